"""PDF → markdown on the real shared PDFs (../shared/data/articles/pdfs): titles recovered, broken files quarantined
with their reason, ligatures and hyphenation, two-column reading order, the conversion cache."""

from __future__ import annotations

import json
import os
import re

import pytest

from ctxbench.convert import pdf as convpdf
from ctxbench.convert import ConversionError, convert_pdf, convert_pdfs
from ctxbench.convert.text import join_hyphenation, SOFT_BREAK, expand_ligatures

from conftest import require_path

BROKEN = {  # file id → reason (metadata.json notes: scanned image-only, AES-256 encrypted, truncated copies)
    "H02": "scanned or no text layer",
    "H07": "encrypted",
    "X01": "truncated or corrupt",
    "X02": "truncated or corrupt",
}


@pytest.fixture(scope="module")
def pdf_dir(shared_data):
    return require_path(shared_data / "articles" / "pdfs", "shared article PDFs")


@pytest.fixture(scope="module")
def meta(pdf_dir):
    return {m["id"]: m for m in json.loads((pdf_dir / "metadata.json").read_text(encoding="utf-8"))}


def _norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", s.lower()).strip()


def _title(m: dict) -> str:
    # metadata titles of excerpts carry a note in brackets: "(3-page excerpt)", "(page 9 only)"
    return _norm(re.sub(r"\s*\([^()]*(excerpt|only|abstract)[^()]*\)\s*$", "", m["title"]))


@pytest.fixture(scope="module")
def a01(pdf_dir, meta):
    return convert_pdf(pdf_dir / meta["A01"]["file"])


def test_broken_pdfs_quarantined_with_reason(pdf_dir, meta, tmp_path):
    paths = [pdf_dir / meta[i]["file"] for i in BROKEN]
    convs, quarantine = convert_pdfs(paths, cache_dir=tmp_path)
    assert convs == [None] * len(paths)
    assert [(q["input"], q["stage"], q["reason"]) for q in quarantine] == [
        (meta[i]["file"], "convert", r) for i, r in BROKEN.items()]
    for q in quarantine:
        assert json.loads(q["detail"])["sha256"] == meta[q["input"][:3]]["sha256"]
    with pytest.raises(ConversionError) as e:
        convert_pdf(pdf_dir / meta["H07"]["file"])
    assert e.value.reason == "encrypted" and "password" in str(e.value)


def test_converts_a_two_column_paper(a01, meta):
    m = meta["A01"]
    assert a01.converter == "pdfminer-layout" and a01.converter_version.startswith("pdfminer.six ")
    assert a01.pages == m["pages"] == 8
    assert a01.pdf_sha256 == m["sha256"]
    assert a01.chars == len(a01.markdown) > 30_000
    md = a01.markdown
    assert md.startswith("# " + m["title"] + "\n")
    for name in m["authors"]:
        assert name in md, name
    headings = [ln for ln in md.splitlines() if ln.startswith("#")]
    assert headings[:4] == ["# Construction of the Literature Graph in Semantic Scholar", "## Abstract",
                            "## 1 Introduction", "## 2 Structure of The Literature Graph"]
    assert "### 2.1 Node Types" in headings and headings[-1] == "## References"
    # one paragraph per bibliography entry: A01 lists 27 references (metadata ref_count, read by hand)
    refs = md.split("## References\n", 1)[1].strip().split("\n\n")
    assert abs(len(refs) - m["ref_count"]) <= 2


def test_ligatures_and_hyphenation(a01, pdf_dir, meta):
    md = a01.markdown
    # the PDF sets "Artificial" and "effects" with the ligature glyphs U+FB01 and U+FB00
    assert not re.search("[\ufb00-\ufb06]", md)
    assert "Allen Institute for Artificial Intelligence" in md
    assert "discuss the effects of Ranibizumab" in md
    # broken at line ends in the PDF: "de-|ployed", "fa-|miliar"
    assert "in a scalable deployed production system" in md
    assert "into familiar NLP tasks such as sequence labeling" in md
    # Type 3 TeX fonts with no Unicode map: ligatures come out as OT1 control codes, rebuilt from the code
    h04 = convert_pdf(pdf_dir / meta["H04"]["file"]).markdown
    assert "12000 Jefferson Avenue" in h04 and "heavy quark effective theory" in h04
    assert "scalar confining and vector Coulomb potentials" in h04


