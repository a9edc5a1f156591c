"""The configuration of a planted-fact build (needles), apart from the build's code so that registering the track
(``ctxbench build needles --help``) imports none of the build's libraries (issue 36)."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from ctxbench.core.values import MAX_CONTEXT_TOKENS, check_lengths

MAX_TIER = MAX_CONTEXT_TOKENS
BOUNDARIES = ("sentence", "paragraph")  # where a needle is inserted (ctxbench.tracks.needles.questions)


class NeedlesConfig(BaseModel):
    """Configuration of a planted-fact build (validates the CLI, the Prefect form and the stored manifest).
    Tiers are in tokens of each sizing model's own tokenizer."""

    corpus: str = Field(..., description="corpus directory (ctxbench fetch corpus output, or a directory of .txt volumes)")
    models: list[str] = Field(default_factory=lambda: ["gpt-4.1"],
                              description="sizing models from assets/models.yaml")
    lengths: list[int] = Field(default_factory=lambda: [262144, 524288, 1048576],
                               description="tiers in tokens of each model's tokenizer")
    fill: float = Field(0.99, gt=0, le=1, description="fraction of min(tier, window) the whole prompt may use")
    depths: list[float] = Field(default_factory=lambda: [0.25, 0.5, 0.75],
                                description="needle depths (fractions of the context's tokens, sizing model's tokenizer)")
    chain_depths: list[float] | None = Field(None, description="depth of each chain statement (default evenly spaced)")
    boundary: str = Field("sentence", description="insert at a sentence or a paragraph boundary")
    needles: str | None = Field(None, description="needle set (assets/needles/<name>.yaml or a path); default by corpus language")
    exclude: list[str] = Field(default_factory=list, description="volumes to leave out, besides the needle set's")
    variants: list[str] = Field(default_factory=lambda: ["real", "altered"],
                                description="needle variants: real, altered")
    chains: bool = Field(True, description="plant the needle set's multi-hop chains too")
    output_budget: int | None = Field(None, ge=1, description="output tokens reserved (default: each model's registry value)")
    distractor_needles: int = Field(0, ge=0, le=32, description="look-alike statements planted besides each needle "
                                    "(the needle's form, other subjects and values; none answers the question)")
    max_overlap: float | None = Field(None, ge=0, le=1, description="keep only needles and chains whose question's "
                                      "lexical overlap with its statements is at most this (0..1; "
                                      "ctxbench.features.overlap), e.g. 0.2 with --needles zh-classical-low-overlap")

    @field_validator("lengths")
    @classmethod
    def _lengths(cls, v: list[int]) -> list[int]:
        return check_lengths(v, 256, MAX_TIER, "262144,1000000")

    @field_validator("models")
    @classmethod
    def _models(cls, v: list[str]) -> list[str]:
        v = [m.strip() for m in v if m.strip()]
        if not v:
            raise ValueError("give at least one sizing model (--models gpt-4.1,Qwen2.5-7B-Instruct-1M)")
        return list(dict.fromkeys(v))

    @field_validator("depths")
    @classmethod
    def _depths(cls, v: list[float]) -> list[float]:
        for d in v:
            if not 0 <= d <= 1:
                raise ValueError(f"depth {d} is outside 0..1 (a fraction of the context's tokens)")
        return list(dict.fromkeys(v))

    @field_validator("chain_depths")
    @classmethod
    def _chain_depths(cls, v: list[float] | None) -> list[float] | None:
        for d in v or []:
            if not 0 <= d <= 1:
                raise ValueError(f"chain depth {d} is outside 0..1 (a fraction of the context's tokens)")
        return v

    @field_validator("boundary")
    @classmethod
    def _boundary(cls, v: str) -> str:
        if v not in BOUNDARIES:
            raise ValueError(f"unknown boundary {v!r}: use {' or '.join(BOUNDARIES)}")
        return v

    @field_validator("variants")
    @classmethod
    def _variants(cls, v: list[str]) -> list[str]:
        for x in v:
            if x not in ("real", "altered"):
                raise ValueError(f"unknown variant {x!r}: use real and/or altered")
        return list(dict.fromkeys(v))
