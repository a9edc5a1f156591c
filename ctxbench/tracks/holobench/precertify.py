"""Certify's work on a HoloBench build done ahead in a helper process while the build goes on (issue 36). The
longest parts of the ``certify`` stage (:func:`ctxbench.tracks.holobench.verify.certify`) are reading each
distinct context back into rows (step 1), which depends on the context's text and the inverted templates alone,
and comparing those rows with the rows ``included_rows`` names (step 3), which adds that JSON text, the build's
seed and ``source.sqlite``. A large build hands each context to the helper ``certify`` (:mod:`ctxbench.core.sidecar`,
a fresh Python process) as soon as it is assembled, and each context's ``included_rows`` as soon as the gold stage
has written it; the helper parses and compares with the very functions of the ``certify`` stage
(:mod:`.precertify_helper`), with the grammar of the staged ``source.sqlite`` and templates, on the other core
while the main process assembles the next contexts and computes the gold answers.

The ``certify`` stage then asks for the results (:meth:`Ahead.parsed`) and uses a parse only for a context whose
stored text (read from ``instances.parquet``) is equal to the parsed text, character for character, and a rows
check only where the stored ``included_rows`` and the manifest's seed are equal to those checked too; and only
when the helper's grammar fingerprint (the inverted templates, dummy documents, declared types and the SHA-256 of
``source.sqlite``'s bytes: :meth:`~ctxbench.tracks.holobench.verify.Grammar.fingerprint`) is that of the grammar
certify loads from the written build. The results are functions of those inputs alone, so the certificates are
what the ``certify`` stage computes by itself, byte for byte, and still derived from the stored bytes; any other
context, a different grammar, or a helper that fails (or ``CTXBENCH_SIDECAR=off``) is worked out in the
``certify`` stage as before. The gold answers are always compared there.

Builds whose largest tier is under :data:`MIN_TOKENS` do not start the helper (its start-up, a Python process
importing the gold engines, costs more than their parse). Nor do builds on a machine with no core to spare
(:func:`spare_core`): there the helper's work, about a third more CPU time than the stage's own (its imports, the
grammar loaded twice), is taken from the build itself (measured on 2 cores under a test suite's load of 2.5–3:
warm rebuilds 1.35–1.79× with the helper against 1.16–1.49× without). ``CTXBENCH_CERTIFY_AHEAD``: ``auto`` (the default, as above), ``on`` (whatever the
load) or ``off``.
"""

from __future__ import annotations

import os
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxbench.core import sidecar

HELPER = "certify"
# the smallest largest tier whose contexts are parsed ahead (a 131,072-token context parses in about 0.1 s)
MIN_TOKENS = 131_072
_HELPER_MODULE = "ctxbench.tracks.holobench.precertify_helper"
# build directory (resolved) -> the parses started for it, taken by its certify stage
_AHEAD: dict[Path, "Ahead"] = {}


@dataclass
class AheadResult:
    """What the helper worked out: the ``fingerprint`` of its grammar, ``errors`` (context text -> the parse's
    error, None when every line parses; the rows stay in the helper),
    ``checks`` ((context text, included_rows JSON, seed) -> the rows check's reason, None when they agree) and
    ``answers`` ((context text, SQL, seed) -> SQLite's answer over the rows read back, None where it failed)."""

    fingerprint: str
    errors: dict[str, str | None]
    checks: dict[tuple[str, str, int], str | None]
    answers: dict[tuple[str, str, int], list | None]


