"""The instance browser's data writer and the report's figures, without a browser: token evidence spans converted to
characters (checked against tiktoken's own decoding, independently of ctxbench's tokenizer registry), reasoning
split from replies, data-driven facets, escaping, every response of a build written, contexts one file each, links,
and plotly figures that name models in full and load nothing from the network. The page in a real browser:
tests/test_browser_ui.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ctxbench.report.browser import (char_spans, facet_columns, instances_link, split_reasoning, write_browser)
from ctxbench.report.plots import (accuracy_by_category, accuracy_by_length, figure_data, figure_div, figures_in_html,
                                   write_plotly_js)
from ctxbench.core.storage import to_table, write_parquet


def read_data(report: Path) -> dict:
    s = (report / "browser" / "data.js").read_text(encoding="utf-8")
    assert s.startswith("window.CTXBENCH_BROWSER=") and s.rstrip().endswith(";")
    return json.loads(s[len("window.CTXBENCH_BROWSER="):].rstrip().rstrip(";"))


# ------------------------------------------------------------------------------------------ token → character spans

TEXT = ("Château Margaux 1996 costs 1,200 euros. 李白的诗在唐朝很有名。 The grape is Cabernet Sauvignon; "
        "its appellation is Margaux (Bordeaux). Émile wrote 3 reviews — all <b>positive</b>.")


def test_char_spans_match_tiktoken_decoding(tiktoken_enc):
    enc = tiktoken_enc("cl100k_base")
    toks = enc.encode(TEXT)
    # token boundaries where the prefix decodes to whole characters (no split multi-byte character)
    clean = [k for k in range(len(toks) + 1) if "\ufffd" not in enc.decode(toks[:k])]
    spans = [[clean[1], clean[4]], [clean[6], clean[9]], [clean[-3], len(toks)]]
    got = char_spans(TEXT, spans, "cl100k_base")
    want = [[len(enc.decode(toks[:s])), len(enc.decode(toks[:e]))] for s, e in spans]
    assert got == want
    for (cs, ce), (s, e) in zip(got, spans):
        assert TEXT[cs:ce] == enc.decode(toks[s:e])
    assert got[-1][1] == len(TEXT)                      # the last token's span runs to the end of the text


def test_char_spans_merge_sort_and_clip(tiktoken_enc):
    enc = tiktoken_enc("cl100k_base")
    toks = enc.encode(TEXT)
    n = len(toks)
    # overlapping and touching spans merge; an empty span is dropped; a span past the tokens ends at the text's end
    got = char_spans(TEXT, [[5, 8], [2, 4], [4, 6], [9, 9], [n - 2, n + 50]], "cl100k_base")
    assert got == [[len(enc.decode(toks[:2])), len(enc.decode(toks[:8]))], [len(enc.decode(toks[:n - 2])), len(TEXT)]]
    assert char_spans(TEXT, [], "cl100k_base") == []


def test_char_spans_of_a_real_build_cover_the_evidence_rows(tmp_path, spider_db, tiktoken_enc):
    from ctxbench.tracks.holobench import HoloBenchConfig, build_holobench

    b = tmp_path / "b"
    build_holobench(HoloBenchConfig(db=str(spider_db("wine_1")), lengths=[2048], setting="density",
                                    positions=["end"]), b)
    enc = tiktoken_enc("cl100k_base")
    rows = pq.read_table(b / "instances.parquet", columns=["context", "evidence_spans", "tokenizer"]).to_pylist()
    assert rows
    for r in rows[:8]:
        spans = json.loads(r["evidence_spans"])
        toks = enc.encode(r["context"])
        got = char_spans(r["context"], spans, r["tokenizer"])
        # the evidence text decoded token by token is exactly what the character spans cover
        covered = "".join(r["context"][cs:ce] for cs, ce in got)
        assert covered == "".join(enc.decode(toks[s:e]) for s, e in sorted(spans))
        assert len(covered) > 100


# ------------------------------------------------------------------------------------------------ reasoning apart

@pytest.mark.parametrize("reply, field, blocks, visible", [
    ("<think>12 rows match</think>\nAnswer: 12", None, ["<think>12 rows match</think>"], "Answer: 12"),
    ("Answer: 12", None, [], "Answer: 12"),
    ("counting the rows…</think>Answer: 7", None, ["counting the rows…</think>"], "Answer: 7"),  # opened by template
    ("<think>never closed, cut by the budget", None, ["<think>never closed, cut by the budget"], ""),
    ("A<think>x</think>B<think>y</think>C", None, ["<think>x</think>", "<think>y</think>"], "A B C"),
    ("I reason at length about the rows. Answer: 3", "I reason at length about the rows.", [], "Answer: 3"),
    ("<|channel|>analysis<|message|>sum them<|end|><|channel|>final<|message|>Answer: 9", None,
     ["<|channel|>analysis<|message|>sum them<|end|><|channel|>final<|message|>"], "Answer: 9"),
])
def test_split_reasoning(reply, field, blocks, visible):
    got_blocks, got_visible = split_reasoning(reply, field)
    assert got_visible == visible
    assert got_blocks == blocks


# ---------------------------------------------------------------------------------------------------------- facets

def test_facets_come_from_the_data():
    rows = [{"instance_id": f"i{k}", "question": f"q{k}", "skill": ["lookup", "count"][k % 2],
             "query_types": json.dumps([["Join"], ["Join", "Ranking"], []][k % 3]), "scope": k / 10,
             "source_id": "db", "reasoning_depth": 1 + k % 3, "gold": "[[1]]"} for k in range(12)]
    got = {f["key"]: f for f in facet_columns(rows, list(rows[0]))}
    assert set(got) == {"skill", "query_types", "source_id", "reasoning_depth"}
    assert got["skill"]["values"] == ["count", "lookup"] and not got["skill"]["multi"]
    assert got["query_types"]["multi"] and got["query_types"]["values"] == ["Join", "Ranking"]
    assert got["reasoning_depth"]["values"] == [1, 2, 3]
    assert got["source_id"]["values"] == ["db"]          # one value: kept for links, the page shows no filter
    # a column whose values do not repeat is no filter
    assert "question" not in got and "scope" not in got


def test_links_carry_filters_as_the_page_reads_them():
    assert instances_link({"model": "openai/gpt-4o", "length": 4096, "score": "wrong", "q": None}) == \
        "instances.html#model=openai%2Fgpt-4o&length=4096&score=wrong"
    assert instances_link({"depth": 1.0, "flag": True, "query_types": "Max/Min"}) == \
        "instances.html#depth=1&flag=true&query_types=Max%2FMin"
    assert instances_link() == "instances.html"


# ------------------------------------------------------------------------------------------------- the data files

NASTY = "<script>alert('x')</script></script><!-- <|im_end|> \u2028 & <think>"
# the reasoning of a reply: the same markup, but no opening <think> inside the block (that would open a nested block
# that never closes, so the reply would have no answer: ctxbench.scoring.strip._strip_blocks)
NASTY_REASONING = NASTY.removesuffix("<think>") + "<b>"


def _tiny_build(d: Path) -> Path:
    d.mkdir(parents=True)
    ctx_a = "Row one. The answer is 42. Row three."
    ctx_b = "Other text " + NASTY
    inst = []
    for k, (ctx, spans) in enumerate([(ctx_a, "[[3,8]]"), (ctx_a, "[]"), (ctx_b, "[[0,2]]")]):
        inst.append({"instance_id": f"i{k}", "benchmark": "holobench", "source_id": "t", "question": f"Q{k} {NASTY}",
                     "question_id": f"q{k}", "gold": json.dumps([[42, "x"]]), "context": ctx,
                     "tokenizer": "cl100k_base", "target_tokens": 1024, "context_tokens": 12,
                     "context_format": "full_text", "query_types": "[]", "evidence_spans": spans,
                     "position": ["end", "end", "beginning"][k], "build_hash": "tiny"})
    write_parquet(to_table("instances", inst), d / "instances.parquet")
    resp, sc = [], []
    for k in range(3):
        for m in ("openai/a", "openai/b"):
            key = f"{m}-{k}"
            resp.append({"request_key": key, "instance_id": f"i{k}", "model": m, "mode": "lc", "sample": 0,
                         "prompt_variant": "default", "response": f"<think>{NASTY_REASONING}</think>Answer: {k}",
                         "reasoning": None, "cached": False, "status": "ok", "retries": 0})
            sc.append({"instance_id": f"i{k}", "model": m, "mode": "lc", "sample": 0, "matcher": "row_match",
                       "score": float(k == 0), "tags": "[]", "extracted_answer": str(k), "request_key": key})
    resp.append({"request_key": "err", "instance_id": "i1", "model": "openai/c", "mode": "lc", "sample": 0,
                 "prompt_variant": "default", "response": None, "reasoning": None, "cached": False,
                 "status": "error", "error": "503 <b>down</b>", "retries": 3})
    write_parquet(to_table("responses", resp), d / "responses.parquet")
    write_parquet(to_table("scores", sc), d / "scores.parquet")
    return d


def test_every_response_written_escaped_with_contexts_apart(tmp_path):
    b = _tiny_build(tmp_path / "b")
    out = b / "report"
    res = write_browser(b, out, "tiny")
    data = read_data(out)
    assert res.instances == 3 and res.answers == 7 and res.contexts == 2 and res.models == ["openai/a", "openai/b",
                                                                                             "openai/c"]
    got = {(data["instances"][a["i"]]["id"], a["model"], a["status"]) for a in data["answers"]}
    want = {(r["instance_id"], r["model"], r["status"]) for r in pq.read_table(b / "responses.parquet").to_pylist()}
    assert got == want
    a0 = next(a for a in data["answers"] if a["model"] == "openai/a" and data["instances"][a["i"]]["id"] == "i0")
    assert a0["visible"] == "Answer: 0" and a0["reasoning"] == [f"<think>{NASTY_REASONING}</think>"]
    assert a0["scores"] == {"row_match": 1.0} and a0["extracted"] == {"row_match": "0"}
    assert data["instances"][0]["gold"] == "42 | x" and data["instances"][0]["primary"] == "row_match"
    # the evidence of i0 (tokens 3..8 of cl100k_base) as characters; i1 shares i0's context file
    assert data["instances"][0]["context"] == data["instances"][1]["context"] != data["instances"][2]["context"]
    assert data["instances"][1]["spans"] == []
    files = sorted((out / "browser" / "contexts").glob("*.js"))
    assert len(files) == 2
    for f in [out / "browser" / "data.js", *files]:
        s = f.read_text(encoding="utf-8")
        assert "<" not in s and ">" not in s and "\u2028" not in s      # nothing a page could parse as markup
    # what the page evaluates is the original text
    ctx = files[0].read_text(encoding="utf-8")
    key, text = json.loads("[" + ctx[len("ctxbenchContext("):].rstrip().rstrip(";").rstrip(")") + "]")
    assert text in ("Row one. The answer is 42. Row three.", "Other text " + NASTY)
    # a context no longer in the build is removed on the next write
    (out / "browser" / "contexts" / "stale.js").write_text("x")
    write_browser(b, out)
    assert not (out / "browser" / "contexts" / "stale.js").exists()
    page = (out / "instances.html").read_text(encoding="utf-8")
    assert 'src="browser/data.js"' in page and "http://" not in page and "https://" not in page
    assert "innerHTML" not in page                            # text goes in as text only


# ------------------------------------------------------------------------------------------------------- figures

LONG = "openai/a-very-long-model-name-that-used-to-be-cut-off-in-legends-2025-05-preview"


def test_length_figure_names_models_in_full_and_links_points():
    rows = [{"model": m, "mode": "lc", "matcher": "row_match", "context_length": L, "n": 5, "score": s,
             "ci_low": s - 0.1, "ci_high": min(1.0, s + 0.1)}
            for m in (LONG, "openai/<b>x</b>") for L, s in ((4096, 0.8), (8192, 0.5))]
    fig = figure_data(accuracy_by_length(rows, link=lambda r: instances_link({"model": r["model"],
                                                                              "length": r["context_length"]})))
    names = [t["name"] for t in fig["data"]]
    assert f"{LONG} (lc)" in names and "openai/&lt;b&gt;x&lt;/b&gt; (lc)" in names   # whole, markup shown as text
    assert fig["layout"]["hoverlabel"]["namelength"] == -1                    # hover labels not cut either
    assert fig["layout"]["legend"]["orientation"] == "h"
    t = next(t for t in fig["data"] if t["name"] == f"{LONG} (lc)")
    assert t["x"] == [4096, 8192] and t["y"] == [0.8, 0.5]
    assert t["error_y"]["array"][0] == pytest.approx(0.1) and t["error_y"]["arrayminus"][1] == pytest.approx(0.1)
    assert t["customdata"][0][0] == f"instances.html#model={LONG.replace('/', '%2F')}&length=4096"
    assert fig["layout"]["xaxis"]["ticktext"] == ["4,096", "8,192"] and fig["layout"]["xaxis"]["type"] == "log"
    # embedded, then read back from the page
    div = figure_div(accuracy_by_length(rows))
    assert figures_in_html(div)[0]["data"][0]["y"] == [0.8, 0.5]
    assert div == figure_div(accuracy_by_length(rows))        # same data, same bytes


def test_category_bars_and_offline_plotly(tmp_path):
    rows = [{"model": "m", "mode": "lc", "position": p, "n": 3, "score": s, "ci_low": 0.0, "ci_high": 1.0}
            for p, s in (("end", 1.0), ("beginning", 0.25))]
    fig = figure_data(accuracy_by_category(rows, "position", "Accuracy by position"))
    assert fig["data"][0]["type"] == "bar" and fig["data"][0]["x"] == ["beginning", "end"]
    assert fig["data"][0]["y"] == [0.25, 1.0]
    assert accuracy_by_category([], "position", "t") is None
    assert write_plotly_js(tmp_path) == "plotly.min.js"
    js = (tmp_path / "plotly.min.js").read_bytes()
    assert len(js) > 1_000_000 and b"plotly.js" in js[:2000]


def test_report_page_loads_no_network_asset(tmp_path):
    from ctxbench.report import build_report

    b = _tiny_build(tmp_path / "b")
    doc = build_report(b).read_text(encoding="utf-8")
    srcs = re.findall(r'<script[^>]*\bsrc="([^"]+)"', doc)
    assert srcs == ["plotly.min.js"]
    assert not re.search(r"(?:src|href)=\"(?:https?:)?//", doc)
    assert (b / "report" / "plotly.min.js").exists() and (b / "report" / "instances.html").exists()
    # the length table's count links to its instances, the nav to each model's wrong answers
    assert 'href="instances.html#model=openai%2Fa&amp;mode=lc&amp;matcher=row_match&amp;length=1024&amp;score=scored"' \
        in doc
    assert 'href="instances.html#model=openai%2Fb&amp;score=wrong"' in doc
