"""A Dask worker preload (distributed's ``preload``: ``dask worker --preload ctxbench.run.daskexit``, or
``preload=[PRELOAD]`` given to a ``LocalCluster``) that lets a worker process of ctxbench end within the nanny's
close timeout.

Why: when a cluster closes, each nanny asks its worker process to stop and kills it when it has not ended within
4 s (``Nanny.kill``: 0.8 of its 5 s close timeout, not configurable through ``LocalCluster.close`` or prefect-dask;
prefect-dask issue #20). A worker that ran an evaluation holds litellm, Prefect's task engine, pyarrow and
ctxbench: some 5,000 modules and 600,000 objects tracked by the garbage collector. Everything in Python had ended
when the nanny killed it (its threads joined, its atexit handlers run); the process was still in the
interpreter's finalization, whose cyclic garbage collections walk every one of those objects, several seconds on
two busy cores. :func:`dask_teardown` moves the objects alive at the worker's close to the collector's permanent
generation (:func:`gc.freeze`), so finalization does not walk them again: the memory goes back to the system with
the process anyway. Reference counting still frees objects and closes files as before; only the cycle search at
exit is skipped. Measured here (load 6–9): the flow's two worker processes went from killed after 4 s to ended
within 0.1 s of their close.
"""

from __future__ import annotations

import gc
from typing import Any

PRELOAD = __name__  # the name to give distributed's ``preload``


def dask_teardown(worker: Any) -> None:
    """Called by distributed when ``worker`` closes. A worker started by a nanny runs in a process of its own that
    ends with it: freeze what it holds (module docstring). A worker without a nanny (``LocalCluster(processes=
    False)``: threads of the calling process) is left alone, since that process goes on."""
    if getattr(worker, "nanny", None):
        gc.freeze()
