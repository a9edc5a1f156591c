"""The garbage collector around latency-bound work: :func:`frozen_heap`.

A process that has just imported ctxbench's dependencies (litellm's price table, pyarrow, pydantic models, the
tracks) holds a few million objects that the cyclic garbage collector has not yet promoted. Its first full
collection then walks all of them: measured at 0.34 s on 2 cores, in the middle of an evaluation's first second,
during which the event loop answers nothing and every call in flight waits. :func:`frozen_heap` moves the objects
that exist when it is entered to the collector's permanent generation (:func:`gc.freeze`) and back when it ends
(:func:`gc.unfreeze`), so collections during the block walk only the objects made in it; the frozen ones are
collected as before afterwards (a cycle among them that became garbage meanwhile is freed then, not lost).
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

_lock = threading.Lock()
_holders = 0  # blocks inside frozen_heap now (threads, nested calls): the heap is unfrozen when the last one ends
_ours = False  # whether the objects frozen now were frozen by frozen_heap (never unfreeze someone else's freeze)


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Freeze the garbage collector's view of the objects alive now for the duration of the block (module
    docstring). Nested and concurrent blocks (threads) share one freeze, lifted when the last of them ends; a
    heap someone else froze (:func:`gc.freeze` called outside this function, e.g. by a pre-forking server) is left
    as it is. Never raises."""
    global _holders, _ours
    with _lock:
        if _holders == 0:
            _ours = gc.get_freeze_count() == 0
            if _ours:
                gc.freeze()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _ours:
                gc.unfreeze()
                _ours = False
