"""Issue 25's axes: near-miss distractors (verbalized databases), look-alike needles, lexical overlap and reasoning
effort. Every expected value is worked out here independently: predicates evaluated by plain sqlite3 over
source.sqlite, gold answers recomputed by sqlite3 over the included rows only, overlaps counted by hand."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ctxbench.tracks.holobench import HoloBenchConfig, build_holobench

from test_holobench_build import _recompute, _same

# wine_1 questions whose WHERE has predicates: q14 two on appellations, q17 one on grapes and one on wine
Q14_PREDICATES = {"appellations": ["Area = 'North Coast'", "isAVA = 'Yes'"]}
Q17_PREDICATES = {"grapes": ["Color = 'White'"], "wine": ["Score > 92"]}


@pytest.fixture(scope="module")
def wine(spider_db) -> str:
    return str(spider_db("wine_1"))


@pytest.fixture(scope="module")
def nm_builds(wine, tmp_path_factory):
    out = {}
    for d in ("random", "near-miss"):
        cfg = HoloBenchConfig(db=wine, lengths=[512, 1024], positions=["uniform", "end"], distractors=d,
                              question_ids=["wine_1-q14", "wine_1-q17", "wine_1-q02"])
        out[d] = build_holobench(cfg, tmp_path_factory.mktemp(d.replace("-", "")) / "b").out
    return out


def _misses(source: Path, table: str, preds: list[str]) -> dict[int, int]:
    con = sqlite3.connect(source)
    try:
        expr = " + ".join(f"(CASE WHEN {p} THEN 0 ELSE 1 END)" for p in preds)
        return dict(con.execute(f'SELECT rowid, {expr} FROM "{table}"').fetchall())
    finally:
        con.close()


def _share(row: dict, source: Path, preds: dict[str, list[str]]) -> tuple[int, int]:
    inc = json.loads(row["included_rows"])
    one = non = 0
    for t, ps in preds.items():
        m = _misses(source, t, ps)
        for rid in inc.get(t, []):
            if m[rid]:
                non += 1
                one += m[rid] == 1
    return one, non


def test_near_miss_rows_fail_exactly_one_predicate_and_gold_is_exact(nm_builds):
    out = nm_builds["near-miss"]
    rows = pq.read_table(out / "instances.parquet").to_pylist()
    source = out / "source.sqlite"
    q14 = [r for r in rows if r["question_id"] == "wine_1-q14"]
    assert q14
    m = _misses(source, "appellations", Q14_PREDICATES["appellations"])
    n_one = sum(v == 1 for v in m.values())
    for r in rows:
        assert r["distractors"] == "near-miss"
        # the gold answer over exactly the included rows, by plain sqlite3
        got = _recompute(source, r["sql"], json.loads(r["included_rows"]))
        assert _same(json.loads(r["gold"]), got, ordered="ORDER BY" in r["sql"].upper())
    for r in q14:
        one, non = _share(r, source, Q14_PREDICATES)
        assert non > 0
        if non <= n_one:  # the table has enough one-predicate misses: every non-matching row is one
            assert one == non
        assert one / non >= 0.8 or non > n_one
        assert r["near_miss_share"] == pytest.approx(one / non, abs=1e-6)
    for r in (r for r in rows if r["question_id"] == "wine_1-q17"):
        one, non = _share(r, source, Q17_PREDICATES)
        assert r["near_miss_share"] == (pytest.approx(one / non, abs=1e-6) if non else None)
    # a question without WHERE has no predicate: no share
    assert all(r["near_miss_share"] is None for r in rows if r["question_id"] == "wine_1-q02")


def test_near_miss_keeps_the_matching_rows_of_random_sampling_and_raises_the_share(nm_builds):
    def by_key(out):
        return {(r["question_id"], r["target_tokens"], r["position"]): r
                for r in pq.read_table(out / "instances.parquet").to_pylist()}

    rnd, nm = by_key(nm_builds["random"]), by_key(nm_builds["near-miss"])
    assert rnd.keys() == nm.keys()
    source = nm_builds["random"] / "source.sqlite"
    m = _misses(source, "appellations", Q14_PREDICATES["appellations"])
    lower = 0
    for k in rnd:
        if k[0] != "wine_1-q14":
            continue
        a, b = json.loads(rnd[k]["included_rows"]), json.loads(nm[k]["included_rows"])
        # the matching rows come from the same draws (only the non-matching draws are filled differently, so the
        # budget may stop one draw earlier or later): one set holds the other
        ma = {x for x in a.get("appellations", []) if m[x] == 0}
        mb = {x for x in b.get("appellations", []) if m[x] == 0}
        assert ma <= mb or mb <= ma
        one_r, non_r = _share(rnd[k], source, Q14_PREDICATES)
        assert rnd[k]["near_miss_share"] == pytest.approx(one_r / non_r, abs=1e-6)
        lower += one_r / non_r < nm[k]["near_miss_share"]
    assert lower >= 1  # random sampling includes rows failing both predicates; near-miss replaces them
    assert all(r["distractors"] == "random" for r in rnd.values())


def test_random_default_keeps_build_hash_and_ids(wine, tmp_path):
    from ctxbench.tracks.holobench.build import _config_dump

    a = HoloBenchConfig(db=wine, lengths=[512])
    assert "distractors" not in _config_dump(a)  # a build made before the field keeps its hash and instance ids
    assert _config_dump(HoloBenchConfig(db=wine, lengths=[512], distractors="near-miss"))["distractors"] == \
        "near-miss"


def test_table_predicates_from_sql():
    from ctxbench.tracks.holobench.nearmiss import table_predicates

    cols = {"flights": ["origin", "month", "dep_delay"], "airports": ["faa", "name"]}
    p = table_predicates("SELECT COUNT(*) FROM flights WHERE origin = 'JFK' AND month = 3", {"flights": cols["flights"]})
    assert p == {"flights": ('"origin" = \'JFK\'', '"month" = 3')}
    p = table_predicates("SELECT a.name FROM flights AS f JOIN airports AS a ON f.origin = a.faa "
                         "WHERE f.month = 1 AND a.name LIKE 'J%' AND f.dep_delay > (SELECT AVG(dep_delay) FROM flights)",
                         cols)
    assert p == {"flights": ('"month" = 1',), "airports": ('"name" LIKE \'J%\'',)}
    assert table_predicates("SELECT MAX(month) FROM flights", {"flights": cols["flights"]}) == {}


# ---------------------------------------------------------------- look-alike needles, lexical overlap

@pytest.fixture(scope="module")
def zh_corpus(shared_data) -> Path:
    from conftest import require_path

    return require_path(shared_data / "classical" / "songyuan_xuean" / "volumes", "宋元學案 volumes")


@pytest.fixture(scope="module")
def lookalike_build(zh_corpus, tmp_path_factory):
    from ctxbench.tracks.needles import NeedlesConfig, build_needles

    out = tmp_path_factory.mktemp("lk") / "b"
    cfg = NeedlesConfig(corpus=str(zh_corpus), models=["gpt-4.1"], lengths=[6000], output_budget=512,
                        distractor_needles=3, depths=[0.5], chains=True)
    build_needles(cfg, out)
    return out


def test_lookalikes_planted_and_never_answer(lookalike_build):
    import tiktoken
    import yaml

    ns = yaml.safe_load((Path(__file__).resolve().parent.parent / "assets/needles/zh-classical.yaml")
                        .read_text(encoding="utf-8"))
    by_id = {n["id"]: n for n in ns["needles"]}
    enc = tiktoken.get_encoding("o200k_base")
    rows = pq.read_table(lookalike_build / "instances.parquet").to_pylist()
    singles = [r for r in rows if r["variant"] != "chain"]
    assert singles and all(r["distractor_needles"] == 3 for r in singles)
    assert all(r["distractor_needles"] == 0 and r["distractor_spans"] is None for r in rows if r["variant"] == "chain")
    for r in singles:
        n = by_id[r["needle_id"]]
        ids = enc.encode(r["context"], disallowed_special=())
        spans = json.loads(r["distractor_spans"])
        assert len(spans) == 3
        (es, ee), = json.loads(r["evidence_spans"])
        gold = json.loads(r["gold"])[0][0]
        forms = [gold, *json.loads(r["accepted_answers"] or "[]")]
        own = [n["subject"], *n.get("subject_aliases", [])]
        texts = [enc.decode(ids[s:e]).strip() for s, e in spans]
        for (s, e), t in zip(spans, texts):
            assert e <= es or s >= ee  # apart from the needle
            assert t in r["context"]
            # the needle's form (its tail after the value), about another subject, with another value
            assert any(name in t for name in ns["lookalike_subjects"])
            assert not any(x in t for x in own)
            assert not any(f in t for f in forms)
        assert len(set(texts)) == 3
        # exactly one statement in the context answers: the needle's own (subject and value in one sentence)
        needle = n["statement"].format(value=gold)
        assert r["context"].count(needle) == 1
        # spread over the haystack: the look-alikes lie in different thirds of the context
        assert sorted(int(3 * s / len(ids)) for s, _ in spans) == [0, 1, 2]


def test_lookalikes_are_seeded_and_checked():
    from ctxbench.core.errors import InputError
    from ctxbench.tracks.needles.questions import load_needle_set

    ns = load_needle_set("zh-classical")
    n1 = next(n for n in ns.needles if n["id"] == "N1")
    a = ns.lookalikes(n1, "real", 3, (0.5,))
    assert a == ns.lookalikes(n1, "real", 3, (0.5,))
    # 鶴山先生魏了翁 becomes one look-alike name; the real value 六十 is never used, nor 六十一-like forms of it
    assert all("先生" not in x and "魏了翁" not in x and "六十" not in x for x in a)
    assert all(x.endswith("卒於家，年七十三。") for x in a)
    with pytest.raises(InputError, match="look-alike subjects"):
        ns.lookalikes(n1, "real", 9)


def test_lexical_overlap_worked_examples():
    from ctxbench.features.overlap import content_terms, lexical_overlap

    # English: stop words (what, did, the, in, of) dropped; question terms {city, charles, darwin, die}
    q = "In what city did Charles Darwin die?"
    assert content_terms(q) == {"city", "charles", "darwin", "die"}
    # sentence 1 holds charles, darwin (2 of 4); sentence 2 holds darwin and city (2 of 4), the 3rd nothing
    assert lexical_overlap(q, ["Charles Darwin died at Down House.", "Darwin left the city.", "Nothing here."]) \
        == 0.5
    assert lexical_overlap(q, ["Charles Darwin would die in the city of Downe."]) == 1.0
    assert lexical_overlap(q, []) == 0.0
    # CJK: character bigrams inside runs; 魏了翁去世 → 魏了 了翁 翁去 去世; 根據文中記載 → 5 bigrams; 享年幾歲 → 3
    q = "根據文中記載，魏了翁去世時享年幾歲？"
    terms = content_terms(q)
    assert len(terms) == 5 + len("魏了翁去世時享年幾歲") - 1 == 14
    # 鶴山先生魏了翁卒於家，年六十。: shares 魏了 and 了翁 only (年六 is not 享年): 2 of 14
    assert lexical_overlap(q, ["鶴山先生魏了翁卒於家，年六十。"]) == round(2 / 14, 6)
    # a bigram never spans punctuation: 記載，魏 gives no 載魏
    assert "載魏" not in terms
    # a one-character run is its own term
    assert content_terms("鶴。") == {"鶴"}


def test_low_overlap_set_and_max_overlap(zh_corpus, tmp_path):
    from ctxbench.features.overlap import lexical_overlap
    from ctxbench.core.errors import InputError
    from ctxbench.tracks.needles import NeedlesConfig, build_needles
    from ctxbench.tracks.needles.questions import load_needle_set

    low = load_needle_set("zh-classical-low-overlap")
    assert len(low.needles) >= 20
    for n in low.needles:
        for v in ("real", "altered"):
            assert lexical_overlap(n["question"], [n["statement"].format(value=n[v]["value"])]) <= 0.05
    # the default set's questions name their subject: 0.09 to 0.18 (worked out as in the examples above)
    base = load_needle_set("zh-classical")
    assert all(lexical_overlap(n["question"], [n["statement"].format(value=n["real"]["value"])]) > 0.05
               for n in base.needles)
    with pytest.raises(InputError, match="--max-overlap"):
        build_needles(NeedlesConfig(corpus=str(zh_corpus), models=["gpt-4.1"], lengths=[6000], output_budget=512,
                                    max_overlap=0.05, depths=[0.5]), tmp_path / "none")
    r = build_needles(NeedlesConfig(corpus=str(zh_corpus), models=["gpt-4.1"], lengths=[6000], output_budget=512,
                                    needles="zh-classical-low-overlap", max_overlap=0.05, depths=[0.5],
                                    variants=["real"], distractor_needles=2), tmp_path / "low")
    rows = pq.read_table(r.out / "instances.parquet").to_pylist()
    assert len(rows) == len(low.needles)
    assert all(x["lexical_overlap"] <= 0.05 and x["distractor_needles"] == 2 for x in rows)


# ---------------------------------------------------------------- reasoning effort: each provider's field

def test_effort_fields_in_each_providers_documented_shape():
    from ctxbench.models.effort import apply_effort, native_fields, provider_of

    assert provider_of("gpt-4o") == "openai" and provider_of("o3-mini") == "openai"
    assert provider_of("claude-sonnet-4-20250514") == "anthropic"
    assert provider_of("anthropic/claude-sonnet-4-20250514", "http://127.0.0.1:9/") == "anthropic"
    assert provider_of("gemini/gemini-2.5-flash") == "gemini" and provider_of("vertex_ai/gemini-2.5-pro") == "gemini"
    assert provider_of("Qwen/Qwen3-8B", "http://127.0.0.1:8000/v1") == "openai_compatible"
    assert provider_of("gpt-4o", "https://api.openai.com/v1") == "openai"
    # OpenAI Chat Completions: reasoning_effort, a string
    assert native_fields("openai", "low") == {"reasoning_effort": "low"}
    assert native_fields("openai", None, 4096) == {}  # OpenAI has no token budget
    # Anthropic Messages: thinking {type: enabled, budget_tokens}; disabled for none
    assert native_fields("anthropic", "medium") == {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    assert native_fields("anthropic", "high", 8000) == {"thinking": {"type": "enabled", "budget_tokens": 8000}}
    assert native_fields("anthropic", "none", 8000) == {"thinking": {"type": "disabled"}}
    # Gemini generateContent: generationConfig.thinkingConfig.thinkingBudget (0 = off)
    assert native_fields("gemini", "low") == {"generationConfig": {"thinkingConfig": {"thinkingBudget": 1024}}}
    assert native_fields("gemini", "none") == {"generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}}
    # vLLM / SGLang chat templates: chat_template_kwargs.enable_thinking, and OpenAI's field beside it
    assert native_fields("openai_compatible", "none") == {"chat_template_kwargs": {"enable_thinking": False},
                                                          "reasoning_effort": "none"}
    assert native_fields("openai_compatible", "high")["chat_template_kwargs"] == {"enable_thinking": True}
    # no effort: the sampling dict is the same object (request keys of earlier runs unchanged)
    s = {"temperature": 0.0, "seed": 0}
    assert apply_effort(s, "gpt-4o", None, None) is s
    # Anthropic refuses a temperature with thinking on: not sent then
    a = apply_effort(s, "anthropic/claude-sonnet-4-20250514", None, "low")
    assert "temperature" not in a and a["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert apply_effort(s, "anthropic/claude-sonnet-4-20250514", None, "none")["temperature"] == 0.0


def test_gemini_thinking_reaches_generation_config_through_litellm():
    from ctxbench.models import quiet_litellm
    from ctxbench.models.effort import apply_effort

    quiet_litellm()
    from litellm.llms.vertex_ai.gemini.transformation import _transform_request_body
    from litellm.utils import get_optional_params

    for effort, budget in (("medium", 2048), ("none", 0)):
        sent = apply_effort({}, "gemini/gemini-2.5-flash", None, effort)
        params = get_optional_params(model="gemini-2.5-flash", custom_llm_provider="gemini", **sent)
        body = _transform_request_body(messages=[{"role": "user", "content": "q"}], model="gemini-2.5-flash",
                                       optional_params=params, custom_llm_provider="gemini", litellm_params={},
                                       cached_content=None)
        assert body["generationConfig"]["thinkingConfig"]["thinkingBudget"] == budget


def test_anthropic_thinking_sent_by_litellm_and_the_batch_api():
    import asyncio

    from fakeserver import FakeOpenAIServer

    from ctxbench.models.batch import anthropic_params, openai_line
    from ctxbench.models.effort import apply_effort
    from ctxbench.models.gateway import Gateway, RetryPolicy

    sampling = apply_effort({"temperature": 0.0}, "anthropic/claude-sonnet-4-20250514", None, "high")
    with FakeOpenAIServer() as srv:  # litellm's anthropic provider posts to <api_base>/v1/messages
        gw = Gateway("anthropic/claude-sonnet-4-20250514", srv.base_url[:-len("/v1")], 1,
                     RetryPolicy(max_retries=0, timeout_s=120), backend="litellm")

        async def go():
            try:
                return await gw.complete([{"role": "user", "content": "Say hi"}], 8192, sampling)
            finally:
                await gw.aclose()

        res = asyncio.run(go())
        body = srv.requests[-1]
    assert res.status == "ok"
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4096} and "temperature" not in body
    assert anthropic_params("anthropic/claude-x", [{"role": "user", "content": "q"}], 8192, sampling)["thinking"] \
        == {"type": "enabled", "budget_tokens": 4096}
    o = apply_effort({"temperature": 0.0}, "o3-mini", None, "low")
    assert openai_line("k", "o3-mini", [{"role": "user", "content": "q"}], 100, o)["body"]["reasoning_effort"] == "low"


def test_anthropic_budget_checked_before_any_call(wine, tmp_path):
    from ctxbench.core.errors import InputError
    from ctxbench.run.evaluate import EvalConfig, plan_requests
    from ctxbench.models.cache import ResponseCache

    b = build_holobench(HoloBenchConfig(db=wine, lengths=[512], question_ids=["wine_1-q06"]), tmp_path / "b").out
    with pytest.raises(InputError, match="not below the output budget"):
        plan_requests(b, EvalConfig(model="anthropic/claude-sonnet-4-20250514", reasoning_effort=["high"],
                                    max_tokens=1000), ResponseCache(tmp_path / "c"))


def test_two_efforts_end_to_end_through_a_local_server_report_and_compare(wine, tmp_path, monkeypatch):
    """A small build answered by a local OpenAI-compatible server at efforts none and high: the server reads the
    effort from the request body and answers right only when thinking is on; the report and compare show
    model@none and model@high, the stored model stays the name given."""
    from fakeserver import FakeOpenAIServer, message_text

    from ctxbench.run.evaluate import EvalConfig, evaluate_build
    from ctxbench.report import build_report
    from ctxbench.report.compare import compare_runs
    from ctxbench.run.score import score_build

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    b = build_holobench(HoloBenchConfig(db=wine, lengths=[512, 1024], distractors="near-miss",
                                        question_ids=["wine_1-q06", "wine_1-q07", "wine_1-q08"]),
                        tmp_path / "b").out
    inst = pq.read_table(b / "instances.parquet").to_pylist()
    # the gold answer of the instance whose context and question the prompt holds (each tier has its own rows)
    gold = [(r["question"], r["context"], json.loads(r["gold"])[0][0]) for r in inst]

    def answer(body):
        text = "\n".join(message_text(m["content"]) for m in body["messages"])
        [g] = [g for q, c, g in gold if q in text and c.strip() in text]
        thinking = body.get("chat_template_kwargs", {}).get("enable_thinking")
        return f"Answer: {g}" if thinking else "Answer: I do not know"

    with FakeOpenAIServer(answer_fn=answer) as srv:
        cfg = EvalConfig(model="openai/fake", base_url=srv.base_url, reasoning_effort="none,high", concurrency=2)
        s = evaluate_build(b, cfg)
        bodies = list(srv.requests)
        assert s.calls == 2 * len(inst) and len(bodies) == 2 * len(inst)
        assert sorted(x["reasoning_effort"] for x in bodies) == ["high"] * len(inst) + ["none"] * len(inst)
        assert all(x["chat_template_kwargs"] == {"enable_thinking": x["reasoning_effort"] != "none"} for x in bodies)
        again = evaluate_build(b, cfg)  # the effort is in the request key: a rerun calls nothing
        assert again.calls == 0 and len(srv.requests) == len(bodies)
    resp = pq.read_table(b / "responses.parquet").to_pylist()
    assert {r["model"] for r in resp} == {"openai/fake"}
    assert sorted(r["reasoning_effort"] for r in resp) == ["high"] * len(inst) + ["none"] * len(inst)
    assert len({r["request_key"] for r in resp}) == 2 * len(inst)
    score_build(b)
    report = build_report(b).read_text(encoding="utf-8")
    assert "openai/fake@high" in report and "openai/fake@none" in report and "Reasoning effort" in report
    eff = {r["label"]: r for r in pq.read_table(b / "report" / "by_effort.parquet").to_pylist()}
    assert eff["openai/fake@high"]["score"] == 1.0 and eff["openai/fake@none"]["score"] == 0.0
    assert eff["openai/fake@high"]["responses"] == len(inst) and eff["openai/fake@none"]["cut_off"] == 0
    by_len = pq.read_table(b / "report" / "by_length.parquet").to_pylist()
    assert {r["model"] for r in by_len} == {"openai/fake@high", "openai/fake@none"}
    from ctxbench.report.browser import browser_data

    data, _ = browser_data(b, tmp_path / "browser")  # the browser's model filter tells the two efforts apart
    assert data["models"] == ["openai/fake@high", "openai/fake@none"]
    assert sorted(a["model"] for a in data["answers"]) == ["openai/fake@high"] * len(inst) + [
        "openai/fake@none"] * len(inst)
    compare_runs([b], tmp_path / "board")
    cells = pq.read_table(tmp_path / "board" / "leaderboard.parquet").to_pylist()
    got = {(c["model"], c["context_length"]): c["score"] for c in cells}
    assert got == {("openai/fake@high", 512): 1.0, ("openai/fake@high", 1024): 1.0,
                   ("openai/fake@none", 512): 0.0, ("openai/fake@none", 1024): 0.0}
    assert "openai/fake@high" in (tmp_path / "board" / "index.html").read_text(encoding="utf-8")


# ---------------------------------------------------------------- the axes in the CLI, the Prefect forms, the regression

def test_axes_in_the_cli_and_the_prefect_forms():
    from prefect.utilities.callables import parameter_schema
    from typer.testing import CliRunner

    from ctxbench.cli import app
    from pipelines.flows import evaluate_flow, get_build_flow

    r = CliRunner()
    for args, words in ((["build", "holobench", "--help"], ["--distractors", "near-miss"]),
                        (["build", "needles", "--help"], ["--distractor-needles", "--max-overlap"]),
                        (["evaluate", "--help"], ["--reasoning-effort", "--thinking-budget"])):
        out = r.invoke(app, args, env={"COLUMNS": "300", "TERMINAL_WIDTH": "300"}).output
        assert all(w in out for w in words), (args, out[-800:])
    bad = r.invoke(app, ["evaluate", "--build", ".", "--model", "m", "--reasoning-effort", "low,extreme"])
    assert bad.exit_code == 2 and "extreme" in bad.output
    hb = parameter_schema(get_build_flow("holobench").fn).definitions["HoloBenchConfig"]["properties"]
    assert hb["distractors"]["enum"] == ["random", "near-miss"]
    nd = parameter_schema(get_build_flow("needles").fn).definitions["NeedlesConfig"]["properties"]
    assert {"distractor_needles", "max_overlap"} <= set(nd)
    ev = parameter_schema(evaluate_flow.fn).definitions["EvalConfig"]["properties"]
    assert {"reasoning_effort", "thinking_budget"} <= set(ev)


def test_regression_enters_the_axes_where_they_vary():
    import random

    from ctxbench.analysis.regression import fit_difficulty

    rng = random.Random(3)
    rows = []
    for q in range(40):
        scope, disp, depth = rng.uniform(.05, .5), rng.uniform(.1, .9), rng.choice([1, 2, 3])
        overlap = rng.uniform(0, 1)
        for L in (1024, 4096):
            iid = f"i{q}-{L}"
            for e, eff in enumerate(("none", "high")):
                # effort raises the score, lexical overlap has no effect; look-alike count constant (not entered)
                p = 0.25 + 0.5 * e - 0.05 * (L == 4096)
                rows.append({"instance_id": iid, "obs": f"{iid}|{eff}", "question": f"q{q}", "task": "t/a",
                             "model": "m", "score": min(1.0, max(0.0, p + rng.uniform(-.2, .2))),
                             "context_length": float(L), "scope": scope, "dispersion": disp,
                             "reasoning_depth": float(depth), "lexical_overlap": overlap, "lookalike_count": 3.0,
                             "near_miss_share": None, "reasoning_effort": float(2 * e + (e and 1))})
    out = fit_difficulty(rows, interactions=False)
    assert out["estimable"], out["reason"]
    f = {x["factor"]: x for x in out["factors"]}
    assert set(f) == {"lexical_overlap", "reasoning_effort"}
    assert f["reasoning_effort"]["matters"] and f["reasoning_effort"]["coef"] > 0
    assert f["reasoning_effort"]["ci_low"] > 0
    assert not f["lexical_overlap"]["matters"]
    assert any("lookalike_count not entered: constant" in n for n in out["notes"])


def test_by_effort_counts_cut_off_replies_and_scores_them_0(wine, tmp_path, monkeypatch):
    """At effort low the output budget ends every other reply half-way (finish_reason length: status cut_off); at
    high every reply is whole. The by-effort table counts the cut replies (responses, ok, cut_off, share) and
    scores them 0 (an observation of the mean, not left out), as ``score`` does."""
    from fakeserver import FakeOpenAIServer, message_text

    from ctxbench.analysis.effort import effort_rows
    from ctxbench.run.evaluate import EvalConfig, evaluate_build
    from ctxbench.run.score import score_build

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    b = build_holobench(HoloBenchConfig(db=wine, lengths=[512, 1024],
                                        question_ids=["wine_1-q06", "wine_1-q07", "wine_1-q08"]),
                        tmp_path / "b").out
    inst = pq.read_table(b / "instances.parquet").to_pylist()
    gold = [(r["question"], r["context"], json.loads(r["gold"])[0][0]) for r in inst]
    # instances whose low-effort reply is cut: the 512-token tier's
    cut_q = {(r["question"], r["context"]) for r in inst if r["target_tokens"] == 512}

    def find(body):
        text = "\n".join(message_text(m["content"]) for m in body["messages"])
        [(q, c, g)] = [(q, c, g) for q, c, g in gold if q in text and c.strip() in text]
        return q, c, g

    def answer(body):
        return f"I count the matching rows one by one. Answer: {find(body)[2]}"

    def rule(body):
        q, c, _ = find(body)
        return "cut_off" if body.get("reasoning_effort") == "low" and (q, c) in cut_q else None

    with FakeOpenAIServer(answer_fn=answer, rule=rule) as srv:
        s = evaluate_build(b, EvalConfig(model="openai/fake", base_url=srv.base_url, reasoning_effort="low,high",
                                         concurrency=2))
        assert s.calls == 2 * len(inst)
    resp = pq.read_table(b / "responses.parquet").to_pylist()
    n_cut = len([r for r in inst if r["target_tokens"] == 512])
    assert 0 < n_cut < len(inst)
    assert sorted(r["status"] for r in resp if r["reasoning_effort"] == "low") == \
        ["cut_off"] * n_cut + ["ok"] * (len(inst) - n_cut)
    assert {r["finish_reason"] for r in resp if r["status"] == "cut_off"} == {"length"}
    score_build(b)
    eff = {r["label"]: r for r in effort_rows(b)}
    low, high = eff["openai/fake@low"], eff["openai/fake@high"]
    assert (low["responses"], low["ok"], low["cut_off"]) == (len(inst), len(inst) - n_cut, n_cut)
    assert low["cut_off_share"] == pytest.approx(n_cut / len(inst))
    assert (high["responses"], high["ok"], high["cut_off"], high["cut_off_share"]) == (len(inst), len(inst), 0, 0.0)
    # the cut replies are scored 0 and counted in n: the mean over instances is the uncut share
    assert low["n"] == high["n"] == len(inst)
    assert low["score"] == pytest.approx((len(inst) - n_cut) / len(inst)) and high["score"] == 1.0
