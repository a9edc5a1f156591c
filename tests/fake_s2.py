"""A local server answering in the Semantic Scholar Graph API's documented JSON shape (stdlib only, 127.0.0.1, free
port), for testing ``ctxbench fetch s2`` with the real ``semanticscholar`` client.

Endpoints (``/graph/v1``): ``GET /paper/search`` (relevance search: ``query``, ``fields``, ``offset``, ``limit``,
``year``, ``fieldsOfStudy``, ``minCitationCount``, ``openAccessPdf``; answers ``{total, offset, next?, data}``),
``GET /paper/{id}``, ``GET /paper/{id}/references`` (``{offset, next?, data: [{citedPaper}]}``) and
``/citations`` (``{offset, next?, data: [{citingPaper}]}``); a paper is ``{paperId, title, authors: [{authorId,
name}], year, referenceCount, citationCount, openAccessPdf: {url, status, license} | null, externalIds,
fieldsOfStudy}`` restricted to the requested ``fields``; unknown ids answer 404 ``{"error": ...}``. PDFs are served
at ``/pdf/<name>``. ``script([...])`` queues behaviours for the next requests (``429``: Too Many Requests with
``Retry-After``); every request is logged with its path, query, headers and time.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


class FakeS2Server:
    """``with FakeS2Server(papers, refs, pdfs) as srv: srv.api_url``.

    ``papers``: {paperId: full paper dict (API shape)}; ``refs``: {paperId: [ids it cites]} (citations are the
    inverse); ``pdfs``: {path under /pdf/: (status, content_type, bytes)}."""

    def __init__(self, papers: dict, refs: dict, pdfs: dict, retry_after: int = 1):
        self.papers = papers
        self.refs = refs
        self.cites: dict[str, list[str]] = {}
        for a, bs in refs.items():
            for b in bs:
                self.cites.setdefault(b, []).append(a)
        self.pdfs = pdfs
        self.retry_after = retry_after
        self.log: list[dict] = []
        self._script: list[str] = []
        self._lock = threading.Lock()

    def script(self, behaviours: list[str]) -> None:
        with self._lock:
            self._script.extend(behaviours)

    def __enter__(self):
        srv = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, status: int, body, headers: dict | None = None, ctype="application/json"):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                u = urlparse(self.path)
                q = {k: v[-1] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
                with srv._lock:
                    srv.log.append({"path": u.path, "query": q, "headers": dict(self.headers), "t": time.monotonic()})
                    beh = srv._script.pop(0) if srv._script and u.path.startswith("/graph/") else "ok"
                if beh == "429":
                    return self._send(429, {"message": "Too Many Requests. Please wait and try again or apply for a "
                                                       "key for higher rate limits.", "code": "429"},
                                      {"Retry-After": str(srv.retry_after)})
                if u.path.startswith("/pdf/"):
                    status, ctype, data = srv.pdfs.get(u.path[5:], (404, "text/html", b"<html>Not Found</html>"))
                    return self._send(status, data, ctype=ctype)
                parts = u.path.split("/")
                if u.path == "/graph/v1/paper/search":
                    return self._send(200, srv._search(q))
                if len(parts) >= 5 and parts[:4] == ["", "graph", "v1", "paper"]:
                    pid = parts[4]
                    if pid not in srv.papers:
                        return self._send(404, {"error": f"Paper with id {pid} not found"})
                    fields = q.get("fields", "paperId,title").split(",")
                    if len(parts) == 5:
                        return self._send(200, srv._shape(srv.papers[pid], fields))
                    if parts[5] in ("references", "citations"):
                        ids = srv.refs.get(pid, []) if parts[5] == "references" else srv.cites.get(pid, [])
                        key = "citedPaper" if parts[5] == "references" else "citingPaper"
                        return self._send(200, srv._page(
                            [{key: srv._shape(srv.papers[i], fields) if i in srv.papers else
                              {"paperId": None, "title": i}} for i in ids], q, total=False))
                return self._send(404, {"error": "Not found"})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def pdf_url(self, name: str) -> str:
        return f"{self.api_url}/pdf/{name}"

    @staticmethod
    def _shape(paper: dict, fields: list[str]) -> dict:
        """A paper restricted to the requested fields; paperId is always returned (as the API does)."""
        out = {"paperId": paper["paperId"]}
        for f in fields:
            if f in paper:
                out[f] = paper[f]
        return out

    @staticmethod
    def _page(items: list, q: dict, total: bool) -> dict:
        offset = int(q.get("offset", 0) or 0)
        limit = int(q.get("limit", 100) or 100)
        page = items[offset: offset + limit]
        out = {"offset": offset, "data": page}
        if total:
            out["total"] = len(items)
        if offset + limit < len(items):
            out["next"] = offset + limit
        return out

    def _search(self, q: dict) -> dict:
        words = q.get("query", "").lower().split()
        fos = set(filter(None, q.get("fieldsOfStudy", "").split(",")))
        min_c = int(q.get("minCitationCount") or 0)
        year0 = int(q["year"].split("-")[0]) if q.get("year", "").split("-")[0] else 0
        hits = []
        for p in self.papers.values():
            if fos and not fos & set(p.get("fieldsOfStudy") or []):
                continue
            if (p.get("citationCount") or 0) < min_c or (p.get("year") or 0) < year0:
                continue
            if "openAccessPdf" in q and not (p.get("openAccessPdf") or {}).get("url"):
                continue
            text = ((p.get("title") or "") + " " + " ".join(p.get("fieldsOfStudy") or [])).lower()
            if all(w in text for w in words):
                hits.append(self._shape(p, q.get("fields", "paperId,title").split(",")))
        return self._page(hits, q, total=True)
