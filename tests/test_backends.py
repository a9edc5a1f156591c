"""One backend interface (issue 33): the generic registry, the providers table, backends looked up by name, the
embedded model as a backend that starts and stops itself, and request keys unchanged by the move."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from ctxbench.core.backend import Backend, CallResult
from ctxbench.core.registry import Registry, UnknownNameError
from ctxbench.models import gateway, local_server, providers
from ctxbench.models.backends import (BACKENDS, BaseBackend, EmbeddedBackend, LitellmBackend, OpenAIHTTPBackend,
                                      backend_class, preflight, register_backend, server_for)
from ctxbench.models.batch import BATCH_CLIENTS, AnthropicBatch, OpenAIHTTPBatch, OpenAILitellmBatch, batch_client
from ctxbench.models.cache import endpoint_id, request_key
from ctxbench.models.effort import apply_effort
from ctxbench.models.gateway import Gateway, RetryPolicy
from ctxbench.models.prompts import render_messages
from fakeserver import FakeOpenAIServer

DATA = Path(__file__).parent / "data"
MESSAGES = [{"role": "user", "content": "Document: the gate is C12.\nQuestion: which gate?"}]


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))


# -- request keys: computed with the code before ctxbench.models.providers existed (commit 3ad26ab) -------------------

# (model, base_url) -> request key of render_messages("CTX", "Q?", "cot", model) with sampling {"temperature": 0.0,
# "seed": 0} plus the reasoning fields of effort "low", max_tokens 512, sample 0, at endpoint_id(model, base_url).
# The cases cover: a provider's default endpoint and its own host (same key), another provider's host (its name in
# the key), a Claude model (cache hint blocks, thinking fields), a provider prefix at its host, an
# OpenAI-compatible server (normalised URL, chat_template_kwargs) and the embedded model.
PINNED_KEYS = {
    ("gpt-4o", None): "c2194ab3167c55e4ec2a1dc710bc13a84545ac559911a857ba65bd5f0eb434b2",
    ("gpt-4o", "https://api.openai.com/v1"): "c2194ab3167c55e4ec2a1dc710bc13a84545ac559911a857ba65bd5f0eb434b2",
    ("gpt-4o", "https://api.anthropic.com/v1"): "9c212fbcf7171393015e049760645ecbb12a51105e3a7453b5679646632ee05d",
    ("claude-sonnet-4-20250514", None): "ac0b802737be0e4236bccdb4e6002df6cc58146173bf0c43cbf7dc8738dbf073",
    ("anthropic/claude-sonnet-4-20250514", "https://api.anthropic.com"):
        "9b58b3a8a07152dd6a08e83e0186344106b27ff768e5c1043cb37ef6d6a1b2dc",
    ("deepseek/deepseek-chat", "https://api.deepseek.com/v1"):
        "522c0b2721e6d80d6bf494a0372de2dcc81a72737e69b8cb30c8d3f62ebfada2",
    ("openai/Qwen/Qwen3-8B", "http://127.0.0.1:8000/v1/"):
        "42d1c5900fd9d8babf32f62b2adcbbc553b196e9133fecc526795685f1c00732",
    ("smollm2-135m-instruct", None): "a005e395f9fc88a41501a4c8b8b2b20fdf2f0c1f1ef3e87dd515e10fdc204cf7",
}


@pytest.mark.parametrize("model,base_url", list(PINNED_KEYS))
def test_request_keys_are_those_made_before_the_providers_table(model, base_url):
    msgs = render_messages("CTX", "Q?", "cot", model)
    sampling = apply_effort({"temperature": 0.0, "seed": 0}, model, base_url, "low", None)
    key = request_key(model, msgs, sampling, 512, 0, endpoint_id(model, base_url))
    assert key == PINNED_KEYS[(model, base_url)]


def test_every_provider_answer_is_the_one_the_five_resolvers_gave():
    """tests/data/provider_answers.json was written by tests/data/make_provider_answers.py on the code before the
    providers table (16 model names x 6 base URLs): provider, request shape, billing provider, cache hint, batch
    protocol, request-key endpoint and cache minimum, each through the old public names, which still exist."""
    from ctxbench.core.errors import InputError
    from ctxbench.models.batch import batch_protocol
    from ctxbench.models.cache import model_provider
    from ctxbench.models.effort import provider_of as shape
    from ctxbench.models.pricing import cache_min_tokens
    from ctxbench.models.pricing import provider_of as billed
    from ctxbench.models.prompts import takes_cache_hint

    rows = json.loads((DATA / "provider_answers.json").read_text())
    assert len(rows) == 96
    for m, u, provider, sh, bill, hint, bp, ep, cmin in rows:
        try:
            got_bp = list(batch_protocol(m, u))
        except InputError:
            got_bp = None
        assert [model_provider(m), shape(m, u), billed(m), takes_cache_hint(m), got_bp, endpoint_id(m, u),
                cache_min_tokens(m)] == [provider, sh, bill, hint, bp, ep, cmin], (m, u)
        r = providers.resolve(m, u)  # the one resolution answers the same
        assert (r.provider, r.request_shape, r.price_provider, r.cache_hint) == (provider, sh, bill, hint), (m, u)
        assert (list(r.batch) if r.batch else None) == bp, (m, u)


def test_the_table_holds_the_hosts_the_request_keys_read():
    # the hosts of the request key's endpoint, as cache.PROVIDER_HOSTS had them before the table (17 hosts)
    assert providers.PROVIDER_HOSTS == {
        "api.openai.com": "openai", "api.anthropic.com": "anthropic", "generativelanguage.googleapis.com": "gemini",
        "openrouter.ai": "openrouter", "api.deepseek.com": "deepseek", "api.groq.com": "groq",
        "api.together.ai": "together_ai", "api.together.xyz": "together_ai", "api.mistral.ai": "mistral",
        "api.x.ai": "xai", "api.fireworks.ai": "fireworks_ai", "api.cohere.ai": "cohere", "api.cohere.com": "cohere",
        "api.perplexity.ai": "perplexity", "api.deepinfra.com": "deepinfra", "api.cerebras.ai": "cerebras",
        "api.moonshot.ai": "moonshot", "api.moonshot.cn": "moonshot"}
    assert set(providers.CACHE_HINT_PREFIXES) == {"", "anthropic", "bedrock", "vertex_ai", "vertex_ai_beta",
                                                  "openrouter"}
    assert providers.LITELLM_BATCH_PROVIDERS == ("openai",)


def test_resolve_names_key_variable_and_backend():
    r = providers.resolve("claude-sonnet-4-20250514")
    assert (r.provider, r.key_env, r.backend, r.batch, r.cache_hint) == (
        "anthropic", ("ANTHROPIC_API_KEY",), "litellm", ("anthropic", "http"), True)
    r = providers.resolve("Qwen/Qwen3-8B", "http://127.0.0.1:8000/v1")
    assert (r.key_env, r.backend, r.batch, r.request_shape) == ((), "openai_http", ("openai", "http"),
                                                                "openai_compatible")
    r = providers.resolve("smollm2-135m-instruct")
    assert (r.backend, r.batch) == ("embedded", None)


# -- the generic registry ------------------------------------------------------------------------------------------

def test_registry_registers_looks_up_and_says_what_it_has():
    reg: Registry[type] = Registry("widget")

    @reg.register("round")
    class Round:
        pass

    assert reg.get("round") is Round and "round" in reg and reg.names() == ["round"]
    with pytest.raises(UnknownNameError) as e:
        reg.get("rund")
    assert str(e.value) == "unknown widget 'rund' (did you mean round?): the widgets are round"
    assert isinstance(e.value, KeyError)
    with pytest.raises(ValueError, match="already registered"):
        reg.register("round")(type("Other", (), {}))
    reg.register("round")(Round)  # the same object again: allowed (a module imported twice)


def test_registry_resolves_a_lazy_reference_on_first_lookup():
    reg: Registry[type] = Registry("thing")
    reg.register_lazy("ordered", "collections:OrderedDict")
    assert reg._entries["ordered"] == "collections:OrderedDict"  # nothing imported yet
    from collections import OrderedDict
    assert reg.get("ordered") is OrderedDict and reg._entries["ordered"] is OrderedDict
    with pytest.raises(ValueError, match="module:object"):
        reg.register_lazy("bad", "collections.OrderedDict")


# -- backends by name ----------------------------------------------------------------------------------------------

def test_backends_are_registered_by_name_and_picked_by_lookup():
    assert {"openai_http", "litellm", "embedded"} <= set(BACKENDS.names())
    assert backend_class("gpt-4o") is LitellmBackend
    assert backend_class("Qwen/Qwen3-8B", "http://127.0.0.1:8000/v1") is OpenAIHTTPBackend
    assert backend_class("Qwen/Qwen3-8B", "http://127.0.0.1:8000/v1", backend="litellm") is LitellmBackend
    assert backend_class("gpt-4o", None, backend="http") is LitellmBackend  # http without a URL: litellm, as before
    assert backend_class("smollm2-135m-instruct") is EmbeddedBackend
    assert backend_class("smollm2-135m-instruct", "http://127.0.0.1:8080/v1") is OpenAIHTTPBackend
    for cls in (OpenAIHTTPBackend, LitellmBackend, EmbeddedBackend):
        assert isinstance(cls("m"), Backend)
    with pytest.raises(UnknownNameError, match="did you mean litellm"):
        backend_class("gpt-4o", None, backend="litelm")


def test_batch_clients_are_registered_by_protocol_and_transport():
    assert BATCH_CLIENTS.names() == ["anthropic/http", "openai/http", "openai/litellm"]
    assert type(batch_client("gpt-4o", None, None)) is OpenAILitellmBatch
    assert type(batch_client("claude-sonnet-4-20250514", None, None)) is AnthropicBatch
    assert type(batch_client("m", "http://127.0.0.1:9/v1", None)) is OpenAIHTTPBatch


def test_call_result_lives_in_core_and_the_gateway_still_exports_it():
    assert gateway.CallResult is CallResult
    assert gateway.classify_error.__module__ == "ctxbench.models.errors"
    assert gateway.completion_result.__module__ == "ctxbench.models.replies"


def test_gateway_calls_a_registered_backend_and_classifies_its_failures():
    calls = []

    @register_backend("scripted-test")
    class Scripted(BaseBackend):
        async def generate(self, messages, max_tokens, sampling):
            calls.append(max_tokens)
            if len(calls) == 1:
                raise TimeoutError("read timed out")  # transient by the error table: retried
            return CallResult("ok", "C12", prompt_tokens=10, completion_tokens=2, finish_reason="stop")

    async def go():
        gw = Gateway("any-model", backend="scripted-test",
                     policy=RetryPolicy(max_retries=2, base_delay_s=0.0, max_delay_s=0.0))
        try:
            return await gw.complete(MESSAGES, 64, {})
        finally:
            await gw.aclose()

    res = asyncio.run(go())
    assert (res.status, res.response, res.retries, calls) == ("ok", "C12", 1, [64, 64])


# -- the embedded model: a backend that starts and stops itself ------------------------------------------------------

def test_server_for_gives_the_embedded_server_only_for_the_embedded_model(monkeypatch, tmp_path):
    monkeypatch.setattr(local_server, "embedded_gguf", lambda: tmp_path / "m.gguf")
    assert server_for("gpt-4o") is None
    assert server_for("smollm2-135m-instruct", "http://127.0.0.1:8080/v1") is None  # someone else's server
    make = server_for("smollm2-135m-instruct")
    assert make is not None
    srv = make()
    assert isinstance(srv, local_server.LocalServer) and srv.proc is None  # made, not started
    assert providers.is_embedded("smollm2-135m-instruct", None)
    assert not providers.is_embedded("smollm2-135m-instruct", "http://127.0.0.1:8080/v1")


def test_the_embedded_backend_starts_its_server_on_the_first_call_and_stops_it_on_close(monkeypatch):
    events = []
    with FakeOpenAIServer() as fake:
        class FakeLocal:
            base_url = fake.base_url

            def __enter__(self):
                events.append("start")
                return self

            def __exit__(self, *exc):
                events.append("stop")

        monkeypatch.setattr(local_server, "LocalServer", FakeLocal)

        async def go():
            gw = Gateway("smollm2-135m-instruct", concurrency=3)
            try:
                return await asyncio.gather(*(gw.complete(MESSAGES, 64, {}) for _ in range(3)))
            finally:
                await gw.aclose()

        results = asyncio.run(go())
    assert [r.status for r in results] == ["ok"] * 3
    assert events == ["start", "stop"]  # one server for three calls arriving together, stopped on close


def test_preflight_says_a_missing_embedded_runtime_before_any_work(monkeypatch):
    from ctxbench.core.errors import CtxbenchError

    def missing():
        raise CtxbenchError("no runtime: pip install xllamacpp")

    monkeypatch.setattr(local_server, "embedded_runtime", missing)
    with pytest.raises(CtxbenchError, match="pip install xllamacpp"):
        preflight("smollm2-135m-instruct")
    preflight("smollm2-135m-instruct", "http://127.0.0.1:8080/v1")  # someone else's server: nothing to check
    preflight("gpt-4o")


async def _generate_against_raw_reply(reply: bytes):
    """One openai_http call to a server that answers any request with the bytes ``reply`` and closes."""
    async def answer(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(reply)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    backend = OpenAIHTTPBackend("openai/fake", f"http://127.0.0.1:{port}/v1", timeout_s=5.0, concurrency=1)
    try:
        return await backend.generate(MESSAGES, 16, {})
    finally:
        await backend.aclose()
        server.close()


@pytest.mark.parametrize("reply", [b"HTTP/1.1 2x0 OK\r\n\r\n", b"garbage, not HTTP\r\n\r\n",
                                   b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 70000 + b"\r\nContent-Length: 2\r\n\r\n{}"])
def test_openai_http_retries_a_reply_it_cannot_parse(reply):
    """A reply that is not HTTP (a bad status line, a header past the client's limit) is a transport failure the
    call retries, as it was with httpx (RemoteProtocolError), not a per-request error stored in the row."""
    from ctxbench.models.gateway import TransientError  # lazy: only this test raises it

    with pytest.raises(TransientError):
        asyncio.run(_generate_against_raw_reply(reply))


def test_openai_http_reads_a_reply_with_a_long_header():
    """A header of 9,000 bytes (over aiohttp's default limit of 8,190; httpx read it) does not fail the call."""
    body = json.dumps({"choices": [{"message": {"role": "assistant", "content": "C12"}, "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 10, "completion_tokens": 2}}).encode()
    res = asyncio.run(_generate_against_raw_reply(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Trace: " + b"a" * 9000
        + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body))
    assert (res.status, res.response) == ("ok", "C12")
