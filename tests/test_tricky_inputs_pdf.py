"""tests/data/tricky_inputs.yaml, section ``pdf_lines`` (issue 13, item 14): line-end hyphens inside compounds are
kept (the document writes the hyphenated form, the break follows a digit or a capital-letter token, or sits inside
a hyphenated compound), ordinary word breaks rejoin — through both converter paths."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ctxbench.convert.layout import _paragraph, mark_line_breaks
from ctxbench.convert.text import clean, join_hyphenation

ENTRIES = yaml.safe_load((Path(__file__).parent / "data" / "tricky_inputs.yaml").read_text(encoding="utf-8"))[
    "pdf_lines"]


def test_section_is_filled():
    assert len(ENTRIES) >= 30 and all(e["lines"] and e["expect"] for e in ENTRIES)


def _first(md: str) -> str:
    return re.sub(r"\s+", " ", md.split("\n\n")[0]).strip()


@pytest.mark.parametrize("e", ENTRIES, ids=[" / ".join(e["lines"]) + (" +doc" if "elsewhere" in e else "")
                                            for e in ENTRIES])
def test_pdf_lines(e):
    rest = [e["elsewhere"]] if "elsewhere" in e else []
    # pdfminer-layout: a text box's lines joined into a paragraph, then the document's hyphen breaks resolved
    box = join_hyphenation("\n\n".join([clean(_paragraph(e["lines"])), *rest]))
    assert _first(box) == e["expect"]
    # pdfium-text / pdfplumber-text: the page's plain text with its line breaks
    raw = join_hyphenation("\n\n".join([clean(mark_line_breaks("\n".join(e["lines"]))), *rest]))
    assert _first(raw) == e["expect"]
