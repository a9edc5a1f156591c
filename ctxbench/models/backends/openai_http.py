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
import urllib.request
from typing import Any

import aiohttp
import httpx
import yarl
from aiohttp.helpers import netrc_from_env

from ctxbench.core.backend import CallResult
from ctxbench.models.backends.base import BaseBackend, api_key, register_backend, served_name
from ctxbench.models.errors import PermanentError, classify
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


PROXY_SCHEMES = ("http", "https")  # the proxies aiohttp's client speaks to (https://: TLS in TLS, Python 3.11+)


def env_proxy(url: yarl.URL) -> yarl.URL | None:
    """The proxy the environment variables give a request to ``url``, read as httpx read them (the client this
    backend used before issue 36; the operating system's own proxy settings are not read): ``<scheme>_proxy`` for
    the URL's scheme (``HTTPS_PROXY`` for an https server), else ``ALL_PROXY``, either case, the lower-case one
    first; none where ``NO_PROXY`` names the host (or ``*``). A proxy given as ``host:port`` is
    ``http://host:port``. Returns the proxy's URL with its credentials (its own,
    else .netrc's for the proxy's host: aiohttp sends them to the proxy alone, as ``Proxy-Authorization``), or
    None for no proxy.

    aiohttp's own reading (``trust_env``) ignores ``ALL_PROXY`` and every ``https://`` proxy, so such a
    configuration sent its calls around the proxy, where they failed as connection errors. Raises PermanentError
    (status ``config_error``, naming the variable) for a proxy this client cannot speak to (``socks5://`` ...) and
    for a variable that is not a URL (its value not shown: it may hold credentials)."""
    proxies = urllib.request.getproxies_environment()  # the variables alone, as httpx (not the OS's settings)
    host = url.raw_host
    if not proxies or not host:
        return None
    if urllib.request.proxy_bypass_environment(f"{host}:{url.port}" if url.port else host, proxies):
        return None
    key = url.scheme if url.scheme in proxies else "all" if "all" in proxies else None
    if key is None:
        return None
    raw = proxies[key]
    var = next((v for v in (f"{key}_proxy", f"{key.upper()}_PROXY") if os.environ.get(v) == raw),
               f"{key.upper()}_PROXY")
    try:
        proxy = yarl.URL(raw if "://" in raw else f"http://{raw}")
        proxy.port  # noqa: B018 - a port out of range raises here
    except ValueError as e:
        raise PermanentError(f"configuration error: {var} is not a URL a proxy can have ({e}): set it like "
                             f"http://proxy.example:3128, or unset it", status="config_error") from None
    shown = proxy.with_user(None)
    if proxy.scheme not in PROXY_SCHEMES:
        raise PermanentError(f"configuration error: {var}={shown} is a {proxy.scheme} proxy, which the openai_http "
                             f"backend cannot use (it speaks to http:// and https:// proxies): set {var} to an HTTP "
                             f"proxy, or name the server's host {host} in NO_PROXY", status="config_error")
    if proxy.user is None:
        netrc = netrc_from_env()
        entry = netrc.authenticators(proxy.host) if netrc is not None and proxy.host else None
        if entry:
            proxy = proxy.with_user(entry[0] or "").with_password(entry[2] or "")
    return proxy


@register_backend("openai_http")
class OpenAIHTTPBackend(BaseBackend):
    """POSTs ``{"model", "messages", "max_tokens", **sampling}`` to ``base_url/chat/completions`` (a leading
    ``openai/`` dropped from the model name), with ``Authorization: Bearer`` the ``--api-key-env`` key, on one
    aiohttp session per backend: up to twice ``concurrency`` pooled connections, the proxy variables
    (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``: :func:`env_proxy`) honoured, the key sent to the
    server alone (never to the proxy), redirects not followed, ``timeout_s`` for connecting and for each wait for
    the server's bytes (as httpx's timeout was)."""

    _session: aiohttp.ClientSession | None = None
    _url: yarl.URL | None = None
    _proxy: yarl.URL | None = None
    _headers: dict[str, str] | None = None  # sent with each request (never to a proxy: see _http_session)

    def _http_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            n = max(self.concurrency, 1) * 2
            self._url, self._headers = chat_url(self.base_url), {"Content-Type": "application/json"}
            # the proxy variables read once, before the session: a proxy it cannot use is refused on every call
            self._proxy = env_proxy(self._url)
            key = api_key(self.api_key_env, self.base_url)
            if self._url.user is None and self._url.password is None:  # else basic auth from the URL, as httpx
                # per request, not the session's headers: aiohttp copies those into a proxy's request and sends an
                # Authorization there as Proxy-Authorization (the API key reached the proxy)
                self._headers["Authorization"] = f"Bearer {key}"
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(  # certificates loaded (0.1-0.2 s) only for an https server
                    limit=n, ssl=tls_context() if self._url.scheme == "https" else True),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.timeout_s, sock_read=self.timeout_s),
                max_line_size=MAX_HEADER_BYTES, max_field_size=MAX_HEADER_BYTES)
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
            async with session.post(self._url, data=body, allow_redirects=False, headers=self._headers,
                                    proxy=self._proxy) as r:
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
