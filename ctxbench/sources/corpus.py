"""Text corpora as ordered volumes of paragraphs: local files, or the Chinese Text Project (ctext.org) API.

Method: "Retrieval and Multi-Hop Reasoning in 1M-Token Context Windows: Evaluating LLMs on Classical Chinese Text"
(2026), section 3.1: the volumes (卷) of a compilation are concatenated in canonical order to form the master
haystack, leaving out the volumes named by the user (the study drops the needle subjects' own 學案).

* Canonical order is the volume number read from the name (:func:`volume_key`), never the name's code points:
  ``卷首`` (front matter) first, ``卷一`` … ``卷一百`` (also ``卷之一``, ``卷第十二``, ``第十二卷``, ``卷12``, ``巻三``),
  halves ``卷一上`` < ``卷一中`` < ``卷一下`` after their number, ``卷末`` (back matter) last; else a word label
  (``Chapter 12``, ``vol_3``, ``Book IV``) or the first Arabic number after the prefix every name shares. A corpus
  where some volume's number cannot be read is refused with an error naming those files (rename them, e.g. 序 →
  卷首); a directory whose names hold no number and no volume label at all (a collection of separate works, such
  as novels) is read in file-name order, and ``corpus.json`` says so.
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
from typing import NamedTuple, Self

from ctxbench.core.errors import InputError
from ctxbench.core.hashing import stable_hash
from ctxbench.core.outdir import check_out_dir
from ctxbench.core.storage import write_json

CORPUS_MANIFEST = "corpus.json"
ORDER_BY_NUMBER = "volume number (卷首, 卷一 … 卷一百 with halves 上 < 中 < 下, 卷末)"
ORDER_BY_NAME = "file name (no volume numbers or labels in the names: a collection of separate works)"
# Chinese numerals of volume labels: common and financial digits, units, 兩/两, and the classical 廿 卅 卌
_CN_NUM = "〇○零一二三四五六七八九十百千兩两廿卅卌壹貳贰參叁肆伍陸陆柒捌玖拾佰仟"
_NUM = rf"(?:[{_CN_NUM}]+|\d+)"
_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_J = "[卷巻]"  # 巻: the Japanese form of 卷
# a half (上 < 中 < 下) right after a number: after 之 or in brackets always (卷一之上, 卷一（上）); bare (卷一上,
# 卷一_上) only where no further ideograph follows it, so the 上 of 卷二十四上蔡學案 (the 上蔡 school) is no half
_PART = (rf"(?:\s*之\s*(?P<{{g}}1>[上中下])|\s*[(（〔【]\s*(?P<{{g}}3>[上中下])\s*[)）〕】]"
         rf"|[\s_]*(?P<{{g}}2>[上中下])(?![{_CJK}]))")
_LABEL_RE = re.compile(
    rf"第\s*(?P<an>{_NUM})\s*{_J}{_PART.format(g='ap')}?"  # 第十二卷, 第012卷, 第十二卷上
    rf"|{_J}\s*(?:之|第)?\s*(?:(?P<bs>[首末])(?:\s*之?\s*(?P<bsn>{_NUM}))?|(?P<bn>{_NUM})){_PART.format(g='bp')}?"
    # 卷十二, 卷之十二, 卷第十二, 卷12, 卷首, 卷之首, 卷首二, 卷末, 卷一上, 卷十二之上, 卷首上
    rf"|(?P<cs>[首末]){_J}"  # 首卷, 末卷
    rf"|(?P<dp>[上中下]){_J}"  # 上卷, 下卷 (a work in two or three parts, no number)
    rf"|{_J}\s*(?:之\s*)?(?P<ep>[上中下])(?![{_CJK}])"  # 卷上, 卷之下
)
# other units of a compilation, read only where a name has no 卷 label: 第三冊, 冊三, 第十回, 第五章, 第二篇
_UNIT_RE = re.compile(rf"第\s*(?P<an>{_NUM})\s*[冊册回章篇]{_PART.format(g='ap')}?"
                      rf"|[冊册]\s*(?:之|第)?\s*(?P<bn>{_NUM}){_PART.format(g='bp')}?")
_ROMAN = r"M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})"
_WORD_RE = re.compile(r"(?<![A-Za-z])(?:volume|vol|book|part|chapter|chap|ch|juan|fascicle|fasc|no)[\s._-]*"
                      rf"(?:(?P<n>\d+)|(?P<r>{_ROMAN})(?![A-Za-z]))", re.I)
# a bare number standing on its own (007, 012_序, KR1a0001_012 after the shared prefix), not glued to Latin letters
# as in company or product names (2U, 3D Systems, form10-k)
_ARABIC = re.compile(r"(?<![A-Za-z\d])\d+(?![A-Za-z\d])")
# a name that starts with a volume word but whose number does not read ("Chapter One") is a labelled name
_WORD_START_RE = re.compile(r"[\d\s._-]*(?:volume|vol|chapter|chap|juan|fascicle|fasc)(?![a-z])", re.I)
_PARTS = {"上": 1, "中": 2, "下": 3}
_CN_FOLD = str.maketrans({"卅": "三十", "卌": "四十", "廿": "二十", "○": "〇", "參": "叁", "两": "二", "兩": "二",
                          "佰": "百", "仟": "千", "拾": "十"})


class VolumeKey(NamedTuple):
    """Canonical order key of a volume: ``section`` 0 front matter (卷首, or volume 0), 1 numbered volumes, 2 back
    matter (卷末); ``number`` within the section (None for an unnumbered half such as 卷上); ``part`` 0 for a whole
    volume, 1 上, 2 中, 3 下 (halves and thirds come after their number's whole volume, 上 < 中 < 下)."""

    section: int
    number: int | None
    part: int

    def sort_tuple(self) -> tuple[int, int, int]:
        return self.section, -1 if self.number is None else self.number, self.part

    def label(self) -> str:
        half = "上中下"[self.part - 1] if self.part else ""
        if self.section == 0:
            return f"卷首{self.number or ''}{half}"
        if self.section == 2:
            return f"卷末{self.number or ''}{half}"
        return f"卷{'' if self.number is None else self.number}{half}"


def _numeral(run: str) -> int | None:
    """Value of an Arabic or Chinese numeral run (cn2an ``smart`` mode after folding 廿 卅 卌, 兩, and the
    financial 拾 佰 仟; 百二十 = 120). The longest prefix that reads is used (卷十一二程 → 11). None if none reads."""
    if run.isdigit():
        return int(run)
    import cn2an

    s = run.translate(_CN_FOLD)
    for end in range(len(s), 0, -1):
        t = s[:end]
        if t[0] in "十百千":
            t = ("" if t[0] == "十" else "一") + t
        try:
            v = cn2an.cn2an(t, "smart")
        except (ValueError, KeyError, TypeError, IndexError):
            continue
        if float(v).is_integer() and v >= 0:
            return int(v)
    return None


def _part(m: re.Match, g: str) -> int:
    p = m.group(f"{g}1") or m.group(f"{g}2") or m.group(f"{g}3")
    return _PARTS[p] if p else 0


def _label_key(m: re.Match) -> VolumeKey | None:
    """Key of one ``_LABEL_RE``/``_UNIT_RE`` match; None when its numeral does not read."""
    d = m.groupdict()
    if d.get("an") is not None or d.get("bn") is not None:
        g = "ap" if d.get("an") is not None else "bp"
        n = _numeral(d.get("an") or d["bn"])
        if n is None:
            return None
        return VolumeKey(0 if n == 0 else 1, 0 if n == 0 else n, _part(m, g))  # volume 0 is front matter
    if d.get("bs"):
        n = _numeral(d["bsn"]) if d.get("bsn") else 0
        return None if n is None else VolumeKey(0 if d["bs"] == "首" else 2, n, _part(m, "bp"))
    if d.get("cs"):
        return VolumeKey(0 if d["cs"] == "首" else 2, 0, 0)
    p = d.get("dp") or d.get("ep")
    return VolumeKey(1, None, _PARTS[p])


def _roman(s: str) -> int:
    vals = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    s = s.upper()
    return sum(-vals[c] if i + 1 < len(s) and vals[c] < vals[s[i + 1]] else vals[c] for i, c in enumerate(s))


class _Read(NamedTuple):
    key: VolumeKey | None
    labelled: bool  # the name holds a volume label (卷…, 第…卷, 冊…, Vol./Chapter …), readable or not
    problem: str  # why the key is None although the name is labelled


def _read_name(name: str, arabic_from: int = 0) -> _Read:
    """Read one name (see :func:`volume_key`); ``arabic_from``: where to start looking for a bare Arabic number."""
    for rx in (_LABEL_RE, _UNIT_RE):
        found = list(rx.finditer(name))
        if found:
            keys = [_label_key(m) for m in found]
            if any(k is None for k in keys):
                bad = next(m.group() for m, k in zip(found, keys) if k is None)
                return _Read(None, True, f"the numeral of {bad!r} does not read")
            if len(set(keys)) > 1:
                return _Read(None, True, "its labels " + " and ".join(repr(m.group()) for m in found)
                             + " disagree")
            return _Read(keys[0], True, "")
    found = list(_WORD_RE.finditer(name))
    if found:
        keys = {int(m.group("n")) if m.group("n") else _roman(m.group("r")) for m in found if m.group("n") or m.group("r")}
        if len(keys) > 1:
            return _Read(None, True, "its labels " + " and ".join(repr(m.group()) for m in found) + " disagree")
        if keys:
            n = keys.pop()
            return _Read(VolumeKey(0 if n == 0 else 1, n, 0), True, "")
    m = _ARABIC.search(name, arabic_from)
    if m:
        n = int(m.group())
        return _Read(VolumeKey(0 if n == 0 else 1, n, 0), False, "")
    labelled = bool(re.search(rf"{_J}|第.*[冊册回章篇]", name) or _WORD_START_RE.match(name))
    return _Read(None, labelled, "no volume number in it" if labelled else "")


def volume_key(name: str) -> VolumeKey | None:
    """Canonical order key of one volume name (file stem or API title), or None when no number can be read.

    Read, in this order (the first kind found decides; several labels of that kind must agree):
    1. 卷 (or the Japanese 巻) labels: ``卷十二``, ``卷之十二``, ``卷第十二``, ``第十二卷``, ``卷12``, ``第012卷`` → 12;
       ``卷首`` / ``首卷`` / ``卷之首`` → front matter (also ``卷首二``, and volume 0: ``第000卷``); ``卷末`` → back
       matter; halves and thirds ``卷一上`` / ``卷一中`` / ``卷一下`` / ``卷十二之上`` after their number's whole volume;
       ``卷上`` / ``上卷`` → an unnumbered half. Chinese numerals as cn2an reads them (plus 廿 卅 卌 and financial
       forms: 卷廿三 = 23, 卷百二十 = 120).
    2. other units: ``第三冊``, ``冊三``, ``第十回``, ``第五章``, ``第二篇``.
    3. words: ``Volume 3``, ``vol_03``, ``Book IV``, ``Chapter 12``, ``Part ii``, ``juan 5``.
    4. the first Arabic number standing on its own (``012_序``, ``007.txt``; not ``2U`` or ``3D Systems``);
       :func:`volume_keys` reads a corpus's names together and skips the prefix every name shares (``KR1a0001_012``
       → 12; ``2024-Tesla`` and ``2024-NVIDIA`` have no number).
    Returns None for a name with none of these (``序``, ``附錄``) or whose labels do not read or disagree."""
    return _read_name(name).key


def _shared_prefix_end(names: list[str]) -> int:
    """Length of the prefix all ``names`` share, cut back so it does not end inside a run of digits."""
    if len(names) < 2:
        return 0
    import os

    pre = os.path.commonprefix(names)
    n = len(pre)
    while n and pre[n - 1].isdigit():
        n -= 1
    return n


def volume_keys(names: list[str]) -> list[_Read]:
    """:func:`_read_name` of every name of one corpus, bare Arabic numbers read only after the prefix all names share
    (a number every name carries, such as a text id or a year, orders nothing)."""
    start = _shared_prefix_end(names)
    return [_read_name(n, start) for n in names]


def volume_number(name: str) -> int | None:
    """The number of a volume name as an int (:func:`volume_key`): 卷首 → 0, 卷十二 / 卷十二上 → 12, Chapter 12 → 12;
    None for back matter, an unnumbered half and a name without a number."""
    k = volume_key(name)
    if k is None or k.section == 2:
        return None
    return k.number


@dataclass
class Volume:
    """One volume: ``name`` (file stem or API title), ``key`` (canonical order key, :class:`VolumeKey`; None when
    the name holds no number), ``paragraphs`` (list of str), ``sha256`` of the source bytes, ``source`` (path or
    URN). ``number`` is the key's number as an int (卷首 0; None for back matter or no number)."""

    name: str
    key: VolumeKey | None
    paragraphs: list[str]
    sha256: str
    source: str = ""

    @property
    def number(self) -> int | None:
        if self.key is None or self.key.section == 2:
            return None
        return self.key.number

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
    order: str = ORDER_BY_NUMBER

    def paragraphs(self) -> list[str]:
        """All paragraphs of all volumes, in canonical order."""
        return [p for v in self.volumes for p in v.paragraphs]

    def text(self) -> str:
        """The master haystack: paragraphs joined by newlines (one paragraph a line)."""
        return "".join(p + "\n" for v in self.volumes for p in v.paragraphs)

    def checksums(self) -> dict[str, str]:
        return {v.name: v.sha256 for v in self.volumes}


def split_paragraphs(text: str) -> list[str]:
    """Non-blank lines with surrounding whitespace (ASCII and full-width) removed."""
    return [s for s in (line.strip() for line in text.splitlines()) if s]


def order_volumes(volumes: list[Volume], where: str = "") -> tuple[list[Volume], str]:
    """Volumes in canonical order: their names read together (:func:`volume_keys`, keys set on the volumes) and
    sorted by key. Returns (volumes, order description: ORDER_BY_NUMBER, or ORDER_BY_NAME for a collection whose
    names hold no number and no volume label at all). Raises InputError naming the volumes when some number cannot
    be read (no silent name order), when two volumes read the same key (e.g. a duplicated file), or when unnumbered
    halves (卷上/卷下) sit beside numbered volumes. ``where`` names the corpus in messages."""
    reads = volume_keys([v.name for v in volumes])
    for v, r in zip(volumes, reads):
        v.key = r.key
    if len(volumes) <= 1:
        return list(volumes), ORDER_BY_NUMBER
    at = f" in {where}" if where else ""
    if all(r.key is None and not r.labelled for r in reads):
        return sorted(volumes, key=lambda v: v.name), ORDER_BY_NAME
    bad = [(v, r) for v, r in zip(volumes, reads) if r.key is None]
    if bad:
        shown = "; ".join(f"{_shown(v)} ({r.problem or 'no volume number in it'})" for v, r in bad[:20])
        more = f" and {len(bad) - 20} more" if len(bad) > 20 else ""
        raise InputError(f"cannot read the volume number of {len(bad)} of {len(volumes)} volumes{at}: {shown}{more}. "
                         f"Name every volume with its number so the order is known: 卷首 (front matter), 卷一 … "
                         f"卷一百 (or 卷之一, 第一卷, 001_...), halves 卷一上/卷一下, 卷末 (back matter)")
    unnumbered = [v for v in volumes if v.key.number is None]
    if unnumbered and len(unnumbered) < sum(v.key.section == 1 for v in volumes):
        raise InputError(f"volumes {', '.join(_shown(v) for v in unnumbered)}{at} are halves without a number "
                         f"(卷上/卷下) beside numbered volumes: their place is unknown; name them with their number "
                         f"(e.g. 卷一上)")
    seen: dict[VolumeKey, Volume] = {}
    for v in volumes:
        if v.key in seen:
            raise InputError(f"volumes {_shown(seen[v.key])} and {_shown(v)}{at} both read as {v.key.label()}: "
                             f"remove one or rename it")
        seen[v.key] = v
    return sorted(volumes, key=lambda v: v.key.sort_tuple()), ORDER_BY_NUMBER


def _shown(v: Volume) -> str:
    """A volume as messages name it: its file name, or its title with the URN it came from."""
    if v.source and Path(v.source).suffix == ".txt":
        return repr(Path(v.source).name)
    return f"{v.name!r} ({v.source})" if v.source and v.source != v.name else repr(v.name)


def _exclusion_match(v: Volume, word: str) -> bool:
    w = word.strip()
    if not w:
        return False
    if w in (v.name, Path(v.source).name if v.source else None):
        return True
    if w.isdigit():  # a number names a volume by number only (0: front matter), every part of it
        return v.key is not None and v.key.section in (0, 1) and v.key.number == int(w)
    if _LABEL_RE.fullmatch(w) or _UNIT_RE.fullmatch(w):  # a label (卷八十一, 第十二卷, 卷一上) names by key only
        k = volume_key(w)  # a label without a half (卷一) names the whole number, halves included
        return k is not None and v.key is not None and (v.key == k or (
            k.part == 0 and (v.key.section, v.key.number) == (k.section, k.number)))
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
        vols.append(Volume(f.stem, None, split_paragraphs(text), hashlib.sha256(raw).hexdigest(), str(f)))
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
            vols.append(Volume(e["name"], _stored_key(e), paras, e["sha256"], e.get("source", "")))
        corpus_id = meta["corpus_id"]
        prior = dict(meta.get("excluded", {}))
        source = meta.get("source", str(d))
        order = meta.get("order_by", ORDER_BY_NUMBER)
    else:
        vols, order = order_volumes(read_local_volumes(d), str(d))
        corpus_id = d.name if d.name != "volumes" else d.parent.name
        prior, source = {}, str(d)
    kept, excluded = apply_exclusions(vols, exclude)
    return Corpus(corpus_id, kept, {**prior, **excluded}, source, order)


def _stored_key(e: dict) -> VolumeKey | None:
    """The key of a ``corpus.json`` volume entry (``key``; corpora fetched before keys were stored: from
    ``number``, 0 being front matter)."""
    if e.get("key") is not None:
        return VolumeKey(*e["key"])
    n = e.get("number")
    return None if n is None else VolumeKey(0 if n == 0 else 1, n, 0)


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
            vols.append(Volume(title, None, paras, hashlib.sha256(raw).hexdigest(), sub))
        if not any(v.paragraphs for v in vols):
            raise InputError(f"ctext {urn}: the book has no text (no fulltext in any subsection)")
        return vols


def _safe_name(name: str) -> str:
    s = re.sub(r"[\\/:*?\"<>|\s]+", "_", name).strip("_.")
    return s[:80] or "volume"


def fetch_corpus(out: str | Path, *, local: str | Path | None = None, urn: str | None = None,
                 base_url: str | None = None, apikey: str | None = None, remap: str | None = None,
                 exclude: Iterable[str] = (), corpus_id: str | None = None, force: bool = False) -> Corpus:
    """Fetch a corpus into the directory ``out`` (module docstring): from the local directory ``local``, or from
    the ctext API (``urn`` of the book at ``base_url``). Volumes are put in canonical order, the ``exclude``d ones
    left out (and listed in ``corpus.json``), each with its SHA-256. ``out`` is replaced atomically. Raises
    InputError for a bad source, an exclusion that matches nothing, neither/both of ``local`` and ``urn``, or an
    ``out`` holding anything but an earlier corpus (unless ``force``: it is then replaced; ctxbench.core.outdir)."""
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

    # the rule of every --out (ctxbench.core.outdir): a corpus directory (its corpus.json) is replaced, nothing else
    check_out_dir(out, "fetch corpus", force=force, is_own=(out / CORPUS_MANIFEST).exists(),
                  what=f"corpus directory (no {CORPUS_MANIFEST}; it would be replaced)")
    vols, order = order_volumes(vols, str(local) if local is not None else f"ctext {urn}")
    kept, excluded = apply_exclusions(vols, exclude)
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "volumes").mkdir(parents=True)
    entries = []
    for i, v in enumerate(kept):
        fname = f"volumes/{i:03d}_{_safe_name(v.name)}.txt"
        (tmp / fname).write_text("".join(p + "\n" for p in v.paragraphs), encoding="utf-8")
        entries.append({"name": v.name, "number": v.number, "key": None if v.key is None else list(v.key),
                        "file": fname, "sha256": v.sha256, "source": v.source,
                        "paragraphs": len(v.paragraphs), "chars": v.chars,
                        "paragraphs_sha256": stable_hash(v.paragraphs, length=64)})
    write_json({"corpus_id": cid, "source": src, "volumes": entries, "excluded": excluded, "order_by": order,
                "order": "volumes in this order; key = [section (0 front matter, 1 numbered, 2 back matter), "
                         "number, part (0 whole, 1 上, 2 中, 3 下)]"},
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
    return Corpus(cid, kept, excluded, src, order)


def corpus_summary(c: Corpus) -> dict:
    """Counts for printing and manifests: volumes, paragraphs, characters, excluded names, per-volume sha256."""
    return {"corpus_id": c.corpus_id, "volumes": len(c.volumes), "paragraphs": sum(len(v.paragraphs) for v in c.volumes),
            "chars": sum(v.chars for v in c.volumes), "excluded": c.excluded, "sha256": c.checksums(),
            "order": c.order}


__all__ = ["ORDER_BY_NAME", "ORDER_BY_NUMBER", "Corpus", "CtextClient", "Volume", "VolumeKey", "apply_exclusions",
           "corpus_summary", "fetch_corpus", "load_corpus", "order_volumes", "read_local_volumes", "split_paragraphs",
           "volume_key", "volume_keys", "volume_number"]
