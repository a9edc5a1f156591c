"""The engines' logs of ``ctxbench run`` go to a file, never to the terminal (issue 32).

Prefect logs a failed task or flow run with its traceback (``Task run failed with exception``, ``Encountered
exception during execution``) through its console handler, and luigi's worker logs a failed task's traceback
through the handler luigi adds on its first ``luigi.build``; both before the exception reaches ctxbench, which then
says it in one line. :func:`engine_log` sends every record of the engines' loggers (``prefect*``, ``luigi*``,
``uvicorn*``, ``fastapi*``) to a file for the duration of a run and keeps them off every console handler, so the
terminal shows ctxbench's own lines only; records of other loggers are left where they went.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

ENGINE_LOGGERS = ("prefect", "luigi", "uvicorn", "fastapi")


def is_engine_record(rec: logging.LogRecord) -> bool:
    """Whether a log record comes from one of :data:`ENGINE_LOGGERS` (the logger or a child of it;
    ``luigi-interface`` included)."""
    return rec.name.split(".", 1)[0].split("-", 1)[0] in ENGINE_LOGGERS


class _Only(logging.Filter):
    def filter(self, rec: logging.LogRecord) -> bool:
        return is_engine_record(rec)


class _Not(logging.Filter):
    def filter(self, rec: logging.LogRecord) -> bool:
        return not is_engine_record(rec)


def _console(h: logging.Handler) -> bool:
    return isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)


@contextlib.contextmanager
def engine_log(path: str | Path) -> Iterator[Path]:
    """Context manager: the engines' log records go to ``path`` (appended; created with its directory when the
    block starts, so the file the run's help names is there even when no engine logged anything) and to no console
    handler while the block runs; yields the path. Call it after the engine
    is imported (Prefect configures its handlers on import). luigi is told not to add its own console handler
    (``[core] no_configure_logging``). Everything is restored on exit."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = logging.FileHandler(path, encoding="utf-8")
    fh.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    fh.addFilter(_Only())
    off = _Not()
    names = [n for n in list(logging.root.manager.loggerDict) if n.split(".", 1)[0].split("-", 1)[0] in ENGINE_LOGGERS]
    loggers = [logging.root, *(logging.getLogger(n) for n in names)]
    filtered = [h for lg in loggers for h in lg.handlers if _console(h)]
    own = [lg for lg in loggers[1:] if not lg.propagate]  # records that never reach the root's file handler
    for h in filtered:
        h.addFilter(off)
    logging.root.addHandler(fh)
    for lg in own:
        lg.addHandler(fh)
    if "luigi" in sys.modules:  # its first build would add a console handler of its own
        import luigi.configuration

        cfg = luigi.configuration.get_config()
        if not cfg.has_section("core"):
            cfg.add_section("core")
        cfg.set("core", "no_configure_logging", "true")
    try:
        yield path
    finally:
        for lg in own:
            lg.removeHandler(fh)
        logging.root.removeHandler(fh)
        for h in filtered:
            h.removeFilter(off)
        fh.close()


def write_traceback(path: str | Path, e: BaseException) -> None:
    """Append ``e``'s traceback to the log ``path`` (an unexpected error of a run: the terminal gets one line)."""
    with contextlib.suppress(OSError):
        with open(path, "a", encoding="utf-8") as f:
            f.write("".join(traceback.format_exception(type(e), e, e.__traceback__)))
