"""tricky_inputs.yaml section article_bylines: the authors a markdown article's own first lines name
(ctxbench.sources.markdown_articles.title_and_authors), each case's expected list written by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ctxbench.sources.markdown_articles import title_and_authors

CASES = yaml.safe_load((Path(__file__).parent / "data" / "tricky_inputs.yaml").read_text(encoding="utf-8"))[
    "article_bylines"]


@pytest.mark.parametrize("case", CASES, ids=[c["lines"][:40] for c in CASES])
def test_byline(case):
    text = f"# A Title Of An Article\n\n{case['lines']}\n\n## 1 Introduction\n\nBody text by Ann Other.\n"
    title, authors = title_and_authors(text)
    assert title == "A Title Of An Article"
    assert authors == case["authors"]


SECTIONS = yaml.safe_load((Path(__file__).parent / "data" / "tricky_inputs.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", SECTIONS["article_bibliographies"],
                         ids=[c["text"][:40] for c in SECTIONS["article_bibliographies"]])
def test_bibliography_entries(case):
    from ctxbench.sources.fulltext import bibliography_entries, bibliography_section

    sec = bibliography_section(case["text"])
    assert (None if sec is None else len(bibliography_entries(sec[0]))) == case["entries"]


@pytest.mark.parametrize("case", SECTIONS["article_citations"], ids=[c["entry"][:40] for c in SECTIONS["article_citations"]])
def test_citation_of_an_entry(case):
    from ctxbench.sources.fulltext import (BibEntry, FullTextArticle, Merged, ids_in_text, resolve_citations)

    ids = {k: case[k] for k in ("arxiv", "doi") if k in case}
    cited = FullTextArticle("unarxive", "t", "t", case["title"], ["Ann Lee"], 0, "x", [], ids)
    citing = FullTextArticle("markdown", "c", "c", "A Citing Article Of Some Length", ["Bo Chen"], 1, "x",
                             [BibEntry(case["entry"], ids_in_text(case["entry"]))])
    got = resolve_citations(Merged([("t", cited), ("c", citing)], []))
    assert got["c"] == (["t"] if case["cites"] else [])
