"""PDF → markdown: pages per second and the quality figures the offline converter was chosen by (issue 5), per
converter tried (pdfminer-layout, pdfium-text, pdfplumber-text), over the shared PDFs. Prints figures; asserts
nothing.

    python bench/convert_speed.py [--pdfs ../shared/data/articles/pdfs] [--converters pdfminer-layout,pdfium-text]

Quality figures, over the readable PDFs (metadata.json gives the truth):
- title: the metadata title (normalised) appears in the markdown;
- authors: share of author names found (normalised; excerpt notes dropped);
- refs ±2: the references section (after the last "References"/"Bibliography" line, up to the next heading) has
  ref_count ± max(2, 10%) paragraphs — what a per-article reference count needs;
- headings: documents with at least three ``#`` lines;
- residue: ligature code points, control characters and ``(cid:N)`` left per 100k characters;
- hyphen breaks: "letter- letter" line-break hyphens left per 100k characters;
- hyph kept / hyph joined: the words broken by a hyphen at a line end in the PDF (pdfplumber's word boxes, lines
  grouped per column: geometry, not any converter's output) whose right form the document itself shows — kept:
  the hyphenated form occurs inside a line elsewhere at least as often as the closed one, or neither occurs and the
  break follows a digit or a capital-letter token (``CD4-``/``positive``, ``BERT-``/``based``); joined: the closed
  form occurs inside a line elsewhere more often (``SCI-``/``DOCS`` where the paper writes SCIDOCS) — and the share of those found in that form, with the words around the break, in the
  markdown. Breaks with no such evidence are not counted.
- line order: on two-column pages, pairs of consecutive lines of one column (from pdfplumber's word boxes split at
  the page centre: geometry, not any converter's order) whose junction — last two words of the first line, first
  two of the next — appears contiguous in the markdown. Interleaved columns fail it.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import time
from pathlib import Path

from ctxbench.core.config import shared_data_dir
from ctxbench.convert import layout
from ctxbench.convert.pdf import ConversionError, preflight
from ctxbench.convert.text import capital_token, clean

CONVERTERS = {"pdfminer-layout": layout.pdfminer_markdown, "pdfium-text": layout.pdfium_markdown,
              "pdfplumber-text": layout.pdfplumber_markdown}


def norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", s.lower()).strip()


def column_junctions(path: Path, max_pages: int = 6) -> list[str]:
    """Normalised junction strings of consecutive same-column lines on the two-column pages of ``path``."""
    import pdfplumber

    out = []
    with pdfplumber.open(path) as pdf:
        for page in pdf.pages[:max_pages]:
            mid = page.width / 2
            words = page.extract_words(use_text_flow=False)
            cols: dict[str, list] = {"L": [], "R": []}
            crossing = 0
            for w in words:
                if w["x1"] < mid - 2:
                    cols["L"].append(w)
                elif w["x0"] > mid + 2:
                    cols["R"].append(w)
                else:
                    crossing += 1
            if crossing > 0.05 * max(1, len(words)) or min(len(cols["L"]), len(cols["R"])) < 0.25 * len(words):
                continue  # not a two-column page
            for ws in cols.values():
                lines: list[list] = []
                for w in sorted(ws, key=lambda w: (round(w["top"]), w["x0"])):
                    if lines and abs(lines[-1][0]["top"] - w["top"]) < 2:
                        lines[-1].append(w)
                    else:
                        lines.append([w])
                for a, b in zip(lines, lines[1:]):
                    h = a[0]["bottom"] - a[0]["top"]
                    if b[0]["top"] - a[0]["top"] > 1.6 * h or len(a) < 4 or len(b) < 4:
                        continue  # a paragraph gap, a caption or a short line
                    if a[-1]["text"].endswith("-"):
                        continue  # hyphenated junctions are measured separately
                    j = norm(clean(" ".join(w["text"] for w in a[-2:] + b[:2])))
                    if len(j) >= 12:
                        out.append(j)
    return out


def _lines(words: list[dict]) -> list[list[dict]]:
    lines: list[list[dict]] = []
    for w in sorted(words, key=lambda w: (round(w["top"]), w["x0"])):
        if lines and abs(lines[-1][0]["top"] - w["top"]) < 2:
            lines[-1].append(w)
        else:
            lines.append([w])
    return lines


_TOKEN = re.compile(r"[^\W_]+(?:-[^\W_]+)*")


def hyphen_breaks(path: Path) -> list[tuple[str, str]]:
    """(expected markdown text around the break, "kept" or "joined") for the line-end hyphen breaks of ``path``
    whose right form the document shows (module docstring)."""
    import pdfplumber
    from collections import Counter

    cols_lines = []
    with pdfplumber.open(path) as pdf:
        for page in pdf.pages:
            mid = page.width / 2
            # a tight x tolerance: at pdfplumber's default, words set without space characters run together
            words = [dict(w, text=clean(w["text"])) for w in page.extract_words(x_tolerance=1.5,
                                                                                 use_text_flow=False)]
            left = [w for w in words if w["x1"] < mid - 2]
            right = [w for w in words if w["x0"] > mid + 2]
            two = len(words) - len(left) - len(right) <= 0.05 * max(1, len(words)) and \
                min(len(left), len(right)) >= 0.25 * len(words)
            for ws in ((left, right) if two else (words,)):
                cols_lines.append(_lines(ws))
    inner: Counter = Counter()
    for lines in cols_lines:
        for ln in lines:
            for i, w in enumerate(ln):
                if i == len(ln) - 1 and w["text"].endswith("-") or i == 0:
                    continue  # line ends and starts: the breaks themselves
                for t in _TOKEN.findall(w["text"]):
                    inner[t.lower()] += 1
    out = []
    for lines in cols_lines:
        for a, b in zip(lines, lines[1:]):
            last = a[-1]["text"]
            m = re.search(r"([^\W_]+(?:-[^\W_]+)*)-$", last)
            n = re.match(r"[^\W_]+(?:-[^\W_]+)*", b[0]["text"])
            if not m or not n or b[0]["top"] - a[0]["top"] > 3 * (a[0]["bottom"] - a[0]["top"]):
                continue
            x, y = m.group(1), n.group()
            hy, cl = inner[f"{x}-{y}".lower()], inner[f"{x}{y}".lower()]
            if (hy or cl) and hy >= cl or not (hy or cl) and capital_token(x.rsplit("-", 1)[-1]):
                kind, sep = "kept", "-"
            elif cl > hy:
                kind, sep = "joined", ""
            else:
                continue
            text = " ".join([*(w["text"] for w in a[-2:-1]), last[:-1] + sep + b[0]["text"],
                             *(w["text"] for w in b[1:2])])
            out.append((re.sub(r"\s+", " ", text), kind))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pdfs", default=str(shared_data_dir() / "articles" / "pdfs"))
    ap.add_argument("--converters", default=",".join(CONVERTERS))
    a = ap.parse_args()
    logging.getLogger("pdfminer").setLevel(logging.ERROR)  # colour-space warnings on some journal PDFs
    pdf_dir = Path(a.pdfs)
    meta = {m["file"]: m for m in json.loads((pdf_dir / "metadata.json").read_text(encoding="utf-8"))}
    readable = []
    for f in sorted(meta):
        try:
            preflight(pdf_dir / f)
            readable.append(f)
        except ConversionError as e:
            print(f"unreadable: {f}: {e.reason}")
    t0 = time.perf_counter()
    junctions = {f: column_junctions(pdf_dir / f) for f in readable}
    breaks = {f: hyphen_breaks(pdf_dir / f) for f in readable}
    print(f"{len(readable)} readable PDFs, {sum(meta[f]['pages'] for f in readable)} pages; "
          f"{sum(map(len, junctions.values()))} same-column line junctions on two-column pages "
          f"(geometry: {time.perf_counter() - t0:.0f} s); line-end hyphen breaks the document decides: "
          f"{sum(k == 'kept' for b in breaks.values() for _, k in b)} kept, "
          f"{sum(k == 'joined' for b in breaks.values() for _, k in b)} joined\n")
    head = (f"{'converter':16} {'pages/s':>8} {'title':>7} {'authors':>8} {'refs±2':>7} {'headings':>9} "
            f"{'residue':>8} {'hyph':>6} {'hyph kept':>10} {'hyph joined':>12} {'line order':>11}")
    print(head)
    for name in a.converters.split(","):
        fn = CONVERTERS[name]
        pages = secs = 0.0
        title = auth_found = auth_all = refs_ok = refs_n = heads = 0
        residue = hyph = chars = j_found = j_all = 0
        kept = {"kept": [0, 0], "joined": [0, 0]}
        for f in readable:
            m = meta[f]
            t = time.perf_counter()
            md, n = fn(str(pdf_dir / f))
            secs += time.perf_counter() - t
            pages += n
            chars += len(md)
            flat = norm(md)
            t_norm = norm(re.sub(r"\s*\([^()]*(excerpt|only)[^()]*\)\s*$", "", m["title"]))
            title += t_norm in flat
            for au in m["authors"]:
                if "not on this page" in au:
                    continue
                auth_all += 1
                auth_found += norm(au) in flat
            if m.get("ref_count"):
                refs_n += 1
                parts = re.split(r"(?im)^(?:#+ *)?(?:\d+\.? *)?(?:references|bibliography|literature cited)\s*$", md)
                if len(parts) > 1:
                    section = re.split(r"(?m)^#", parts[-1])[0]  # up to the next heading (an appendix)
                    paras = [p for p in re.split(r"\n\s*\n", section) if p.strip()]
                    refs_ok += abs(len(paras) - m["ref_count"]) <= max(2, 0.1 * m["ref_count"])
            heads += sum(ln.startswith("#") for ln in md.splitlines()) >= 3
            residue += len(re.findall(r"[\ufb00-\ufb06\x00-\x08\x0b-\x1f]|\(cid:\d+\)", md))
            hyph += len(re.findall(r"[a-z]-\s+[a-z]", md)) - len(re.findall(r"[a-z]- (?:and|or|to) ", md))
            flat_ws = re.sub(r"\s+", " ", md)
            for text, kind in breaks[f]:
                kept[kind][0] += text in flat_ws
                kept[kind][1] += 1
            for j in junctions[f]:
                j_all += 1
                j_found += j in flat
        nd = len(readable)
        print(f"{name:16} {pages / secs:8.1f} {title:3d}/{nd:<3d} {auth_found / auth_all:8.1%} "
              f"{refs_ok:3d}/{refs_n:<3d} {heads:5d}/{nd:<3d} {residue / chars * 1e5:8.1f} "
              f"{hyph / chars * 1e5:6.1f} {kept['kept'][0] / max(1, kept['kept'][1]):10.1%} "
              f"{kept['joined'][0] / max(1, kept['joined'][1]):12.1%} {j_found / max(1, j_all):11.1%}")
    print("\npages/s: in-process conversion on this machine (convert_pdfs adds one child process per PDF); "
          "residue and hyph per 100k characters.")


if __name__ == "__main__":
    from ctxbench.core.interrupt import run_main

    run_main(main)  # Ctrl-C: exit 130, no traceback
