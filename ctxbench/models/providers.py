"""Providers: the one place that answers, for a model name (and a ``--base-url``), which provider serves it, which
key variable it needs, which price it is billed at, which batch API takes it, whether its requests carry a
prompt-cache hint and which backend calls it (:func:`resolve`).

:data:`PROVIDERS` is the table, one :class:`Provider` per litellm provider name ctxbench treats specially; the
functions below read it (and litellm's provider resolution and price table where the table is silent). Before this
module these answers lived in five places (``cache.PROVIDER_HOSTS``/``model_provider``, ``effort.provider_of``,
``pricing.provider_of``, ``batch.batch_protocol``, ``prompts.takes_cache_hint``); those names are kept as
re-exports with unchanged behaviour, and the response cache's request keys (:func:`ctxbench.models.cache
.endpoint_id`) read :data:`PROVIDER_HOSTS` and :func:`model_provider` exactly as before.

Adding a provider: one :class:`Provider` entry (its public API hosts, key variables, batch protocol, cache hint,
request shape). Adding a backend: one file in ``ctxbench/models/backends/`` and, when some models should go to it
by default, a line in :func:`backend_name` (docs/reference/models.md, "Adding a backend").
"""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ctxbench.core.errors import InputError
from ctxbench.models import quiet_litellm
from ctxbench.models.deployment import is_deployment
from ctxbench.models.local_server import EMBEDDED_MODEL


@dataclass(frozen=True)
class Provider:
    """One row of :data:`PROVIDERS`. ``name``: the litellm provider name; ``hosts``: host[:port] of its public API
    (a ``--base-url`` there is that provider's default endpoint, whatever its path); ``key_env``: the environment
    variable(s) holding its API key, as litellm reads them; ``batch``: the batch protocol of ``evaluate --batch``
    (``openai``: files + batches through litellm; ``anthropic``: Message Batches over HTTP; None: no batch API
    ctxbench sends to); ``cache_hint``: a Claude model named under this prefix takes Anthropic's ``cache_control``
    hint; ``shape``: the request shape of reasoning-effort fields (:mod:`ctxbench.models.effort`: ``openai``,
    ``anthropic``, ``gemini`` or ``other``)."""

    name: str
    hosts: tuple[str, ...] = ()
    key_env: tuple[str, ...] = ()
    batch: str | None = None
    cache_hint: bool = False
    shape: str = "other"


PROVIDERS: dict[str, Provider] = {p.name: p for p in (
    Provider("openai", ("api.openai.com",), ("OPENAI_API_KEY",), batch="openai", shape="openai"),
    Provider("anthropic", ("api.anthropic.com",), ("ANTHROPIC_API_KEY",), batch="anthropic", cache_hint=True,
             shape="anthropic"),
    Provider("gemini", ("generativelanguage.googleapis.com",), ("GEMINI_API_KEY",), shape="gemini"),
    Provider("openrouter", ("openrouter.ai",), ("OPENROUTER_API_KEY",), cache_hint=True),
    Provider("deepseek", ("api.deepseek.com",), ("DEEPSEEK_API_KEY",)),
    Provider("groq", ("api.groq.com",), ("GROQ_API_KEY",)),
    Provider("together_ai", ("api.together.ai", "api.together.xyz"), ("TOGETHERAI_API_KEY", "TOGETHER_API_KEY")),
    Provider("mistral", ("api.mistral.ai",), ("MISTRAL_API_KEY",)),
    Provider("xai", ("api.x.ai",), ("XAI_API_KEY",)),
    Provider("fireworks_ai", ("api.fireworks.ai",), ("FIREWORKS_AI_API_KEY", "FIREWORKS_API_KEY")),
    Provider("cohere", ("api.cohere.ai", "api.cohere.com"), ("COHERE_API_KEY", "CO_API_KEY")),
    Provider("perplexity", ("api.perplexity.ai",), ("PERPLEXITYAI_API_KEY", "PERPLEXITY_API_KEY")),
    Provider("deepinfra", ("api.deepinfra.com",), ("DEEPINFRA_API_KEY",)),
    Provider("cerebras", ("api.cerebras.ai",), ("CEREBRAS_API_KEY",)),
    Provider("moonshot", ("api.moonshot.ai", "api.moonshot.cn"), ("MOONSHOT_API_KEY",)),
    # providers without a public host of their own in this table: Claude behind them takes the cache hint
    Provider("bedrock", key_env=("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"), cache_hint=True),
    Provider("vertex_ai", key_env=("GOOGLE_APPLICATION_CREDENTIALS",), cache_hint=True),
    Provider("vertex_ai_beta", key_env=("GOOGLE_APPLICATION_CREDENTIALS",), cache_hint=True),
)}

