"""S2ORC reader (``--s2orc PATH``): papers of the Semantic Scholar Open Research Corpus (Lo et al. 2020, ACL) as JSON,
a file (``.json`` holding one paper or a list, ``.jsonl``, optionally ``.gz``) or a directory of them. The shapes of
its releases are read:

* a paper with its parse inside (``../shared/data/articles/s2orc_sample/example_paper.json``, s2orc-doc2json):
  ``paper_id``, ``metadata`` (title, authors), ``grobid_parse`` / ``pdf_parse`` / ``latex_parse`` (abstract,
  body_text, bib_entries, ref_entries); the LaTeX parse is preferred when present;
* the 2020 release's two files: metadata lines (``paper_id``, ``title``, ``authors``, ``outbound_citations``,
  ``has_pdf_parse``; e.g. ``metadata_sample.jsonl``) joined by ``paper_id`` with pdf_parses lines (``paper_id``,
  ``body_text``, ``bib_entries``, ``ref_entries``) found anywhere under PATH;
* the Semantic Scholar datasets API's ``s2orc`` lines: ``corpusid``, ``externalids``, ``content.text`` with
  ``content.annotations`` (title, author, sectionheader, paragraph, bibentry spans as JSON strings).

Per paper: title, authors in order (first, middle, last, suffix), abstract, body paragraphs under their section
headings, figure/table captions, and the bibliography as ``## References`` numbered in order; the reference count
is the number of bibliography entries. Citations: ``outbound_citations`` and each entry's linked paper id, DOI and
arXiv id. A paper with metadata but no full text (most of ``metadata_sample.jsonl``) or without title or authors is
a quarantine row (stage ``read``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ctxbench.core.hashing import file_sha256
from ctxbench.sources.fulltext import (MIN_BODY_CHARS, BibEntry, FullTextArticle, ReadResult, add_id, clean_title, ids_in_text,
                       iter_files, json_lines, one_line, open_text, quarantine_row, render_markdown)


def _name(a) -> str:
    if isinstance(a, str):
        return one_line(a)
    if not isinstance(a, dict):
        return ""
    if a.get("name"):
        return one_line(str(a["name"]))
    mid = a.get("middle") or []
    mid = mid if isinstance(mid, list) else [mid]
    return one_line(" ".join(str(x) for x in [a.get("first") or "", *mid, a.get("last") or "", a.get("suffix") or ""]
                             if str(x).strip()))


def _records(f: Path, res: ReadResult):
    """(where, record) for every paper object in a file; unreadable lines/files become quarantine rows."""
    name = f.name.lower()
    if name.endswith((".jsonl", ".jsonl.gz")):
        for line, rec in json_lines(f):
            if isinstance(rec, Exception):
                res.quarantine.append(quarantine_row(f"{f.name}:{line}", f"not JSON ({rec})"))
            else:
                yield f"{f.name}:{line}", rec
        return
    with open_text(f) as fh:
        try:
            data = json.load(fh)
        except ValueError as e:
            res.quarantine.append(quarantine_row(f.name, f"not JSON ({e})"))
            return
    for i, rec in enumerate(data if isinstance(data, list) else [data]):
        yield (f"{f.name}[{i}]" if isinstance(data, list) else f.name), rec


def _names(v) -> list[str]:
    """Author names in order from S2ORC's list of ``{first, middle, last, suffix}`` (or ``{name}``, or strings);
    an authors field written as one string (``"Ann Lee, Bo Chen and Cy Diaz"``, or ``"Lee, Ann; Chen, Bo"``) is
    split into names, not read character by character."""
    if isinstance(v, str):
        sep = r"\s*;\s*" if ";" in v else r",\s*(?:and\s+)?|\s+and\s+|\s*&\s*"
        return [n for n in (one_line(x) for x in re.split(sep, v)) if n]
    if not isinstance(v, list):
        return []
    return [n for n in (_name(a) for a in v) if n]


def _bib_text(b: dict) -> str:
    if b.get("raw_text"):
        return one_line(str(b["raw_text"]))
    names = _names(b.get("authors"))
    parts = [", ".join(n for n in names if n), str(b.get("year") or ""), str(b.get("title") or ""),
             " ".join(str(b.get(k) or "") for k in ("venue", "volume")).strip(), str(b.get("pages") or "")]
    return one_line(". ".join(p.strip() for p in parts if p and p.strip())) + "."


def _from_parse(pid: str, meta: dict, parse: dict, where: str, sha: str, outbound: list) -> tuple:
    title = clean_title(meta.get("title") or "")
    authors = _names(meta.get("authors"))
    if not title:
        return None, "no title in the metadata"
    if not authors:
        return None, "no authors in the metadata"
    bib = parse.get("bib_entries")
    entries = []
    if isinstance(bib, dict):
        for b in bib.values():
            b = b if isinstance(b, dict) else {"raw_text": str(b)}
            text = _bib_text(b)
            ids = ids_in_text(text)
            other = b.get("other_ids") if isinstance(b.get("other_ids"), dict) else {}
            for v in other.get("DOI") or []:
                add_id(ids, "doi", v)
            for v in other.get("arXiv") or []:
                add_id(ids, "arxiv", v)
            for k in ("links", "link", "paper_id"):
                if b.get(k) and isinstance(b[k], (str, int)):
                    add_id(ids, "s2", b[k])
            entries.append(BibEntry(text, ids))
    blocks = []
    for p in parse.get("body_text") or []:
        if not isinstance(p, dict) or not isinstance(p.get("text"), str):
            continue
        sec = one_line(str(p.get("section") or ""))
        num = str(p.get("sec_num") or "").strip()
        level = 2 + num.count(".") if num else 2
        blocks.append((level, f"{num} {sec}".strip() if sec else "", p["text"].strip()))
    if sum(len(b[2]) for b in blocks) < MIN_BODY_CHARS:
        return None, f"no full text: {sum(len(b[2]) for b in blocks)} characters of body text"
    for k, e in (parse.get("ref_entries") or {}).items():
        if isinstance(e, dict) and e.get("text"):
            blocks.append((2, "Figures and tables", one_line(str(e["text"]))))
    ab = parse.get("abstract")
    if isinstance(ab, list):
        ab = "\n\n".join(str(x.get("text") or "") for x in ab if isinstance(x, dict))
    ab = ab or meta.get("abstract")
    text = render_markdown(title, authors, str(ab) if ab else None, blocks, [e.text for e in entries])
    ids: dict[str, set] = {}
    add_id(ids, "s2", pid)
    for k, kind in (("doi", "doi"), ("arxiv_id", "arxiv")):
        add_id(ids, kind, meta.get(k))
    ext = meta.get("externalids") or meta.get("external_ids") or {}
    if isinstance(ext, dict):
        add_id(ids, "doi", ext.get("DOI") or ext.get("doi"))
        add_id(ids, "arxiv", ext.get("ArXiv") or ext.get("arxiv"))
    cites = [("s2", str(c)) for c in outbound or [] if isinstance(c, (str, int))]
    return FullTextArticle("s2orc", str(pid), where, title, authors, len(entries) if isinstance(bib, dict) else None,
                           text, entries, {k: sorted(v)[0] for k, v in ids.items()}, cites, sha, "s2orc-json"), None


def _spans(ann: dict, key: str) -> list[dict]:
    v = ann.get(key)
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            return []
    return [s for s in v or [] if isinstance(s, dict) and "start" in s and "end" in s]


def _from_api(rec: dict, where: str, sha: str) -> tuple:
    content = rec.get("content") if isinstance(rec.get("content"), dict) else {}
    text = content.get("text")
    ann = content.get("annotations") if isinstance(content.get("annotations"), dict) else {}
    if not isinstance(text, str):
        return None, "no content.text"

    def cut(s: dict) -> str:
        return one_line(text[int(s["start"]):int(s["end"])])

    titles = [cut(s) for s in _spans(ann, "title")]
    authors = [cut(s) for s in _spans(ann, "author")]
    authors = [a for a in authors if a]
    if not titles or not titles[0]:
        return None, "no title annotation"
    if not authors:
        return None, "no author annotations"
    heads = sorted(_spans(ann, "sectionheader"), key=lambda s: int(s["start"]))
    blocks = []
    for p in sorted(_spans(ann, "paragraph"), key=lambda s: int(s["start"])):
        h = [x for x in heads if int(x["start"]) < int(p["start"])]
        head = ""
        if h:
            n = (h[-1].get("attributes") or {}).get("n") if isinstance(h[-1].get("attributes"), dict) else None
            head = f"{n} {cut(h[-1])}".strip() if n else cut(h[-1])
        blocks.append((2, head, text[int(p["start"]):int(p["end"])].strip()))
    if sum(len(b[2]) for b in blocks) < MIN_BODY_CHARS:
        return None, "no full text: too little paragraph text"
    entries = []
    for s in sorted(_spans(ann, "bibentry"), key=lambda s: int(s["start"])):
        t = cut(s)
        ids = ids_in_text(t)
        attrs = s.get("attributes") if isinstance(s.get("attributes"), dict) else {}
        add_id(ids, "s2", attrs.get("matched_paper_id"))
        entries.append(BibEntry(t, ids))
    ab = [cut(s) for s in _spans(ann, "abstract")]
    title = clean_title(titles[0])
    body = render_markdown(title, authors, " ".join(ab) or None, blocks, [e.text for e in entries])
    ids: dict[str, set] = {}
    pid = rec.get("corpusid")
    add_id(ids, "s2", pid)
    ext = rec.get("externalids") if isinstance(rec.get("externalids"), dict) else {}
    add_id(ids, "doi", ext.get("DOI"))
    add_id(ids, "arxiv", ext.get("ArXiv"))
    return FullTextArticle("s2orc", str(pid), where, title, authors, len(entries), body, entries,
                           {k: sorted(v)[0] for k, v in ids.items()}, [], sha, "s2orc-json"), None


def read_s2orc(path: str | Path) -> ReadResult:
    """Read S2ORC papers from a file or directory (module docstring). Raises InputError when ``path`` does not
    exist or holds no JSON file; records that cannot become an article are quarantine rows."""
    res = ReadResult()
    metas: dict[str, tuple[str, dict, str]] = {}
    parses: dict[str, tuple[str, dict, str]] = {}
    done: list[tuple[str, tuple]] = []
    for f in iter_files(path, (".json", ".jsonl", ".json.gz", ".jsonl.gz"), "--s2orc"):
        sha = file_sha256(f)
        res.files[str(f)] = sha
        try:
            for where, rec in _records(f, res):
                if not isinstance(rec, dict):
                    res.quarantine.append(quarantine_row(where, f"holds {type(rec).__name__}, not a paper object"))
                    continue
                try:
                    if "corpusid" in rec and "content" in rec:
                        done.append((where, _from_api(rec, where, sha)))
                    elif not rec.get("paper_id"):
                        res.quarantine.append(quarantine_row(where, "no paper_id"))
                    elif any(isinstance(rec.get(k), dict) for k in ("latex_parse", "grobid_parse", "pdf_parse")):
                        parse = next(rec[k] for k in ("latex_parse", "pdf_parse", "grobid_parse")
                                     if isinstance(rec.get(k), dict) and rec[k].get("body_text"))\
                            if any(isinstance(rec.get(k), dict) and rec[k].get("body_text")
                                   for k in ("latex_parse", "pdf_parse", "grobid_parse")) else {}
                        meta = rec.get("metadata") if isinstance(rec.get("metadata"), dict) else rec
                        done.append((where, _from_parse(str(rec["paper_id"]), meta, parse, where, sha,
                                                        rec.get("outbound_citations") or meta.get("outbound_citations"))))
                    elif "body_text" in rec:
                        parses[str(rec["paper_id"])] = (where, rec, sha)
                    else:
                        metas[str(rec["paper_id"])] = (where, rec, sha)
                except (AttributeError, TypeError, KeyError, ValueError) as e:
                    done.append((where, (None, f"malformed record ({type(e).__name__}: {e})")))
        except (OSError, EOFError, UnicodeDecodeError) as e:
            res.quarantine.append(quarantine_row(f.name, f"cannot read the file ({type(e).__name__}: {e})"))
    for pid, (where, meta, sha) in metas.items():
        if pid not in parses:
            why = ("metadata only: no full text (has_pdf_parse is false)" if meta.get("has_pdf_parse") is False
                   else "metadata only: no pdf_parses record with this paper_id under the path")
            done.append((where, (None, why)))
            continue
        pw, parse, psha = parses.pop(pid)
        try:
            done.append((where, _from_parse(pid, meta, parse, f"{where}+{pw}", sha, meta.get("outbound_citations"))))
        except (AttributeError, TypeError, KeyError, ValueError) as e:
            done.append((where, (None, f"malformed record ({type(e).__name__}: {e})")))
    for pid, (where, _, _) in parses.items():
        done.append((where, (None, "full text without metadata: no metadata record with this paper_id")))
    for where, (art, why) in done:
        if art is None:
            res.quarantine.append(quarantine_row(where, why))
        else:
            res.articles.append(art)
    return res
