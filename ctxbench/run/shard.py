"""Sharding an evaluation's calls over workers by context (issue 36).

Every call on one context goes to one worker, in order, so the server's prefix cache (or a provider's prompt cache)
reads the context once for all its questions; contexts are spread over the workers so that each carries about the
same prompt tokens, not the same number of contexts (long-context builds mix 4K and 1M-token contexts). The
assignment is the longest-processing-time rule (Graham 1969): contexts in descending order of their tokens, each to
the worker that carries the fewest tokens so far (ties: the lower worker index; equal contexts: by context hash),
within 4/3 of the best possible maximum load.
"""

from __future__ import annotations

import heapq
from dataclasses import replace
from typing import Any

from ctxbench.models.prompts import messages_text

CHARS_PER_TOKEN = 4  # a request's prompt tokens where no count is at hand: its characters / 4


def context_tokens(calls: list[dict]) -> dict[str, int]:
    """Prompt tokens each context carries: the sum over ``calls`` (requests of :func:`ctxbench.run.evaluate
    .plan_requests`, each with ``_ctx`` and ``_messages``) of their prompt's tokens, ``_prompt_tokens`` where
    counted, else characters / :data:`CHARS_PER_TOKEN` (samples of one instance share their messages and are
    counted each). Returns ``{context hash: tokens}``."""
    out: dict[str, int] = {}
    for t in calls:
        n = t.get("_prompt_tokens") or max(1, len(messages_text(t["_messages"])) // CHARS_PER_TOKEN)
        out[t["_ctx"]] = out.get(t["_ctx"], 0) + n
    return out


def assign_contexts(tokens: dict[str, int], workers: int) -> list[list[str]]:
    """``workers`` lists of context hashes balanced by ``tokens`` (module docstring): every context in exactly one
    list; a list may be empty when there are fewer contexts than workers. Deterministic. Raises ValueError for
    fewer than one worker."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    heap = [(0, i) for i in range(workers)]
    out: list[list[str]] = [[] for _ in range(workers)]
    for ctx, n in sorted(tokens.items(), key=lambda kv: (-kv[1], kv[0])):
        load, i = heapq.heappop(heap)
        out[i].append(ctx)
        heapq.heappush(heap, (load + n, i))
    return out


def restrict_plan(plan: Any, contexts: set[str]) -> Any:
    """``plan`` (:class:`ctxbench.run.evaluate.Plan`) with only the requests on ``contexts`` (context hashes) among
    its cache hits, pending calls and window checks; the counts of the whole selection stay as they are."""
    keep = lambda ts: [t for t in ts if t["_ctx"] in contexts]  # noqa: E731
    hit_keys = {t["request_key"] for t in plan.todo if t["_ctx"] in contexts}
    return replace(plan, hits=[h for h in plan.hits if h["request_key"] in hit_keys], pending=keep(plan.pending),
                   verify=keep(plan.verify))
