"""The silent-truncation check of model calls (:class:`TruncationCheck`): a server that keeps only part of a
prompt answers 200 and reports the prompt tokens it read, which are compared with the prompt's own count. Used by
the call runner (:mod:`ctxbench.models.runner`, which re-exports these names) for every answer it stores.

The check needs a tokenizer, which takes a while to load in a fresh process (cl100k_base: about 0.4 s, two thirds of
it decoding the rank file): :func:`truncation_check_soon` loads it in a thread, so a run's first calls are sent
while it loads and only their answers wait for it.
"""

from __future__ import annotations

import concurrent.futures
import threading
from dataclasses import dataclass
from typing import Callable

from ctxbench.models.prompts import messages_text
from ctxbench.models.registry import model_info
from ctxbench.tokenizers import get_tokenizer


@dataclass
class TruncationCheck:
    """Silent truncation: a server that keeps only part of a prompt (Ollama's default ``num_ctx``, a llama.cpp
    server started with a small ``-c`` and context shift) answers 200 and reports the tokens it read in
    ``usage.prompt_tokens``. The reply is ``truncated`` when that count is below the prompt's own count (``count``:
    the model's tokenizer, or an estimate) by more than ``tolerance`` (a fraction) plus ``slack`` tokens. A server
    that reports no usage is never judged truncated; chat templates only add tokens, so a count above the
    prompt's is never truncation either."""

    count: Callable[[str], int]
    tolerance: float
    tokenizer: str
    exact: bool
    slack: int = 16

    def expected(self, messages: list[dict]) -> int:
        """Tokens of the messages' text (no template) in this check's tokenizer."""
        return self.count(messages_text(messages))

    def is_truncated(self, reported: int | None, expected: int | None, cached: int | None = None,
                     window: int | None = None) -> bool:
        """True when the server's ``reported`` prompt count is below ``expected`` beyond the tolerance, and neither
        ``cached`` (prompt tokens the server says it served from its cache: a server that counts only the
        uncached part, as Ollama's ``prompt_eval_count`` does, reports the rest) nor ``window`` (the server's own
        context window in tokens, where it reports one) explains the shortfall: a window that holds the prompt
        even if this check's count is low by its whole tolerance rules truncation out."""
        if not reported or expected is None:  # no usage (litellm fills a missing one with zeros)
            return False
        floor = expected * (1.0 - self.tolerance) - self.slack
        if reported >= floor or reported + (cached or 0) >= floor:
            return False
        return not self.fits(expected, window)

    def fits(self, expected: int, window: int | None) -> bool:
        """Whether a server ``window`` (tokens) holds a prompt counted ``expected`` here, allowing this check's
        tolerance the other way (the prompt may be up to ``1 / (1 - tolerance)`` times longer in the server's
        tokenizer). False for an unknown window."""
        return bool(window) and window >= expected / max(1.0 - self.tolerance, 1e-6) + self.slack


TOLERANCE_EXACT = 0.05        # the model's own tokenizer: a few percent for how the server joins messages
TOLERANCE_APPROXIMATE = 0.25  # a registry tokenizer marked approximate (e.g. Claude's older tokenizer)
TOLERANCE_ESTIMATE = 0.5      # an unregistered model counted in cl100k_base: tokenizers differ up to ~1.6x


def truncation_check(model: str, count_tokens: Callable[[str], int] | None = None) -> TruncationCheck | None:
    """The truncation check for ``model``: ``count_tokens`` (the model's own counter, e.g. a local server's
    tokenizer) with the exact tolerance unless the registry marks the model's tokenizer approximate; else the
    registry's tokenizer; else a ``cl100k_base`` estimate with a wide tolerance. None when no tokenizer loads (the
    check is then skipped, never guessed)."""
    info = model_info(model)
    tol = TOLERANCE_APPROXIMATE if info.approximate else TOLERANCE_EXACT
    if count_tokens is not None:
        return TruncationCheck(count_tokens, tol, info.tokenizer or "the model's tokenizer", not info.approximate)
    name, exact = info.tokenizer, not info.approximate
    if not name or name == "local-server":
        name, tol, exact = "cl100k_base", TOLERANCE_ESTIMATE, False
    try:
        return TruncationCheck(get_tokenizer(name).count, tol, name, exact)
    except Exception:  # noqa: BLE001 - no tokenizer, no check (a missing file must not stop an evaluation)
        return None


def truncation_check_soon(model: str, count_tokens: Callable[[str], int] | None = None
                          ) -> concurrent.futures.Future:
    """:func:`truncation_check` for ``model`` as a future: done at once when nothing is to load (``count_tokens``
    given, e.g. the model's own counter), else computed in a daemon thread that loads the tokenizer meanwhile (a
    :class:`CallRunner` given it as ``truncation`` sends its first calls while the tokenizer loads, and its answers
    wait for it off the event loop). The future's result is what :func:`truncation_check` returns (None when no
    tokenizer loads); it never raises more than that function does."""
    fut: concurrent.futures.Future = concurrent.futures.Future()
    if count_tokens is not None:
        fut.set_result(truncation_check(model, count_tokens))
        return fut

    def load() -> None:
        try:
            fut.set_result(truncation_check(model))
        except BaseException as e:  # noqa: BLE001 - handed to whoever awaits the check
            fut.set_exception(e)

    threading.Thread(target=load, name="ctxbench-truncation-tokenizer", daemon=True).start()
    return fut
