"""The options and help of ``fetch corpus`` and ``fetch s2``; their work is :mod:`ctxbench.cli.fetch`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ctxbench.cli.common import check_words
from ctxbench.cli.options import check_env, check_text, check_url

fetch_app = typer.Typer(no_args_is_help=True, help="Fetch source documents.")


@fetch_app.command("corpus")
def fetch_corpus_cmd(
    out: Path = typer.Option(..., file_okay=False, help="corpus directory to write (volumes/ + corpus.json)"),
    local: Optional[Path] = typer.Option(None, exists=True, file_okay=False, help="directory of .txt volumes"),
    urn: Optional[str] = typer.Option(None, callback=check_text, help="ctext book URN, e.g. ctp:... (with --base-url)"),
    base_url: Optional[str] = typer.Option(None, callback=check_url, help="ctext API root URL"),
    apikey_env: Optional[str] = typer.Option(None, callback=check_env,
                                             help="environment variable holding a ctext API key"),
    remap: Optional[str] = typer.Option(None, callback=check_text, help="ctext remap, e.g. gb for simplified characters"),
    exclude: str = typer.Option("", help="volumes to leave out, comma-separated (name, 卷 label, number or title)"),
    corpus_id: Optional[str] = typer.Option(None, callback=check_text,
                                            help="corpus id (default: the source directory's name)"),
    force: bool = typer.Option(False, "--force", help="replace a non-empty --out that holds no earlier corpus"),
) -> None:
    """Fetch a corpus (local files or the ctext API) in canonical volume order, with per-volume checksums."""
    kw = dict(locals())  # the options as parsed
    from ctxbench.cli import fetch  # lazy: the command's code and libraries load when it runs (start-up time)

    fetch.fetch_corpus_cmd(**kw)


@fetch_app.command("s2")
def fetch_s2_cmd(
    out: Path = typer.Option(..., file_okay=False, help="directory for the PDFs and metadata.json"),
    subjects: str = typer.Option("Computer Science,Economics,Electronic Engineering,Math,Physics,Biology,Finance,"
                                 "Statistics", callback=check_words,
                                 help="comma-separated subjects (SciTrek's eight by default)"),
    seeds_per_subject: int = typer.Option(2, min=1, help="seed papers per subject"),
    first_hop: int = typer.Option(10, min=0, help="papers sampled from each seed's references and citations"),
    second_hop: int = typer.Option(5, min=0, help="papers sampled around each first-hop paper"),
    min_citations: int = typer.Option(100, min=0, help="seeds have more than this many citations"),
    since_year: int = typer.Option(2020, min=0, help="seeds published in or after this year"),
    seed: int = typer.Option(0, min=0, help="sampling seed"),
    api_url: Optional[str] = typer.Option(None, callback=check_url,
                                          help="Graph API base URL (default: the client's; or $S2_API_URL)"),
    min_interval: float = typer.Option(1.0, min=0.0, help="seconds between API requests"),
    force: bool = typer.Option(False, "--force", help="write into a non-empty --out that holds no earlier fetch"),
) -> None:
    """Fetch SciTrek-style article clusters from Semantic Scholar (API key from $S2_API_KEY): PDFs + metadata.json."""
    kw = dict(locals())  # the options as parsed
    from ctxbench.cli import fetch  # lazy: the command's code and libraries load when it runs (start-up time)

    fetch.fetch_s2_cmd(**kw)
