"""What every backend shares: the registry of backends (:data:`BACKENDS`, :func:`register_backend`) and
:class:`BaseBackend`, the settings a backend is made with (model, base URL, key variable, timeout, concurrency),
its error classification (the one error table, :func:`ctxbench.models.errors.classify`) and no lifecycle.

A backend file registers its class: ``@register_backend("name")`` on a subclass of :class:`BaseBackend` that
implements ``generate`` (:class:`ctxbench.core.backend.Backend`).
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from typing import Any, ClassVar

from ctxbench.core.backend import CallResult
from ctxbench.core.redact import register as register_secret
from ctxbench.core.redact import register_url
from ctxbench.core.registry import Registry
from ctxbench.models.errors import classify

BACKENDS: Registry[type] = Registry("backend")


def register_backend(name: str):
    """Class decorator: register a backend class under ``name`` (sets its ``name`` attribute)."""
    def deco(cls: type) -> type:
        cls.name = name
        return BACKENDS.register(name)(cls)
    return deco


def api_key(api_key_env: str | None, base_url: str | None) -> str:
    """The key sent to a server: the value of ``api_key_env`` where named (``--api-key-env``), else ``sk-no-key``;
    a key is sent to a base URL only when named explicitly, so OPENAI_API_KEY never leaks to an arbitrary server.
    The key and the URL are registered for redaction from every error text (:mod:`ctxbench.core.redact`)."""
    key = (os.environ.get(api_key_env) if api_key_env else None) or "sk-no-key"
    register_secret(key)
    register_url(base_url)
    return key


def served_name(model: str) -> str:
    """The model name sent to an OpenAI-compatible server: ``model`` without a leading ``openai/``."""
    return model[len("openai/"):] if model.startswith("openai/") else model


class BaseBackend:
    """A backend for one ``model`` at ``base_url`` (None: the provider's default endpoint). ``api_key_env``: the
    variable holding the key for a base URL; ``timeout_s``: one attempt's limit; ``concurrency``: calls in flight
    (sizes a connection pool)."""

    name: ClassVar[str] = ""

    def __init__(self, model: str, base_url: str | None = None, api_key_env: str | None = None,
                 timeout_s: float = 600.0, concurrency: int = 8):
        self.model, self.base_url, self.api_key_env = model, base_url, api_key_env
        self.timeout_s, self.concurrency = timeout_s, concurrency

    async def generate(self, messages: list[dict], max_tokens: int, sampling: dict[str, Any]) -> CallResult:
        """One attempt of one chat request (:class:`ctxbench.core.backend.Backend`)."""
        raise NotImplementedError(f"backend {type(self).__name__} does not implement generate")

    def classify(self, exc: BaseException) -> Exception:
        """A client exception through the error table: TransientError or PermanentError."""
        return classify(exc)

    async def aclose(self) -> None:
        """Release connections (nothing to release here)."""

    @classmethod
    def preflight(cls, model: str, base_url: str | None) -> None:
        """Check, before any work, that what this backend needs locally is installed (nothing here); raises
        CtxbenchError naming what to install."""

    @classmethod
    def has_lifecycle(cls, model: str, base_url: str | None) -> bool:
        """Whether something must run while this backend serves ``model`` at ``base_url`` (:meth:`lifecycle`);
        answered without starting or loading anything."""
        return False

    @classmethod
    def lifecycle(cls, model: str, base_url: str | None) -> AbstractContextManager | None:
        """What must run while this backend serves ``model`` (a context manager, not yet entered), None for
        nothing."""
        return None

    @classmethod
    def slots(cls, model: str, base_url: str | None) -> int | None:
        """How many requests the server this backend starts for ``model`` answers at once (more calls in flight
        wait in its queue); None where ctxbench starts no server (the other end decides; nothing here)."""
        return None
