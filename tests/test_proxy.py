"""The openai_http backend's proxy from the environment (ctxbench.models.backends.openai_http.env_proxy): read as
httpx read it, ALL_PROXY and https:// proxies included (aiohttp's own reading ignores both), NO_PROXY honoured, a
proxy the client cannot speak to refused as a configuration error naming the variable."""

from __future__ import annotations

import asyncio
import json

import pytest
import yarl

from ctxbench.models.backends.openai_http import OpenAIHTTPBackend, env_proxy
from ctxbench.models.gateway import Gateway, PermanentError, RetryPolicy

PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "ws_proxy", "wss_proxy", "ftp_proxy")
MESSAGES = [{"role": "user", "content": "What is 6 times 7?"}]


@pytest.fixture
def no_proxy_env(monkeypatch):
    """An environment with no proxy variable (the suite's machine may set some)."""
    for v in PROXY_VARS:
        monkeypatch.delenv(v, raising=False)
        monkeypatch.delenv(v.upper(), raising=False)
    monkeypatch.delenv("REQUEST_METHOD", raising=False)  # urllib ignores HTTP_PROXY under CGI
    monkeypatch.setenv("NETRC", "/nonexistent/netrc")
    return monkeypatch


API = yarl.URL("https://api.example.com/v1/chat/completions")
LOCAL = yarl.URL("http://gpu-box.internal:8000/v1/chat/completions")


@pytest.mark.parametrize("env, url, proxy", [
    ({}, API, None),
    ({"HTTPS_PROXY": "https://proxy.corp:8443"}, API, "https://proxy.corp:8443"),  # aiohttp alone ignored it
    ({"ALL_PROXY": "http://proxy.corp:3128"}, API, "http://proxy.corp:3128"),  # aiohttp alone ignored it
    ({"ALL_PROXY": "http://all:1", "HTTPS_PROXY": "http://tls:2"}, API, "http://tls:2"),  # the scheme's first
    ({"ALL_PROXY": "http://all:1", "HTTPS_PROXY": "http://tls:2"}, LOCAL, "http://all:1"),
    ({"HTTPS_PROXY": "http://tls:2"}, LOCAL, None),  # an http server is not sent to the https proxy
    ({"http_proxy": "http://lower:1", "HTTP_PROXY": "http://upper:2"}, LOCAL, "http://lower:1"),
    ({"HTTP_PROXY": "proxy.corp:3128"}, LOCAL, "http://proxy.corp:3128"),  # no scheme: http
    ({"ALL_PROXY": "http://p:1", "NO_PROXY": "internal,localhost"}, LOCAL, None),  # a domain suffix
    ({"ALL_PROXY": "http://p:1", "NO_PROXY": "gpu-box.internal:8000"}, LOCAL, None),  # host and port
    ({"ALL_PROXY": "http://p:1", "NO_PROXY": "*"}, API, None),
    ({"ALL_PROXY": "http://p:1", "NO_PROXY": "other.example.com"}, API, "http://p:1"),
])
def test_the_proxy_is_read_as_httpx_read_it(no_proxy_env, env, url, proxy):
    for k, v in env.items():
        no_proxy_env.setenv(k, v)
    got = env_proxy(url)
    assert (str(got) if got is not None else None) == proxy


def test_the_proxy_keeps_its_credentials(no_proxy_env):
    no_proxy_env.setenv("HTTPS_PROXY", "http://alice:s3cret@proxy.corp:3128")
    assert env_proxy(API) == yarl.URL("http://alice:s3cret@proxy.corp:3128")


def test_a_proxy_from_netrc_gets_its_credentials(no_proxy_env, tmp_path):
    netrc = tmp_path / "netrc"
    netrc.write_text("machine proxy.corp login bob password hunter2\n", encoding="utf-8")
    netrc.chmod(0o600)
    no_proxy_env.setenv("NETRC", str(netrc))
    no_proxy_env.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    assert env_proxy(API) == yarl.URL("http://bob:hunter2@proxy.corp:3128")


def test_the_operating_systems_proxy_settings_are_not_read(no_proxy_env):
    """As httpx: the variables alone. (urllib's getproxies() falls back to macOS's and Windows' system settings,
    whose exceptions, such as <local>, proxy_bypass_environment does not know: a local server went to the proxy.)"""
    import urllib.request

    no_proxy_env.setattr(urllib.request, "getproxies", lambda: {"http": "http://corp:8080", "https": "http://corp:8080"})
    assert env_proxy(LOCAL) is None and env_proxy(API) is None


@pytest.mark.parametrize("value, why", [("http://u:pw9@[::1", "Invalid IPv6 URL"),
                                        ("http://proxy.corp:99999", "Port out of range 0-65535")])
def test_a_proxy_variable_that_is_not_a_url_is_a_configuration_error_naming_it(no_proxy_env, value, why):
    no_proxy_env.setenv("HTTPS_PROXY", value)
    with pytest.raises(PermanentError) as e:
        env_proxy(API)
    assert e.value.status == "config_error" and "pw9" not in str(e.value) and "99999" not in str(e.value)
    assert str(e.value) == (f"configuration error: HTTPS_PROXY is not a URL a proxy can have ({why}): set it like "
                            f"http://proxy.example:3128, or unset it")


