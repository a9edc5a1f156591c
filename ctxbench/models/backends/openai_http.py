"""The ``openai_http`` backend: any OpenAI-compatible ``/chat/completions`` server at a ``--base-url`` (vLLM,
llama.cpp, SGLang, TGI, Ollama, LM Studio, a provider's compatible endpoint), over a bare async HTTP client
(measured faster than the SDKs on 2 cores, whose per-call CPU cost limits throughput). The answer, whatever its
status and shape, goes through the one reply classifier (:func:`ctxbench.models.replies.http_result`).
"""

from __future__ import annotations

import functools
import os
import ssl
import time
from typing import Any

import httpx

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


@register_backend("openai_http")
class OpenAIHTTPBackend(BaseBackend):
    """POSTs ``{"model", "messages", "max_tokens", **sampling}`` to ``base_url/chat/completions`` (a leading
    ``openai/`` dropped from the model name), with ``Authorization: Bearer`` the ``--api-key-env`` key."""

    _client: httpx.AsyncClient | None = None

    def _http_client(self) -> httpx.AsyncClient:
        if self._client is None:
            n = max(self.concurrency, 1) * 2
            self._client = httpx.AsyncClient(
                base_url=self.base_url.rstrip("/") + "/", timeout=self.timeout_s, verify=tls_context(),
                headers={"Authorization": f"Bearer {api_key(self.api_key_env, self.base_url)}"},
                limits=httpx.Limits(max_connections=n, max_keepalive_connections=n))
        return self._client

    async def generate(self, messages: list[dict], max_tokens: int, sampling: dict[str, Any]) -> CallResult:
        """One call; a timeout or transport failure is raised classified (:func:`ctxbench.models.errors.classify`),
        an HTTP answer is read by :func:`ctxbench.models.replies.http_result` (``latency_s`` set)."""
        t0 = time.perf_counter()
        try:
            r = await self._http_client().post("chat/completions", json={
                "model": served_name(self.model), "messages": messages, "max_tokens": max_tokens, **sampling})
        except (httpx.TimeoutException, httpx.TransportError) as e:
            raise classify(e) from None
        lat = time.perf_counter() - t0
        res = http_result(self.model, r.status_code, r.text, r.headers, max_tokens)
        res.latency_s = lat
        return res

    async def aclose(self) -> None:
        """Close the connection pool."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None
