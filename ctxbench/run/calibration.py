"""``ctxbench calibrate`` as a library call: tokens per character of a corpus for each tokenizer
(:func:`ctxbench.tokenizers.calibrate.calibrate`), stored as JSON beside a fetched corpus or where asked."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ctxbench.core.errors import InputError
from ctxbench.core.hashing import stable_hash
from ctxbench.core.storage import write_json
from ctxbench.sources.corpus import CORPUS_MANIFEST, load_corpus
from ctxbench.tokenizers.calibrate import Calibration, calibrate, spread


@dataclass
class CorpusCalibration:
    """One calibration run: the corpus id, one :class:`Calibration` per tokenizer (in the order asked), their
    spread (largest / smallest tokens per character) and the JSON file written (None when none was)."""

    corpus_id: str
    calibrations: list[Calibration]
    spread: float
    written: Path | None


def check_calibration_out(out: Path) -> None:
    """``--out`` of calibrate: a new file, or an earlier calibration, never a build's file or anything else.
    Raises InputError naming the file and what to do."""
    if out.is_dir():
        raise InputError(f"--out {out} is a directory: give a JSON file name, e.g. {out / 'calibration.json'}")
    if not out.parent.is_dir():
        raise InputError(f"--out {out}: its directory {out.parent} does not exist")
    if (out.parent / "manifest.json").exists():
        raise InputError(f"--out {out} is inside the build {out.parent}, which is immutable: write it elsewhere")
    if out.exists():
        try:
            ok = isinstance(json.loads(out.read_text(encoding="utf-8")).get("tokenizers"), list)
        except (ValueError, UnicodeDecodeError, AttributeError):
            ok = False
        if not ok:
            raise InputError(f"--out {out} exists and is not an earlier calibration: choose another file name")


def calibrate_corpus(corpus: Path, tokenizers: list[str] | None = None, exclude: list[str] | None = None,
                     out: Path | None = None) -> CorpusCalibration:
    """Calibrate ``tokenizers`` (default: every registered one) on the paragraphs of the corpus directory
    ``corpus`` less the volumes ``exclude``, and write ``{corpus_id, corpus_sha256, excluded, spread, tokenizers}``
    as JSON to ``out`` (checked first by :func:`check_calibration_out`), else to ``CORPUS/calibration.json`` for a
    fetched corpus (one with ``corpus.json``), else nowhere. Raises InputError (a bad --out, corpus or tokenizer)."""
    if out is not None:
        check_calibration_out(out)
    c = load_corpus(corpus, exclude=exclude or [])
    cals = calibrate(c.paragraphs(), tokenizers)
    target = out or (Path(corpus) / "calibration.json" if (Path(corpus) / CORPUS_MANIFEST).exists() else None)
    if target is not None:
        write_json({"corpus_id": c.corpus_id, "corpus_sha256": stable_hash(c.checksums(), length=64),
                    "excluded": sorted(c.excluded), "spread": spread(cals),
                    "tokenizers": [x.as_dict() for x in cals]}, target)
    return CorpusCalibration(c.corpus_id, cals, spread(cals), target)
