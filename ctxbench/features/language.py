"""Language of contexts and questions (LURCH's inclusion criteria: "We retain only English-language instances ...
automatic language detection otherwise"), detected with langdetect, seeded so the same text always gets the same
code.

langdetect reads at most its first 10,000 characters of a text; a long context is instead sampled in
``windows`` evenly spaced slices of ``window_chars`` characters (beginning, middle and end all count), so a
haystack whose opening differs from its body is still detected by its body. Codes are langdetect's (ISO 639-1,
``zh-cn`` / ``zh-tw`` for Chinese, and ``zh`` for Han-only text langdetect takes for another language, as it does
classical Chinese); None where no language is detectable (e.g. numbers only).

Codes are kept across builds and nightly runs in ``$CTXBENCH_HOME/cache/language.sqlite`` (SQLite, shared by
processes), keyed by the BLAKE2b digest of the sample with langdetect's version, the seed and this module's
detection rule (:data:`RULE`), so a rebuild detects only samples it has never seen; the store changes no code
(same sample, same seeded detection). ``CTXBENCH_LANGUAGE_CACHE=off`` keeps codes in memory only.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections import OrderedDict
from functools import lru_cache
from ctxbench.core import sidecar
from ctxbench.core.config import cache_dir
from ctxbench.core.sidecar import SidecarError
from ctxbench.models.cache import open_wal

SEED = 0
RULE = "langdetect seeded, zh for Han-only text (v1)"  # changes with _detect's rule: the store's keys follow it


def _sample(text: str, windows: int, window_chars: int) -> str:
    if len(text) <= windows * window_chars:
        return text
    step = (len(text) - window_chars) / (windows - 1)
    return "\n".join(text[int(i * step): int(i * step) + window_chars] for i in range(windows))


def _han_only(sample: str) -> bool:
    """Han ideographs are most of the letters and there is no Hangul or kana: Chinese, whatever langdetect says
    (it reads classical Chinese as ``ko`` in about a third of 200K-character slices of the Song-Yuan Xue'an)."""
    letters = han = 0
    for ch in sample:
        if ch.isalpha():
            letters += 1
            o = ord(ch)
            if 0xAC00 <= o <= 0xD7AF or 0x1100 <= o <= 0x11FF or 0x3040 <= o <= 0x30FF:
                return False
            han += 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0x20000 <= o <= 0x2FFFF
    return letters > 0 and han / letters > 0.5


class _Store:
    """Sample digest -> code, in ``$CTXBENCH_HOME/cache/language.sqlite`` (module docstring); every failure to
    read or write it leaves detection as it is (a store that cannot be opened is left aside)."""

    def __init__(self):
        self._con: sqlite3.Connection | None = None
        self._path: str | None = None
        self._lock = threading.Lock()
        self._prefix = b""

    def _open(self) -> sqlite3.Connection | None:
        if os.environ.get("CTXBENCH_LANGUAGE_CACHE", "").strip().lower() in ("off", "0", "false", "no"):
            return None
        path = str(cache_dir() / "language.sqlite")
        if self._path != path:  # (another CTXBENCH_HOME: another store)
            self._path, self._con = path, None
            try:
                import importlib.metadata

                version = importlib.metadata.version("langdetect")
            except Exception:  # noqa: BLE001
                version = "?"
            self._prefix = f"{version}|{SEED}|{RULE}|".encode()
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                con = sqlite3.connect(path, timeout=30, check_same_thread=False, isolation_level=None)
                open_wal(con, 30.0, ("CREATE TABLE IF NOT EXISTS codes (key BLOB PRIMARY KEY, code TEXT)",))
                self._con = con
            except sqlite3.Error:
                self._con = None
        return self._con

    def key(self, sample: str) -> bytes:
        return hashlib.blake2b(self._prefix + sample.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def get_many(self, samples: list[str]) -> dict[str, str | None]:
        """The stored codes of the samples found (a missing sample is absent from the result)."""
        out: dict[str, str | None] = {}
        with self._lock:
            con = self._open()
            if con is None or not samples:
                return out
            keys = {self.key(s): s for s in samples}
            try:
                ks = list(keys)
                for i in range(0, len(ks), 500):
                    chunk = ks[i:i + 500]
                    q = f"SELECT key, code FROM codes WHERE key IN ({','.join('?' for _ in chunk)})"
                    for k, code in con.execute(q, chunk):
                        out[keys[k]] = code
            except sqlite3.Error:
                pass
        return out

    def put(self, sample: str, code: str | None) -> None:
        with self._lock:
            con = self._open()
            if con is None:
                return
            try:
                con.execute("INSERT OR IGNORE INTO codes VALUES (?, ?)", (self.key(sample), code))
            except sqlite3.Error:
                pass


_STORE = _Store()


@lru_cache(maxsize=4096)  # keyed by the sample (at most windows × window_chars characters), not the context
def _detect(sample: str) -> str | None:
    got = _STORE.get_many([sample])
    if sample in got:
        return got[sample]
    code = _detect_now(sample)
    _STORE.put(sample, code)
    return code


def _detect_now(sample: str) -> str | None:
    from langdetect import DetectorFactory, LangDetectException, detect

    DetectorFactory.seed = SEED
    try:
        code = detect(sample)
    except LangDetectException:
        code = None
    if _han_only(sample) and not (code or "").startswith("zh"):
        return "zh"
    return code


def warm_up() -> None:
    """Start the build's language helper process (ctxbench.core.sidecar) and have it load langdetect's profiles, so
    that :func:`prefetch_languages` hands it the contexts later. Builds call this at their first stage."""
    if sidecar.start("language") is not None:
        sidecar.submit("ctxbench.features.language:load_profiles", helper="language")


def load_profiles() -> bool:
    """Import langdetect and load its language profiles (what the language helper does first)."""
    _detect_now("profiles")
    return True


def detect_samples(samples: list[str]) -> list[str | None]:
    """:func:`_detect` of each sample (what the build's helper process runs, ctxbench.core.sidecar)."""
    return [_detect(s) for s in samples]


# samples handed to the helper process by prefetch_languages: sample -> (pending answer, index in its batch); its
# answers, once read (instances sharing a context ask again). Each keeps the most recent RESOLVED_KEPT (a sample
# whose text is never asked for, e.g. a context whose every instance was quarantined, is forgotten in time)
_PREFETCHED: OrderedDict[str, tuple] = OrderedDict()
_RESOLVED: OrderedDict[str, str | None] = OrderedDict()
RESOLVED_KEPT = 4096


def prefetch_languages(texts: list[str | None], windows: int = 5, window_chars: int = 2000) -> None:
    """Have the build's helper process (ctxbench.core.sidecar, when one runs) detect the languages of ``texts`` while
    this process goes on; :func:`detect_language` then takes its answer instead of detecting again (same code,
    same seeded result). Without a helper this does nothing."""
    if sidecar.current("language") is None:
        return
    samples = list(dict.fromkeys(_sample(t, max(2, windows), window_chars) for t in texts if t and t.strip()))
    samples = [s for s in samples if s not in _PREFETCHED and s not in _RESOLVED]
    for s, code in _STORE.get_many(samples).items():  # detected by an earlier build
        _RESOLVED[s] = code
    for s in samples:
        if s not in _RESOLVED:  # one request each: answers come as they are ready
            _PREFETCHED[s] = (sidecar.submit("ctxbench.features.language:detect_samples", [s], helper="language"), 0)
    while len(_RESOLVED) > RESOLVED_KEPT:
        _RESOLVED.popitem(last=False)
    while len(_PREFETCHED) > RESOLVED_KEPT:
        _PREFETCHED.popitem(last=False)


def detect_language(text: str | None, windows: int = 5, window_chars: int = 2000) -> str | None:
    """langdetect code of ``text`` (characters, not tokens: ``windows`` slices of ``window_chars`` characters of
    a long text), with ``DetectorFactory.seed`` fixed; None for empty or undetectable text."""
    if not text or not text.strip():
        return None
    sample = _sample(text, max(2, windows), window_chars)
    if sample in _RESOLVED:
        return _RESOLVED[sample]
    got = _PREFETCHED.pop(sample, None)
    if got is not None:
        try:
            code = got[0].result()[got[1]]
        except SidecarError:
            return _detect(sample)  # the helper could not: detect here
        _RESOLVED[sample] = code
        while len(_RESOLVED) > RESOLVED_KEPT:
            _RESOLVED.popitem(last=False)
        return code
    return _detect(sample)


def language_columns(instance: dict) -> dict[str, str | None]:
    """``{"language": code of the context, "question_language": code of the question}`` of an instance row
    (SCHEMA.md ``language``; ``question_language`` is added beside it). Every track calls this when it writes its
    instances; contexts shared by several questions are detected once (memoised)."""
    return {"language": detect_language(instance.get("context")),
            "question_language": detect_language(instance.get("question"))}


def language_matches(code: str | None, wanted: str) -> bool:
    """Whether a stored code matches a filter: equal, or the filter is its base language (``zh`` matches
    ``zh-cn`` and ``zh-tw``). Case-insensitive."""
    if code is None:
        return False
    code, wanted = code.lower(), wanted.lower()
    return code == wanted or code.split("-")[0] == wanted
