"""Deprecated import path, kept for one release so that third-party tracks keep working: the track contract and
registry live in :mod:`ctxbench.core.track` since the layers change (docs/design/architecture.md, CHANGELOG.md).
``from ctxbench.tracks.base import Stage, Track, register_track`` still works; write
``from ctxbench.core.track import ...`` in new code."""

import warnings

from ctxbench.core.track import *  # noqa: F401,F403
from ctxbench.core.track import __all__  # noqa: F401

warnings.warn("ctxbench.tracks.base moved to ctxbench.core.track (CHANGELOG.md); the old path goes in the next release",
              DeprecationWarning, stacklevel=2)
