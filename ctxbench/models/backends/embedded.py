"""The ``embedded`` backend: ctxbench's default model (SmolLM2-135M-Instruct) on a llama.cpp server that ctxbench
starts on a free loopback port and stops itself (:class:`ctxbench.models.local_server.LocalServer`), called over
the same OpenAI-compatible HTTP path as any server (:class:`~ctxbench.models.backends.openai_http
.OpenAIHTTPBackend`).

Two ways it runs, neither of which needs a command to test for the embedded model:

- :meth:`EmbeddedBackend.lifecycle` is the server as a context manager; an evaluation enters it only when some
  request is neither stored nor cached (:func:`ctxbench.models.backends.server_for` gives it to
  ``evaluate_build(server=...)``), and calls at its ``base_url`` with its tokenizer and window;
- a gateway made for the embedded model without a base URL starts the server on its first call and stops it when
  the gateway is closed (:meth:`EmbeddedBackend.generate`, :meth:`EmbeddedBackend.aclose`).
"""

from __future__ import annotations

import asyncio
from contextlib import AbstractContextManager
from typing import Any

from ctxbench.core.backend import CallResult
from ctxbench.models import local_server
from ctxbench.models.backends.base import register_backend
from ctxbench.models.backends.openai_http import OpenAIHTTPBackend
from ctxbench.models.providers import is_embedded


@register_backend("embedded")
class EmbeddedBackend(OpenAIHTTPBackend):
    """The embedded model's server, started on demand; otherwise :class:`OpenAIHTTPBackend` at its URL."""

    _server: Any = None
    _starting: asyncio.Lock | None = None

    @classmethod
    def preflight(cls, model: str, base_url: str | None) -> None:
        """A missing runtime or GGUF said before any work (:func:`~ctxbench.models.local_server.embedded_runtime`,
        :func:`~ctxbench.models.local_server.embedded_gguf` raise CtxbenchError naming the install command), for the
        embedded model at no base URL; nothing otherwise."""
        if cls.has_lifecycle(model, base_url):
            local_server.embedded_runtime()
            local_server.embedded_gguf()

    @classmethod
    def has_lifecycle(cls, model: str, base_url: str | None) -> bool:
        """True for the embedded model at no base URL (:func:`ctxbench.models.providers.is_embedded`)."""
        return is_embedded(model, base_url)

    @classmethod
    def lifecycle(cls, model: str, base_url: str | None) -> AbstractContextManager | None:
        """A :class:`~ctxbench.models.local_server.LocalServer` (not yet started) for the embedded model at no base
        URL; None otherwise (a server someone else runs). Entering it starts the server (raises CtxbenchError
        naming the log when it cannot), leaving it stops it; the entered object has ``base_url``,
        ``count_tokens`` and ``n_ctx``."""
        return local_server.LocalServer() if cls.has_lifecycle(model, base_url) else None

    @classmethod
    def slots(cls, model: str, base_url: str | None) -> int | None:
        """:data:`~ctxbench.models.local_server.EMBEDDED_SLOTS` (1) for the embedded model at no base URL: its
        server answers one request at a time; None otherwise (a server someone else runs)."""
        return local_server.EMBEDDED_SLOTS if cls.has_lifecycle(model, base_url) else None

    async def generate(self, messages: list[dict], max_tokens: int, sampling: dict[str, Any]) -> CallResult:
        """One call to the embedded server, starting it first when this backend has no base URL yet (once, however
        many calls arrive together; the start runs in a thread, off the event loop)."""
        if self.base_url is None:
            if self._starting is None:
                self._starting = asyncio.Lock()
            async with self._starting:
                if self.base_url is None:
                    srv = self.lifecycle(self.model, None)
                    if srv is None:
                        raise ValueError(f"model {self.model!r} is not the embedded model "
                                         f"{local_server.EMBEDDED_MODEL!r}: use another backend")
                    self._server = await asyncio.to_thread(srv.__enter__)
                    self.base_url = self._server.base_url
        return await super().generate(messages, max_tokens, sampling)

    async def aclose(self) -> None:
        """Close the connections and stop the server this backend started (if it started one)."""
        await super().aclose()
        if self._server is not None:
            srv, self._server = self._server, None
            await asyncio.to_thread(srv.__exit__, None, None, None)
