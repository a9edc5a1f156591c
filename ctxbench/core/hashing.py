"""Stable hashing and seeded randomness (hashlib, never ``hash()``), so equal configurations build equal bytes."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: the canonical form every hash is taken over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


class Encoded:
    """A part of :func:`stable_hash` whose canonical JSON is made once and reused: a context shared by many
    instances is encoded once instead of once per instance. ``Encoded(obj)`` hashes exactly as ``obj``."""

    __slots__ = ("data",)

    def __init__(self, obj: Any):
        self.data = canonical_json(obj).encode("utf-8")


def stable_hash(*parts: Any, length: int = 16) -> str:
    """Hex SHA-256 prefix of the canonical JSON of ``parts`` (``length`` hex characters); a part may be given
    :class:`Encoded`."""
    if not any(isinstance(p, Encoded) for p in parts):
        return hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).hexdigest()[:length]
    h = hashlib.sha256(b"[")  # the canonical JSON of a list: its items' canonical JSON joined by commas
    for i, p in enumerate(parts):
        if i:
            h.update(b",")
        h.update(p.data if isinstance(p, Encoded) else canonical_json(p).encode("utf-8"))
    h.update(b"]")
    return h.hexdigest()[:length]


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
