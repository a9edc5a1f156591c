"""The planted-fact track: corpus ingest (volume order, exclusions, the ctext API against a local server), tokenizer
calibration, the model registry's sizing tokenizers, per-model haystacks checked by recount with independent
tokenizer implementations, needles at measured depths, rejection of facts already in the corpus, and evaluation of
a needles build through the existing gateway."""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import accumulate
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pyarrow.parquet as pq
import pytest

from ctxbench.core.errors import InputError
from ctxbench.tracks.needles.questions import apply_insertions, load_needle_set, plan_insertions, verify_absent
from ctxbench.sources.corpus import fetch_corpus, load_corpus, volume_number
from ctxbench.tracks.needles import NeedlesConfig, build_needles, size_haystack

ZH_STATEMENTS = {  # the planted statements of assets/needles/zh-classical.yaml, written out by hand
    ("N1", "real"): "鶴山先生魏了翁卒於家，年六十。", ("N1", "altered"): "鶴山先生魏了翁卒於家，年七十三。",
    ("N2", "real"): "真德秀，字景元，建州浦城人也。", ("N2", "altered"): "真德秀，字景元，婺州蘭溪人也。",
    ("N3", "real"): "黃榦娶朱熹之女，為其婿。", ("N3", "altered"): "黃榦娶呂祖謙之女，為其婿。",
}


@pytest.fixture(scope="module")
def zh_corpus(shared_data) -> Path:
    from conftest import require_path

    return require_path(shared_data / "classical" / "songyuan_xuean" / "volumes", "宋元學案 volumes")


@pytest.fixture(scope="module")
def en_corpus(shared_data) -> Path:
    from conftest import require_path

    return require_path(shared_data / "lara" / "corpora" / "128k" / "book", "LaRA novels")


# ---------------------------------------------------------------- corpus ingest

def test_volume_numbers_and_canonical_order(zh_corpus, tmp_path):
    assert [volume_number(n) for n in ("000_第000卷_卷首", "022_第022卷卷二十二", "100_第100卷_卷一百",
                                       "卷四十八", "Chapter 12", "no number")] == [0, 22, 100, 48, 12, None]
    c = load_corpus(zh_corpus)
    assert [v.number for v in c.volumes] == list(range(101))
    assert c.volumes[22].name == "022_第022卷卷二十二"  # the file name without an underscore is still in place
    assert c.volumes[0].heading.startswith("第000卷") and c.volumes[100].heading.startswith("第100卷")
    # order by the number read from the name, never by the file name
    for fname, text in (("a_卷十.txt", "十\n"), ("b_卷二.txt", "二\n"), ("c_卷首.txt", "首\n\n  \n"), ("d_卷一百.txt", "百\n")):
        (tmp_path / fname).write_text(text, encoding="utf-8")
    t = load_corpus(tmp_path)
    assert [v.paragraphs for v in t.volumes] == [["首"], ["二"], ["十"], ["百"]]


def test_exclusions_match_labels_exactly(zh_corpus):
    c = load_corpus(zh_corpus, exclude=["卷八十", "西山真氏學案"])
    # 卷八十 must not also take 卷八十一 (whose heading contains the string 卷八十); the title names 卷八十一
    assert sorted(volume_number(n) for n in c.excluded) == [80, 81]
    assert len(c.volumes) == 99
    with pytest.raises(InputError, match="卷二百"):
        load_corpus(zh_corpus, exclude=["卷二百"])


def test_fetch_local_writes_order_and_checksums(zh_corpus, tmp_path):
    import hashlib

    c = fetch_corpus(tmp_path / "c", local=zh_corpus, exclude=["卷一"])
    meta = json.loads((tmp_path / "c" / "corpus.json").read_text(encoding="utf-8"))
    assert [e["number"] for e in meta["volumes"]] == [0, *range(2, 101)]
    f = zh_corpus / "002_第002卷_卷二.txt"
    assert meta["volumes"][1]["sha256"] == hashlib.sha256(f.read_bytes()).hexdigest()
    again = load_corpus(tmp_path / "c")
    assert again.paragraphs() == c.paragraphs() and "001_第001卷_卷一" in again.excluded


