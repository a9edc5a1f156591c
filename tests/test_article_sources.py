"""Full-text article sources of the scientific-article track (issue 15 items 1-2): each reader on the shared samples
with values checked against the raw files read here independently (json, not the reader), malformed records
quarantined, deduplication in source order, citations across sources, and a 1M build from unArXive + PDFs whose
collection databases match the source records."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from ctxbench.sources.fulltext import FullTextArticle, assign_ids, deduplicate, resolve_citations, title_key
from ctxbench.sources.markdown_articles import read_markdown
from ctxbench.sources.s2orc import read_s2orc
from ctxbench.sources.unarxive import read_unarxive


@pytest.fixture(scope="module")
def articles_dir(shared_data):
    from conftest import require_path

    return require_path(shared_data / "articles", "shared articles")


def _raw_unarxive(d):
    f = d / "unarxive_sample" / "arXiv_src_2212_086.jsonl"
    return [json.loads(x) for x in f.read_text(encoding="utf-8").splitlines() if x.strip()]


def test_unarxive_reader_matches_raw_file(articles_dir):
    raw = {r["paper_id"]: r for r in _raw_unarxive(articles_dir)}
    res = read_unarxive(articles_dir / "unarxive_sample")
    got = {a.source_id: a for a in res.articles}
    # 49 papers; 2212.11739 has 82 characters of body text: no full text
    assert len(raw) == 49 and len(got) == 48 and "2212.11739" not in got
    assert [q["input"] for q in res.quarantine] == ["arXiv_src_2212_086.jsonl:14"]
    assert "no full text" in res.quarantine[0]["reason"]
    for pid, a in got.items():
        r = raw[pid]
        assert a.title == " ".join(r["metadata"]["title"].split())
        parsed = r["metadata"]["authors_parsed"]
        assert len(a.authors) == len(parsed)
        for name, (last, first, *_) in zip(a.authors, parsed):
            assert name.startswith(first) and last in name  # in order, accents decoded by arXiv's own parse
        assert a.ref_count == len(r["bib_entries"])
        assert a.text.startswith(f"# {a.title}\n\n{', '.join(a.authors)}\n")
        assert len(re.findall(r"(?m)^\[\d+\] ", a.text.split("\n## References\n")[-1])) == a.ref_count
        assert "{{formula:" not in a.text and "{{cite:" not in a.text
    a = got["2212.11867"]
    assert a.authors == ["Marcus Michelen", "Xuan-Truong Vu"] and a.ref_count == 17
    assert "\n## 1 Introduction\n" in a.text  # section headings with their numbers
    assert "$P_n(z)=(z-X_1)\\ldots (z-X_n)\\,.$" in a.text  # LaTeX as written
    assert got["2212.11862"].authors[:2] == ["Adrián Pérez-Salinas", "Radoica Draškić"]
    assert got["2212.11791"].ref_count == 0  # no bibliography entries in the record


def test_unarxive_bad_lines_are_quarantined(articles_dir, tmp_path):
    good = (articles_dir / "unarxive_sample" / "arXiv_src_2212_086.jsonl").read_text(encoding="utf-8").splitlines()[0]
    rec = json.loads(good)
    no_title = dict(rec, metadata=dict(rec["metadata"], title=""))
    bad_body = dict(rec, paper_id="x1", body_text="not a list")
    (tmp_path / "a.jsonl").write_text("\n".join([good, "{not json", json.dumps(no_title), "[1, 2]",
                                                 json.dumps(bad_body), ""]), encoding="utf-8")
    res = read_unarxive(tmp_path)
    assert [a.source_id for a in res.articles] == ["2212.11867"]
    reasons = {q["input"]: q["reason"] for q in res.quarantine}
    assert set(reasons) == {"a.jsonl:2", "a.jsonl:3", "a.jsonl:4", "a.jsonl:5"}
    assert reasons["a.jsonl:2"].startswith("not JSON") and "title" in reasons["a.jsonl:3"]
    assert "body_text" in reasons["a.jsonl:5"]


# authors read by hand from the first lines of each file
MARKDOWN_AUTHORS = {
    "1508.01745": ["Tsung-Hsien Wen", "Milica Gašić", "Nikola Mrkšić", "Pei-Hao Su", "David Vandyke", "Steve Young"],
    "1604.05280": ["Scott Garrabrant", "Nate Soares", "Jessica Taylor"],
    "1604.05377": ["Artit Wangperawong", "Cyrille Brun", "Olav Laudy", "Rujikorn Pavasuthipaisit"],
    "1605.00252": ["Peter D. Grünwald", "Nishant A. Mehta"],
    "1610.04325": ["Jin-Hwa Kim", "Kyoung-Woon On", "Woosang Lim", "Jeonghee Kim", "Jung-Woo Ha", "Byoung-Tak Zhang"],
    "1612.04662": ["Jarek Duda"],
    "1709.03082": ["Abien Fred M. Agarap"],
    "1802.03426": ["Leland McInnes", "John Healy", "James Melville"],
    "1802.08129": ["Dong Huk Park", "Lisa Anne Hendricks", "Zeynep Akata", "Anna Rohrbach", "Bernt Schiele",
                   "Trevor Darrell", "Marcus Rohrbach"],
    "1803.08375": ["Abien Fred M. Agarap"],
}


def test_markdown_reader_reads_title_and_author_lines(articles_dir):
    d = articles_dir / "arxiv_markdown"
    res = read_markdown(d)
    got = {a.source_id: a for a in res.articles}
    assert not res.quarantine and set(got) == set(MARKDOWN_AUTHORS)
    for sid, a in got.items():
        text = (d / f"{sid}.md").read_text(encoding="utf-8")
        assert a.title == text.split("\n", 1)[0].removeprefix("# ").strip()
        assert a.authors == MARKDOWN_AUTHORS[sid], sid
        assert a.text.strip() == text.strip()  # the document as written (LaTeX included)
    # numbered bibliographies: entries are the [n] lines after the last References heading (1802.08129's [13] and
    # [37] follow their predecessor without a blank line)
    for sid in ("1604.05280", "1612.04662", "1709.03082", "1802.03426", "1802.08129", "1803.08375"):
        text = (d / f"{sid}.md").read_text(encoding="utf-8")
        bib = re.split(r"(?im)^#+\s*references\s*:?\s*$", text)[-1]
        bib = re.split(r"(?m)^#{1,2} ", bib)[0]
        assert got[sid].ref_count == len(re.findall(r"(?m)^\[\d+\]", bib)), sid
    assert got["1802.08129"].ref_count == 40
    # author-year bibliographies: one paragraph per entry, footnote definitions not counted
    assert got["1508.01745"].ref_count == 49 and got["1610.04325"].ref_count == 38


def test_markdown_sidecar_front_matter_and_missing_authors(tmp_path):
    body = "\n\n".join(f"Paragraph {i} " + "text " * 40 for i in range(8))
    (tmp_path / "a.md").write_text("# A Title Of The Paper\n\nUnreadable byline 123\n\n" + body, encoding="utf-8")
    (tmp_path / "a.json").write_text(json.dumps({"title": "A Title Of The Paper", "authors": ["Ann Lee", "Bo Chen"],
                                                 "ref_count": 7, "doi": "10.1000/XYZ"}), encoding="utf-8")
    (tmp_path / "b.md").write_text("---\ntitle: Front Matter Paper\nauthor:\n  - name: Carla Diaz\n  - Dan Wu\n---\n"
                                   + body + "\n\n## References\n\n[1] X. One.\n\n[2] Y. Two.\n", encoding="utf-8")
    (tmp_path / "c.md").write_text("# Nobody Wrote This\n\n" + body, encoding="utf-8")
    (tmp_path / "d.md").write_text("No heading at all\n\n" + body, encoding="utf-8")
    res = read_markdown(tmp_path)
    got = {a.source_id: a for a in res.articles}
    assert got["a"].authors == ["Ann Lee", "Bo Chen"] and got["a"].ref_count == 7
    assert got["a"].identifiers["doi"] == "10.1000/xyz"
    assert got["b"].title == "Front Matter Paper" and got["b"].authors == ["Carla Diaz", "Dan Wu"]
    assert got["b"].ref_count == 2
    reasons = {q["input"]: q["reason"] for q in res.quarantine}
    assert reasons["c.md"].startswith("no authors") and "c.json" in reasons["c.md"]
    assert reasons["d.md"].startswith("no title")


def test_s2orc_reader_matches_raw_files(articles_dir, tmp_path):
    d = articles_dir / "s2orc_sample"
    ex = json.loads((d / "example_paper.json").read_text(encoding="utf-8"))
    meta = [json.loads(x) for x in (d / "metadata_sample.jsonl").read_text(encoding="utf-8").splitlines() if x]
    res = read_s2orc(d)
    assert [a.source_id for a in res.articles] == [ex["paper_id"]]
    a = res.articles[0]
    assert a.title == ex["metadata"]["title"]
    assert a.authors == [" ".join([x["first"], *x["middle"], x["last"]]) for x in ex["metadata"]["authors"]]
    assert a.ref_count == len(ex["grobid_parse"]["bib_entries"]) == 26
    # metadata lines have no full text beside them: each is a quarantine row saying so
    assert len(res.quarantine) == len(meta) == 1000
    assert sum("has_pdf_parse is false" in q["reason"] for q in res.quarantine) == \
        sum(not m["has_pdf_parse"] for m in meta)
    # the 2020 release's two files joined by paper_id (the example's parse under a metadata line's id)
    m = dict(meta[0], has_pdf_parse=True, outbound_citations=["999"])
    parse = dict(ex["grobid_parse"], paper_id=m["paper_id"])
    (tmp_path / "metadata.jsonl").write_text(json.dumps(m) + "\n", encoding="utf-8")
    (tmp_path / "pdf_parses.jsonl").write_text(json.dumps(parse) + "\n", encoding="utf-8")
    r2 = read_s2orc(tmp_path)
    assert not r2.quarantine and r2.articles[0].title == m["title"] and r2.articles[0].ref_count == 26
    assert r2.articles[0].cites == [("s2", "999")]
    # the datasets API shape: text with annotation spans
    text = "Span Title Here\nAna Ruiz\nBen Ode\nIntro\n" + "Body text. " * 120 + "\n[1] Ref one.\n[2] Ref two."
    def span(s):
        i = text.index(s)
        return {"start": i, "end": i + len(s)}
    body = "Body text. " * 120
    ann = {"title": json.dumps([span("Span Title Here")]), "author": json.dumps([span("Ana Ruiz"), span("Ben Ode")]),
           "sectionheader": json.dumps([span("Intro")]), "paragraph": json.dumps([span(body)]),
           "bibentry": json.dumps([span("[1] Ref one."), span("[2] Ref two.")])}
    (tmp_path / "api.jsonl").write_text(json.dumps({"corpusid": 42, "externalids": {"DOI": "10.5555/AB"},
                                                    "content": {"text": text, "annotations": ann}}), encoding="utf-8")
    r3 = read_s2orc(tmp_path / "api.jsonl")
    assert [(x.title, x.authors, x.ref_count, x.identifiers["doi"]) for x in r3.articles] == \
        [("Span Title Here", ["Ana Ruiz", "Ben Ode"], 2, "10.5555/ab")]


def _rec(source, sid, title, authors=("Ann Lee",), bib=(), ids=None):
    from ctxbench.sources.fulltext import BibEntry, ids_in_text

    return FullTextArticle(source, sid, sid, title, list(authors), len(bib), "text",
                           [BibEntry(b, ids_in_text(b)) for b in bib], ids or {})


def test_dedup_keeps_first_source_and_citations_follow_the_kept_record():
    t = "Attention Is All You Need"
    recs = [_rec("pdf", "B01", t, ids={"arxiv": "1706.03762"}),
            _rec("unarxive", "1706.03762", "Attention is all you need", ("Other Person",), ids={"arxiv": "1706.03762"}),
            _rec("markdown", "x", "ATTENTION IS ALL YOU NEED!"),
            _rec("s2orc", "123", "Attention  is all you need", ids={"s2": "123"}),
            _rec("unarxive", "2212.1", "A Citing Paper About Things",
                 bib=["A. Vaswani et al. Attention is all you need. In NIPS, 2017."]),
            _rec("markdown", "m2", "Another Citing Paper Here", bib=["Some entry, arXiv:1706.03762v5, 2017."]),
            _rec("s2orc", "124", "Third Citing Paper Again", bib=["Attention is all you need in speech separation."])]
    assert len({title_key(r.title) for r in recs[:4]}) == 1
    merged = deduplicate(assign_ids(recs))
    assert [aid for aid, _ in merged.kept] == ["B01", "2212.1", "m2", "124"]
    assert [(aid, kept) for aid, _, kept in merged.duplicates] == [("1706.03762", "B01"), ("x", "B01"), ("123", "B01")]
    cites = resolve_citations(merged)
    # by title phrase, by arXiv id; a longer title that merely begins with the same words is no citation
    assert cites == {"B01": [], "2212.1": ["B01"], "m2": ["B01"], "124": []}
    # ids repeat across sources: later ones are prefixed with their source
    ids = [aid for aid, _ in assign_ids([_rec("unarxive", "1", "A"), _rec("markdown", "1", "B")], {"1"})]
    assert ids == ["unarxive:1", "markdown:1"]


def test_dedup_order_through_the_build_stages(articles_dir, tmp_path):
    """unarXive before markdown before S2ORC: a markdown file and an S2ORC paper with the title of an unArXive
    paper are kept only as duplicates of it (articles.parquet rows with duplicate_of)."""
    from ctxbench.tracks.scitrek import SciTrekConfig
    from ctxbench.tracks.scitrek.build import convert_stage, database_stage, fetch_stage

    raw = _raw_unarxive(articles_dir)[0]
    title = " ".join(raw["metadata"]["title"].split())
    md = tmp_path / "md"
    md.mkdir()
    (md / "dup.md").write_text(f"# {title}\n\nSomeone Else\n\n" + "Words of the body. " * 100, encoding="utf-8")
    ex = json.loads((articles_dir / "s2orc_sample" / "example_paper.json").read_text(encoding="utf-8"))
    ex["metadata"]["title"] = title.upper()
    (tmp_path / "s2.json").write_text(json.dumps(ex), encoding="utf-8")
    cfg = SciTrekConfig(unarxive=str(articles_dir / "unarxive_sample"), markdown=str(md),
                        s2orc=str(tmp_path / "s2.json"), lengths=[65536])
    loaded = fetch_stage(cfg, tmp_path / "out")
    conv = database_stage(loaded, convert_stage(loaded)[0])
    rows = {r["article_id"]: r for r in conv.article_rows}
    assert rows["dup"]["duplicate_of"] == raw["paper_id"] and not rows["dup"]["kept"]
    assert rows[ex["paper_id"]]["duplicate_of"] == raw["paper_id"] and rows[ex["paper_id"]]["source"] == "s2orc"
    assert rows[raw["paper_id"]]["kept"] and rows[raw["paper_id"]]["source"] == "unarxive"
    assert conv.meta[raw["paper_id"]].authors == [f"{f} {last}".strip() for last, f, *_ in raw["metadata"]["authors_parsed"]]
    assert conv.duplicates == 2 and "dup" not in conv.texts


def test_build_1m_from_unarxive_and_pdfs(articles_dir, tmp_path, tiktoken_enc, monkeypatch, shared_pdf_conversions):
    """The issue's command at 1M: collections of exactly counted length filling >= 90% of 1,048,576 tokens with
    >= 4 articles and questions in both formats; every collection database matches the source files (titles,
    authors in order, reference counts) read here from the raw JSON."""
    pytest.importorskip("ctxbench.convert.pdf", reason="the PDF converter is not installed")
    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from ctxbench.cli import app
    from ctxbench.convert.pdf import convert_cache_dir

    real = convert_cache_dir()  # the run's conversion cache (keyed by PDF hash and converter version), which
    assert real == shared_pdf_conversions  # holds every shared PDF already (conftest)
    real.mkdir(parents=True, exist_ok=True)
    home = tmp_path / "home"
    (home / "cache").mkdir(parents=True)
    (home / "cache" / "convert").symlink_to(real, target_is_directory=True)
    monkeypatch.setenv("CTXBENCH_HOME", str(home))
    pdfs = articles_dir / "pdfs"
    out = tmp_path / "sci"
    r = CliRunner().invoke(app, ["build", "scitrek", "--unarxive", str(articles_dir / "unarxive_sample"), "--pdfs",
                                 str(pdfs), "--metadata", str(pdfs / "metadata.json"), "--tokenizer", "o200k_base",
                                 "--lengths", "1048576", "--out", str(out)])
    assert r.exit_code == 0, r.output
    cols = [c for c in pq.read_table(out / "collections.parquet").to_pylist() if c["tier"] == 1048576]
    assert cols
    inst = pq.read_table(out / "instances.parquet", columns=["source_id", "context_format", "context_tokens",
                                                             "target_tokens"]).to_pylist()
    enc = tiktoken_enc("o200k_base")
    arts = {a["article_id"]: a for a in pq.read_table(out / "articles.parquet").to_pylist()}
    ux = {r["paper_id"]: r for r in _raw_unarxive(articles_dir)}
    meta = {m["id"]: m for m in json.loads((pdfs / "metadata.json").read_text(encoding="utf-8"))}
    for c in cols:
        ids = json.loads(c["article_ids"])
        context = "".join(arts[i]["markdown"].strip() + "\n\n---\n\n" for i in ids)
        n = len(enc.encode_ordinary(context))
        assert n == c["context_tokens"] and 0.9 * 1048576 <= n <= 1048576 and len(ids) >= 4
        assert {i["context_format"] for i in inst if i["source_id"] == c["collection_id"]} == {"full_text", "tables"}
        con = sqlite3.connect(out / "collections" / f"{c['collection_id']}.sqlite")
        db = {a: (t, rc) for a, t, rc in con.execute("SELECT article_id, article_title, reference_count FROM articles")}
        authors = {}
        for a, name, pos in con.execute("SELECT article_id, author_name, author_position FROM article_author "
                                        "ORDER BY article_id, author_position"):
            authors.setdefault(a, []).append(name)
        assert sorted(db) == sorted(ids)
        assert {arts[i]["source"] for i in ids} == {"pdf", "unarxive"}
        for i in ids:
            if arts[i]["source"] == "pdf":
                m = meta[i]
                assert db[i] == (m["title"], m["ref_count"]) and authors[i] == m["authors"]
            else:
                x = ux[i]
                assert db[i] == (" ".join(x["metadata"]["title"].split()), len(x["bib_entries"]))
                assert [a.split()[-1] for a in authors[i]] == \
                    [p[0].split()[-1] for p in x["metadata"]["authors_parsed"]]
        # a citation found in a bibliography entry: 2212.11772 cites Attention (B01) and BERT (B02)
        cit = set(con.execute("SELECT article_id_citing, article_id_cited FROM citing_cited"))
        for citing, cited in (("2212.11772", "B01"), ("2212.11772", "B02")):
            if citing in ids and cited in ids:
                assert (citing, cited) in cit


def test_cli_names_what_is_missing(tmp_path):
    from typer.testing import CliRunner

    from ctxbench.cli import app

    r = CliRunner().invoke(app, ["build", "scitrek", "--pdfs", str(tmp_path), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "--metadata go together" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(app, ["build", "scitrek", "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "--unarxive PATH" in r.output
    r = CliRunner().invoke(app, ["build", "scitrek", "--unarxive", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "--unarxive" in r.output and "does not exist" in r.output


def test_byte_order_marks_and_crlf_read_as_the_plain_files(articles_dir, tmp_path):
    """Files saved by Windows tools (UTF-8 byte-order mark, CRLF line ends) give the same article records as the
    plain files: a BOM before '# Title' made the markdown reader take a later heading (an author's name) as the
    title, and a BOM quarantined an unarXive JSONL's first paper and a whole S2ORC file as not JSON."""
    bom = b"\xef\xbb\xbf"
    md = (articles_dir / "arxiv_markdown" / "1610.04325.md").read_text(encoding="utf-8")
    (tmp_path / "md").mkdir()
    (tmp_path / "md" / "k.md").write_bytes(bom + md.replace("\n", "\r\n").encode("utf-8"))
    (tmp_path / "md" / "s.md").write_bytes(bom + ("# Sidecar Paper\n\n" + "words " * 400).encode("utf-8"))
    (tmp_path / "md" / "s.json").write_bytes(bom + json.dumps({"title": "Sidecar Paper", "authors": "Ann Lee and Bo Chen",
                                                               "ref_count": 3}).encode("utf-8"))
    got = {a.source_id: a for a in read_markdown(tmp_path / "md").articles}
    assert got["k"].title == md.split("\n", 1)[0].removeprefix("# ").strip() == "Hadamard Product FOR LOW-RANK BILINEAR POOLING"
    assert got["k"].authors == MARKDOWN_AUTHORS["1610.04325"] and got["k"].ref_count == 38
    assert got["k"].text.strip() == md.strip()
    assert got["s"].authors == ["Ann Lee", "Bo Chen"] and got["s"].ref_count == 3
    lines = (articles_dir / "unarxive_sample" / "arXiv_src_2212_086.jsonl").read_bytes().splitlines()[:2]
    (tmp_path / "ua").mkdir()
    (tmp_path / "ua" / "a.jsonl").write_bytes(bom + b"\r\n".join(lines) + b"\r\n")
    res = read_unarxive(tmp_path / "ua")
    assert not res.quarantine and [a.source_id for a in res.articles] == [json.loads(x)["paper_id"] for x in lines]
    (tmp_path / "s2").mkdir()
    (tmp_path / "s2" / "p.json").write_bytes(bom + (articles_dir / "s2orc_sample" / "example_paper.json").read_bytes())
    res = read_s2orc(tmp_path / "s2")
    assert not res.quarantine and [a.source_id for a in res.articles] == ["15772371"]


def test_s2orc_authors_written_as_one_string_and_missing_fields(articles_dir, tmp_path):
    """An S2ORC record whose authors field is one string is split into names (it was read character by
    character: ['A', '.', 'O', ...]); records lacking a title, authors or body are quarantined naming the field."""
    ex = json.loads((articles_dir / "s2orc_sample" / "example_paper.json").read_text(encoding="utf-8"))
    n_bib = len(ex["grobid_parse"]["bib_entries"])
    variants = {
        "comma": dict(ex, paper_id="p1", metadata=dict(ex["metadata"], title="Comma Paper",
                                                      authors="Ann Lee, Bo Chen and Cy Diaz")),
        "semi": dict(ex, paper_id="p2", metadata=dict(ex["metadata"], title="Semicolon Paper",
                                                     authors="Lee, Ann; Chen, Bo")),
        "noauth": dict(ex, paper_id="p3", metadata={"title": "No Authors Paper"}),
        "notitle": dict(ex, paper_id="p4", metadata=dict(ex["metadata"], title=None)),
        "nobody": dict(ex, paper_id="p5", metadata=dict(ex["metadata"], title="No Body Paper"),
                       grobid_parse={k: v for k, v in ex["grobid_parse"].items() if k != "body_text"}),
    }
    for name, rec in variants.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(rec), encoding="utf-8")
    res = read_s2orc(tmp_path)
    got = {a.source_id: a for a in res.articles}
    assert got["p1"].authors == ["Ann Lee", "Bo Chen", "Cy Diaz"] and got["p1"].ref_count == n_bib
    assert got["p2"].authors == ["Lee, Ann", "Chen, Bo"]
    reasons = {q["input"]: q["reason"] for q in res.quarantine}
    assert set(reasons) == {"noauth.json", "notitle.json", "nobody.json"}
    assert "authors" in reasons["noauth.json"] and "title" in reasons["notitle.json"]
    assert "full text" in reasons["nobody.json"]
