"""What every build track shares: the result of a build, the check of the output directory against the build hash
(an unchanged build is skipped, a different one needs ``--force``), removal of a replaced build's evaluation
tables, and the library versions recorded in manifests (SCHEMA.md, "Build directory")."""

from __future__ import annotations

import importlib.metadata
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..errors import InputError
from ..hashing import file_sha256


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


# what a build directory may hold before its manifest is written (an interrupted build restarts over these)
BUILD_ENTRIES = frozenset({"instances.parquet", "quarantine.parquet", "articles.parquet", "source.sqlite",
                           "collections", "responses.parquet", "scores.parquet", "report", "calibration.json"})


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
        foreign = sorted(p.name for p in out.iterdir() if not p.name.startswith(".")
                         and p.name not in BUILD_ENTRIES) if out.is_dir() else []
        if foreign and not force:
            raise InputError(f"--out {out} is not empty and holds no ctxbench build ({', '.join(foreign[:5])}"
                             f"{' …' if len(foreign) > 5 else ''}): choose another --out or pass --force")
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
    shutil.rmtree(out / "report", ignore_errors=True)


# libraries whose versions a manifest records (those that shape a build's bytes: tables, SQL, tokenizers, templates)
MANIFEST_PACKAGES = ("ctxbench", "pyarrow", "duckdb", "sqlglot", "tiktoken", "tokenizers", "litellm", "quicktok-v1",
                     "pydantic", "pyyaml", "great-expectations", "numpy")


def version(pkg: str) -> str:
    """Installed version of a distribution ("" when absent; ctxbench's own version in a source checkout)."""
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return __version__ if pkg == "ctxbench" else ""


def versions(*pkgs: str) -> dict[str, str]:
    """``{package: version}`` for the manifest."""
    return {p: version(p) for p in pkgs}


def check_lengths(v: list[int], low: int, high: int, example: str) -> list[int]:
    """Validate tiers (tokens): at least one, each in ``low..high``; returns them sorted and deduplicated.
    Raises ValueError naming the bad length (pydantic reports it under --lengths)."""
    if not v:
        raise ValueError(f"give at least one length (--lengths {example})")
    for x in v:
        if x < low or x > high:
            raise ValueError(f"length {x} is outside {low}..{high} tokens")
    return sorted(set(v))


def check_choices(v: list[str], allowed: tuple[str, ...], what: str) -> list[str]:
    """Validate a list of words against ``allowed`` (at least one); returns it deduplicated in order. Raises
    ValueError naming the unknown word and the choices."""
    for s in v:
        if s not in allowed:
            raise ValueError(f"unknown {what} {s!r}: use {', '.join(allowed)}")
    if not v:
        raise ValueError(f"give at least one {what} ({', '.join(allowed)})")
    return list(dict.fromkeys(v))
