"""What every build track shares: the result of a build, the check of the output directory against the build hash
(an unchanged build is skipped, a different one needs ``--force``), removal of a replaced build's evaluation
tables, the typed build manifest (:class:`BuildManifest`) and the one writer of a build directory
(:class:`BuildWriter`: versioned run roots, staged files moved into place, tables written against their schemas,
the manifest last) — SCHEMA.md, "Build directory"."""

from __future__ import annotations

import platform
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa

from ctxbench.core.errors import InputError
from ctxbench.core.manifest import (MANIFEST_PACKAGES, BuildManifest, BuildResult, TokenizerRecord, check_out_dir,
                                    clear_replaced_build, track_source, versions)
# build records and the manifest live in ctxbench.core.manifest; still importable from here for one release
from ctxbench.core.manifest import (MANIFEST_FORMAT, TrackSource, asset_hash, check_choices,  # noqa: F401
                                    check_lengths, read_manifest, version)
from ctxbench.core.outdir import BUILD_ENTRIES, check_build_out  # noqa: F401  (BUILD_ENTRIES: what a build may hold unfinished)
from ctxbench.core.storage import set_latest, to_table, write_json, write_parquet
from ctxbench.features import language
from ctxbench.features.overlap import fill_lexical_overlap
from ctxbench.tracks.validate import warm_up


# ------------------------------------------------------------------------------------------------ the writer

def unstaged(path: Path) -> Path:
    """The build file a staged path (:meth:`BuildWriter.staged`: ``DIR/.NAME.staging``) becomes when the build is
    written: ``DIR/NAME``. Raises ValueError for a path that is no staged name."""
    if not (path.name.startswith(".") and path.name.endswith(".staging")):
        raise ValueError(f"{path} is not a staged build file (.NAME.staging)")
    return path.with_name(path.name[1:].removesuffix(".staging"))


class BuildWriter:
    """The one writer of a build directory, shared by every track.

    ``BuildWriter(out, build_hash, force, versioned)`` checks the directory first (:func:`check_out_dir`):
    ``existing`` is the complete build of this hash already there (nothing to do), else the build may go on.
    ``versioned``: ``out`` is a run root and the build directory is ``out/<build_hash>``; ``out/latest`` points at
    it once complete (ctxbench.run.incremental). Stages stage large files under :meth:`staged` while they work;
    :meth:`write` then replaces an old build's evaluation tables (``--force``), moves the staged files into
    place, writes the extra tables, ``quarantine.parquet`` and ``instances.parquet`` (against their schemas:
    a column a schema lacks is an error) and, last, ``manifest.json``."""

    def __init__(self, out: str | Path, build_hash: str, force: bool = False, versioned: bool = False):
        root = Path(out)
        if root.exists() and not root.is_dir():
            raise InputError(f"--out {root} is a file: pass a directory for the build")
        if versioned:  # a run root: the rule of every --out (ctxbench.core.outdir), for the root itself
            check_build_out(root, force, versioned=True)
        self.root = root if versioned else None
        self.dir = root / build_hash if versioned else root
        self.build_hash = build_hash
        self.existing = check_out_dir(self.dir, build_hash, force)
        if self.existing is not None and self.root is not None:
            set_latest(self.root, build_hash)
        if self.existing is None:  # a build follows: its helper processes load their libraries meanwhile
            warm_up()
            language.warm_up()

    def staged(self, name: str) -> Path:
        """Where a stage writes ``name`` (a file or directory of the build) before the build is complete."""
        self.dir.mkdir(parents=True, exist_ok=True)
        return self.dir / f".{name}.staging"

    def write(self, track: str, config: dict[str, Any], instances: list[dict], quarantine: list[dict], *,
              seed: int | None = None, inputs: dict[str, Any] | None = None, tokenizer: Any = None,
              tokenizers: dict[str, Any] | None = None, counts: dict[str, int] | None = None,
              tables: dict[str, list[dict] | pa.Table] | None = None, details: dict[str, Any] | None = None,
              result: type[BuildResult] = BuildResult, **result_fields: Any) -> BuildResult:
        """Write the build (class docstring). ``tables``: further tables, ``name`` → rows written with
        ``schemas/<name>.schema.json`` or an Arrow table; ``tokenizer``/``tokenizers``: Tokenizer objects (or
        records); ``counts``: the track's counts besides instances and quarantined; ``details``: the track's
        manifest sections. Returns ``result(out, build_hash, n_instances, n_quarantined, **result_fields)``."""
        out = self.dir
        out.mkdir(parents=True, exist_ok=True)
        clear_replaced_build(out)  # replacing a build (--force): its evaluation tables go with it
        for staged in sorted(out.glob(".*.staging")):
            final = unstaged(staged)
            if final.is_dir():
                shutil.rmtree(final)
            staged.replace(final)
        for name, rows in (tables or {}).items():
            write_parquet(rows if isinstance(rows, pa.Table) else to_table(name, rows), out / f"{name}.parquet")
        write_parquet(to_table("quarantine", quarantine), out / "quarantine.parquet")

        fill_lexical_overlap(instances)  # never null: a track that did not measure it gets it from its spans
        write_parquet(to_table("instances", instances), out / "instances.parquet")

        def rec(t: Any) -> TokenizerRecord:
            return t if isinstance(t, TokenizerRecord) else TokenizerRecord(name=t.name,
                                                                              file_sha256=t.file_sha256 or "")

        manifest = BuildManifest(
            track=track, build_hash=self.build_hash, config=config, seed=seed, inputs=inputs or {},
            tokenizer=rec(tokenizer) if tokenizer is not None else None,
            tokenizers={k: rec(v) for k, v in (tokenizers or {}).items()},
            versions=versions(*MANIFEST_PACKAGES), python=platform.python_version(),
            sqlite_version=sqlite3.sqlite_version,
            counts={"instances": len(instances), "quarantined": len(quarantine), **(counts or {})},
            track_source=track_source(track), **(details or {}))
        write_json(manifest.model_dump(mode="json"), out / "manifest.json")
        if self.root is not None:
            set_latest(self.root, self.build_hash)
        return result(out, self.build_hash, len(instances), len(quarantine), **result_fields)
