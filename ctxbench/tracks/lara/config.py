"""The configuration of a LaRA import, apart from the import's code so that registering the track
(``ctxbench import lara --help``) imports none of its libraries (issue 36)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class LaraConfig(BaseModel):
    """Configuration of a LaRA import (validates the CLI, the Prefect form and the manifest)."""

    data: str = Field(..., description="LaRA dataset directory (queries/*.jsonl and corpora/<tier>/<type>/)")
    tokenizer: str = Field("cl100k_base", description="tokenizer that counts context lengths")
