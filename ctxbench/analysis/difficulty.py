"""Evidence scope and dispersion of an instance (LURCH, "Beyond Context Length", section 3).

Spans are half-open token intervals ``[start, end)`` in the context. Overlapping or adjacent intervals are merged
first. With L context tokens, S evidence tokens and H the evidence span (first start to last end):

* scope = S / L, the proportion of the context covered by evidence;
* dispersion = (H − S) / (L − S), the fraction of all non-evidence text lying between the first and the last
  evidence interval: 0 for a single interval, 1 when the evidence span covers the whole context.

Both are None when the spans are unknown (empty) or the context is empty.
"""

from __future__ import annotations


def merge_spans(spans: list[list[int]]) -> list[tuple[int, int]]:
    """Sorted, disjoint, non-adjacent intervals covering the same tokens as ``spans``."""
    out: list[list[int]] = []
    for s, e in sorted((int(a), int(b)) for a, b in spans if b > a):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def scope_and_dispersion(spans: list[list[int]], context_tokens: int) -> tuple[float | None, float | None]:
    """``(scope, dispersion)`` of evidence spans in a context of ``context_tokens`` tokens (module docstring)."""
    merged = merge_spans(spans)
    if not merged or context_tokens <= 0:
        return None, None
    S = sum(e - s for s, e in merged)
    H = merged[-1][1] - merged[0][0]
    scope = S / context_tokens
    non_evidence = context_tokens - S
    dispersion = (H - S) / non_evidence if non_evidence > 0 else 0.0
    return scope, dispersion