class _CtextHandler(BaseHTTPRequestHandler):
    """The ctext API's documented shapes: gettext → {"title", "fulltext"} or {"title", "subsections"}; errors as
    {"error": {"code", "description"}}."""

    BOOK = {
        "ctp:book": {"title": "某書", "subsections": ["ctp:book/v3", "ctp:book/v1", "ctp:book/v0"]},
        "ctp:book/v3": {"title": "卷三", "fulltext": ["卷三第一段。", "卷三第二段。"]},
        "ctp:book/v1": {"title": "卷一", "subsections": ["ctp:book/v1/a", "ctp:book/v1/b"]},
        "ctp:book/v1/a": {"title": "上", "fulltext": ["卷一上。"]},
        "ctp:book/v1/b": {"title": "下", "fulltext": ["卷一下甲。\n卷一下乙。"]},
        "ctp:book/v0": {"title": "卷首", "fulltext": ["序。"]},
    }
    seen: list = []

    def do_GET(self):  # noqa: N802
        u = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(u.query).items()}
        type(self).seen.append((u.path, q))
        data = self.BOOK.get(q.get("urn", "")) if u.path.endswith("/gettext") else None
        if data is None:
            data = {"error": {"code": "ERR_INVALID_URN", "description": "Invalid URN"}}
        body = json.dumps(data, ensure_ascii=False).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture()
def ctext_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _CtextHandler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    _CtextHandler.seen = []
    yield f"http://127.0.0.1:{srv.server_address[1]}/api"
    srv.shutdown()
    srv.server_close()


def test_ctext_client_against_a_local_server(ctext_server, tmp_path):
    import hashlib

    c = fetch_corpus(tmp_path / "ct", urn="ctp:book", base_url=ctext_server, apikey="k123", exclude=["卷三"])
    # canonical order 卷首, 卷一 (its two subsections in order, paragraphs split on newlines); 卷三 excluded
    assert [(v.name, v.paragraphs) for v in c.volumes] == [("卷首", ["序。"]),
                                                           ("卷一", ["卷一上。", "卷一下甲。", "卷一下乙。"])]
    assert c.volumes[0].sha256 == hashlib.sha256(json.dumps(["序。"], ensure_ascii=False).encode()).hexdigest()
    assert all(q.get("apikey") == "k123" and p == "/api/gettext" for p, q in _CtextHandler.seen)
    assert load_corpus(tmp_path / "ct").paragraphs() == ["序。", "卷一上。", "卷一下甲。", "卷一下乙。"]
    with pytest.raises(InputError, match="ERR_INVALID_URN"):
        fetch_corpus(tmp_path / "bad", urn="ctp:nothing", base_url=ctext_server)
    with pytest.raises(InputError, match="base-url"):
        fetch_corpus(tmp_path / "bad", urn="ctp:book")
    # the same through the CLI, with the key read from the named environment variable
    from typer.testing import CliRunner

    from ctxbench.cli import app

    r = CliRunner().invoke(app, ["fetch", "corpus", "--urn", "ctp:book", "--base-url", ctext_server, "--apikey-env",
                                 "CTEXT_TEST_KEY", "--out", str(tmp_path / "cli")], env={"CTEXT_TEST_KEY": "k456"})
    assert r.exit_code == 0, r.output
    assert "3 volumes" in r.output and _CtextHandler.seen[-1][1].get("apikey") == "k456"
    assert [v.name for v in load_corpus(tmp_path / "cli").volumes] == ["卷首", "卷一", "卷三"]


# ---------------------------------------------------------------- tokenizers and models

def test_calibration_counts_every_paragraph_once(tiktoken_enc):
    from ctxbench.tokenizers.calibrate import calibrate, spread

    paras = ["宋元學案，卷一。", "The flight left at 5:17.", "胡瑗，字翼之。"]
    enc = tiktoken_enc("o200k_base")
    cal = {c.tokenizer: c for c in calibrate(paras, ["o200k_base", "qwen2.5"])}
    want = sum(len(enc.encode_ordinary(p + "\n")) for p in paras)
    nonspace = sum(len(p.replace(" ", "")) for p in paras)
    assert cal["o200k_base"].tokens == want and cal["o200k_base"].chars_nonspace == nonspace
    assert cal["o200k_base"].tokens_per_char == round(want / nonspace, 4)
    r = [c.tokens_per_char for c in cal.values()]
    assert spread(list(cal.values())) == round(max(r) / min(r), 4)