class Ahead:
    """The contexts of one build handed to the helper (:meth:`add`, :meth:`add_instances`) and what it made of them
    (:meth:`parsed`)."""

    def __init__(self, db_id: str, source: Path, templates: Path | None):
        self.key = uuid.uuid4().hex  # the helper's state of this build
        self.grammar = (db_id, str(source), str(templates) if templates else None)
        self._texts: dict[str, int] = {}
        self._checks: dict[tuple[int, str, int], None] = {}
        self._sent: list[Future] = []
        # requests go to the helper from a thread of their own: writing a long context into the helper's pipe
        # waits while it parses the previous one, and the build does not
        self._sender = ThreadPoolExecutor(1, thread_name_prefix="precertify")

    def _submit(self, fn: str, *args: Any) -> None:
        # the sender reads each answer before it sends the next request: answers left unread would fill the
        # helper's stdout pipe (64 KiB, some 2,400 answers) and the helper, the sender and certify would wait on
        # each other for ever
        self._sent.append(self._sender.submit(_ask, f"{_HELPER_MODULE}:{fn}", *args))

    def add(self, text: str) -> None:
        """Hand one context's text to the helper to parse (a text already handed over is not sent again)."""
        if text not in self._texts:
            self._texts[text] = len(self._texts)
            self._submit("parse_ahead", self.key, *self.grammar, self._texts[text], text)

    def add_instances(self, text: str, included_json: str, seed: int, sqls: list[str]) -> None:
        """Have the helper check the rows of a context handed over with :meth:`add` against its instances'
        ``included_rows`` (``included_json``, as stored) with ``seed``, and answer their questions' ``sqls``."""
        k = (self._texts.get(text, -1), included_json, seed)
        if k[0] >= 0 and k not in self._checks:
            self._checks[k] = None
            self._submit("check_ahead", self.key, *k, list(sqls))

    def parsed(self) -> AheadResult | None:
        """What the helper made of every request (waits for it; module docstring); None when it could not (the
        helper then forgets this build's work)."""
        try:
            for f in self._sent:
                f.result()  # raises SidecarError where the helper failed
            fingerprint, errors, checks, answers = _ask(f"{_HELPER_MODULE}:collect_ahead", self.key)
        except sidecar.SidecarError:
            self.discard()
            return None
        finally:
            self._sender.shutdown(wait=False, cancel_futures=True)
        texts = list(self._texts)
        return AheadResult(fingerprint, {texts[i]: e for i, e in errors.items()},
                           {(texts[i], inc, seed): why for (i, inc, seed), why in checks.items()},
                           {(texts[i], sql, seed): a for (i, sql, seed), a in answers.items()})

    def discard(self) -> None:
        """Forget this build's work (the tasks not yet sent are cancelled and the helper drops what it kept; harmless when repeated)."""
        self._sender.shutdown(wait=False, cancel_futures=True)  # contexts not yet sent are not sent
        try:
            sidecar.submit(f"{_HELPER_MODULE}:drop_ahead", self.key, helper=HELPER).result()
        except sidecar.SidecarError:  # no helper left: nothing kept there
            pass


def _ask(target: str, *args: Any) -> Any:
    """``target``'s answer from the helper (waited for); raises SidecarError where it failed."""
    return sidecar.submit(target, *args, helper=HELPER).result()


def spare_core() -> bool:
    """Whether this machine has a core to spare for the helper: the load average over the last minute, this
    build's own threads included (about 1 to 2 while it assembles), is under the number of cores plus a half
    (True where the load average cannot be read)."""
    try:
        return os.getloadavg()[0] < (os.cpu_count() or 1) + 0.5
    except OSError:
        return True


def wanted(largest: int) -> bool:
    """Whether a build whose largest tier is ``largest`` tokens works ahead (module docstring;
    ``CTXBENCH_CERTIFY_AHEAD`` = ``auto``, ``on`` or ``off``)."""
    mode = os.environ.get("CTXBENCH_CERTIFY_AHEAD", "auto").strip().lower()
    if mode in ("off", "0", "false", "no"):
        return False
    return largest >= MIN_TOKENS and (mode in ("on", "1", "true", "yes") or spare_core())


def start(out: Path, db_id: str, source: Path, templates: Path | None, largest: int) -> Ahead | None:
    """Start parsing ahead for the build going to ``out`` (module docstring): the helper is started (or the
    running one reused) and the :class:`Ahead` the assembly hands contexts to is returned and kept for
    :func:`take`. None when the build does not work ahead (:func:`wanted`) or no helper runs (then ``certify``
    works everything out itself). ``source`` / ``templates``: the staged ``source.sqlite`` and templates copy (None:
    the shipped templates of ``db_id``)."""
    if not wanted(largest) or sidecar.start(HELPER) is None:
        return None
    # one build's work ahead per process: a build that stopped before its certify stage (or one still going in
    # another thread, whose certify then works everything out itself) leaves nothing behind here or in the helper
    while _AHEAD:
        _AHEAD.popitem()[1].discard()
    _AHEAD[Path(out).resolve()] = ahead = Ahead(db_id, source, templates)
    ahead._submit("drop_ahead", "")  # the helper imports the parser meanwhile
    return ahead


def current(build_dir: Path) -> Ahead | None:
    """The :class:`Ahead` started for ``build_dir`` (kept for :func:`take`), or None."""
    return _AHEAD.get(Path(build_dir).resolve())


def take(build_dir: Path) -> Ahead | None:
    """The :class:`Ahead` started for ``build_dir`` by this process's build (removed from the registry), or
    None."""
    return _AHEAD.pop(Path(build_dir).resolve(), None)
