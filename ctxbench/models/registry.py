"""Model registry (``assets/models.yaml``): tokenizer, input window, output budget and sampling defaults."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


from ctxbench.core.config import assets_dir
from ctxbench.core.config import read_yaml
from ctxbench.core.errors import InputError, TokenizerError
from ctxbench.models.providers import price_table
from ctxbench.tokenizers import get_tokenizer


@dataclass
class ModelInfo:
    """What ctxbench knows of a model. ``window`` None means unknown (a name outside the registry).
    ``max_output_tokens``: the default output budget (:func:`default_output_budget` where the registry names none);
    ``reasoning``: a model that reasons at length before its answer (registry ``reasoning: true``, or its name)."""

    name: str
    tokenizer: str | None = None
    window: int | None = None
    max_output_tokens: int = 4096
    approximate: bool = False
    safety_margin: float = 0.0
    fixed_temperature: float | None = None
    default_samples: int = 1
    local: bool = False
    registered: bool = True
    reasoning: bool = False


# Names of models that reason at length before answering (their replies spend thousands of tokens first): OpenAI's
# o-series and gpt-5, DeepSeek-R1 / deepseek-reasoner, Qwen's QwQ and Qwen3, anything named *thinking* / *reasoner*
# / *reasoning*, Mistral's Magistral, gpt-oss, Gemini 2.5, Grok 3 mini / Grok 4, Phi-4-reasoning, EXAONE Deep.
REASONING_NAME_RE = re.compile(
    r"(?:^|[/_:-])o[134](?:-|$)|gpt-5|gpt-oss|deepseek[-_]?r1|\br1[-_]|reasoner|reasoning|thinking|\bqwq|qwen3"
    r"|magistral|gemini-2\.5|grok-(?:3-mini|4)|exaone-deep", re.IGNORECASE)
BUDGET_PLAIN = (2048, 8192, 4096)       # (least, most, window unknown): an instruct model's reply with its steps
BUDGET_REASONING = (8192, 32768, 16384)  # the same for a reasoning model


def is_reasoning_model(name: str) -> bool:
    """Whether ``name`` names a model that reasons at length before answering (:data:`REASONING_NAME_RE`)."""
    return bool(REASONING_NAME_RE.search(name or ""))


def default_output_budget(window: int | None, reasoning: bool) -> int:
    """The default output budget (tokens) of a model the registry gives none: one eighth of a known ``window``
    for an instruct model, clamped to 2,048 … 8,192 (4,096 when the window is unknown), and one quarter for a
    reasoning model, clamped to 8,192 … 32,768 (16,384 when unknown), so that the default chain-of-thought prompt's
    reply (its steps, then "Answer:") fits. A budget that ends a reply stores it as ``cut_off``
    (docs/replies.md); ``--max-tokens`` overrides it."""
    least, most, unknown = BUDGET_REASONING if reasoning else BUDGET_PLAIN
    if not window:
        return unknown
    return max(least, min(most, window // (4 if reasoning else 8)))


@lru_cache(maxsize=1)
def _registry_file() -> dict:
    return read_yaml(assets_dir() / "models.yaml", "model registry") or {}


def _registry() -> dict[str, dict]:
    return _registry_file().get("models", {})


def provider_info(provider: str | None) -> dict:
    """The ``providers:`` entry of ``assets/models.yaml`` for a litellm provider name (``openai``, ``anthropic``):
    ``batch_discount`` (factor on token prices in the provider's batch API) and ``cache_min_tokens`` (shortest
    prefix its prompt cache stores); empty for an unlisted provider or None."""
    return dict((_registry_file().get("providers") or {}).get(provider or "", {}) or {})


def model_info(name: str) -> ModelInfo:
    """Registry entry for ``name`` (also matched without a provider prefix such as ``openai/``); an unknown name
    gets an entry with unknown window, as SCHEMA.md requires."""
    reg = _registry()
    key = name if name in reg else name.split("/", 1)[-1] if name.split("/", 1)[-1] in reg else None
    if key is None:  # names differ in case across providers and hubs (qwen2.5-7b-instruct-1m)
        low = {k.lower(): k for k in reg}
        key = low.get(name.lower()) or low.get(name.split("/", 1)[-1].lower())
    if key is None:
        r = is_reasoning_model(name)
        return ModelInfo(name=name, registered=False, reasoning=r, max_output_tokens=default_output_budget(None, r))
    e = reg[key]
    r = bool(e.get("reasoning", is_reasoning_model(key)))
    return ModelInfo(name=name, tokenizer=e.get("tokenizer"), window=e.get("window"),
                     max_output_tokens=e.get("max_output_tokens") or default_output_budget(e.get("window"), r),
                     approximate=bool(e.get("approximate")),
                     safety_margin=float(e.get("safety_margin", 0.0)), fixed_temperature=e.get("fixed_temperature"),
                     default_samples=int(e.get("default_samples", 1)), local=bool(e.get("local")), reasoning=r)


def _litellm_names() -> set[str]:
    """Model names litellm knows (its price table), without provider prefixes too; empty where it cannot load."""
    try:
        names = set(price_table())
    except Exception:  # noqa: BLE001 - a broken litellm install only loses suggestions, never the run
        return set()
    return names | {n.split("/", 1)[-1] for n in names}


def unknown_model_warning(name: str, base_url: str | None = None) -> str | None:
    """A one-line warning where ``name`` looks misspelt, else None: it is in neither ``assets/models.yaml`` nor
    litellm's model table (with or without a provider prefix, any case), and no ``base_url`` names a server whose
    own model names are free. Suggests up to 3 close names (difflib, registry names first), e.g. for ``gtp-4o``:
    ``warning: model 'gtp-4o' is in neither assets/models.yaml nor litellm's model list; did you mean gpt-4o,
    ...?``. A model that is really new still runs: it gets an unknown window and cost."""
    import difflib

    if base_url or model_info(name).registered:
        return None
    bare = name.split("/", 1)[-1]
    known = _litellm_names()
    if {name, bare, name.lower(), bare.lower()} & known:
        return None
    reg = list(_registry())
    close = difflib.get_close_matches(bare.lower(), [r.lower() for r in reg], n=3, cutoff=0.6)
    close = [next(r for r in reg if r.lower() == c) for c in close]
    if len(close) < 3:
        close += [c for c in difflib.get_close_matches(bare, sorted(known), n=3, cutoff=0.75) if c not in close]
    hint = f"; did you mean {', '.join(close[:3])}?" if close else ""
    return (f"warning: model {name!r} is in neither assets/models.yaml nor litellm's model list{hint} "
            f"(an unknown model runs with an unknown window and cost; with --base-url the server's own names are "
            f"taken as given)")


def check_sizing_model(name: str) -> ModelInfo:
    """The registry entry of a model that contexts can be sized for (in ``assets/models.yaml`` with a window and a
    ctxbench tokenizer), without loading the tokenizer. Raises InputError naming the model and the fix."""
    info = model_info(name)
    if not info.registered:
        raise InputError(f"model {name!r} is not in assets/models.yaml: add it with its tokenizer, window and "
                         f"max_output_tokens to size contexts for it")
    if not info.tokenizer or info.tokenizer == "local-server" or not info.window:
        raise InputError(f"model {name!r} has no ctxbench tokenizer or no window in assets/models.yaml: add both "
                         f"to size contexts for it")
    return info


def sizing_tokenizer(name: str):
    """``(ModelInfo, Tokenizer)`` of a registered model, for sizing contexts in that model's own tokens.

    Raises InputError naming the model when it is not in ``assets/models.yaml``, has no window or tokenizer there,
    or its tokenizer cannot be loaded (with what to install); never falls back to another tokenizer."""
    info = check_sizing_model(name)
    try:
        return info, get_tokenizer(info.tokenizer)
    except TokenizerError as e:
        raise InputError(f"model {name!r}: its tokenizer {info.tokenizer!r} cannot be loaded ({e})") from None