def test_text_cleanup_rules():
    assert expand_ligatures("signi\ufb01cant e\ufb00ect Je\x0berson de\x0cning") == \
        "significant effect Jefferson defining"
    text = f"transduc{SOFT_BREAK}tion and sequence{SOFT_BREAK}aligned; a sequence-aligned model; BERT{SOFT_BREAK}Base"
    assert join_hyphenation(text) == \
        "transduction and sequence-aligned; a sequence-aligned model; BERT-Base"


def test_two_column_reading_order(a01):
    # A01 page 1: the left column ends "... academic search (e.g., Xiong et al.," and the right column goes on
    # "2017). We describe methods ..." below Figure 1; page 2 starts in the left column with "2016), and assume"
    # after the right column's "... (e.g., Lample et al.," (read from the PDF)
    flat = re.sub(r"\s+", " ", a01.markdown)
    assert ("or to improve ranking of results in academic search (e.g., Xiong et al., 2017). We describe methods "
            "used in a scalable deployed production system for extracting structured information") in flat
    assert ("large labeled datasets such as CoNLL-2003 and ACE-2005 (e.g., Lample et al., 2016), and assume that "
            "entity types in the test set match") in flat


def test_cache_converts_only_new_pdfs(pdf_dir, meta, tmp_path, monkeypatch):
    calls = []
    real = convpdf._convert_uncached

    def counting(path, converter, timeout_s):
        calls.append(path.name)
        return real(path, converter, timeout_s)

    monkeypatch.setattr(convpdf, "_convert_uncached", counting)
    first = [pdf_dir / meta[i]["file"] for i in ("D05", "H06", "H07")]
    c1, q1 = convert_pdfs(first, cache_dir=tmp_path)
    assert sorted(calls) == sorted(p.name for p in first)
    calls.clear()
    c2, q2 = convert_pdfs(first + [pdf_dir / meta["X01"]["file"]], cache_dir=tmp_path)
    assert calls == [meta["X01"]["file"]]  # only the new file; the encrypted one's verdict is cached too
    assert c2[:3] == c1 and q2[:1] == q1 and q2[1]["reason"] == "truncated or corrupt"
    # another converter version is another cache key
    calls.clear()
    monkeypatch.setattr(convpdf, "LAYOUT_REVISION", "test-other")
    convert_pdfs(first[:1], cache_dir=tmp_path)
    assert calls == [first[0].name]


def test_timeout_and_not_a_pdf(pdf_dir, meta, tmp_path):
    with pytest.raises(ConversionError) as e:
        convert_pdf(pdf_dir / meta["B04"]["file"], timeout_s=0.05)
    assert e.value.reason == "timeout"
    bad = tmp_path / "notes.pdf"
    bad.write_text("plain text, not a PDF")
    convs, q = convert_pdfs([bad], cache_dir=tmp_path / "c")
    assert convs == [None] and q[0]["reason"] == "not a pdf"


def test_marker_never_started_without_models(tmp_path, monkeypatch):
    monkeypatch.setenv("MODEL_CACHE_DIR", str(tmp_path / "empty"))
    ok, why = convpdf.marker_available()
    assert not ok and why
    assert convpdf.default_converter()[0] == "pdfminer-layout"


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_every_readable_shared_pdf_converts(pdf_dir, meta, shared_pdf_conversions):
    # the run's conversions of the shared PDFs (conftest: converted once for every test that needs them, by this
    # code); the cache's own behaviour is tested by test_cache_converts_only_new_pdfs
    ids = sorted(meta)
    convs, quarantine = convert_pdfs([pdf_dir / meta[i]["file"] for i in ids], cache_dir=shared_pdf_conversions)
    assert {q["input"][:3]: q["reason"] for q in quarantine} == BROKEN
    for i, c in zip(ids, convs):
        if i in BROKEN:
            continue
        assert c is not None and c.pages == meta[i]["pages"], i
        assert _title(meta[i]) in _norm(c.markdown), i
        assert not re.search("[\ufb00-\ufb06]", c.markdown), i


