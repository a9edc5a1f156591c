"""What every report section receives: :class:`ReportContext` (one signature for all sections)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxbench.report import render
from ctxbench.report.browser import instances_link
from ctxbench.report.plots import figure_div


@dataclass
class ReportContext:
    """A report section is ``fn(ctx: ReportContext) -> str`` (HTML; "" when it has nothing to show). It reads the
    build's tables from ``build_dir``, may write its own tables as ``out/<name>.parquet``, and renders with
    :mod:`ctxbench.report.render` (``ctx.table``), :mod:`ctxbench.report.plots` (``ctx.figure``) and links
    aggregates to their instances in the browser (``ctx.link``). ``benchmarks``: the tracks whose instances the build holds;
    ``options``: report options from the CLI (``ctxbench report --regime KEY=VALUE`` → ``{"regime": [...]}``)."""

    build_dir: Path
    out: Path
    manifest: dict = field(default_factory=dict)
    benchmarks: list[str] = field(default_factory=list)
    options: Mapping[str, Any] = field(default_factory=dict)

    @staticmethod
    def table(rows: list[dict], cols: list[str], link: Callable[[dict], str | None] | None = None,
              link_cols: Sequence[str] = ("n", "score")) -> str:
        """:func:`ctxbench.report.render.table` (``link(row)``: the address of a row's instances, on its
        ``link_cols`` cells; make it with :meth:`link`)."""
        return render.table(rows, cols, link, link_cols)

    @staticmethod
    def link(**filters: Any) -> str:
        """The instance browser's address showing the instances that match ``filters`` (``model``, ``mode``,
        ``matcher``, ``length`` in tokens, ``score``: scored/correct/partial/wrong/unscored, or any instance column
        the browser filters on, e.g. ``position="end"``, ``query_types="Max/Min"``):
        :func:`ctxbench.report.browser.instances_link`."""
        return instances_link(filters)

    @staticmethod
    def figure(fig: Any) -> str:
        """The HTML of a plotly figure (:mod:`ctxbench.report.plots`: the page already loads the local
        plotly.min.js); "" for None."""
        return figure_div(fig)

    @classmethod
    def of(cls, build_dir: str | Path, out: str | Path, options: Mapping[str, Any] | None = None) -> ReportContext:
        """The context of a build directory: its manifest (``{}`` without one) and the benchmarks of its
        instances."""
        import pyarrow.parquet as pq

        build_dir = Path(build_dir)
        mp = build_dir / "manifest.json"
        manifest = json.loads(mp.read_text(encoding="utf-8")) if mp.exists() else {}
        ip = build_dir / "instances.parquet"
        names: set[str] = set()
        if "benchmark" in pq.read_schema(ip).names:
            names = {b for b in pq.read_table(ip, columns=["benchmark"]).column("benchmark").unique().to_pylist() if b}
        if isinstance(manifest, dict) and manifest.get("track"):
            names.add(str(manifest["track"]))
        return cls(build_dir, Path(out), manifest if isinstance(manifest, dict) else {}, sorted(names),
                   dict(options or {}))
