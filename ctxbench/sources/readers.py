"""The full-text article sources and their readers (each yields :class:`~ctxbench.sources.fulltext.FullTextArticle`
records; PDFs go through conversion in the article track)."""

from __future__ import annotations

from ctxbench.sources.fulltext import ReaderFn
from ctxbench.sources.markdown_articles import read_markdown
from ctxbench.sources.s2orc import read_s2orc
from ctxbench.sources.unarxive import read_unarxive


def readers() -> dict[str, ReaderFn]:
    """Source name -> reader function (the full-text sources; PDFs go through conversion in the track)."""
    return {"unarxive": read_unarxive, "markdown": read_markdown, "s2orc": read_s2orc}
