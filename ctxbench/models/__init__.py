"""Models: registry, response cache, gateway (litellm / OpenAI-compatible HTTP), embedded local server."""

import os as _os

# litellm's price table: use the copy it ships instead of fetching one at import (no network here, and a
# reproducible cost figure everywhere)
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
