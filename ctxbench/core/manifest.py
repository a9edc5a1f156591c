"""Build records and the manifest, the ground floor every track and every reader of a build shares: what a build
wrote (:class:`BuildResult`), the checks of a build's ``--out`` and options, the versions recorded, and
``manifest.json`` (:class:`BuildManifest`, :func:`read_manifest`; field meanings in ../shared/design/SCHEMA.md).
Moved here from ``ctxbench.tracks.common`` so that nothing below the tracks reaches up for them."""

from __future__ import annotations

import functools
import importlib.metadata
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ctxbench import __version__
from ctxbench.core.errors import InputError
from ctxbench.core.hashing import file_sha256
from ctxbench.core.outdir import BUILD_ENTRIES
from ctxbench.core.outdir import check_out_dir as check_dir
from ctxbench.core.storage import parts_dir
from ctxbench.core.track import find_track
from ctxbench.core.values import check_choices, check_lengths  # noqa: F401 (defined there, light to import)


@dataclass
class BuildResult:
    """What a build wrote: the directory, instance and quarantine counts, and the build hash."""

    out: Path
    build_hash: str
    n_instances: int
    n_quarantined: int
    skipped: bool = False


def asset_hash(path: str | Path) -> str:
    """SHA-256 of an asset file, or "" when it does not exist."""
    p = Path(path)
    return file_sha256(p) if p.exists() else ""




def check_out_dir(out: str | Path, build_hash: str, force: bool = False) -> BuildResult | None:
    """Check the build directory ``out`` before building ``build_hash`` into it.

    Returns the existing BuildResult (``skipped``) when ``out`` already holds this complete build, else None (go
    on building). Raises InputError when ``out`` is a file, or holds a different or incomplete build or foreign
    files, unless ``force`` (the old build is then replaced by ``clear_replaced_build`` when the new one is written).
    """
    out = Path(out)
    mpath = out / "manifest.json"
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file: pass a directory for the build")
    if not mpath.exists():
        check_dir(out, "build", force=force, own=BUILD_ENTRIES, what="build")  # the rule of every --out
        return None
    try:
        old = json.loads(mpath.read_text(encoding="utf-8"))
        if not isinstance(old, dict):
            raise ValueError("not a JSON object")
    except ValueError as e:
        if not force:
            raise InputError(f"{mpath} is not a ctxbench manifest ({e}): choose another --out or pass --force") from None
        old = {}
    if old.get("build_hash") == build_hash and (out / "instances.parquet").exists():
        n = old.get("counts", {})
        return BuildResult(out, build_hash, n.get("instances", 0), n.get("quarantined", 0), skipped=True)
    if not force:
        what = (f"a different build ({old['build_hash']})" if old.get("build_hash") not in (None, build_hash)
                else "an incomplete build" if old.get("build_hash") == build_hash else "files of another kind")
        raise InputError(f"{out} already holds {what}; a completed build is immutable: choose another --out or "
                         f"pass --force to replace it (the old build is removed only once the new one is complete)")
    return None


def clear_replaced_build(out: Path) -> None:
    """Before writing a build over an old one (``--force``): remove the manifest (written again last) and the
    evaluation tables and report, which belong to the old instances."""
    (out / "manifest.json").unlink(missing_ok=True)
    for name in ("responses.parquet", "scores.parquet"):
        (out / name).unlink(missing_ok=True)
    shutil.rmtree(parts_dir(out / "responses.parquet"), ignore_errors=True)
    shutil.rmtree(out / "report", ignore_errors=True)


# libraries whose versions a manifest records (those that shape a build's bytes: tables, SQL, tokenizers, templates)
MANIFEST_PACKAGES = ("ctxbench", "pyarrow", "duckdb", "sqlglot", "tiktoken", "tokenizers", "litellm", "quicktok-v1",
                     "pydantic", "pyyaml", "great-expectations", "numpy", "pypdfium2", "pdfminer.six", "cn2an")


def version(pkg: str) -> str:
    """Installed version of a distribution ("" when absent; ctxbench's own version in a source checkout)."""
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return __version__ if pkg == "ctxbench" else ""


def versions(*pkgs: str) -> dict[str, str]:
    """``{package: version}`` for the manifest."""
    return {p: version(p) for p in pkgs}


