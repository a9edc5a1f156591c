"""PDF → markdown for the scientific-article track (SciTrek, Li et al., section 3.1: articles are converted to
markdown before they are concatenated into collections).

Converter choice: Marker (a layout-model converter) when it is installed *and* its models are already in its local
model cache — offline, Marker would otherwise wait forever on a model download, so absence is detected up front and
Marker is never started then; it always runs in a subprocess under a timeout. Otherwise the offline converter
``pdfminer-layout`` (``ctxbench.convert.layout``: pdfminer.six text boxes ordered column by column, headings,
ligatures, hyphenation; MIT licence — PyMuPDF is AGPL and not used), chosen over pypdfium2's plain text layer by the
quality figures of ``bench/convert_speed.py``.

Every conversion runs in a child process with a timeout, so a PDF that hangs the parser costs ``timeout_s`` and
never stops a run. Unreadable files raise ``ConversionError`` with a ``reason`` (``convert_pdfs`` turns it into a
quarantine row with stage ``convert``): encrypted, truncated or corrupt, scanned or no text layer, timeout.
``convert_pdfs`` caches results by the PDF's SHA-256 and the converter name + version (``$CTXBENCH_HOME/cache/convert``
by default), so a rerun converts only new PDFs. The version names the converter library's version, the layout
revision and the hash of this package's code (:func:`converter_code_hash`), so a changed converter reconverts and
changes the build hash of the builds that use it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from ctxbench.core.config import ctxbench_home
from ctxbench.core.errors import CtxbenchError
from ctxbench.core.hashing import file_sha256
from ctxbench.convert.layout import pdfium_markdown, pdfminer_markdown, pdfplumber_markdown
from ctxbench.core.hashing import stable_hash

# bump when the offline converter's output changes: it is part of the version, so cached conversions are redone
# (the code's hash is part of it too: converter_code_hash)
LAYOUT_REVISION = "5"
# the converter's code: every module of this package (the layout converter, the text clean-up, the child-process
# worker, Marker's wrapper)
CONVERT_DIR = Path(__file__).resolve().parent
DEFAULT_TIMEOUT_S = 300.0
# a document with fewer non-space characters than this per page (and in all) has no usable text layer
MIN_CHARS_PER_PAGE = 40
MIN_CHARS = 200


class ConversionError(CtxbenchError):
    """A PDF that could not be converted. ``reason`` is one of REASONS; ``detail`` says what the library said."""

    def __init__(self, path, reason: str, detail: str = ""):
        self.path = str(path)
        self.reason = reason
        self.detail = detail
        super().__init__(f"{path}: cannot convert: {REASONS.get(reason, reason)}{' (' + detail + ')' if detail else ''}")


REASONS = {
    "encrypted": "encrypted (a password is needed to open it); decrypt it (e.g. qpdf --decrypt) and retry",
    "truncated or corrupt": "truncated or corrupt (no readable PDF structure); fetch the file again",
    "scanned or no text layer": "scanned or no text layer (image-only pages); run OCR first",
    "timeout": "conversion did not finish within the timeout",
    "not a pdf": "not a PDF file (no %PDF header)",
    "converter failed": "the converter raised an error",
}


@dataclass
class Conversion:
    """One converted PDF. ``chars`` counts characters of ``markdown`` (not tokens); ``pages`` is the PDF's page
    count; ``converter`` and ``converter_version`` name what produced it (the cache key besides ``pdf_sha256``)."""

    markdown: str
    converter: str
    converter_version: str
    chars: int
    pages: int
    pdf_sha256: str


# ----------------------------------------------------------------------------- converters


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def marker_model_dir() -> Path:
    """Where Marker (through surya) keeps its models: ``$MODEL_CACHE_DIR`` or ``<user cache>/datalab/models``."""
    if os.environ.get("MODEL_CACHE_DIR"):
        return Path(os.environ["MODEL_CACHE_DIR"])
    try:
        from platformdirs import user_cache_dir

        base = Path(user_cache_dir("datalab"))
    except ImportError:  # pragma: no cover - platformdirs comes with most environments
        base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "datalab"
    return base / "models"


# the model families Marker loads for a PDF (surya checkpoints, one sub-directory each in the model cache)
MARKER_MODELS = ("layout", "text_recognition", "text_detection", "table_recognition", "ocr_error_detection")


def marker_available() -> tuple[bool, str]:
    """(True, "") when Marker is installed and every model it loads is in the local model cache; else (False,
    why). Only looks at files: never imports Marker, never starts a download."""
    if importlib.util.find_spec("marker") is None or _dist_version("marker-pdf") is None:
        return False, "marker-pdf is not installed"
    d = marker_model_dir()
    missing = [m for m in MARKER_MODELS
               if not (d / m).is_dir() or not any(p.is_file() and p.stat().st_size > 0 for p in (d / m).rglob("*"))]
    if missing:
        return False, f"Marker models missing from {d}: {', '.join(missing)}"
    return True, ""


def default_converter() -> tuple[str, str]:
    """(name, version) of the converter ``convert_pdf`` uses here: ``marker`` when available, else
    ``pdfminer-layout`` (:func:`converter_version`)."""
    name = "marker" if marker_available()[0] else "pdfminer-layout"
    return name, converter_version(name)


def converter_code_hash(directory: str | Path | None = None) -> str:
    """16 hex digits of SHA-256 over the name and bytes of every ``*.py`` file of the converter package
    (``directory``, default :data:`CONVERT_DIR`, this package wherever it is installed), in name order: part of
    every converter's version, so the conversion cache key and the build hash of PDF builds change with the code.
    Raises CtxbenchError when the directory holds no module (a moved package must never hash to nothing)."""
    d = Path(directory) if directory is not None else CONVERT_DIR
    files = sorted(d.glob("*.py"))
    if not files:
        raise CtxbenchError(f"the converter's code is not in {d} (no *.py file): its hash would not follow the code")
    h = hashlib.sha256()
    for p in files:
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def converter_version(name: str) -> str:
    """Version string of a named converter (``pdfminer-layout``, ``pdfium-text``, ``pdfplumber-text`` or
    ``marker``): the library's version, the layout revision (not for Marker) and :func:`converter_code_hash`, e.g.
    ``pdfminer.six 20231228; layout r5; code 0123456789abcdef``. Raises CtxbenchError for another name."""
    if name == "pdfminer-layout":
        v = f"pdfminer.six {_dist_version('pdfminer.six')}; layout r{LAYOUT_REVISION}"
    elif name == "pdfium-text":
        v = f"pypdfium2 {_dist_version('pypdfium2')}; layout r{LAYOUT_REVISION}"
    elif name == "pdfplumber-text":
        v = f"pdfplumber {_dist_version('pdfplumber')}; layout r{LAYOUT_REVISION}"
    elif name == "marker":
        v = f"marker-pdf {_dist_version('marker-pdf')}"
    else:
        raise CtxbenchError(f"unknown converter {name!r}: use pdfminer-layout, pdfium-text, pdfplumber-text or "
                            f"marker")
    return f"{v}; code {converter_code_hash()}"


def preflight(path: Path) -> tuple[int, int]:
    """Open ``path`` with pypdfium2: (pages, non-space characters of its text layer). Raises ConversionError for a
    file that is not a PDF, is encrypted, truncated or corrupt, or has no text layer."""
    import pypdfium2 as pdfium

    with open(path, "rb") as f:
        head = f.read(1024)
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - 2048))
        tail = f.read()
    if b"%PDF-" not in head:
        raise ConversionError(path, "not a pdf", f"first bytes {head[:8]!r}")
    try:
        pdf = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as e:
        msg = str(e)
        if "password" in msg.lower() or "security" in msg.lower():
            raise ConversionError(path, "encrypted", msg) from None
        what = "no %%EOF marker at the end of the file" if b"%%EOF" not in tail else msg
        raise ConversionError(path, "truncated or corrupt", f"{what} ({msg})") from None
    try:
        pages = len(pdf)
        chars = 0
        for i in range(pages):
            page = pdf[i]
            tp = page.get_textpage()
            chars += sum(not c.isspace() for c in tp.get_text_range())
            tp.close()
            page.close()
    finally:
        pdf.close()
    if pages == 0 or chars < MIN_CHARS or chars < MIN_CHARS_PER_PAGE * pages / 4:
        raise ConversionError(path, "scanned or no text layer", f"{chars} non-space characters on {pages} pages")
    return pages, chars


def convert_in_child(name: str, path: str) -> dict:
    """Run in the child process: preflight, then the named converter. Returns a JSON-able dict."""
    try:
        pages, _ = preflight(Path(path))
        if name == "pdfminer-layout":
            md, pages = pdfminer_markdown(path)
        elif name == "pdfium-text":
            md, pages = pdfium_markdown(path)
        elif name == "pdfplumber-text":
            md, pages = pdfplumber_markdown(path)
        else:
            raise CtxbenchError(f"converter {name!r} does not run in the worker")
    except ConversionError as e:
        return {"error": e.reason, "detail": e.detail}
    except Exception as e:  # the library's own error on a damaged file: a reason, not a crash
        return {"error": "converter failed", "detail": f"{type(e).__name__}: {e}"}
    if sum(not c.isspace() for c in md) < MIN_CHARS:
        return {"error": "scanned or no text layer", "detail": f"{len(md)} characters of markdown"}
    return {"markdown": md, "pages": pages}


def _child_env() -> dict:
    """The child's environment: offline model hubs, and this ctxbench package first on the path."""
    root = str(Path(__file__).resolve().parents[2])
    pp = os.environ.get("PYTHONPATH")
    return dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                PYTHONPATH=root + (os.pathsep + pp if pp else ""))