# public API hosts of providers litellm calls by default (host[:port] -> litellm provider name); a --base-url on one
# of these hosts is that provider's default endpoint, whatever its path (/v1, /v1beta, /openai/v1, ...). Part of
# the request key's endpoint (ctxbench.models.cache.endpoint_id): a host moved or renamed here changes keys.
PROVIDER_HOSTS: dict[str, str] = {h: p.name for p in PROVIDERS.values() for h in p.hosts}

# litellm provider prefixes under which a Claude model takes Anthropic's ``cache_control`` hint (litellm passes it
# on to Anthropic's API, to Bedrock as a cache point and to Vertex AI); "" is a bare name (``claude-...``). An
# ``openai/`` name at a --base-url is an OpenAI-compatible server, which takes no hint.
CACHE_HINT_PREFIXES: tuple[str, ...] = ("",) + tuple(p.name for p in PROVIDERS.values() if p.cache_hint)

# providers whose batches ctxbench sends through litellm (OpenAI's files + batches protocol)
LITELLM_BATCH_PROVIDERS: tuple[str, ...] = tuple(p.name for p in PROVIDERS.values() if p.batch == "openai")


@dataclass(frozen=True)
class Resolution:
    """What :func:`resolve` answers for one model at one endpoint: ``provider`` (litellm's provider name, None where
    unknown), ``key_env`` (its key variable(s); () for a base URL, whose key comes only from ``--api-key-env``),
    ``price_provider`` (the provider whose ``providers:`` entry in assets/models.yaml sets batch discounts and cache
    minimums), ``batch`` (``(protocol, transport)`` of ``--batch``, None where there is no batch API),
    ``cache_hint`` (requests mark their shared prefix with ``cache_control``), ``request_shape`` (the reasoning
    fields' shape) and ``backend`` (the registered backend name a call goes through)."""

    model: str
    base_url: str | None
    provider: str | None
    key_env: tuple[str, ...]
    price_provider: str | None
    batch: tuple[str, str] | None
    cache_hint: bool
    request_shape: str
    backend: str


def resolve(model: str, base_url: str | None = None, backend: str = "auto") -> Resolution:
    """Every provider answer for ``model`` at ``base_url`` (:class:`Resolution`), from the functions below. May
    consult litellm's provider resolution and price table (never the network)."""
    provider = model_provider(model)
    try:
        batch: tuple[str, str] | None = batch_protocol(model, base_url, backend)
    except InputError:
        batch = None
    spec = PROVIDERS.get(provider or "")
    return Resolution(model, base_url, provider, () if base_url or spec is None else spec.key_env,
                      price_provider(model), batch, takes_cache_hint(model), request_shape(model, base_url),
                      backend_name(model, base_url, backend))


def model_provider(model: str) -> str | None:
    """The litellm provider that serves ``model`` by default (``openai`` for ``gpt-4o``), or None when litellm
    cannot tell (or is not installed). A name prefixed with a provider of :data:`PROVIDER_HOSTS`
    (``deepseek/...``) is that provider without asking litellm."""
    prefix = model.split("/", 1)[0] if "/" in model else None
    if prefix in set(PROVIDER_HOSTS.values()):
        return prefix
    try:
        litellm = quiet_litellm()

        return litellm.get_llm_provider(model)[1]
    except Exception:  # noqa: BLE001 - litellm raises its own BadRequestError for unknown names
        return prefix


# litellm's offline price table, the file it loads under LITELLM_LOCAL_MODEL_COST_MAP (ctxbench.models sets it)
_PRICE_FILE = "model_prices_and_context_window_backup.json"
_NOT_MODELS = ("fallback_generalizations",)  # top-level keys litellm takes out of the table at load


@functools.lru_cache(maxsize=1)
def _shipped_price_table() -> Mapping[str, Mapping]:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(list(spec.submodule_search_locations)[0]) / _PRICE_FILE
    if not path.is_file():  # a litellm that ships its table otherwise: ask litellm itself
        return quiet_litellm().model_cost
    table = json.loads(path.read_bytes())
    for key in _NOT_MODELS:
        table.pop(key, None)
    # alias rows, resolved as litellm resolves them at load: a row {"alias_of": NAME} is NAME's entry (dropped
    # when NAME is missing or itself an alias row); an ``aliases`` list adds further names for a row, the first
    # claim of a name winning and an existing row never overwritten
    pointers = {k: v["alias_of"] for k, v in table.items() if isinstance(v.get("alias_of"), str)}
    owners: dict[str, str] = {}
    for name, entry in table.items():
        aliases = entry.get("aliases")
        if name in pointers or not isinstance(aliases, list):
            continue
        for alias in aliases:
            if (alias not in table or alias in pointers) and alias not in owners:
                owners[alias] = name
    for alias, target in pointers.items():
        if target in table and target not in pointers and alias not in owners:
            owners[alias] = target
    for entry in table.values():
        if isinstance(entry.get("aliases"), list):
            entry.pop("aliases")
    for alias in pointers.keys() - owners.keys():
        table.pop(alias)
    for alias, owner in owners.items():
        table[alias] = table[owner]
    return table


