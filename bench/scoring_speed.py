"""Scoring speed (issue 12 item 4, issue 13 items 4-6): the answer pipeline and every matcher of every built-in
track over the replies of tests/data/tricky_inputs.yaml, repeated, each with a long reasoning block in front (as a
reasoning model writes), against one tokenizer pass over the same replies. Also the time to fingerprint the
scoring code (paid once per ``score_if_changed``). Prints figures; asserts nothing.

    python bench/scoring_speed.py [--repeat 20] [--reasoning-words 2000] [--tokenizer cl100k_base]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import yaml

from ctxbench.scoring.pipeline import answer_chain, score_reply
from ctxbench.scoring.registry import matchers_for
from ctxbench.scoring.versions import scoring_fingerprint
from ctxbench.tokenizers import get_tokenizer

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "tricky_inputs.yaml"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--reasoning-words", type=int, default=2000)
    ap.add_argument("--tokenizer", default="cl100k_base")
    a = ap.parse_args()
    entries = yaml.safe_load(DATA.read_text(encoding="utf-8"))["replies"]
    draft = " ".join(f"step {i}: maybe {i * 7 % 1000} flights" for i in range(a.reasoning_words // 5))
    replies = [(f"<think>{draft}</think>\n{e['reply']}", e) for e in entries] * a.repeat
    benches = ("holobench", "scitrek", "needles", "lara")

    t0 = time.perf_counter()
    fp = scoring_fingerprint(list(benches))
    fp_s = time.perf_counter() - t0

    chain = answer_chain()
    t0 = time.perf_counter()
    for text, e in replies:
        chain(text, e.get("reasoning"))
    chain_s = time.perf_counter() - t0

    n_scores = 0
    t0 = time.perf_counter()
    for text, e in replies:
        g = e["gold"]
        gold = g if isinstance(g, list) and g and isinstance(g[0], list) else [[g]]
        for b in benches:
            inst = {"benchmark": b, "gold": gold, "question": "How many?", "sql": "SELECT x FROM t",
                    "skill": e.get("skill", "location"), "accepted_answers": None}
            n_scores += len(score_reply(text, inst, e.get("reasoning")))
    score_s = time.perf_counter() - t0

    tok = get_tokenizer(a.tokenizer)
    t0 = time.perf_counter()
    n_tokens = sum(tok.count(text) for text, _ in replies)
    tok_s = time.perf_counter() - t0

    n = len(replies)
    print(f"{n} replies of ~{n_tokens // n} tokens each ({n_tokens} in all, {a.tokenizer})")
    print(f"scoring code fingerprint ({sum(len(v['matchers']) for v in fp.values())} matchers, "
          f"{len(matchers_for('holobench'))} holobench): {fp_s * 1000:.0f} ms (first call, module sources hashed)")
    print(f"answer pipeline: {chain_s:.2f} s, {chain_s / n * 1e6:.0f} µs per reply")
    print(f"pipeline + all {n_scores // n} matchers of the 4 tracks: {score_s:.2f} s, {score_s / n_scores * 1e6:.0f} µs "
          f"per reply x matcher")
    print(f"one tokenizer pass over the replies: {tok_s:.2f} s; ratio pipeline / tokenizer pass "
          f"{chain_s / tok_s:.2f}x, scoring every matcher / tokenizer pass {score_s / tok_s:.2f}x")


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    run_main(main)  # Ctrl-C: exit 130, no traceback
