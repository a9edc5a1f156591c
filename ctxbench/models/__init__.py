"""Models: registry, providers table (:mod:`~ctxbench.models.providers`), backends registered by name
(:mod:`~ctxbench.models.backends`: OpenAI-compatible HTTP, litellm, the embedded llama.cpp server), the gateway
(retries around one backend), the error table (:mod:`~ctxbench.models.errors`), the one reply classifier
(:mod:`~ctxbench.models.replies`), the call runner and the response cache."""

import os as _os

# litellm's price table: use the copy it ships instead of fetching one at import (no network here, and a
# reproducible cost figure everywhere)
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def quiet_litellm():
    """The ``litellm`` module with its console help lines turned off (``suppress_debug_info``: "Provider List:
    ...", "Give Feedback / Get Help ..." printed to stdout on an unknown model name or any error, which landed in
    the middle of ctxbench's own output, e.g. ``evaluate --dry-run`` of the embedded model). Raises ImportError
    when litellm is not installed."""
    import litellm

    litellm.suppress_debug_info = True
    return litellm