def test_qwen25_from_qwen_tiktoken_matches_an_independent_implementation():
    import quicktok

    from ctxbench.tokenizers import get_tokenizer

    tok = get_tokenizer("qwen2.5")
    assert tok.source.endswith("qwen.tiktoken")
    text = "真德秀，字景元，建州浦城人也。 Isaac Newton was born in 1642; 12,345 tokens!\n\n"
    assert tok.encode(text) == quicktok.get_encoding("qwen3").encode_ordinary(text)


def test_sizing_models_and_unloadable_tokenizer(monkeypatch):
    import ctxbench.models.registry as reg

    for name, tname in (("gpt-4o", "o200k_base"), ("gpt-4.1", "o200k_base"), ("claude-sonnet-4", "claude-legacy"),
                        ("DeepSeek-V3", "deepseek-v3"), ("Qwen2.5-7B-Instruct-1M", "qwen2.5"),
                        ("llama-3.1-8b-instruct", "llama3")):
        info, tok = reg.sizing_tokenizer(name)
        assert tok.name == tname and info.window and info.max_output_tokens
    assert reg.model_info("claude-sonnet-4").approximate and reg.model_info("claude-sonnet-4").safety_margin > 0
    with pytest.raises(InputError, match="no-such-model"):
        reg.sizing_tokenizer("no-such-model")
    monkeypatch.setattr(reg, "_registry", lambda: {"m1": {"tokenizer": "hf:/nonexistent/tokenizer.json",
                                                          "window": 1000}})
    with pytest.raises(InputError, match="m1.*cannot be loaded"):
        reg.sizing_tokenizer("m1")


def test_sizing_formula_and_skipped_tier():
    from ctxbench.models.registry import ModelInfo

    class Tok:
        name = "t"

    prefix = list(range(0, 100_000, 10))  # paragraphs of 10 tokens each
    chars = list(range(0, 200_000, 20))
    small = ModelInfo("m", window=3000)
    hs = size_haystack("m", small, Tok(), 4096, prefix, 0.99, 500, 30, chars)
    # sized to the window (smaller than the tier): floor(0.99 × 3000) − 500 = 2470; cut at 2470 − 30 → 2440
    assert (hs.effective, hs.budget, hs.tokens, hs.k) == (3000, 2470, 2440, 244)
    approx = ModelInfo("a", window=100_000, approximate=True, safety_margin=0.1)
    assert size_haystack("a", approx, Tok(), 4096, prefix, 0.99, 500, 30, chars).budget == math.floor(
        0.99 * 0.9 * 4096) - 500
    assert "below half the tier" in size_haystack("m", ModelInfo("m", window=2000), Tok(), 4096, prefix, 0.99, 500,
                                                  30, chars)


# ---------------------------------------------------------------- haystacks, needles, chains

def _independent_counters(tiktoken_enc):
    import quicktok
    from tokenizers import Tokenizer as HF

    from conftest import _litellm_tokenizer_dir

    hf = HF.from_file(str(_litellm_tokenizer_dir() / "deepseek_tokenizer.json"))
    o200k = tiktoken_enc("o200k_base")
    qwen = quicktok.get_encoding("qwen3")
    return {"o200k_base": lambda s: len(o200k.encode_ordinary(s)),
            "qwen2.5": lambda s: len(qwen.encode_ordinary(s)),
            "deepseek-v3": lambda s: len(hf.encode(s, add_special_tokens=False).ids)}


