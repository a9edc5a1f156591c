"""Stable hashing and seeded randomness (hashlib, never ``hash()``), so equal configurations build equal bytes."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: the canonical form every hash is taken over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def stable_hash(*parts: Any, length: int = 16) -> str:
    """Hex SHA-256 prefix of the canonical JSON of ``parts`` (``length`` hex characters)."""
    h = hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).hexdigest()
    return h[:length]


def file_sha256(path) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def seeded_rng(*parts: Any) -> random.Random:
    """A ``random.Random`` seeded from the SHA-256 of ``parts`` (reproducible across processes and machines)."""
    seed = int(hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).hexdigest()[:16], 16)
    return random.Random(seed)
