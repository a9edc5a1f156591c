"""The ``replicas`` backend: one model served by several OpenAI-compatible replicas (a ``--base-url`` deployment,
:mod:`ctxbench.models.deployment`), one :class:`~ctxbench.models.backends.openai_http.OpenAIHTTPBackend` per
replica.

Each call goes to the replica its route ranks first among those in service (:data:`ctxbench.models.deployment
.ROUTE`, set by the call runner to the context's shared-prefix hash: every question of a context reaches one
replica, whose prefix cache serves the context once). A connection error, a timeout or a 5xx counts against the
replica (:class:`~ctxbench.models.deployment.ReplicaHealth`); once it is taken out, the call (and every later call
of its contexts) goes at once to the replica ranked next. A 429 or any other answer is the call's own outcome.
"""

from __future__ import annotations

from typing import Any

from ctxbench.core.backend import CallResult
from ctxbench.core.redact import redact
from ctxbench.models.backends.base import BaseBackend, register_backend
from ctxbench.models.backends.openai_http import OpenAIHTTPBackend
from ctxbench.models.deployment import ROUTE, ReplicaHealth, parse_deployment, route_of, shown
from ctxbench.models.errors import TransientError


def replica_fault(e: TransientError) -> bool:
    """Whether a transient failure is the replica's fault (connection error, timeout, 5xx, a body cut in transit)
    rather than load the server asks to wait out (a 429, any Retry-After)."""
    return e.retry_after is None and not str(e).startswith("HTTP 429")


@register_backend("replicas")
class ReplicasBackend(BaseBackend):
    """Calls ``model`` on the replicas of the deployment ``base_url`` names (:func:`~ctxbench.models.deployment
    .parse_deployment`); ``health`` says which are in service. Raises TransientError (retried by the gateway, then
    the outage pause) when every replica is out."""

    def __init__(self, model: str, base_url: str | None = None, api_key_env: str | None = None,
                 timeout_s: float = 600.0, concurrency: int = 8):
        super().__init__(model, base_url, api_key_env, timeout_s, concurrency)
        dep = parse_deployment(base_url or "", model)
        self.health = ReplicaHealth(dep.replicas, dep.fail_after)
        self._backends = {r: OpenAIHTTPBackend(model, r, api_key_env, timeout_s, concurrency) for r in dep.replicas}
        self.calls: dict[str, int] = {r: 0 for r in dep.replicas}  # attempts sent to each replica

    async def generate(self, messages: list[dict], max_tokens: int, sampling: dict[str, Any]) -> CallResult:
        """One attempt on the route's replica; a replica fault that takes it out sends the attempt to the next one
        at once."""
        route = ROUTE.get() or route_of(messages)
        while True:
            r = self.health.pick(route)
            if r is None:
                why = "; ".join(f"{shown(k)}: {redact(v)}" for k, v in self.health.down.items())
                raise TransientError(f"every replica of the deployment is out of service ({why[:400]})")
            self.calls[r] += 1
            try:
                res = await self._backends[r].generate(messages, max_tokens, sampling)
            except TransientError as e:
                if replica_fault(e) and self.health.failed(r, redact(str(e))[:200]):
                    continue  # taken out: this attempt goes to the replica ranked next
                raise
            self.health.ok(r)
            return res

    async def aclose(self) -> None:
        """Close every replica's connection pool."""
        for b in self._backends.values():
            await b.aclose()
