"""``fetch corpus`` and ``fetch s2``: source documents."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional


from ctxbench.cli.common import out_console
from ctxbench.cli.errors import USER_ERRORS, fail
from ctxbench.core.errors import InputError
from ctxbench.sources.corpus import corpus_summary, fetch_corpus
from ctxbench.sources.s2 import FetchConfig, fetch_clusters

def fetch_corpus_cmd(*, out: Path, local: Optional[Path], urn: Optional[str], base_url: Optional[str],
                     apikey_env: Optional[str], remap: Optional[str], exclude: str, corpus_id: Optional[str],
                     force: bool) -> None:
    """The work of :func:`ctxbench.cli.commands.fetch.fetch_corpus_cmd` (its options and help)."""
    try:
        c = fetch_corpus(out, local=local, urn=urn, base_url=base_url,
                         apikey=os.environ.get(apikey_env) if apikey_env else None, remap=remap,
                         exclude=[x for x in exclude.split(",") if x.strip()], corpus_id=corpus_id, force=force)
    except USER_ERRORS as e:
        fail(e)
    s = corpus_summary(c)
    out_console.print(f"{s['corpus_id']}: {s['volumes']} volumes, {s['paragraphs']:,} paragraphs, {s['chars']:,} "
                      f"characters → {out}" + (f"; excluded {', '.join(s['excluded'])}" if s["excluded"] else ""))


def fetch_s2_cmd(*, out: Path, subjects: str, seeds_per_subject: int, first_hop: int, second_hop: int,
                 min_citations: int, since_year: int, seed: int, api_url: Optional[str], min_interval: float,
                 force: bool) -> None:
    """The work of :func:`ctxbench.cli.commands.fetch.fetch_s2_cmd` (its options and help)."""
    from semanticscholar.SemanticScholarException import (  # lazy: start-up time, only `fetch s2` needs the client
        BadQueryParametersException, ObjectNotFoundException)

    try:
        cfg = FetchConfig(subjects=[x.strip() for x in subjects.split(",") if x.strip()],
                          seeds_per_subject=seeds_per_subject, first_hop=first_hop, second_hop=second_hop,
                          min_citations=min_citations, since_year=since_year, seed=seed,
                          api_url=api_url or os.environ.get("S2_API_URL") or None, min_interval_s=min_interval)
        rows, quarantine = fetch_clusters(out, cfg, force=force)
    except (ObjectNotFoundException, BadQueryParametersException) as e:  # the API answered 404/400 at the root
        fail(InputError(f"--api-url {api_url}: the Semantic Scholar Graph API answered "
                         f"{type(e).__name__} ({e}); check the address (it should end before /graph/v1)"))
    except USER_ERRORS as e:
        fail(e)
    out_console.print(f"{len(rows)} papers with PDFs in {out} (metadata.json); {len(quarantine)} left out"
                      + (" (quarantine.json)" if quarantine else ""))