@pytest.fixture(scope="module")
def zh_build(zh_corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("ndl") / "zh"
    cfg = NeedlesConfig(corpus=str(zh_corpus), models=["gpt-4.1", "Qwen2.5-7B-Instruct-1M", "DeepSeek-V3"],
                        lengths=[6000], output_budget=512)
    r = build_needles(cfg, out)
    return out, r


def test_haystacks_for_three_tokenizers_recounted(zh_build, zh_corpus, tiktoken_enc):
    from ctxbench.models.prompts import VARIANTS, messages_text, render_messages

    out, r = zh_build
    rows = pq.read_table(out / "instances.parquet").to_pylist()
    # 3 needles × 2 variants × 3 depths + 5 chains, for each of 3 models
    assert r.n_instances == len(rows) == 3 * 23 and r.n_quarantined == 0
    count = _independent_counters(tiktoken_enc)
    paras = load_corpus(zh_corpus, exclude=["卷六十三", "卷八十", "卷八十一"]).paragraphs()
    man = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    planted = {s for s in ZH_STATEMENTS.values()} | {s for c in load_needle_set("zh-classical").chains
                                                       for s in c["statements"]}
    for row in rows:
        n = count[row["tokenizer"]](row["context"])
        assert n == row["context_tokens"] <= row["haystack_budget_tokens"]
        # the budget: floor(0.99 × 6000) − (template + longest question + 512 output tokens + 16 chat allowance)
        tmpl = max(count[row["tokenizer"]](messages_text(render_messages("", q, v, row["sizing_model"],
                                                                          benchmark="needles")))
                   for q in {x["question"] for x in rows} for v in VARIANTS)
        assert row["haystack_budget_tokens"] == math.floor(0.99 * 6000) - (tmpl + 512 + 16)
        # whole paragraphs: without the planted statements the context is the corpus's first k paragraphs
        text = row["context"]
        for s in planted:
            text = text.replace(s, "")
        k = row["haystack_paragraphs"]
        assert text.replace("\n\n", "\n") == "".join(p + "\n" for p in paras[:k])
        # and it is full: one more paragraph would not have fit beside the reserve for the largest planted set
        reserve = next(h["reserve"] for h in man["haystacks"] if h["model"] == row["sizing_model"])
        base = n - row["relevant_tokens"]
        assert base + count[row["tokenizer"]](paras[k] + "\n") > row["haystack_budget_tokens"] - reserve - 2
    # the same fraction of each tier for every model, hence different lengths in characters
    by_model = {}
    for row in rows:
        by_model.setdefault(row["sizing_model"], row)
    assert len({len(x["context"]) for x in by_model.values()}) == 3
    assert {h["tokenizer"] for h in man["haystacks"]} == {"o200k_base", "qwen2.5", "deepseek-v3"}
    # 15 fictional chain names and the 8 look-alike subjects of zh-classical.yaml, each checked absent
    assert man["absence_check"]["names"] == 15 + 8 and sorted(man["corpus"]["excluded"]) == [
        "063_第063卷_卷六十三", "080_第080卷_卷八十", "081_第081卷_卷八十一"]


def test_needles_at_stated_depths_measured(zh_build, tiktoken_enc):
    out, _ = zh_build
    rows = [r for r in pq.read_table(out / "instances.parquet").to_pylist() if r["sizing_model"] == "gpt-4.1"]
    enc = tiktoken_enc("o200k_base")
    singles = [r for r in rows if r["variant"] != "chain"]
    assert sorted({(r["needle_id"], r["variant"]) for r in singles}) == sorted(ZH_STATEMENTS)
    for r in singles:
        st = ZH_STATEMENTS[(r["needle_id"], r["variant"])]
        ctx = r["context"]
        assert ctx.count(st) == 1
        pos = ctx.index(st)
        j = ctx[:pos].count("\n")  # paragraphs wholly before the needle
        n = r["haystack_paragraphs"]
        assert r["achieved_depth_paragraphs"] == round(j / n, 6)
        # the depth is a fraction of the tokens: the needle starts within 2 points of it (short sentences here)
        before, total = len(enc.encode_ordinary(ctx[:pos])), len(enc.encode_ordinary(ctx))
        assert r["achieved_depth_tokens"] == before and r["achieved_depth"] == round(before / total, 6)
        assert abs(before / total - r["depth"]) <= 0.02 and r["depth_tolerance"] == 0.02
        (s, e), = json.loads(r["evidence_spans"])
        assert st in enc.decode(enc.encode_ordinary(ctx)[s:e])
        assert json.loads(r["gold"]) == [[{"N1": {"real": "六十", "altered": "七十三"},
                                           "N2": {"real": "建州浦城", "altered": "婺州蘭溪"},
                                           "N3": {"real": "朱熹", "altered": "呂祖謙"}}[r["needle_id"]][r["variant"]]]]
    ch = next(r for r in rows if r["needle_id"] == "C1")
    c1 = ["甄子敬少從葛元方學，終身師事之。", "葛元方與闕仲章為友，相交甚篤。", "闕仲章晚居鄉里，卒年六十一。"]
    pos = [ch["context"].index(s) for s in c1]
    assert pos == sorted(pos) and ch["reasoning_depth"] == 3 and ch["depth"] is None
    total = len(enc.encode_ordinary(ch["context"]))
    before = [len(enc.encode_ordinary(ch["context"][:p])) for p in pos]
    assert [b / total for b in before] == pytest.approx([0.25, 0.5, 0.75], abs=0.02)
    assert json.loads(ch["needle_depths_tokens"]) == before
    assert json.loads(ch["needle_depths_achieved"]) == [round(b / total, 6) for b in before]
    assert json.loads(ch["gold"]) == [["六十一"]] and "61" in json.loads(ch["accepted_answers"])


def test_rebuild_is_skipped_and_identical(zh_build, zh_corpus, tmp_path):
    out, r = zh_build
    cfg = NeedlesConfig(corpus=str(zh_corpus), models=["gpt-4.1", "Qwen2.5-7B-Instruct-1M", "DeepSeek-V3"],
                        lengths=[6000], output_budget=512)
    assert build_needles(cfg, out).skipped


def test_english_corpus_paragraph_boundary_and_approximate_sizing(en_corpus, tmp_path, tiktoken_enc):
    from ctxbench.report import build_report

    cfg = NeedlesConfig(corpus=str(en_corpus), models=["gpt-4o", "claude-sonnet-4"], lengths=[4096],
                        output_budget=256, boundary="paragraph", depths=[0.5])
    build_needles(cfg, tmp_path / "en")
    rows = pq.read_table(tmp_path / "en" / "instances.parquet").to_pylist()
    enc = tiktoken_enc("o200k_base")
    assert len(rows) == 2 * (3 * 2 + 5) and {r["language"] for r in rows} == {"en"}
    r = next(x for x in rows if x["needle_id"] == "N1" and x["variant"] == "altered" and x["sizing_model"] == "gpt-4o")
    st = "Charles Darwin died at Down House at the age of fifty-eight."
    lines = r["context"].split("\n")
    assert st in lines  # a paragraph of its own
    # at the paragraph boundary nearest half the context's tokens (the needle's own included), counted here
    at = lines.index(st)
    base = [ln + "\n" for i, ln in enumerate(lines[:-1]) if i != at]
    offsets = [0, *accumulate(len(enc.encode_ordinary(x)) for x in base)]
    target = 0.5 * (offsets[-1] + len(enc.encode_ordinary(st + "\n")))
    assert at == min(range(len(offsets)), key=lambda j: (abs(offsets[j] - target), j))
    assert r["achieved_depth_tokens"] == offsets[at] and r["achieved_depth_paragraphs"] == round(
        at / r["haystack_paragraphs"], 6)
    # a paragraph boundary is as close as paragraphs allow: the tolerance is the paragraph the target fell in
    assert abs(r["achieved_depth"] - 0.5) <= r["depth_tolerance"]
    assert len(enc.encode_ordinary(r["context"])) == r["context_tokens"] and not r["sizing_approximate"]
    # Claude Sonnet 4 is sized with the older Claude tokenizer: flagged, with a 10% margin, and said in the report
    c = next(x for x in rows if x["sizing_model"] == "claude-sonnet-4")
    assert c["sizing_approximate"] and c["tokenizer"] == "claude-legacy"
    assert c["haystack_budget_tokens"] < math.floor(0.99 * 0.9 * 4096)
    man = json.loads((tmp_path / "en" / "manifest.json").read_text(encoding="utf-8"))
    assert list(man["approximate_tokenizers"]) == ["claude-sonnet-4"]
    page = build_report(tmp_path / "en").read_text(encoding="utf-8")
    assert "Approximate tokenizer" in page and "claude-sonnet-4 were sized with claude-legacy" in page
    assert "Haystacks" in page and str(c["haystack_budget_tokens"]) in page


def test_a_fact_already_in_the_corpus_is_rejected(zh_corpus, tmp_path):
    # 卷五 says 吳道，字真常，浦城人也。 — a needle planting that fact must be refused, naming it
    bad = tmp_path / "bad.yaml"
    bad.write_text("""language: zh
needles:
  - id: NX
    subject: 吳道
    statement: "吳道，{value}人也。"
    fact_terms: [人]
    question: 吳道是哪裏人？
    real: {value: 浦城}
    altered: {value: 金華}
""", encoding="utf-8")
    with pytest.raises(InputError, match="NX.*吳道.*浦城"):
        build_needles(NeedlesConfig(corpus=str(zh_corpus), models=["gpt-4o"], lengths=[4096], needles=str(bad)),
                      tmp_path / "b")
    assert not (tmp_path / "b" / "instances.parquet").exists()
    # a "fictional" chain name that occurs in the corpus (胡瑗, the subject of 卷一) is refused too
    chain = tmp_path / "chain.yaml"
    chain.write_text("""language: zh
chains:
  - id: CX
    names: [甄子敬, 胡瑗]
    statements: [甄子敬從胡瑗學。, 胡瑗卒年六十七。]
    question: 甄子敬的老師卒年幾歲？
    answer: 六十七
""", encoding="utf-8")
    with pytest.raises(InputError, match="CX.*胡瑗"):
        verify_absent(load_corpus(zh_corpus).text(), load_needle_set(str(chain)))


def test_insertion_at_sentence_boundaries_of_either_script():
    paras = ["甲曰：「學而時習之。」乙曰：「不亦說乎？」丙。", "One sentence here. Another one! Last", "無句讀"]
    ins = plan_insertions(paras, ["NEEDLE。", "PIN.", "釘。"], [0.0, 1 / 3, 2 / 3], "sentence")
    result, where, origin = apply_insertions(paras, ins)
    # after the sentence end nearest the middle (a closing quote stays with its sentence); no space in Chinese,
    # one space in English; a paragraph without an inner sentence end gets the statement as a paragraph before it
    assert result == ["甲曰：「學而時習之。」NEEDLE。乙曰：「不亦說乎？」丙。", "One sentence here. PIN. Another one! Last",
                      "釘。", "無句讀"]
    assert origin == [None, None, None, 2]
    assert [result[i][a:b] for i, a, b in where] == ["NEEDLE。", "PIN.", "釘。"]
    assert [x.j for x in ins] == [0, 1, 2]


def test_evaluate_runs_on_a_needles_build(zh_build, tmp_path, monkeypatch):
    import shutil

    from ctxbench.run.evaluate import EvalConfig, evaluate_build
    from fakeserver import FakeOpenAIServer

    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    out, _ = zh_build
    b = tmp_path / "b"
    shutil.copytree(out, b)
    with FakeOpenAIServer(answer_fn=lambda body: "Answer: 六十") as srv:
        s = evaluate_build(b, EvalConfig(model="openai/needle-test", base_url=srv.base_url, max_tokens=64))
    n = pq.read_table(b / "instances.parquet").num_rows
    assert s.calls == n and pq.read_table(b / "responses.parquet").num_rows == n


def test_build_needles_flow(en_corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from pipelines.flows import build_needles_flow

    cfg = NeedlesConfig(corpus=str(en_corpus), models=["gpt-4o"], lengths=[2048], output_budget=128, depths=[0.5],
                        chains=False)
    out = str(tmp_path / "f")
    r = build_needles_flow(cfg, out)
    assert r["n_instances"] == pq.read_table(Path(out) / "instances.parquet").num_rows == 6
    assert build_needles_flow(cfg, out)["skipped"] is True


def test_cli_fetch_calibrate_and_errors(tmp_path, tiktoken_enc):
    from typer.testing import CliRunner

    from ctxbench.cli import app

    src = tmp_path / "src"
    src.mkdir()
    (src / "b_卷二.txt").write_text("卷二。\n學而時習之。\n", encoding="utf-8")
    (src / "a_卷一.txt").write_text("卷一。\nThe quick brown fox.\n", encoding="utf-8")
    run = CliRunner().invoke
    r = run(app, ["fetch", "corpus", "--local", str(src), "--out", str(tmp_path / "c")])
    assert r.exit_code == 0, r.output
    r = run(app, ["calibrate", "--corpus", str(tmp_path / "c"), "--tokenizers", "o200k_base,qwen2.5"])
    assert r.exit_code == 0, r.output
    cal = json.loads((tmp_path / "c" / "calibration.json").read_text(encoding="utf-8"))
    enc = tiktoken_enc("o200k_base")
    paras = ["卷一。", "The quick brown fox.", "卷二。", "學而時習之。"]
    o = next(x for x in cal["tokenizers"] if x["tokenizer"] == "o200k_base")
    assert o["tokens"] == sum(len(enc.encode_ordinary(p + "\n")) for p in paras)
    assert "o200k_base" in r.output and "spread" in r.output
    # clear errors, no tracebacks
    r = run(app, ["build", "needles", "--corpus", str(tmp_path / "c"), "--models", "no-such-model",
                  "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "no-such-model" in r.output
    r = run(app, ["fetch", "corpus", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "--local" in r.output


def test_window_below_half_the_tier_is_quarantined_and_any_hop_count(en_corpus, tmp_path):
    chain = tmp_path / "hops.yaml"
    chain.write_text("""language: en
chains:
  - id: H4
    attribute: hometown
    names: [Quenby Ashdale, Morrow Tindle, Perrin Vashe, Oriel Fanshaw]
    statements:
      - Quenby Ashdale studied under Morrow Tindle.
      - Morrow Tindle was a friend of Perrin Vashe.
      - Perrin Vashe was the cousin of Oriel Fanshaw.
      - Oriel Fanshaw was born in Lowmarsh.
    question: Where was the cousin of Quenby Ashdale's teacher's friend born?
    answer: Lowmarsh
""", encoding="utf-8")
    # Llama-3.1-8B-Instruct has a 131,072-token window: the 524,288 tier (more than twice the window) is skipped
    cfg = NeedlesConfig(corpus=str(en_corpus), models=["Llama-3.1-8B-Instruct"], lengths=[2048, 524288],
                        output_budget=128, needles=str(chain), boundary="paragraph")
    r = build_needles(cfg, tmp_path / "h")
    q = pq.read_table(tmp_path / "h" / "quarantine.parquet").to_pylist()
    assert r.n_quarantined == 1 and q[0]["input"] == "Llama-3.1-8B-Instruct@524288" and q[0]["stage"] == "assemble"
    assert "below half the tier" in q[0]["reason"]
    (row,) = pq.read_table(tmp_path / "h" / "instances.parquet").to_pylist()
    assert row["target_tokens"] == 2048 and row["reasoning_depth"] == 4 and row["tokenizer"] == "llama3"
    import quicktok

    enc = quicktok.get_encoding("llama3")
    lines = row["context"].split("\n")[:-1]
    sts = ["Quenby Ashdale studied under Morrow Tindle.", "Morrow Tindle was a friend of Perrin Vashe.",
           "Perrin Vashe was the cousin of Oriel Fanshaw.", "Oriel Fanshaw was born in Lowmarsh."]
    idx = [lines.index(s) for s in sts]
    # four statements at 20/40/60/80% of the tokens (evenly spaced), in chain order, each at the paragraph boundary
    # nearest its target: statement k aims at depth × (all tokens) − (tokens of the k statements before it)
    base = [ln + "\n" for ln in lines if ln not in sts]
    offsets = [0, *accumulate(len(enc.encode_ordinary(x)) for x in base)]
    st_tokens = [len(enc.encode_ordinary(s + "\n")) for s in sts]
    total = offsets[-1] + sum(st_tokens)
    want = []
    for k, f in enumerate((0.2, 0.4, 0.6, 0.8)):
        t = f * total - sum(st_tokens[:k])
        want.append(min(range(len(offsets)), key=lambda j: (abs(offsets[j] - t), j)))
    assert [i - k for k, i in enumerate(idx)] == want
    assert json.loads(row["needle_depths"]) == [0.2, 0.4, 0.6, 0.8] and len(json.loads(row["evidence_spans"])) == 4
