"""Text corpora as ordered volumes of paragraphs: local files, or the Chinese Text Project (ctext.org) API.

Method: "Retrieval and Multi-Hop Reasoning in 1M-Token Context Windows: Evaluating LLMs on Classical Chinese Text"
(2026), section 3.1: the volumes (卷) of a compilation are concatenated in canonical order to form the master
haystack, leaving out the volumes named by the user (the study drops the needle subjects' own 學案).

* Canonical order is the volume number parsed from the name, never the file name: ``卷首`` (front matter) is 0,
  ``卷一`` … ``卷一百`` are 1 … 100 (Chinese numerals read with cn2an), else the first Arabic number in the name
  (``Chapter 12``, ``vol_3``). Names without any number keep name order after the numbered ones.
* A paragraph is a non-blank line with surrounding whitespace removed (the layout of the shared corpora and of the
  API's ``fulltext`` list); paragraphs are kept as units all the way into haystacks.
* Every volume carries the SHA-256 of its source bytes (the file, or the API's JSON paragraphs as UTF-8).

``fetch_corpus`` writes a corpus directory: ``volumes/NNN_<name>.txt`` (canonical order; one paragraph a line)
and ``corpus.json`` (source, order, per-volume sha256, characters, paragraphs, excluded volumes). ``load_corpus``
reads either such a directory or a plain directory of ``.txt`` files.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from ..errors import InputError
from ..hashing import stable_hash

CORPUS_MANIFEST = "corpus.json"
_CN_DIGITS = "〇零一二三四五六七八九十百千两兩"
_JUAN = re.compile(rf"卷([{_CN_DIGITS}]+|首)")
_ARABIC = re.compile(r"\d+")


@dataclass
class Volume:
    """One volume: ``name`` (file stem or API title), ``number`` (canonical order key; None when the name holds
    none), ``paragraphs`` (list of str), ``sha256`` of the source bytes, ``source`` (path or URN)."""

    name: str
    number: int | None
    paragraphs: list[str]
    sha256: str
    source: str = ""

    @property
    def heading(self) -> str:
        return self.paragraphs[0] if self.paragraphs else ""

    @property
    def chars(self) -> int:
        return sum(len(p) for p in self.paragraphs)


@dataclass
class Corpus:
    """Volumes in canonical order (excluded ones removed) and what was excluded (``excluded``: name -> the
    ``--exclude`` word that matched)."""

    corpus_id: str
    volumes: list[Volume]
    excluded: dict[str, str] = field(default_factory=dict)
    source: str = ""

    def paragraphs(self) -> list[str]:
        """All paragraphs of all volumes, in canonical order."""
        return [p for v in self.volumes for p in v.paragraphs]

    def text(self) -> str:
        """The master haystack: paragraphs joined by newlines (one paragraph a line)."""
        return "".join(p + "\n" for v in self.volumes for p in v.paragraphs)

    def checksums(self) -> dict[str, str]:
        return {v.name: v.sha256 for v in self.volumes}


def volume_number(name: str) -> int | None:
    """Canonical order key of a volume name: 卷首 → 0, 卷<Chinese numeral> → its value (cn2an), else the first
    Arabic number in the name, else None. The last 卷 label in the name wins (``第022卷_卷二十二`` → 22)."""
    import cn2an

    labels = _JUAN.findall(name)
    for lab in reversed(labels):
        if lab == "首":
            return 0
        try:
            return int(cn2an.cn2an(lab, "smart"))
        except (ValueError, KeyError, TypeError):
            continue
    m = _ARABIC.search(name)
    return int(m.group()) if m else None


def split_paragraphs(text: str) -> list[str]:
    """Non-blank lines with surrounding whitespace (ASCII and full-width) removed."""
    return [s for s in (line.strip() for line in text.splitlines()) if s]


def order_volumes(volumes: list[Volume]) -> list[Volume]:
    """Volumes sorted by number (numbered first), then by name. Raises InputError when two volumes share a number
    (e.g. a duplicated file), naming both."""
    seen: dict[int, str] = {}
    for v in volumes:
        if v.number is not None:
            if v.number in seen:
                raise InputError(f"volumes {seen[v.number]!r} and {v.name!r} both have number {v.number}: "
                                 f"remove one or rename it")
            seen[v.number] = v.name
    return sorted(volumes, key=lambda v: (v.number is None, v.number if v.number is not None else 0, v.name))


def _exclusion_match(v: Volume, word: str) -> bool:
    w = word.strip()
    if not w:
        return False
    if w in (v.name, Path(v.source).name if v.source else None):
        return True
    if _JUAN.fullmatch(w) or w.isdigit():  # a label (卷八十一) or a number names a volume by number only
        return v.number is not None and volume_number(w) == v.number
    # a title such as 西山真氏學案: matched in the volume's heading line
    return len(w) >= 2 and w in v.heading


def apply_exclusions(volumes: list[Volume], exclude: Iterable[str]) -> tuple[list[Volume], dict[str, str]]:
    """Remove the volumes named by ``exclude`` (a volume name or file name, a volume label such as ``卷八十一`` or
    its number, or a title found in the volume's heading line). Returns (kept, {excluded name: matching word}).
    Raises InputError when a word matches no volume, or when every volume would be excluded."""
    words = [w for w in exclude if w and w.strip()]
    kept, excluded = [], {}
    used = set()
    for v in volumes:
        hit = next((w for w in words if _exclusion_match(v, w)), None)
        if hit is None:
            kept.append(v)
        else:
            excluded[v.name] = hit
            used.add(hit)
    unused = [w for w in words if w not in used]
    if unused:
        raise InputError(f"--exclude {', '.join(unused)}: no volume matches (give a volume name, a label such as "
                         f"卷八十一, a number, or a title from the volume's first line)")
    if volumes and not kept:
        raise InputError(f"--exclude {', '.join(words)} removes every volume of the corpus")
    return kept, excluded


def read_local_volumes(directory: str | Path) -> list[Volume]:
    """Every ``*.txt`` file of ``directory`` (not recursive) as a volume, unordered. Raises InputError when the
    directory is missing or holds no ``.txt`` file, or a file is not UTF-8."""
    import hashlib

    d = Path(directory)
    if not d.is_dir():
        raise InputError(f"corpus {d} is not a directory: give a directory of UTF-8 .txt files (one per volume)")
    files = sorted(d.glob("*.txt"))
    if not files:
        raise InputError(f"corpus {d} holds no .txt file: give a directory of UTF-8 .txt files (one per volume)")
    vols = []
    for f in files:
        raw = f.read_bytes()
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise InputError(f"corpus file {f} is not UTF-8 ({e}): convert it to UTF-8") from None
        vols.append(Volume(f.stem, volume_number(f.stem), split_paragraphs(text), hashlib.sha256(raw).hexdigest(),
                           str(f)))
    return vols


def load_corpus(path: str | Path, exclude: Iterable[str] = ()) -> Corpus:
    """A corpus from a directory: one written by :func:`fetch_corpus` (its ``corpus.json`` order and checksums
    are used and checked) or any directory of ``.txt`` volumes (ordered by :func:`volume_number`).
    ``exclude`` names volumes to leave out (see :func:`apply_exclusions`). Raises InputError for a missing or
    empty directory, a non-UTF-8 file, a checksum that no longer matches, or an exclusion that matches nothing."""
    d = Path(path)
    man = d / CORPUS_MANIFEST
    if man.exists():
        meta = json.loads(man.read_text(encoding="utf-8"))
        vols = []
        for e in meta["volumes"]:
            f = d / e["file"]
            text = f.read_text(encoding="utf-8")
            paras = split_paragraphs(text)
            if stable_hash(paras, length=64) != e["paragraphs_sha256"]:
                raise InputError(f"{f} changed since it was fetched (paragraph checksum differs): fetch it again")
            vols.append(Volume(e["name"], e["number"], paras, e["sha256"], e.get("source", "")))
        corpus_id = meta["corpus_id"]
        prior = dict(meta.get("excluded", {}))
        source = meta.get("source", str(d))
    else:
        vols = order_volumes(read_local_volumes(d))
        corpus_id = d.name if d.name != "volumes" else d.parent.name
        prior, source = {}, str(d)
    kept, excluded = apply_exclusions(vols, exclude)
    return Corpus(corpus_id, kept, {**prior, **excluded}, source)


# ---------------------------------------------------------------- ctext.org API client

class CtextClient:
    """Client of the Chinese Text Project API (documented at ctext.org/tools/api): ``GET {base_url}/gettext?urn=``
    returns ``{"title": ..., "fulltext": [paragraph, ...]}`` for a leaf section or ``{"title": ...,
    "subsections": [urn, ...]}`` for a container; an error is ``{"error": {"code": ..., "description": ...}}``.
    ``apikey`` and ``remap`` (e.g. ``gb`` for simplified characters) are passed as the API's query parameters.
    The base URL is required (no host is built in)."""

    def __init__(self, base_url: str, apikey: str | None = None, remap: str | None = None, timeout_s: float = 60.0,
                 retries: int = 3):
        import httpx

        self.base_url = base_url.rstrip("/")
        self.params = {k: v for k, v in (("apikey", apikey), ("remap", remap)) if v}
        self.retries = retries
        self._http = httpx.Client(timeout=timeout_s)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def call(self, function: str, **params) -> dict:
        """One API call; returns the JSON object. Raises InputError with the API's error code and description, or
        on a non-JSON answer; retries transport errors and 5xx answers ``retries`` times."""
        import time

        import httpx

        url = f"{self.base_url}/{function}"
        last = ""
        for attempt in range(self.retries + 1):
            try:
                r = self._http.get(url, params={**params, **self.params})
                if r.status_code >= 500:
                    last = f"HTTP {r.status_code}"
                else:
                    try:
                        data = r.json()
                    except ValueError:
                        raise InputError(f"ctext {function} {params}: answer is not JSON (HTTP {r.status_code}): "
                                         f"check --base-url") from None
                    if isinstance(data, dict) and "error" in data:
                        err = data["error"] if isinstance(data["error"], dict) else {"description": data["error"]}
                        raise InputError(f"ctext {function} {params}: {err.get('code', 'error')}: "
                                         f"{err.get('description', '')}")
                    if not isinstance(data, dict):
                        raise InputError(f"ctext {function} {params}: expected a JSON object, got {type(data).__name__}")
                    return data
            except httpx.TransportError as e:
                last = f"{type(e).__name__}: {e}"
            if attempt < self.retries:
                time.sleep(min(0.2 * 2 ** attempt, 5.0))
        raise InputError(f"ctext {function} {params}: failed after {self.retries + 1} attempts ({last}): check "
                         f"--base-url and the network")

    def gettext(self, urn: str) -> dict:
        return self.call("gettext", urn=urn)

    def paragraphs(self, urn: str) -> tuple[str, list[str]]:
        """(title, every paragraph of ``urn`` in order), following subsections depth-first."""
        data = self.gettext(urn)
        title = data.get("title") or urn
        paras: list[str] = []
        for p in data.get("fulltext") or []:
            paras.extend(split_paragraphs(str(p)))
        for sub in data.get("subsections") or []:
            paras.extend(self.paragraphs(sub)[1])
        return title, paras

    def volumes(self, urn: str) -> list[Volume]:
        """The subsections of the book ``urn`` as volumes (each with all its paragraphs); a book without
        subsections is one volume. Raises InputError when the book has no text."""
        import hashlib

        data = self.gettext(urn)
        subs = data.get("subsections") or []
        units = [(urn, data)] if not subs else [(s, None) for s in subs]
        vols = []
        for sub, pre in units:
            if pre is not None:
                title = pre.get("title") or sub
                paras = [q for p in pre.get("fulltext") or [] for q in split_paragraphs(str(p))]
            else:
                title, paras = self.paragraphs(sub)
            raw = json.dumps(paras, ensure_ascii=False).encode("utf-8")
            vols.append(Volume(title, volume_number(title), paras, hashlib.sha256(raw).hexdigest(), sub))
        if not any(v.paragraphs for v in vols):
            raise InputError(f"ctext {urn}: the book has no text (no fulltext in any subsection)")
        return vols


def _safe_name(name: str) -> str:
    s = re.sub(r"[\\/:*?\"<>|\s]+", "_", name).strip("_.")
    return s[:80] or "volume"


def fetch_corpus(out: str | Path, *, local: str | Path | None = None, urn: str | None = None,
                 base_url: str | None = None, apikey: str | None = None, remap: str | None = None,
                 exclude: Iterable[str] = (), corpus_id: str | None = None) -> Corpus:
    """Fetch a corpus into the directory ``out`` (module docstring): from the local directory ``local``, or from
    the ctext API (``urn`` of the book at ``base_url``). Volumes are put in canonical order, the ``exclude``d ones
    left out (and listed in ``corpus.json``), each with its SHA-256. ``out`` is replaced atomically. Raises
    InputError for a bad source, an exclusion that matches nothing, or neither/both of ``local`` and ``urn``."""
    from ..storage import write_json

    if (local is None) == (urn is None):
        raise InputError("give exactly one source: --local DIR (a directory of .txt volumes) or --urn URN with "
                         "--base-url URL (the ctext API)")
    if local is not None:
        vols = read_local_volumes(local)
        src = str(Path(local).resolve())
        cid = corpus_id or (Path(local).name if Path(local).name != "volumes" else Path(local).resolve().parent.name)
    else:
        if not base_url:
            raise InputError("--urn needs --base-url: the ctext API's address (e.g. the API root of ctext.org)")
        with CtextClient(base_url, apikey, remap) as c:
            vols = c.volumes(urn)
        src = f"ctext:{urn}"
        cid = corpus_id or _safe_name(urn.split(":")[-1])
    out = Path(out)
    if local is not None:
        lr, orr = Path(local).resolve(), out.resolve()
        if lr == orr or orr in lr.parents:
            raise InputError(f"--out {out} holds the source --local {local}: writing the corpus there would delete "
                             f"the source; choose another --out")
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / CORPUS_MANIFEST).exists())):
        raise InputError(f"--out {out} exists and is not a corpus directory (no {CORPUS_MANIFEST}): it would be "
                         f"replaced; choose a new or empty --out")
    vols = order_volumes(vols)
    kept, excluded = apply_exclusions(vols, exclude)
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "volumes").mkdir(parents=True)
    entries = []
    for i, v in enumerate(kept):
        fname = f"volumes/{i:03d}_{_safe_name(v.name)}.txt"
        (tmp / fname).write_text("".join(p + "\n" for p in v.paragraphs), encoding="utf-8")
        entries.append({"name": v.name, "number": v.number, "file": fname, "sha256": v.sha256, "source": v.source,
                        "paragraphs": len(v.paragraphs), "chars": v.chars,
                        "paragraphs_sha256": stable_hash(v.paragraphs, length=64)})
    write_json({"corpus_id": cid, "source": src, "volumes": entries,
                "excluded": excluded, "order": "volume number (卷首 = 0, 卷一 = 1, ...), then name"},
               tmp / CORPUS_MANIFEST)
    if out.exists():
        old = out.with_name(f".{out.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.rename(out)
    return Corpus(cid, kept, excluded, src)


def corpus_summary(c: Corpus) -> dict:
    """Counts for printing and manifests: volumes, paragraphs, characters, excluded names, per-volume sha256."""
    return {"corpus_id": c.corpus_id, "volumes": len(c.volumes), "paragraphs": sum(len(v.paragraphs) for v in c.volumes),
            "chars": sum(v.chars for v in c.volumes), "excluded": c.excluded, "sha256": c.checksums()}


__all__ = ["Corpus", "CtextClient", "Volume", "apply_exclusions", "corpus_summary", "fetch_corpus", "load_corpus",
           "order_volumes", "read_local_volumes", "split_paragraphs", "volume_number"]
