"""Full context (lc), retrieval (rag) and the context as a REPL environment (repl, issue 35) on the same instances,
with one scripted model: accuracy, the paired difference to lc (clustered by context), calls, tokens and money per
instance, $ per correct answer, wall time. Prints figures; asserts nothing.

The model is scripted (tests/fakeserver.py on 127.0.0.1, answering in OpenAI's chat-completion shape and counting
usage in cl100k_base): in lc and rag it reads the document in its prompt with a regular expression; in repl it
follows the REPL protocol (step 1: code that regex-searches ``context`` and asks the sub-model to confirm the
sentence through ``llm_query``; step 2: ``FINAL``). Its answers measure the harness (what each mode sends, how many
calls and tokens it costs), not a model's reading. Cost is priced at ``--price IN,OUT`` USD per million tokens
(default 2.5,10).

    python bench/repl_three_way.py [--contexts 8] [--questions 4] [--chars 60000] [--price 2.5,10]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

WORDS = ("amber basalt copper dune ember fjord garnet harbor indigo jasper kelp lagoon meadow nickel onyx prairie "
         "quartz reef slate tundra umber valley willow xenon yarrow zephyr").split()


def make_build(d: Path, contexts: int, questions: int, chars: int, seed: int = 0) -> None:
    """Contexts of about ``chars`` characters of seeded filler, each holding one sentence "The code of item NAME is
    CODE." per item at a seeded position; ``questions`` questions per context ask one item's code each."""
    from ctxbench.core.storage import to_table, write_parquet
    from ctxbench.tokenizers import get_tokenizer

    enc = get_tokenizer("cl100k_base")
    rng = random.Random(hashlib.sha256(f"repl-three-way:{seed}".encode()).hexdigest())
    rows = []
    for c in range(contexts):
        items = {f"{w.capitalize()}{c}": rng.randrange(1000, 9999) for w in rng.sample(WORDS, questions)}
        sents = []
        while sum(len(s) + 1 for s in sents) < chars:
            a, b, e = rng.sample(WORDS, 3)
            sents.append(f"The {a} ledger of shelf {rng.randrange(1, 999)} lists {b} and {e} stock.")
        for name, code in items.items():
            sents.insert(rng.randrange(len(sents) + 1), f"The code of item {name} is {code}.")
        ctx = " ".join(sents)
        n = enc.count(ctx)
        for q, (name, code) in enumerate(items.items()):
            rows.append({"instance_id": f"c{c:02d}-q{q}", "benchmark": "holobench", "source_id": "bench",
                         "question": f"What is the code of item {name}?", "question_id": f"q{q}", "sql": None,
                         "gold": json.dumps([[code]]), "context": ctx, "tokenizer": "cl100k_base",
                         "target_tokens": n, "context_tokens": n, "setting": "amount", "context_format": "full_text",
                         "position": "middle", "query_types": json.dumps(["Lookup"]), "difficulty": "easy",
                         "evidence_spans": "[]", "build_hash": "bench"})
    d.mkdir(parents=True, exist_ok=True)
    write_parquet(to_table("instances", rows), d / "instances.parquet")
    (d / "manifest.json").write_text(json.dumps({"build_hash": "bench", "track": "holobench"}), encoding="utf-8")


REPL_STEP1 = '''```repl
import re
m = re.search(r"The code of item {name} is (\\d+)\\.", context)
print(llm_query("Confirm this sentence: " + m.group(0)) if m else "not found")
answer = m.group(1) if m else "unknown"
```'''