def _fake_marker(tmp_path, monkeypatch, body: str):
    """A ``marker_single`` executable on PATH (the real one is not installed here) and Marker reported available."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "marker_single"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setattr(convpdf, "marker_available", lambda: (True, ""))
    monkeypatch.setattr(convpdf, "_dist_version", lambda name: "0.0-test" if name == "marker-pdf" else None)


def test_marker_runs_in_a_subprocess_under_a_timeout(pdf_dir, meta, tmp_path, monkeypatch):
    # arguments: PDF --output_dir DIR --output_format markdown; writes DIR/<name>/<name>.md like Marker
    _fake_marker(tmp_path, monkeypatch, 'mkdir -p "$3/x" && printf "# Marker output\\n\\nbody text\\n" > "$3/x/x.md"\n')
    assert convpdf.default_converter() == ("marker", f"marker-pdf 0.0-test; code {convpdf.converter_code_hash()}")
    c = convert_pdf(pdf_dir / meta["D05"]["file"])
    assert (c.converter, c.markdown, c.pages) == ("marker", "# Marker output\n\nbody text\n", 4)
    slow = tmp_path / "slow"
    slow.mkdir()
    _fake_marker(slow, monkeypatch, "sleep 30\n")  # a model download that never finishes
    with pytest.raises(ConversionError) as e:
        convert_pdf(pdf_dir / meta["D05"]["file"], timeout_s=1)
    assert e.value.reason == "timeout"


def test_numbered_bibliography_one_paragraph_per_entry(pdf_dir, meta):
    # B01 (Attention Is All You Need) numbers its 40 references [1]..[40] (metadata ref_method N: exact)
    md = convert_pdf(pdf_dir / meta["B01"]["file"]).markdown
    refs = md.split("## References\n", 1)[1]
    labels = [int(m.group(1)) for m in re.finditer(r"(?m)^\[(\d+)\] ", refs)]
    assert labels == list(range(1, meta["B01"]["ref_count"] + 1)) == list(range(1, 41))
    assert refs.startswith("\n[1] Jimmy Lei Ba, Jamie Ryan Kiros, and Geoffrey E Hinton. Layer normalization.")


def test_converter_code_is_hashed_into_cache_keys_and_build_hashes(tmp_path, monkeypatch):
    """The converter's code (every module of the ctxbench.convert package, wherever it is installed) is hashed:
    its hash is non-empty, equals one computed here from the package's files, and changes when a converter file
    changes — and with it the converter version (the conversion cache key) and a SciTrek PDF build's hash."""
    import hashlib
    import shutil
    from pathlib import Path

    import ctxbench.convert
    from ctxbench.core.errors import CtxbenchError
    from ctxbench.tracks.scitrek import build as sb

    pkg = Path(ctxbench.convert.__file__).resolve().parent
    files = sorted(pkg.glob("*.py"))
    assert {"pdf.py", "layout.py", "text.py", "worker.py"} <= {p.name for p in files}
    h = hashlib.sha256()
    for p in files:
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    code = h.hexdigest()[:16]
    assert sb._convert_code_hash() == code
    assert convpdf.converter_version("pdfminer-layout").endswith(f"; code {code}")

    # a SciTrek build with one PDF (fetch only hashes it; nothing is converted)
    (tmp_path / "pdfs").mkdir()
    (tmp_path / "pdfs" / "a.pdf").write_bytes(b"%PDF-1.4\n%%EOF\n")
    (tmp_path / "pdfs" / "metadata.json").write_text(json.dumps([{"id": "A", "file": "a.pdf", "title": "T",
                                                                   "authors": ["X"]}]), encoding="utf-8")
    cfg = sb.SciTrekConfig(pdfs=str(tmp_path / "pdfs"), metadata=str(tmp_path / "pdfs" / "metadata.json"),
                           tokenizer="cl100k_base")

    def build_hash() -> str:
        return sb.fetch_stage(cfg, tmp_path / "out", force=True).build_hash

    def cache_key() -> str:
        name, version = convpdf.default_converter()
        return str(convpdf._cache_path(tmp_path / "cache", "ab" * 32, name, version))

    before = (build_hash(), cache_key())
    copy = tmp_path / "convert"
    shutil.copytree(pkg, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(convpdf, "CONVERT_DIR", copy)
    assert sb._convert_code_hash() == code and (build_hash(), cache_key()) == before   # the same code
    (copy / "layout.py").write_text((copy / "layout.py").read_text(encoding="utf-8") + "\n# changed\n",
                                    encoding="utf-8")
    assert sb._convert_code_hash() != code
    after = (build_hash(), cache_key())
    assert after[0] != before[0] and after[1] != before[1]
    # a package directory without its modules never hashes to nothing
    monkeypatch.setattr(convpdf, "CONVERT_DIR", tmp_path / "nowhere")
    with pytest.raises(CtxbenchError, match="converter's code is not in"):
        sb._convert_code_hash()


def test_full_text_reader_code_hash_names_a_missing_module(monkeypatch):
    from ctxbench.core.errors import CtxbenchError
    from ctxbench.tracks.scitrek import build as sb

    assert len(sb._source_code_hash()) == 16
    monkeypatch.setattr(sb, "SOURCE_CODE", sb.SOURCE_CODE + ("moved_away.py",))
    with pytest.raises(CtxbenchError, match="moved_away.py are not in .*sources"):
        sb._source_code_hash()