def price_table() -> Mapping[str, Mapping]:
    """litellm's price table (``litellm.model_cost``): model name -> its entry (``input_cost_per_token`` in USD
    per token, ``max_input_tokens`` in tokens, ``litellm_provider``, ...). Where litellm is already imported, its
    own live table (with any ``litellm.register_model`` of the process); otherwise the same table read from the
    file litellm ships and loads offline (``LITELLM_LOCAL_MODEL_COST_MAP``), alias rows resolved as litellm
    resolves them, without importing litellm (about 5 s of CPU: a price lookup of a self-hosted model, which has
    none, need not pay it). ``{}`` when litellm is not installed. tests/test_prices.py checks that both are
    equal."""
    mod = sys.modules.get("litellm")
    if mod is not None:
        return getattr(mod, "model_cost", None) or {}
    try:
        return _shipped_price_table()
    except (OSError, ValueError, AttributeError, ImportError):  # an unreadable table: no prices, as without litellm
        return {}


def price_entry(model: str) -> dict:
    """The entry of litellm's price table (:func:`price_table`) for ``model``, also found without its provider
    prefix; ``{}`` when there is none or litellm is not installed."""
    table = price_table()
    return dict(table.get(model) or table.get(model.split("/", 1)[-1]) or {})


def price_provider(model: str) -> str | None:
    """The provider ``model`` is billed by: litellm's price table's ``litellm_provider`` (``openai`` for
    ``gpt-4o``), else :func:`model_provider`; None when neither knows."""
    return price_entry(model).get("litellm_provider") or model_provider(model)


def request_shape(model: str, base_url: str | None = None) -> str:
    """The request shape a call of ``model`` takes (reasoning-effort fields, :mod:`ctxbench.models.effort`):
    ``anthropic`` / ``gemini`` for a name with that provider prefix (the provider's own protocol, also at a base
    URL); ``openai_compatible`` for a ``--base-url`` server that is not a provider's own API host; else the
    provider's :attr:`Provider.shape` (``openai``, ``anthropic``, ``gemini``; Vertex AI's Gemini is ``gemini``),
    ``other`` for any other provider (litellm maps ``reasoning_effort`` there)."""
    low = model.lower()
    for prefix, p in (("anthropic/", "anthropic"), ("gemini/", "gemini")):
        if low.startswith(prefix):
            return p
    if base_url:
        p = PROVIDER_HOSTS.get(urlsplit(base_url).netloc.lower())
        if p is None:
            return "openai_compatible"
        return PROVIDERS[p].shape
    try:
        _, p, _, _ = quiet_litellm().get_llm_provider(model)
    except Exception:  # noqa: BLE001 - an unknown name: litellm fails on the call itself, with its own message
        return "other"
    if p in ("vertex_ai", "vertex_ai_beta"):
        return "gemini" if "gemini" in low else "other"
    return PROVIDERS[p].shape if p in PROVIDERS else "other"


def batch_protocol(model: str, base_url: str | None, backend: str = "auto") -> tuple[str, str]:
    """``(protocol, transport)`` of ``--batch`` for ``model``: ``("anthropic", "http")`` for an Anthropic model,
    ``("openai", "litellm")`` for an OpenAI model at its own endpoint (or ``backend="litellm"``), ``("openai",
    "http")`` for an OpenAI-compatible ``--base-url``. Raises InputError naming the model for a provider whose
    batch API ctxbench does not send."""
    provider = model_provider(model)
    spec = PROVIDERS.get(provider or "")
    if spec is not None and spec.batch == "anthropic":
        return "anthropic", "http"
    if base_url:
        return "openai", "litellm" if backend == "litellm" else "http"
    if provider in LITELLM_BATCH_PROVIDERS:
        return "openai", "litellm"
    raise InputError(f"--batch: model {model!r} (provider {provider or 'unknown'}) has no batch API ctxbench can "
                     f"send to: batches go to OpenAI, Anthropic, or an OpenAI-compatible --base-url that serves "
                     f"/v1/files and /v1/batches; run without --batch")