def scripted(body: dict) -> str:
    """The scripted model (module docstring)."""
    from fakeserver import message_text

    msgs = body["messages"]
    first = message_text(msgs[0]["content"])
    last = message_text(msgs[-1]["content"])
    if msgs[0]["role"] == "user":  # a sub-call
        return "Confirmed: " + last.split(": ", 1)[-1]
    if first.startswith("You are tasked"):  # a REPL root turn
        name = re.search(r"code of item (\w+)\?", message_text(msgs[1]["content"])).group(1)
        if sum(m["role"] == "user" for m in msgs) == 1:
            return REPL_STEP1.replace("{name}", name)
        return "```repl\nFINAL(answer)\n```"
    name = re.search(r"Question: What is the code of item (\w+)\?", last).group(1)
    m = re.search(rf"The code of item {name} is (\d+)\.", last)
    return f"Answer: {m.group(1) if m else 'unknown'}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--contexts", type=int, default=8)
    ap.add_argument("--questions", type=int, default=4)
    ap.add_argument("--chars", type=int, default=60000)
    ap.add_argument("--price", default="2.5,10", help="USD per million input and output tokens")
    a = ap.parse_args()
    p_in, p_out = (float(x) / 1e6 for x in a.price.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CTXBENCH_HOME"] = str(Path(tmp) / "home")
        import pyarrow.parquet as pq

        from ctxbench.analysis.paired import paired_difference
        from ctxbench.run.evaluate import EvalConfig, evaluate_build
        from ctxbench.run.repl import ReplConfig
        from ctxbench.run.score import score_build
        from fakeserver import FakeOpenAIServer

        build = Path(tmp) / "build"
        make_build(build, a.contexts, a.questions, a.chars)
        inst = {r["instance_id"]: r for r in pq.read_table(build / "instances.parquet").to_pylist()}
        mean_tokens = sum(r["context_tokens"] for r in inst.values()) / len(inst)
        print(f"{len(inst)} instances on {a.contexts} contexts of {mean_tokens:,.0f} tokens (cl100k_base) each; "
              f"scripted model; priced at ${a.price} per million input,output tokens")
        wall = {}
        with FakeOpenAIServer(answer_fn=scripted) as srv:
            for mode in ("lc", "rag", "repl"):
                cfg = EvalConfig(model="openai/scripted", base_url=srv.base_url, concurrency=4, mode=mode,
                                 retriever="bm25", max_tokens=512, repl=ReplConfig(step_timeout_s=30))
                before = srv.count
                t0 = time.perf_counter()
                s = evaluate_build(build, cfg)
                wall[mode] = (time.perf_counter() - t0, srv.count - before, s.status)
        score_build(build)
        scores = {(r["mode"], r["instance_id"]): r["score"] for r in pq.read_table(build / "scores.parquet").to_pylist()}
        resp = pq.read_table(build / "responses.parquet").to_pylist()
        steps = pq.read_table(build / "steps.parquet").to_pylist()
        calls_repl = {}
        for st in steps:
            calls_repl[st["instance_id"]] = calls_repl.get(st["instance_id"], 0) + 1 + len(json.loads(st["sub_calls"] or "[]"))
        ids = sorted(inst)
        ctx_of = [hashlib.sha256(inst[i]["context"].encode()).hexdigest() for i in ids]
        print(f"{'mode':5} {'accuracy':>8} {'vs lc (95% CI, clustered by context)':>38} {'calls/inst':>10} "
              f"{'tokens in/inst':>14} {'tokens out/inst':>15} {'$/inst':>9} {'$/correct':>9} {'wall s':>7}")
        for mode in ("lc", "rag", "repl"):
            rows = [r for r in resp if r["mode"] == mode]
            acc = sum(scores.get((mode, i), 0.0) for i in ids) / len(ids)
            tin = sum(r["prompt_tokens"] or 0 for r in rows) / len(ids)
            tout = sum(r["completion_tokens"] or 0 for r in rows) / len(ids)
            usd = tin * p_in + tout * p_out
            calls = (sum(calls_repl.values()) / len(ids)) if mode == "repl" else len(rows) / len(ids)
            if mode == "lc":
                diff = "—"
            else:
                d = paired_difference([scores.get((mode, i), 0.0) for i in ids],
                                      [scores.get(("lc", i), 0.0) for i in ids], ctx_of)
                lo, hi = d.get("ci_low"), d.get("ci_high")
                diff = f"{d['diff']:+.3f}" + (f" [{lo:+.3f}, {hi:+.3f}]" if lo is not None else " (no CI)")
            per_correct = usd / acc if acc else float("nan")
            print(f"{mode:5} {acc:8.3f} {diff:>38} {calls:10.2f} {tin:14,.0f} {tout:15,.0f} {usd:9.5f} "
                  f"{per_correct:9.5f} {wall[mode][0]:7.2f}")
        print("requests per mode: " + ", ".join(f"{m} {w[1]} ({w[2]})" for m, w in wall.items()))
        from ctxbench.run.repl.sandbox import Sandbox

        starts = []
        for _ in range(10):  # a sandbox's start, one step and its end (bubblewrap where installed)
            t0 = time.perf_counter()
            with Sandbox(inst[ids[0]]["context"]) as sb:
                sb.run("print(len(context))", lambda ps: ps)
            starts.append(time.perf_counter() - t0)
        print(f"sandbox start + one step + end: median {sorted(starts)[5]:.3f} s of 10")


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    run_main(main)  # Ctrl-C: exit 130, no traceback