@pytest.mark.parametrize("var", ["ALL_PROXY", "all_proxy", "HTTPS_PROXY"])
def test_a_socks_proxy_is_a_configuration_error_naming_the_variable(no_proxy_env, var):
    no_proxy_env.setenv(var, "socks5://carol:pw@proxy.corp:1080")
    with pytest.raises(PermanentError) as e:
        env_proxy(API)
    assert e.value.status == "config_error"
    msg = str(e.value)
    assert msg.startswith(f"configuration error: {var}=socks5://proxy.corp:1080 is a socks5 proxy")
    assert "api.example.com in NO_PROXY" in msg and "pw" not in msg  # the password is not shown


def _call_through_proxy(env, proxy, var: str, base_url: str, **backend_kw):
    """One openai_http call to ``base_url`` with ``var`` naming a local proxy (credentials dave:pw) that
    ``proxy(reader, writer)`` serves: the call's result, or what it raised."""
    async def go():
        server = await asyncio.start_server(proxy, "127.0.0.1", 0)
        env.setenv(var, f"http://dave:pw@127.0.0.1:{server.sockets[0].getsockname()[1]}")
        backend = OpenAIHTTPBackend("openai/fake", base_url, timeout_s=5.0, concurrency=1, **backend_kw)
        try:
            return await backend.generate(MESSAGES, 16, {})
        finally:
            await backend.aclose()
            server.close()

    return asyncio.run(go())


def test_a_call_goes_through_all_proxy_to_a_host_it_cannot_reach_directly(no_proxy_env):
    """ALL_PROXY names a local HTTP proxy; the server's host does not resolve, so only the proxy can answer: it
    sees the absolute URL of the request (a forward proxy's request line) and the proxy's credentials."""
    seen: list[tuple[str, str | None]] = []

    async def proxy(reader, writer):
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        lines = head.split("\r\n")
        length = next(int(h.split(":", 1)[1]) for h in lines if h.lower().startswith("content-length:"))
        body = json.loads(await reader.readexactly(length))
        auth = next((h.split(":", 1)[1].strip() for h in lines if h.lower().startswith("proxy-authorization:")),
                    None)
        seen.append((lines[0], auth))
        reply = json.dumps({"id": "x", "object": "chat.completion", "model": body["model"],
                            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Answer: 42"},
                                         "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": 12, "completion_tokens": 3}}).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                     % (len(reply), reply))
        await writer.drain()
        writer.close()

    res = _call_through_proxy(no_proxy_env, proxy, "ALL_PROXY", "http://model.invalid/v1")
    assert res.status == "ok" and res.response == "Answer: 42"
    assert seen == [("POST http://model.invalid/v1/chat/completions HTTP/1.1", "Basic ZGF2ZTpwdw==")]


def test_a_socks_proxy_stops_the_call_as_a_configuration_error(no_proxy_env):
    """Through the gateway: no retry, status config_error, the message naming the variable (the runner's start
    gate stops a run after three such calls)."""
    no_proxy_env.setenv("ALL_PROXY", "socks5h://127.0.0.1:1")
    gw = Gateway("openai/fake", "http://127.0.0.1:9/v1", 1, RetryPolicy(max_retries=3, base_delay_s=0.01))

    async def go():
        try:
            return await gw.complete(MESSAGES, 16, {})
        finally:
            await gw.aclose()

    res = asyncio.run(go())
    assert res.status == "config_error" and res.retries == 0
    assert res.error.startswith("configuration error: ALL_PROXY=socks5h://127.0.0.1:1 is a socks5h proxy")


def test_the_api_key_never_reaches_the_proxy_of_an_https_server(no_proxy_env):
    """An https server through a proxy: the proxy gets a CONNECT with its own credentials and nothing else of the
    request; the API key (aiohttp copied the session's Authorization header into the proxy's request, as
    Proxy-Authorization) is not in it."""
    heads: list[str] = []

    async def proxy(reader, writer):
        heads.append((await reader.readuntil(b"\r\n\r\n")).decode("latin-1"))
        writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    no_proxy_env.setenv("CTXBENCH_TEST_KEY", "sk-secret-4711")
    with pytest.raises(Exception):  # the proxy refused the tunnel: a transport failure, classified
        _call_through_proxy(no_proxy_env, proxy, "HTTPS_PROXY", "https://model.invalid/v1",
                            api_key_env="CTXBENCH_TEST_KEY")
    assert len(heads) == 1 and heads[0].startswith("CONNECT model.invalid:443 HTTP/1.1\r\n")
    assert "Proxy-Authorization: Basic ZGF2ZTpwdw==" in heads[0]  # base64 of dave:pw
    assert "sk-secret-4711" not in heads[0] and "Bearer" not in heads[0]
