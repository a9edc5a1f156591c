"""The filter that keeps Prefect's crash records of a Ctrl-C off the terminal."""

from __future__ import annotations

import logging


class _InterruptCrashFilter:
    """Drops Prefect's records of a run stopped by Ctrl-C ("Crash detected! Execution was aborted by an interrupt
    signal.", or a record carrying the KeyboardInterrupt): ctxbench says ``interrupted`` and exits 130 itself."""

    def filter(self, rec) -> bool:
        e = rec.exc_info[1] if rec.exc_info else None
        return not (isinstance(e, KeyboardInterrupt) or "aborted by an interrupt signal" in rec.getMessage())


_CRASH_FILTER = _InterruptCrashFilter()


def quiet_interrupt_crash() -> None:
    """Install :class:`_InterruptCrashFilter` on Prefect's loggers and their handlers (every other record stays)."""
    f = _CRASH_FILTER  # one instance: logging's addFilter skips a filter already there, so repeated runs add none
    names = ["prefect", *[n for n in logging.root.manager.loggerDict if n.startswith("prefect.")]]
    for lg in [logging.getLogger(n) for n in names] + [logging.root]:
        if lg is not logging.root:
            lg.addFilter(f)
        for h in lg.handlers:
            h.addFilter(f)
