"""Model backends: one class per way of calling a model, registered by name (:data:`BACKENDS`).

==============  ====================================================  ===========================================
name            calls                                                 file
==============  ====================================================  ===========================================
``openai_http`` an OpenAI-compatible server at a ``--base-url``        :mod:`~ctxbench.models.backends.openai_http`
``litellm``     every provider litellm knows, by model name            :mod:`~ctxbench.models.backends.litellm_backend`
``embedded``    the embedded llama.cpp model, started and stopped      :mod:`~ctxbench.models.backends.embedded`
``replicas``    several replicas of one model (a ``--base-url`` list)  :mod:`~ctxbench.models.backends.replicas`
==============  ====================================================  ===========================================

Providers' batch APIs are the batch clients of :mod:`ctxbench.models.batch` (``BATCH_CLIENTS``). Which backend a
model goes to is :func:`ctxbench.models.providers.backend_name`; :func:`backend_class` looks it up and
:func:`server_for` gives what must run while a backend serves (the embedded server), so no command tests for the
embedded model itself; :func:`concurrency_note` says when that server answers fewer calls at once than asked. A
backend made outside the package registers itself with :func:`~ctxbench.models.backends.base.register_backend`, or
lazily: ``BACKENDS.register_lazy("name", "pkg.module:Class")``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from ctxbench.models.backends.base import BACKENDS, BaseBackend, register_backend
from ctxbench.models.backends.embedded import EmbeddedBackend
from ctxbench.models.backends.litellm_backend import LitellmBackend
from ctxbench.models.backends.openai_http import OpenAIHTTPBackend
from ctxbench.models.backends.replicas import ReplicasBackend
from ctxbench.models.providers import backend_name

__all__ = ["BACKENDS", "BaseBackend", "EmbeddedBackend", "LitellmBackend", "OpenAIHTTPBackend", "ReplicasBackend",
           "backend_class", "concurrency_note",
           "preflight", "register_backend", "server_for"]


def backend_class(model: str, base_url: str | None = None, backend: str = "auto") -> type[BaseBackend]:
    """The registered backend class a call of ``model`` at ``base_url`` goes through
    (:func:`ctxbench.models.providers.backend_name`). Raises UnknownNameError (a KeyError naming the choices) for
    an unknown ``backend``."""
    return BACKENDS.get(backend_name(model, base_url, backend))


def server_for(model: str, base_url: str | None = None) -> Callable[[], AbstractContextManager] | None:
    """What ``evaluate_build(server=...)`` (and ``screen_build``) take for ``model`` at ``base_url``: a callable
    making the context manager that runs the backend's server (the embedded model's llama.cpp server), or None
    when the backend needs nothing started. Replaces ``LocalServer if model == EMBEDDED_MODEL and not base_url
    else None``."""
    cls = backend_class(model, base_url)
    if not cls.has_lifecycle(model, base_url):
        return None
    return lambda: cls.lifecycle(model, base_url)


def concurrency_note(model: str, base_url: str | None, concurrency: int) -> str | None:
    """One line saying that ``--concurrency`` above what the server ctxbench starts for ``model`` answers at once
    (:meth:`~ctxbench.models.backends.base.BaseBackend.slots`: the embedded llama.cpp server, 1) changes nothing,
    since its calls go one at a time (the others wait in its queue); None where it does change something."""
    slots = getattr(backend_class(model, base_url), "slots", lambda m, u: None)(model, base_url)
    if slots is None or concurrency <= slots:
        return None
    at_once = "one at a time" if slots == 1 else f"{slots} at a time"
    return (f"note: calls to {model} go {at_once} (the server ctxbench runs for it has {slots} slot"
            f"{'s' if slots != 1 else ''}); --concurrency {concurrency} changes nothing")


def preflight(model: str, base_url: str | None = None) -> None:
    """Say before any work what the backend of ``model`` at ``base_url`` lacks locally (the embedded model's
    runtime or GGUF): raises CtxbenchError naming the install command; nothing for a backend that needs nothing.
    Replaces ``if model == EMBEDDED_MODEL and not base_url: embedded_runtime(); embedded_gguf()``."""
    backend_class(model, base_url).preflight(model, base_url)