# ------------------------------------------------------------------------------------------------ the manifest

MANIFEST_FORMAT = 2  # 1: the four hand-written manifests before issue 12


class TokenizerRecord(BaseModel):
    """A tokenizer a build counted with: its registry name and the SHA-256 of its file ("" when it has none)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    file_sha256: str = ""


class TrackSource(BaseModel):
    """Where a build's track code came from: its module, the distribution that installed it and that
    distribution's version (a track in a package: ``ctxbench`` for the built-in ones), or ``file_sha256`` of a
    track defined in a plain ``.py`` file (``CTXBENCH_TRACKS``), so that a manifest names the code of a track
    ctxbench does not ship."""

    model_config = ConfigDict(extra="forbid")
    module: str
    distribution: str = ""
    version: str = ""
    file_sha256: str = ""


@functools.lru_cache(maxsize=1)
def import_names_to_distributions() -> dict[str, tuple[str, ...]]:
    """``importlib.metadata.packages_distributions()`` (top-level import name -> the distributions that install
    it), read once per process: it scans the files of every installed distribution (1-2 s of CPU here)."""
    return {k: tuple(v) for k, v in importlib.metadata.packages_distributions().items()}


def track_source(name: str) -> TrackSource | None:
    """The :class:`TrackSource` of the registered track ``name`` (None when none is registered by that name)."""
    import sys


    t = find_track(name)
    if t is None:
        return None
    mod = type(t).__module__
    top = mod.partition(".")[0]
    if top == "ctxbench":
        return TrackSource(module=mod, distribution="ctxbench", version=version("ctxbench"))
    dists = import_names_to_distributions().get(top) or ()
    if dists:
        return TrackSource(module=mod, distribution=dists[0], version=version(dists[0]))
    f = getattr(sys.modules.get(mod), "__file__", None)
    return TrackSource(module=mod, file_sha256=file_sha256(f) if f and Path(f).is_file() else "")


class BuildManifest(BaseModel):
    """``manifest.json`` of a build directory (SCHEMA.md, "Build directory"), written last by :class:`BuildWriter`
    so that its presence marks a complete build. Every track's manifest has these fields; a track adds its own
    sections (e.g. ``haystacks``, ``collections``, ``preprocessing``) as further top-level keys (``details``)."""

    model_config = ConfigDict(extra="allow")
    format_version: int = Field(MANIFEST_FORMAT, description="version of this manifest layout")
    track: str = Field(..., description="the registered track that built it (instances.benchmark)")
    build_hash: str = Field(..., description="content hash of the inputs and configuration (paths excluded)")
    config: dict[str, Any] = Field(..., description="the track's configuration (location fields excluded)")
    seed: int | None = Field(None, description="the configuration's seed, where it has one")
    inputs: dict[str, Any] = Field(default_factory=dict, description="content hashes of the inputs")
    tokenizer: TokenizerRecord | None = Field(None, description="the tokenizer that counted context lengths "
                                                                "(one for the whole build)")
    tokenizers: dict[str, TokenizerRecord] = Field(default_factory=dict,
                                                   description="tokenizers by what they counted for (e.g. a sizing "
                                                               "model), where a build uses several")
    versions: dict[str, str] = Field(..., description="library versions that shape a build's bytes")
    python: str = Field(..., description="Python version")
    sqlite_version: str = Field(..., description="SQLite library version")
    counts: dict[str, int] = Field(..., description="instances, quarantined and the track's own counts")
    track_source: TrackSource | None = Field(None, description="where the track's code came from (a package's "
                                                               "version, or a plain file's hash)")


def read_manifest(build_dir: str | Path) -> BuildManifest:
    """The manifest of a build directory, validated (a format-1 manifest is read with its missing fields
    derived). Raises InputError when it is missing or not a ctxbench manifest."""
    p = Path(build_dir) / "manifest.json"
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
        if not isinstance(d, dict):
            raise ValueError("not a JSON object")
        d.setdefault("format_version", 1)
        d.setdefault("versions", {})
        d.setdefault("python", "")
        d.setdefault("sqlite_version", "")
        return BuildManifest.model_validate(d)
    except (OSError, ValueError) as e:
        raise InputError(f"{p} is missing or not a ctxbench manifest ({e})") from None
