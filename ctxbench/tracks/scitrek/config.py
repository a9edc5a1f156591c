"""The configuration of a scientific-article build (SciTrek) and of its Semantic Scholar fetch, apart from the build's
code so that registering the track (``ctxbench build scitrek --help``) imports none of the build's libraries
(issue 36)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from ctxbench.core.values import MAX_CONTEXT_TOKENS, SAMPLINGS, check_choices, check_lengths

MAX_TOKENS = MAX_CONTEXT_TOKENS
FORMATS = ("full_text", "tables")


class SciTrekConfig(BaseModel):
    """Configuration of a scientific-article build (validates the CLI, the Prefect form and the manifest). Lengths
    are in tokens of ``tokenizer``; ``collections_per_tier`` counts collections per tier *and* sampling."""

    pdfs: str | None = Field(None, description="directory holding the article PDFs (with --metadata)")
    metadata: str | None = Field(None, description="article metadata JSON (as `ctxbench fetch s2` writes it)")
    unarxive: str | None = Field(None, description="unArXive JSON lines: a .jsonl file or a directory of them")
    markdown: str | None = Field(None, description="directory of markdown articles (one per .md; sidecar JSON "
                                                   "or the document's own title and author lines)")
    s2orc: str | None = Field(None, description="S2ORC JSON: a file or a directory (metadata joined with parses)")
    tokenizer: str = Field("o200k_base", description="tokenizer that counts context lengths")
    lengths: list[int] = Field(default_factory=lambda: [65536, 131072],
                               description="tiers in tokens, e.g. 65536,131072 (64k,128k,512k,1m)")
    samplings: list[str] = Field(default_factory=lambda: list(SAMPLINGS),
                                 description="collection samplings: random, bfs, dfs")
    formats: list[str] = Field(default_factory=lambda: list(FORMATS),
                               description="context formats: full_text (F-*), tables (D-*)")
    collections_per_tier: int = Field(3, ge=1, description="collections per tier and sampling")
    templates_per_collection: int = Field(10, ge=0, description="templates per collection that yield a question "
                                                                "(drawn in a seeded order; one that yields none gives "
                                                                "its place to the next; 0: all)")
    min_articles: int = Field(4, ge=1, description="fewest articles in a collection")
    min_fill: float = Field(0.9, ge=0.0, le=1.0, description="share of the tier a collection must fill (tokens)")
    misaligned: Literal["exclude", "keep"] = Field("exclude", description="articles whose title/authors are not "
                                                                          "in the text")
    question_model: str | None = Field(None, description="LLM that phrases questions (validated by SQL round trip)")
    question_base_url: str | None = Field(None, description="OpenAI-compatible endpoint of --question-model")
    question_api_key_env: str | None = Field(None, description="env variable with the key for --question-base-url")
    max_attempts: int = Field(10, ge=1, description="round-trip attempts per query before it is dropped")
    convert_timeout_s: float = Field(300.0, gt=0, description="seconds one PDF conversion may take")
    seed: int = Field(0, description="seed of the collection and template sampling")

    @model_validator(mode="after")
    def _sources(self) -> "SciTrekConfig":
        if (self.pdfs is None) != (self.metadata is None):
            raise ValueError("--pdfs and --metadata go together (the metadata names each PDF's title and "
                             "authors)")
        if not any((self.pdfs, self.unarxive, self.markdown, self.s2orc)):
            raise ValueError("no articles: pass --pdfs DIR --metadata FILE, --unarxive PATH, --markdown DIR "
                             "or --s2orc PATH (several at once are merged)")
        return self

    @field_validator("lengths")
    @classmethod
    def _lengths(cls, v: list[int]) -> list[int]:
        return check_lengths(v, 1024, MAX_TOKENS, "65536,131072")

    @field_validator("samplings")
    @classmethod
    def _samplings(cls, v: list[str]) -> list[str]:
        return check_choices(v, SAMPLINGS, "sampling")

    @field_validator("formats")
    @classmethod
    def _formats(cls, v: list[str]) -> list[str]:
        return check_choices(v, FORMATS, "context format")


class S2Fetch(BaseModel):
    """Fetching clusters from the Semantic Scholar Graph API before a build (``ctxbench fetch s2``,
    ``ctxbench.sources.s2``): PDFs and ``metadata.json`` are written into the build's ``pdfs`` directory; PDFs
    already there are not downloaded again, so a nightly rebuild fetches and converts only new papers. The API key
    comes from the environment (``S2_API_KEY``)."""

    subjects: list[str] | None = Field(None, description="subjects (default: SciTrek's eight)")
    seeds_per_subject: int = Field(2, ge=1)
    first_hop: int = Field(10, ge=0)
    second_hop: int = Field(5, ge=0)
    api_url: str | None = Field(None, description="Graph API base URL (default: the public API)")
    min_interval_s: float = Field(1.0, ge=0, description="seconds between API requests")
    seed: int = 0
