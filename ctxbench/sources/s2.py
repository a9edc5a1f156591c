"""Article clusters from the Semantic Scholar Graph API (SciTrek, Li et al., section 3.1).

Per subject, seed papers come from a relevance search (published since ``since_year``, more than ``min_citations``
citations, an open-access PDF). Around each seed, a cluster: ``first_hop`` papers sampled from the seed's references
and citations, then for each of them ``second_hop`` papers sampled from *its* references and citations (SciTrek:
two seeds per subject, 10 first-hop and 5 second-hop each). Only papers with an open-access PDF are sampled (full
texts are required). Sampling uses ``ctxbench.core.hashing.seeded_rng`` over the candidates sorted by paper id, so the
same configuration and API answers choose the same papers. PDFs are downloaded with httpx; a paper whose PDF cannot
be fetched (HTTP error, not a PDF) is left out and listed in the quarantine rows (stage ``fetch``).

The written ``metadata.json`` has the shape of ``../shared/data/articles/pdfs/metadata.json`` (list of {id, file,
title, authors[], ref_count, ref_method, cites_in_set[], cited_by_in_set[], sha256, pages, ...}); citation relations
are computed within the fetched set from every kept paper's reference list.

The client is the ``semanticscholar`` package pointed at ``api_url`` (tests use a local server answering in the
Graph API's documented shape). Its requester is replaced by ``S2Requester``, which sends the API key (env
``S2_API_KEY``, header ``x-api-key``) on every request — the package omits it on paginated reference/citation
calls — spaces requests ``min_interval_s`` apart, and retries 429 and 5xx answers honouring ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from ctxbench.core.errors import CtxbenchError, InputError
from ctxbench.core.hashing import file_sha256, seeded_rng
from ctxbench.models.gateway import RetryPolicy, retry_after_s
from ctxbench.core.outdir import claim_out_dir

# SciTrek's eight subjects (section 3.1) with the Semantic Scholar field of study each maps to
SUBJECTS = {
    "Computer Science": "Computer Science", "Economics": "Economics", "Electronic Engineering": "Engineering",
    "Math": "Mathematics", "Physics": "Physics", "Biology": "Biology", "Finance": "Business",
    "Statistics": "Mathematics",
}
PAPER_FIELDS = ["paperId", "title", "authors", "year", "referenceCount", "citationCount", "openAccessPdf",
                "externalIds"]


class FetchError(CtxbenchError):
    """The Semantic Scholar API could not be used (bad key, no answer after retries)."""


@dataclass
class FetchConfig:
    """What ``fetch_clusters`` fetches. Counts are papers; ``min_interval_s`` seconds between API requests (the
    unauthenticated API allows about one request per second)."""

    subjects: list[str] = field(default_factory=lambda: list(SUBJECTS))
    seeds_per_subject: int = 2
    first_hop: int = 10
    second_hop: int = 5
    min_citations: int = 100
    since_year: int = 2020
    related_limit: int = 100  # references / citations read per paper (one page)
    seed: int = 0
    api_url: str | None = None  # None: the client's default (the public API)
    api_key: str | None = None  # None: $S2_API_KEY
    min_interval_s: float = 1.0
    timeout_s: float = 30.0
    policy: RetryPolicy = field(default_factory=lambda: RetryPolicy(max_retries=6, base_delay_s=1.0,
                                                                    max_delay_s=60.0))


def _requester_class():
    from semanticscholar.ApiRequester import ApiRequester
    from semanticscholar.SemanticScholarException import (BadQueryParametersException,
                                                          ObjectNotFoundException)

    class S2Requester(ApiRequester):
        """The package's requester with our retry policy (429 / 5xx / connection errors, Retry-After honoured),
        the API key on every request and a minimum interval between requests."""

        def __init__(self, cfg: FetchConfig, api_key: str | None):
            super().__init__(cfg.timeout_s, retry=False)
            self.cfg = cfg
            self.api_key = api_key
            self.calls = 0
            self._last = 0.0
            self._rng = random.Random(0)
            self.client: httpx.AsyncClient | None = None  # one connection pool for the whole walk

        async def aclose(self) -> None:
            if self.client is not None:
                await self.client.aclose()
                self.client = None

        async def get_data_async(self, url: str, parameters: str, headers: dict | None, payload: dict = None):
            hdrs = dict(headers or {})
            if self.api_key:
                hdrs["x-api-key"] = self.api_key
            params = (parameters or "").lstrip("&")
            pol = self.cfg.policy
            for attempt in range(pol.max_retries + 1):
                wait = self._last + self.cfg.min_interval_s - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                self._last = time.monotonic()
                self.calls += 1
                if self.client is None:
                    self.client = httpx.AsyncClient(timeout=self.cfg.timeout_s)
                try:
                    r = await self.client.request("POST" if payload else "GET", url, params=params, headers=hdrs,
                                                  json=payload)
                except (httpx.TransportError, httpx.TimeoutException) as e:
                    if attempt == pol.max_retries:
                        raise FetchError(f"{url}: no answer after {attempt + 1} attempts ({e})") from None
                    await asyncio.sleep(pol.delay(attempt, None, self._rng))
                    continue
                if r.status_code == 429 or r.status_code >= 500:
                    if attempt == pol.max_retries:
                        raise FetchError(f"{url}: HTTP {r.status_code} after {attempt + 1} attempts")
                    await asyncio.sleep(pol.delay(attempt, retry_after_s(r.headers), self._rng))
                    continue
                if r.status_code == 200:
                    data = r.json()
                    return {} if isinstance(data, dict) and len(data) == 1 and "error" in data else data
                if r.status_code == 404:
                    raise ObjectNotFoundException(_error_text(r))
                if r.status_code == 400:
                    raise BadQueryParametersException(_error_text(r))
                if r.status_code in (401, 403):
                    raise FetchError(f"{url}: HTTP {r.status_code} (check the API key in S2_API_KEY)")
                raise FetchError(f"{url}: HTTP {r.status_code}: {_error_text(r)}")
            raise FetchError(f"{url}: no answer")  # pragma: no cover - the loop returns or raises

    return S2Requester


def _error_text(r: httpx.Response) -> str:
    try:
        d = r.json()
        return str(d.get("error") or d.get("message") or d)
    except ValueError:
        return r.text[:200]


def make_client(cfg: FetchConfig):
    """An ``AsyncSemanticScholar`` for ``cfg.api_url`` whose requester is ``S2Requester``."""
    from semanticscholar import AsyncSemanticScholar

    key = cfg.api_key if cfg.api_key is not None else os.environ.get("S2_API_KEY") or None
    sch = AsyncSemanticScholar(timeout=int(cfg.timeout_s), api_key=key, api_url=cfg.api_url, retry=False)
    sch._requester = _requester_class()(cfg, key)
    return sch


def _paper_dict(p) -> dict | None:
    """The fields we keep of a client ``Paper`` (None for a paper without an id: the API returns those for
    references it could not resolve). Missing fields become None / []."""
    raw = getattr(p, "raw_data", None) or {}
    pid = raw.get("paperId")
    if not pid:
        return None
    oa = raw.get("openAccessPdf") or {}
    authors = [a.get("name") for a in (raw.get("authors") or []) if a and a.get("name")]
    return {"paperId": pid, "title": raw.get("title"), "authors": authors, "year": raw.get("year"),
            "referenceCount": raw.get("referenceCount"), "citationCount": raw.get("citationCount"),
            "pdf_url": oa.get("url") or None, "oa_status": oa.get("status"),
            "externalIds": raw.get("externalIds") or {}}


async def _related(sch, pid: str, cfg: FetchConfig, cache: dict) -> tuple[list[dict], list[str], list[str]]:
    """(papers related to ``pid`` through references and citations, ids of the papers it cites, ids of the papers
    citing it)."""
    if pid in cache:
        return cache[pid]
    from semanticscholar.SemanticScholarException import ObjectNotFoundException

    out: dict[str, dict] = {}
    cited: list[str] = []
    citing: list[str] = []
    for kind in ("references", "citations"):
        fn = sch.get_paper_references if kind == "references" else sch.get_paper_citations
        try:
            res = await fn(pid, fields=PAPER_FIELDS, limit=cfg.related_limit)
        except ObjectNotFoundException:
            continue
        for item in res.items:
            d = _paper_dict(item.paper) if item.paper is not None else None
            if d is None:
                continue
            out.setdefault(d["paperId"], d)
            (cited if kind == "references" else citing).append(d["paperId"])
    cache[pid] = (list(out.values()), cited, citing)
    return cache[pid]


def _sample(cands: list[dict], k: int, exclude: set[str], *seed_parts) -> list[dict]:
    pool = sorted((c for c in cands if c["pdf_url"] and c["paperId"] not in exclude), key=lambda c: c["paperId"])
    if len(pool) <= k:
        return pool
    return seeded_rng(*seed_parts).sample(pool, k)


async def discover(cfg: FetchConfig) -> tuple[list[dict], dict[str, set[str]]]:
    """Walk the graph: (papers with cluster/subject/hop, {paperId: ids of the papers it cites}, from the kept
    papers' reference and citation lists).

    Each paper dict: paperId, title, authors, year, referenceCount, citationCount, pdf_url, oa_status, externalIds,
    subject, cluster (the seed's paper id), hop (0 seed, 1, 2). A paper met again in a later cluster keeps its first
    cluster."""
    sch = make_client(cfg)
    try:
        return await _walk(sch, cfg)
    finally:
        await sch._requester.aclose()


async def _walk(sch, cfg: FetchConfig) -> tuple[list[dict], dict[str, set[str]]]:
    rel_cache: dict = {}
    chosen: dict[str, dict] = {}
    for subject in cfg.subjects:
        fos = SUBJECTS.get(subject, subject)
        res = await sch.search_paper(subject, year=f"{cfg.since_year}-", fields_of_study=[fos],
                                     min_citation_count=cfg.min_citations + 1, open_access_pdf=True,
                                     fields=PAPER_FIELDS, limit=100)
        seeds = [d for d in (_paper_dict(p) for p in res.items) if d and d["pdf_url"] and d["paperId"] not in chosen
                 and (d["citationCount"] is None or d["citationCount"] > cfg.min_citations)]
        for seed in seeds[: cfg.seeds_per_subject]:
            cluster = seed["paperId"]
            chosen[cluster] = dict(seed, subject=subject, cluster=cluster, hop=0)
            related = (await _related(sch, cluster, cfg, rel_cache))[0]
            first = _sample(related, cfg.first_hop, set(chosen), cfg.seed, "first", cluster)
            for p in first:
                chosen[p["paperId"]] = dict(p, subject=subject, cluster=cluster, hop=1)
            for p in first:
                related2 = (await _related(sch, p["paperId"], cfg, rel_cache))[0]
                for q in _sample(related2, cfg.second_hop, set(chosen), cfg.seed, "second", cluster, p["paperId"]):
                    chosen[q["paperId"]] = dict(q, subject=subject, cluster=cluster, hop=2)
    cites: dict[str, set[str]] = {}
    for pid in chosen:  # every kept paper's lists (already read for seeds and first hops)
        _, cited, citing = await _related(sch, pid, cfg, rel_cache)
        cites.setdefault(pid, set()).update(cited)
        for c in citing:
            cites.setdefault(c, set()).add(pid)
    return list(chosen.values()), cites


def _download(client: httpx.Client, url: str, dest: Path, cfg: FetchConfig) -> str | None:
    """Download one PDF to ``dest`` (atomically); None on success, else the reason."""
    pol = cfg.policy
    rng = random.Random(0)
    for attempt in range(pol.max_retries + 1):
        try:
            r = client.get(url)
        except (httpx.TransportError, httpx.TimeoutException) as e:
            if attempt == pol.max_retries:
                return f"download failed: {type(e).__name__}: {e}"
            time.sleep(pol.delay(attempt, None, rng))
            continue
        if r.status_code == 429 or r.status_code >= 500:
            if attempt == pol.max_retries:
                return f"download failed: HTTP {r.status_code}"
            time.sleep(pol.delay(attempt, retry_after_s(r.headers), rng))
            continue
        if r.status_code != 200:
            return f"download failed: HTTP {r.status_code}"
        if not r.content.lstrip()[:5] == b"%PDF-":
            return f"not a PDF (content-type {r.headers.get('content-type')!r}, {len(r.content)} bytes)"
        tmp = dest.with_suffix(".pdf.tmp")
        tmp.write_bytes(r.content)
        os.replace(tmp, dest)
        return None
    return "download failed"  # pragma: no cover


def _pages(path: Path) -> int | None:
    try:
        import pypdfium2 as pdfium

        pdf = pdfium.PdfDocument(str(path))
        try:
            return len(pdf)
        finally:
            pdf.close()
    except Exception:  # an unreadable PDF is the converter's to quarantine, with its reason
        return None


def fetch_clusters(out_dir, cfg: FetchConfig | None = None, force: bool = False) -> tuple[list[dict], list[dict]]:
    """Fetch clusters into ``out_dir``: ``<paperId>.pdf`` per kept paper and ``metadata.json`` (the shared
    metadata shape). PDFs already in ``out_dir`` are not downloaded again. Returns (metadata rows, quarantine
    rows); also writes ``quarantine.json`` when some paper was left out.

    Raises InputError for bad counts, or an ``out_dir`` holding anything but an earlier fetch (unless ``force``;
    ctxbench.core.outdir), and FetchError when the API cannot be used."""
    cfg = cfg or FetchConfig()
    if cfg.seeds_per_subject < 1 or cfg.first_hop < 0 or cfg.second_hop < 0 or not cfg.subjects:
        raise InputError("fetch s2: --subjects must name at least one subject, --seeds-per-subject must be >= 1 "
                         "and --first-hop / --second-hop >= 0")
    out = Path(out_dir)

    # the rule of every --out (ctxbench.core.outdir): an earlier fetch (its metadata.json, PDFs) is completed, nothing else
    claim_out_dir(out, "fetch s2", force=force, is_own=(out / "metadata.json").exists(),
                  what="paper fetch (no metadata.json)")
    papers, cites = asyncio.run(discover(cfg))
    rows: list[dict] = []
    quarantine: list[dict] = []
    client = httpx.Client(timeout=cfg.timeout_s, follow_redirects=True)
    for p in papers:
        dest = out / f"{p['paperId']}.pdf"
        why = None if dest.exists() else _download(client, p["pdf_url"], dest, cfg)
        if why:
            quarantine.append({"input": p["paperId"], "stage": "fetch", "reason": why,
                               "detail": json.dumps({"url": p["pdf_url"], "title": p["title"], "cluster": p["cluster"],
                                                     "hop": p["hop"]}, ensure_ascii=False)})
            continue
        ids = p["externalIds"] or {}
        rows.append({
            "id": p["paperId"], "file": dest.name, "title": p["title"], "authors": p["authors"],
            "ref_count": p["referenceCount"], "ref_method": "S2" if p["referenceCount"] is not None else "-",
            "cites_in_set": [], "cited_by_in_set": [], "sha256": file_sha256(dest), "pages": _pages(dest),
            "year": p["year"], "subject": p["subject"], "cluster": p["cluster"], "hop": p["hop"],
            "ids": "; ".join(f"{k} {v}" for k, v in sorted(ids.items()) if v) or "none found",
            "s2_paper_id": p["paperId"], "pdf_url": p["pdf_url"],
            "license": f"open access ({p['oa_status']})" if p["oa_status"] else "open access (status unknown)",
            "encrypted": None, "notes": "fetched from the Semantic Scholar Graph API",
        })
    client.close()
    kept = {r["id"] for r in rows}
    by_id = {r["id"]: r for r in rows}
    for pid in sorted(kept):
        for cited in sorted(cites.get(pid, ())):
            if cited in kept and cited != pid:
                by_id[pid]["cites_in_set"].append(cited)
                by_id[cited]["cited_by_in_set"].append(pid)
    for r in rows:
        r["cited_by_in_set"].sort()
    (out / "metadata.json").write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if quarantine:
        (out / "quarantine.json").write_text(json.dumps(quarantine, indent=1, ensure_ascii=False) + "\n",
                                             encoding="utf-8")
    return rows, quarantine
