"""The ``openai_http`` backend: any OpenAI-compatible ``/chat/completions`` server at a ``--base-url`` (vLLM,
llama.cpp, SGLang, TGI, Ollama, LM Studio, a provider's compatible endpoint), over a bare async HTTP client
(measured faster than the SDKs on 2 cores, whose per-call CPU cost limits throughput): aiohttp's, whose parser is
compiled (issue 36: 0.2-0.3 ms of the event loop's CPU per call against 1.1-1.3 ms for httpx's ``AsyncClient``,
which checked every pooled connection with a system call before each request). The answer, whatever its status
and shape, goes through the one reply classifier (:func:`ctxbench.models.replies.http_result`).
"""

from __future__ import annotations

import functools
import json
import os
import ssl
import time
from typing import Any

import aiohttp
import httpx
import yarl
from aiohttp.helpers import get_env_proxy_for_url

from ctxbench.core.backend import CallResult
from ctxbench.models.backends.base import BaseBackend, api_key, register_backend, served_name
from ctxbench.models.errors import classify
from ctxbench.models.replies import http_result


def tls_context() -> ssl.SSLContext:
    """httpx's default TLS context (certifi's certificates, or those ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` name),
    made once per process and per value of those variables and shared by the backend's clients: loading the
    certificates takes about 0.1 s (measured on 2 cores), which every evaluation's first call paid on the event
    loop when each client made its own. Raises what :func:`httpx.create_ssl_context` raises (a missing file)."""
    return _tls_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=4)
def _tls_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    return httpx.create_ssl_context()  # reads the two variables itself: the arguments key the cache


MAX_HEADER_BYTES = 65536  # a reply's status line or header, at most (aiohttp's default, 8190, refused long headers
# that httpx read, e.g. a gateway's tracing or cookie headers)


def chat_url(base_url: str) -> yarl.URL:
    """The ``/chat/completions`` URL of a server at ``base_url``: the path extended (a trailing slash dropped),
    its query kept (``http://h/v1?x=1`` gives ``http://h/v1/chat/completions?x=1``). Raises ValueError for a URL
    that cannot be parsed."""
    u = yarl.URL(base_url)
    return u.with_path(u.path.rstrip("/") + "/chat/completions").with_query(u.query)


@register_backend("openai_http")
class OpenAIHTTPBackend(BaseBackend):
    """POSTs ``{"model", "messages", "max_tokens", **sampling}`` to ``base_url/chat/completions`` (a leading
    ``openai/`` dropped from the model name), with ``Authorization: Bearer`` the ``--api-key-env`` key, on one
    aiohttp session per backend: up to twice ``concurrency`` pooled connections, the proxy variables
    (``HTTP_PROXY``, ``HTTPS_PROXY``, ``NO_PROXY``) honoured, redirects not followed, ``timeout_s`` for connecting and for each wait for the server's bytes (as httpx's
    timeout was)."""

    _session: aiohttp.ClientSession | None = None
    _url: yarl.URL | None = None
    _proxy: yarl.URL | None = None
    _proxy_auth: aiohttp.BasicAuth | None = None

    def _http_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            n = max(self.concurrency, 1) * 2
            self._url, headers = chat_url(self.base_url), {"Content-Type": "application/json"}
            key = api_key(self.api_key_env, self.base_url)
            if self._url.user is None and self._url.password is None:  # else basic auth from the URL, as httpx
                headers["Authorization"] = f"Bearer {key}"
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(  # certificates loaded (0.1-0.2 s) only for an https server
                    limit=n, ssl=tls_context() if self._url.scheme == "https" else True),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.timeout_s, sock_read=self.timeout_s),
                headers=headers, max_line_size=MAX_HEADER_BYTES, max_field_size=MAX_HEADER_BYTES)
            try:  # the proxy variables read once (aiohttp's trust_env reads them, and .netrc, in a thread per call)
                self._proxy, self._proxy_auth = get_env_proxy_for_url(self._url)
            except LookupError:
                self._proxy, self._proxy_auth = None, None
        return self._session

    async def generate(self, messages: list[dict], max_tokens: int, sampling: dict[str, Any]) -> CallResult:
        """One call; a timeout or transport failure is raised classified (:func:`ctxbench.models.errors.classify`),
        an HTTP answer is read by :func:`ctxbench.models.replies.http_result` (``latency_s`` set). The body is
        compact UTF-8 JSON (NaN refused: ValueError, as httpx did); the answer is decoded in its declared charset,
        else UTF-8, undecodable bytes replaced."""
        body = json.dumps({"model": served_name(self.model), "messages": messages, "max_tokens": max_tokens,
                           **sampling}, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
        session = self._http_session()
        t0 = time.perf_counter()
        try:
            async with session.post(self._url, data=body, allow_redirects=False, proxy=self._proxy,
                                    proxy_auth=self._proxy_auth) as r:
                raw = await r.read()
                status, headers, charset = r.status, r.headers, r.charset
        except (aiohttp.ClientError, TimeoutError) as e:
            raise classify(e) from None
        lat = time.perf_counter() - t0
        try:
            text = raw.decode(charset or "utf-8", errors="replace")
        except LookupError:  # a charset Python does not know
            text = raw.decode("utf-8", errors="replace")
        res = http_result(self.model, status, text, headers, max_tokens)
        res.latency_s = lat
        return res

    async def aclose(self) -> None:
        """Close the connection pool."""
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()
