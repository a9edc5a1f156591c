"""Progress events of a run, for whoever shows them (``ctxbench run`` prints one line or bar per stage).

Library code calls :func:`emit` at the points a person waits on: each build stage as it starts, the model server
starting and ready, each model call answered (with the count and the total, from which the listener derives an
ETA), scoring and the report. With no listener an event costs one list lookup. Listeners are process-wide (the
Prefect and luigi engines run their tasks in threads of this process), added for a block with :func:`listening`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    """One progress event: ``stage`` is build, model, calls, score or report; ``detail`` says what (a stage name,
    a model); ``done``/``total`` count items (calls) where known."""

    stage: str
    detail: str = ""
    done: int | None = None
    total: int | None = None


_listeners: list[Callable[[Event], None]] = []
_lock = threading.Lock()


def emit(stage: str, detail: str = "", done: int | None = None, total: int | None = None) -> None:
    """Tell every listener (none: nothing happens). A listener's exception is not the run's: it is dropped."""
    if not _listeners:
        return
    ev = Event(stage, detail, done, total)
    for fn in list(_listeners):
        try:
            fn(ev)
        except Exception:  # noqa: BLE001  a display error never stops a run
            pass


@contextmanager
def listening(fn: Callable[[Event], None]) -> Iterator[None]:
    """Call ``fn`` with every event emitted in this process while the block runs."""
    with _lock:
        _listeners.append(fn)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(fn)
