"""``ctxbench fetch s2`` with the real ``semanticscholar`` client against a local server in the Graph API's shape
(tests/fake_s2.py), on real Semantic Scholar titles, authors and reference counts (../shared/data/articles/
s2_metadata/papers_annotated.json) and a real PDF from the shared set."""

from __future__ import annotations

import json

import pytest

from ctxbench.core.hashing import seeded_rng, stable_hash
from ctxbench.sources.s2 import FetchConfig, fetch_clusters
from conftest import require_path
from fake_s2 import FakeS2Server

FAIL_404: set[str] = set()
FAIL_HTML: set[str] = set()
SEED = "seedcs0000000000000000000000000000000000"


@pytest.fixture(scope="module")
def s2_real(shared_data):
    p = require_path(shared_data / "articles" / "s2_metadata" / "papers_annotated.json", "S2 metadata")
    return json.loads(p.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def pdf_bytes(shared_data):
    pdfs = require_path(shared_data / "articles" / "pdfs", "shared article PDFs")
    return (pdfs / "D05_0908.0054_ultralight-bosonic-DM.pdf").read_bytes()


def _graph(srv: FakeS2Server, s2_real: dict, pdf: bytes):
    """120 real papers + one CS seed. Each paper cites 8 others (seeded); 1 in 10 has no open-access PDF, ids
    in FAIL_404 serve a 404 and in FAIL_HTML an HTML page instead of a PDF. The seed lacks authors, externalIds
    and referenceCount; one of its references is unresolved (paperId null)."""
    ids = sorted(s2_real)[:120]
    rng = seeded_rng("fake-s2-graph")
    papers, refs = {}, {}
    for n, pid in enumerate(ids):
        r = s2_real[pid]
        has_pdf = n % 10 != 3
        papers[pid] = {
            "paperId": pid, "title": r["title"], "year": 2015 + n % 9, "referenceCount": r["referenceCount"],
            "citationCount": 5 + n, "fieldsOfStudy": ["Chemistry"],
            "authors": [{"authorId": str(int(stable_hash(a, length=8), 16)), "name": a}
                        for a in r["authors"].split(", ")],
            "externalIds": {"CorpusId": 200000000 + n, "DOI": f"10.1038/s41467-0{n:02d}-1"},
            "openAccessPdf": ({"url": srv.pdf_url(f"{pid}.pdf"), "status": "GOLD", "license": "CCBY"} if has_pdf
                              else {"url": "", "status": None, "license": None}) if n % 20 else None,
        }
        if has_pdf and n % 20:
            if n % 7 == 5:
                FAIL_404.add(pid)
            elif n % 11 == 6:
                FAIL_HTML.add(pid)
            srv.pdfs[f"{pid}.pdf"] = ((404, "text/html", b"<html>gone</html>") if pid in FAIL_404 else
                                     (200, "text/html", b"<html>login</html>") if pid in FAIL_HTML else
                                     (200, "application/pdf", pdf))
        refs[pid] = rng.sample([i for i in ids if i != pid], 8)
    papers[SEED] = {"paperId": SEED, "title": "Attention-based graph learning for computer science literature",
                    "year": 2021, "citationCount": 250, "fieldsOfStudy": ["Computer Science"],
                    "openAccessPdf": {"url": srv.pdf_url(f"{SEED}.pdf"), "status": "GREEN", "license": None}}
    srv.pdfs[f"{SEED}.pdf"] = (200, "application/pdf", pdf)
    refs[SEED] = ids[:12] + ["unresolved-reference"]
    for pid in ids[12:20]:
        refs[pid].append(SEED)
    # a highly cited CS paper without a PDF: not a seed
    papers["nopdfcs"] = {"paperId": "nopdfcs", "title": "Computer science without PDF", "year": 2022,
                         "citationCount": 900, "fieldsOfStudy": ["Computer Science"], "openAccessPdf": None}
    srv.papers.update(papers)
    srv.refs.update(refs)
    for a, bs in refs.items():
        for b in bs:
            srv.cites.setdefault(b, []).append(a)
    return papers, refs


def _fetch(srv, out, **kw):
    cfg = FetchConfig(subjects=["Computer Science"], seeds_per_subject=1, api_url=srv.api_url, api_key="test-key",
                      min_interval_s=0.0, **kw)
    return fetch_clusters(out, cfg)


def test_fetch_clusters(tmp_path, s2_real, pdf_bytes, shared_data):
    with FakeS2Server({}, {}, {}, retry_after=1) as srv:
        papers, refs = _graph(srv, s2_real, pdf_bytes)
        srv.script(["429"])  # the first API request is refused with Retry-After: 1
        rows, quarantine = _fetch(srv, tmp_path / "a")
        log = list(srv.log)
        rows2, _ = _fetch(srv, tmp_path / "b")
        rows3, _ = _fetch(srv, tmp_path / "c", seed=1)

    # 429 honoured: the retry came at least Retry-After (1 s) later
    api = [e for e in log if e["path"].startswith("/graph/")]
    assert api[0]["path"] == "/graph/v1/paper/search" and api[1]["path"] == api[0]["path"]
    assert api[1]["t"] - api[0]["t"] >= 1.0
    # the key goes with every API request, paginated references/citations included
    assert all(e["headers"].get("x-api-key") == "test-key" for e in api)
    assert any(e["path"].endswith("/references") for e in api) and any(e["path"].endswith("/citations") for e in api)

    by_id = {r["id"]: r for r in rows}
    chosen = set(by_id) | {q["input"] for q in quarantine}
    # SciTrek 3.1: the seed, 10 first-hop papers, 5 second-hop papers for each: 61 papers, all with a PDF
    assert len(chosen) == 61
    seed_related = {p for p in refs[SEED] if p in papers} | {a for a, bs in refs.items() if SEED in bs}
    first = {r["id"] for r in rows if r["hop"] == 1} | {
        q["input"] for q in quarantine if json.loads(q["detail"])["hop"] == 1}
    assert SEED in by_id and by_id[SEED]["hop"] == 0 and len(first) == 10 and first <= seed_related
    assert all((papers[p]["openAccessPdf"] or {}).get("url") for p in chosen)
    # PDFs that fail to download are quarantined with the reason, the rest kept
    for q in quarantine:
        assert q["stage"] == "fetch" and q["input"] in FAIL_404 | FAIL_HTML
        assert q["reason"] == ("download failed: HTTP 404" if q["input"] in FAIL_404 else
                               "not a PDF (content-type 'text/html', 18 bytes)")
    assert quarantine and not (set(by_id) & (FAIL_404 | FAIL_HTML))
    # same seed → same papers; another seed → another sample
    assert [r["id"] for r in rows2] == [r["id"] for r in rows]
    assert {r["id"] for r in rows3} != set(by_id)

    # metadata.json: the shared file's shape and values from the API
    meta = json.loads((tmp_path / "a" / "metadata.json").read_text(encoding="utf-8"))
    assert meta == rows
    shared_keys = set(json.loads((shared_data / "articles" / "pdfs" / "metadata.json").read_text())[0])
    assert {"id", "file", "title", "authors", "ref_count", "cites_in_set", "cited_by_in_set", "sha256", "pages",
            "ids", "license"} <= set(meta[0]) and {"id", "file", "title", "authors", "ref_count"} <= shared_keys
    seed = by_id[SEED]
    assert seed["authors"] == [] and seed["ref_count"] is None and seed["ids"] == "none found"
    for r in rows:
        if r["id"] == SEED:
            continue
        assert r["title"] == s2_real[r["id"]]["title"]
        assert r["authors"] == s2_real[r["id"]]["authors"].split(", ")
        assert r["ref_count"] == s2_real[r["id"]]["referenceCount"]
        assert (tmp_path / "a" / r["file"]).read_bytes() == pdf_bytes and r["pages"] == 4
    # citation relations within the fetched set, from the graph itself
    kept = set(by_id)
    for r in rows:
        assert r["cites_in_set"] == sorted(set(refs[r["id"]]) & kept - {r["id"]})
        assert r["cited_by_in_set"] == sorted(a for a in kept if r["id"] in refs[a] and a != r["id"])
    assert any(r["cites_in_set"] for r in rows)


def test_fetch_rerun_skips_downloaded_pdfs(tmp_path, s2_real, pdf_bytes):
    with FakeS2Server({}, {}, {}) as srv:
        _graph(srv, s2_real, pdf_bytes)
        rows, _ = _fetch(srv, tmp_path, first_hop=3, second_hop=1)
        n = len([e for e in srv.log if e["path"].startswith("/pdf/")])
        rows2, _ = _fetch(srv, tmp_path, first_hop=3, second_hop=1)
        pdf_gets = [e for e in srv.log if e["path"].startswith("/pdf/")][n:]
    assert rows2 == rows
    assert pdf_gets and all(e["path"][5:-4] in FAIL_404 | FAIL_HTML for e in pdf_gets)  # only the failed ones are tried again


def test_cli_fetch_s2(tmp_path, s2_real, pdf_bytes, monkeypatch):
    from typer.testing import CliRunner

    from ctxbench.cli import app

    monkeypatch.setenv("S2_API_KEY", "env-key")
    with FakeS2Server({}, {}, {}) as srv:
        _graph(srv, s2_real, pdf_bytes)
        res = CliRunner().invoke(app, ["fetch", "s2", "--out", str(tmp_path), "--subjects", "Computer Science",
                                       "--seeds-per-subject", "1", "--first-hop", "2", "--second-hop", "1",
                                       "--api-url", srv.api_url, "--min-interval", "0"])
        keys = {e["headers"].get("x-api-key") for e in srv.log if e["path"].startswith("/graph/")}
    assert res.exit_code == 0, res.output
    meta = json.loads((tmp_path / "metadata.json").read_text())
    n_q = len(json.loads((tmp_path / "quarantine.json").read_text())) if (tmp_path / "quarantine.json").exists() else 0
    assert len(meta) + n_q == 1 + 2 + 2 and f"{len(meta)} papers with PDFs" in res.output
    assert keys == {"env-key"}
    res = CliRunner().invoke(app, ["fetch", "s2", "--out", str(tmp_path / "x"), "--first-hop", "-1"])
    assert res.exit_code == 2 and "--first-hop" in res.output and "greater than or equal to 0" in res.output