def takes_cache_hint(model: str) -> bool:
    """Whether requests to ``model`` mark their shared prefix with ``cache_control`` (Anthropic's prompt caching
    is opt-in per request; OpenAI, DeepSeek and vLLM/llama.cpp servers cache prefixes by themselves, so their
    messages carry no hint and their request keys stay plain): a Claude model named bare or under one of
    :data:`CACHE_HINT_PREFIXES` (``claude-sonnet-4-20250514``, ``anthropic/claude-...``,
    ``bedrock/anthropic.claude-...``, ``vertex_ai/claude-...``, ``openrouter/anthropic/claude-...``)."""
    name = model.lower()
    prefix = name.split("/", 1)[0] if "/" in name else ""
    return "claude" in name and prefix in CACHE_HINT_PREFIXES


def caches_prefixes(model: str, base_url: str | None = None) -> bool:
    """Whether the server that answers ``model`` (at ``base_url``) keeps a prompt-prefix cache by itself, so that a
    call on a context asked just before reads that context's tokens from the cache instead of prefilling them again
    (what ``evaluate --adaptive-calls`` weighs when it picks the next instances, :mod:`ctxbench.run.adaptive`):

    - an OpenAI-compatible ``--base-url`` that is no provider's public API host (a self-hosted server, or a
      deployment of replicas, each of which gets a context's calls): True. vLLM's automatic prefix caching is on by
      default in its V1 engine, SGLang's RadixAttention unless ``--disable-radix-cache``, and llama.cpp's
      ``llama-server`` sends ``cache_prompt`` true by default; a server started with the cache off is the exception;
    - the embedded model (ctxbench's own llama.cpp server): True (llama-cpp-python keeps the previous prompt in its
      KV cache and reuses its longest common prefix);
    - a Claude model whose requests carry the ``cache_control`` hint (:func:`takes_cache_hint`): True;
    - any other model: whether litellm's price table gives it a cached-input price (``cache_read_input_token_cost``:
      OpenAI's and DeepSeek's automatic prompt caching, Gemini's implicit caching), at a ``--base-url`` on that
      provider's own host too; False where it has none or litellm is not installed.

    A guess made before any call (the server's usage reports say afterwards, as ``prefix_cache_hits``); it only
    orders near-equal choices, so a wrong guess costs tokens, never validity. Never raises."""
    if base_url and PROVIDER_HOSTS.get(urlsplit(base_url).netloc.lower()) is None:
        return True
    if is_embedded(model, base_url) or takes_cache_hint(model):
        return True
    return price_entry(model).get("cache_read_input_token_cost") is not None


def is_embedded(model: str, base_url: str | None) -> bool:
    """Whether ``model`` is the embedded default model served by ctxbench's own llama.cpp server (its name with no
    ``--base-url``; the same name at a base URL is a server someone else runs)."""
    return model == EMBEDDED_MODEL and not base_url


def backend_name(model: str, base_url: str | None = None, backend: str = "auto") -> str:
    """The registered backend (:mod:`ctxbench.models.backends`) a call of ``model`` goes through. ``backend``:
    ``auto`` or ``http`` (``openai_http`` for a base URL, ``replicas`` for several (:mod:`ctxbench.models.deployment`),
    ``embedded`` for the embedded model, else ``litellm``),
    ``litellm`` (litellm also for a base URL, sent as its ``api_base``), or any registered name, taken as given."""
    if backend not in ("auto", "http"):
        return backend
    if base_url:
        return "replicas" if is_deployment(base_url) else "openai_http"
    if is_embedded(model, base_url):
        return "embedded"
    return "litellm"


def missing_credentials(model: str, base_url: str | None = None) -> list[str]:
    """The environment variables litellm needs for ``model`` that are not set (``litellm.validate_environment``;
    e.g. ``["OPENAI_API_KEY"]`` for ``gpt-4o-mini``, where any one of several will do all are listed); [] for a
    model called at a ``base_url`` (its key comes only from ``--api-key-env``, checked as the option is read),
    for one whose provider litellm does not know, or where litellm cannot tell. Never raises."""
    if base_url:
        return []
    try:
        env = quiet_litellm().validate_environment(model=model)
    except Exception:  # noqa: BLE001  a check that cannot be made is no reason to stop: the call will say
        return []
    if not isinstance(env, dict) or env.get("keys_in_environment"):
        return []
    return [str(k) for k in env.get("missing_keys") or [] if str(k).isupper()]


def require_credentials(model: str, base_url: str | None = None, what: str = "model") -> None:
    """Raise InputError (exit 2) before any call when ``model``'s provider key is not set in the environment
    (:func:`missing_credentials`), naming the variable(s); nothing happens when they are set."""
    missing = missing_credentials(model, base_url)
    if missing:
        either = missing[0] if len(missing) == 1 else "one of " + ", ".join(missing)
        raise InputError(f"{what} {model}: its provider's key is not set: export {either} (or call a server with "
                         f"--base-url URL [--api-key-env NAME]); nothing was called")