def _run(args: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    """Run ``args`` in its own process group; on timeout the whole group is killed (Marker starts workers) and
    subprocess.TimeoutExpired is raised."""
    import signal

    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_child_env(),
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            raise
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def _run_child(args: list[str], path: Path, timeout_s: float) -> dict:
    try:
        proc = _run(args, timeout_s)
    except subprocess.TimeoutExpired:
        raise ConversionError(path, "timeout", f"no result after {timeout_s:g} s") from None
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ConversionError(path, "converter failed",
                              f"exit status {proc.returncode}: {err[-1] if err else 'no message'}")
    return json.loads(proc.stdout.decode("utf-8"))


def _convert_marker(path: Path, timeout_s: float) -> tuple[str, int]:
    pages, _ = preflight(path)
    with tempfile.TemporaryDirectory(prefix="ctxbench-marker-") as out:
        try:
            proc = _run(["marker_single", str(path), "--output_dir", out, "--output_format", "markdown"], timeout_s)
        except subprocess.TimeoutExpired:
            raise ConversionError(path, "timeout", f"Marker gave no result after {timeout_s:g} s") from None
        mds = sorted(Path(out).rglob("*.md"))
        if proc.returncode != 0 or not mds:
            err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            raise ConversionError(path, "converter failed", f"marker_single: {err[-1] if err else proc.returncode}")
        return mds[0].read_text(encoding="utf-8"), pages


def _convert_uncached(path: Path, converter: str, timeout_s: float) -> tuple[str, int]:
    """(markdown, pages) of one PDF with the named converter, in a child process under ``timeout_s``."""
    if converter == "marker":
        return _convert_marker(path, timeout_s)
    res = _run_child([sys.executable, "-m", "ctxbench.convert.worker", converter, str(path)], path, timeout_s)
    if "error" in res:
        raise ConversionError(path, res["error"], res.get("detail", ""))
    return res["markdown"], int(res["pages"])


def convert_pdf(path, timeout_s: float = DEFAULT_TIMEOUT_S, converter: str | None = None) -> Conversion:
    """Convert one PDF to markdown (no cache). ``converter`` defaults to ``default_converter()`` (Marker when its
    models are local, else ``pdfminer-layout``); ``timeout_s`` (seconds) bounds the child process.

    Raises ConversionError (``.reason``: encrypted, truncated or corrupt, scanned or no text layer, timeout, not a
    pdf, converter failed) and FileNotFoundError for a missing file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"PDF not found: {path}")
    name = converter or default_converter()[0]
    version = converter_version(name)
    sha = file_sha256(path)
    md, pages = _convert_uncached(path, name, timeout_s)
    return Conversion(md, name, version, len(md), pages, sha)


# ----------------------------------------------------------------------------- cache


def convert_cache_dir() -> Path:
    """Default conversion cache: ``$CTXBENCH_HOME/cache/convert``."""
    return ctxbench_home() / "cache" / "convert"


def _cache_path(cache_dir: Path, sha: str, name: str, version: str) -> Path:
    return cache_dir / sha[:2] / f"{sha}-{stable_hash(name, version, length=12)}.json"


def _write_atomic(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)
    os.replace(tmp, path)


# reasons that depend only on the file's bytes (cached: a rerun does not retry them); a timeout may pass next time
_PERMANENT = {"encrypted", "truncated or corrupt", "scanned or no text layer", "not a pdf"}


def convert_pdfs(paths, cache_dir=None, timeout_s: float = DEFAULT_TIMEOUT_S, converter: str | None = None,
                 workers: int | None = None) -> tuple[list[Conversion | None], list[dict]]:
    """Convert many PDFs, caching each result under ``cache_dir`` (default ``convert_cache_dir()``) keyed by the
    PDF's SHA-256 and the converter name + version: a rerun converts only new (or changed) PDFs. ``workers``
    child processes run at once (default: the number of CPUs, at most 4); ``timeout_s`` bounds each PDF.

    Returns (conversions, quarantine): ``conversions[i]`` is the Conversion of ``paths[i]`` or None when it could
    not be converted; ``quarantine`` holds one row per such file, in input order, shaped as SCHEMA.md's quarantine
    table: ``{"input": file name, "stage": "convert", "reason": ..., "detail": JSON {"path", "sha256",
    "message"}}``. Failures whose reason depends only on the bytes (encrypted, truncated, no text layer, not a PDF)
    are cached too; timeouts and converter crashes are retried on the next call. Never raises for a bad PDF."""
    from concurrent.futures import ThreadPoolExecutor

    cache = Path(cache_dir) if cache_dir is not None else convert_cache_dir()
    name = converter or default_converter()[0]
    version = converter_version(name)
    paths = [Path(p) for p in paths]
    outcome: list[dict | None] = [None] * len(paths)
    shas: list[str | None] = [None] * len(paths)
    todo: list[int] = []
    for i, p in enumerate(paths):
        try:
            shas[i] = file_sha256(p)
        except OSError as e:
            outcome[i] = {"error": "unreadable file", "detail": f"{type(e).__name__}: {e}"}
            continue
        cp = _cache_path(cache, shas[i], name, version)
        if cp.exists():
            try:
                outcome[i] = json.loads(cp.read_text(encoding="utf-8"))
                continue
            except (OSError, json.JSONDecodeError):
                pass  # a damaged cache entry is redone
        todo.append(i)

    def run(i: int) -> None:
        p = paths[i]
        try:
            md, pages = _convert_uncached(p, name, timeout_s)
            res = asdict(Conversion(md, name, version, len(md), pages, shas[i]))
        except ConversionError as e:
            res = {"error": e.reason, "detail": e.detail}
        if "error" not in res or res["error"] in _PERMANENT:
            _write_atomic(_cache_path(cache, shas[i], name, version), res)
        outcome[i] = res

    n = workers or min(4, os.cpu_count() or 1)
    if len(todo) <= 1 or n <= 1:
        for i in todo:
            run(i)
    else:
        with ThreadPoolExecutor(max_workers=n) as pool:
            list(pool.map(run, todo))
    results: list[Conversion | None] = []
    quarantine: list[dict] = []
    for p, sha, res in zip(paths, shas, outcome):
        if res is None or "error" in res:
            results.append(None)
            res = res or {"error": "converter failed", "detail": "no result"}
            quarantine.append(_qrow(p, sha, res["error"], res.get("detail", "")))
        else:
            results.append(Conversion(**res))
    return results, quarantine


def _qrow(path: Path, sha: str | None, reason: str, message: str) -> dict:
    return {"input": path.name, "stage": "convert", "reason": reason,
            "detail": json.dumps({"path": str(path), "sha256": sha, "message": message}, ensure_ascii=False)}

