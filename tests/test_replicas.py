"""Replicas (issue 36): ``--base-url`` with several endpoints of one model. Contexts are sharded over the replicas
by rendezvous hashing of their prefix, so each replica's prefix cache serves its contexts; the request key names
the deployment, so a rerun with the replicas reordered or one fewer makes no call; a single URL keeps today's key;
a replica that fails is taken out and its contexts move to the others, no call made twice."""

from __future__ import annotations

import contextlib
import functools
import json
import re
import socket
from collections import Counter, defaultdict

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import ctxbench.run.evaluate as ev
from ctxbench.cli import app
from ctxbench.core.errors import CtxbenchError, InputError
from ctxbench.core.storage import to_table, write_parquet
from ctxbench.models.cache import endpoint_id, key_endpoint, request_key
from ctxbench.models.deployment import ReplicaHealth, parse_deployment, rank
from ctxbench.models.gateway import RetryPolicy
from fakeserver import FakeOpenAIServer, call_id, message_text

runner = CliRunner()
MSGS = [{"role": "system", "content": "You answer questions."}, {"role": "user", "content": "What is 2+2?"}]
SAMPLING = {"temperature": 0.0, "seed": 0}


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(ev, "RetryPolicy", functools.partial(RetryPolicy, base_delay_s=0.01, max_delay_s=0.05))


def _key(base_url):
    return request_key("openai/fake", MSGS, SAMPLING, 256, 0, endpoint_id("openai/fake", base_url))


# -- keys ------------------------------------------------------------------------------------------------------------

def test_a_single_base_url_keeps_the_key_it_had_before_replicas():
    # worked out with the code before this change (commit 9db8e30): nothing stored is asked again
    assert _key("http://127.0.0.1:8000/v1/") == "49f103309183a7cde15421c841a15db1925134cf7647e86e884349ff41f7c964"
    assert _key(None) == "5fc81508e7aaa90d7e2599df44428da89423a2ceea143526f681ca14ffa3e0bc"
    assert _key("http://localhost:8000/v1,") == _key("http://localhost:8000/v1")  # a list of one is that URL


def test_the_key_of_a_deployment_names_it_not_its_replicas(tmp_path):
    a, b, c = "http://gpu1:8000/v1", "http://gpu2:8000/v1", "http://gpu3:8000/v1"
    assert endpoint_id("openai/fake", f"{a},{b},{c}") == "deployment:fake"
    k = _key(f"{a},{b},{c}")
    assert _key(f"{c},{a},{b}") == k and _key(f"{b},{a}") == k and _key(f" {a} , {c} ") == k
    assert k not in (_key(a), _key(b), _key(None))
    f = tmp_path / "dep.yaml"
    f.write_text(f"name: fake-prod\nreplicas: [{a}, {b}]\n", encoding="utf-8")
    assert endpoint_id("openai/fake", str(f)) == key_endpoint("openai/fake", str(f)) == "deployment:fake-prod"
    f.write_text(json.dumps({"replicas": [c, a]}), encoding="utf-8")  # no name: the model's
    assert _key(str(f)) == k


def test_duplicates_collapse_before_the_key_is_chosen_and_a_file_of_one_keeps_the_deployment(tmp_path):
    a, b = "http://gpu1:8000/v1", "http://gpu2:8000/v1"
    # a list of one distinct URL is that URL (whatever its spelling): --base-url A and A,A share every answer
    assert _key(f"{a},{a}") == _key(a) == _key(f"{a}/, {a}") and endpoint_id("openai/fake", f"{a},{a}") == a
    assert _key(f"{a},{b},{b}") == _key(f"{b},{a}") == _key(f"{a},{b}")
    # down to one replica in a deployment file (no name: the model's): still the list's key
    f = tmp_path / "one.yaml"
    f.write_text(f"replicas: [{a}]\n", encoding="utf-8")
    assert parse_deployment(str(f), "openai/fake").name == "fake"
    assert _key(str(f)) == _key(f"{a},{b}") != _key(a)


@pytest.mark.parametrize("value,says", [
    ("http://a:1/v1,ftp://b/v1", "not an http(s) URL"),
    ("{dir}/missing.yaml", "cannot read the deployment file"),
    ("{dir}/noreplicas.yaml", "needs 'replicas:'"),
    ("{dir}/badfail.yaml", "'fail_after' must be"),
])
def test_a_bad_deployment_is_one_line_naming_it(tmp_path, value, says):
    (tmp_path / "noreplicas.yaml").write_text("name: x\n", encoding="utf-8")
    (tmp_path / "badfail.yaml").write_text("replicas: [http://a:1/v1]\nfail_after: 0\n", encoding="utf-8")
    value = value.format(dir=tmp_path)
    with pytest.raises(InputError, match=says.replace("(", r"\(").replace(")", r"\)")):
        parse_deployment(value, "openai/fake")
    r = runner.invoke(app, ["evaluate", "--build", str(tmp_path), "--model", "openai/fake", "--base-url", value])
    assert r.exit_code == 2 and says in r.output and "Traceback" not in r.output


# -- sharding ----------------------------------------------------------------------------------------------------

def test_rank_ignores_the_order_and_taking_a_replica_out_moves_only_its_routes():
    reps = ["http://gpu1:8000/v1", "http://gpu2:8000/v1", "http://gpu3:8000/v1"]
    routes = [f"ctx{i}" for i in range(300)]
    first = {r: rank(r, reps)[0] for r in routes}
    assert all(rank(r, list(reversed(reps)))[0] == first[r] for r in routes)
    assert all(rank(r, ["HTTP://GPU1:8000/v1/", *reps[1:]])[0].lower().rstrip("/") == first[r].lower()
               for r in routes)  # spelling of a URL does not move a route
    counts = Counter(first.values())
    assert set(counts) == set(reps) and min(counts.values()) > 60  # spread (300 routes, 3 replicas: ~100 each)
    h = ReplicaHealth(tuple(reps), fail_after=2)
    assert not h.failed(reps[0], "reset") and h.failed(reps[0], "reset")  # out after 2 in a row
    for r in routes:  # only gpu1's routes move, each to the replica that ranked next for it
        assert h.pick(r) == (first[r] if first[r] != reps[0] else rank(r, reps)[1])
    h.failed(reps[1], "x"), h.ok(reps[1]), h.failed(reps[1], "x")
    assert reps[1] not in h.down  # an answer starts the count again


# -- through the command line -------------------------------------------------------------------------------------

WORDS = "amber basil cobalt dune ember fjord garnet harbor indigo jasper kelp lumen".split()


def make_build(d, contexts=8, questions=4):
    d.mkdir(parents=True, exist_ok=True)
    rows = []
    for c in range(contexts):
        ctx = " ".join(f"Entry {i} of ledger {c} lists {WORDS[(i + c) % 12]} at shelf {i * 7 % 101}."
                       for i in range(25))
        for q in range(questions):
            rows.append({
                "instance_id": f"c{c}q{q}", "benchmark": "holobench", "source_id": "toy",
                "question": f"Which shelf holds entry {q + 1} of ledger {c}?", "question_id": f"q{q}", "sql": None,
                "gold": json.dumps([[(q + 1) * 7 % 101]]), "context": ctx, "tokenizer": "cl100k_base",
                "target_tokens": 1024, "context_tokens": 300, "setting": "amount", "context_format": "full_text",
                "position": "uniform", "query_types": "[]", "difficulty": "easy", "evidence_spans": "[]",
                "build_hash": "replicabuild"})
    write_parquet(to_table("instances", rows), d / "instances.parquet")
    (d / "manifest.json").write_text(json.dumps({"build_hash": "replicabuild", "track": "holobench"}),
                                     encoding="utf-8")
    return d


def _evaluate(build, base_url, *extra):
    return runner.invoke(app, ["evaluate", "--build", str(build), "--model", "openai/fake", "--base-url", base_url,
                               "--max-tokens", "64", "--concurrency", "4", *extra])


def _ledger(body: dict) -> str:
    """The context a request is on (its ledger number, read from the prompt)."""
    text = "\n".join(message_text(m.get("content")) for m in body["messages"])
    return text.split("of ledger ", 1)[1].split(" ", 1)[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _routes(build, tmp_path, monkeypatch) -> set[str]:
    """The routes (shared-prefix hashes) the build's contexts take, read by a run against two throwaway replicas
    with its own response cache and rows, so the run under test starts from nothing."""
    seen: set[str] = set()
    pick = ReplicaHealth.pick
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "routes-home"))
    with monkeypatch.context() as m, FakeOpenAIServer() as x, FakeOpenAIServer() as y:
        m.setattr(ReplicaHealth, "pick", lambda self, route: (seen.add(route), pick(self, route))[1])
        assert _evaluate(build, f"{x.base_url},{y.base_url}").exit_code == 0
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    (build / "responses.parquet").unlink()
    return seen


def _served_by(url: str, other: str, routes: set[str]) -> int:
    """How many of ``routes`` rank ``url`` first among ``url`` and ``other``."""
    return sum(rank(r, [other, url])[0] == url for r in routes)


def test_two_replicas_keep_each_context_on_one_and_see_every_possible_prefix_hit(tmp_path, monkeypatch):
    build = make_build(tmp_path / "b")
    routes = _routes(build, tmp_path, monkeypatch)
    with FakeOpenAIServer(prompt_cache=True, prompt_cache_min=1) as a, contextlib.ExitStack() as stack:
        while True:  # random ports: b drawn until both replicas serve a context (2 draws in 256 give one all)
            b = stack.enter_context(FakeOpenAIServer(prompt_cache=True, prompt_cache_min=1))
            if 1 <= _served_by(b.base_url, a.base_url, routes) <= 7:
                break
        r = _evaluate(build, f"{a.base_url},{b.base_url}")
        assert r.exit_code == 0, r.output
        where = defaultdict(set)
        for name, srv in (("a", a), ("b", b)):
            for body in srv.requests:
                where[_ledger(body)].add(name)
        assert len(where) == 8 and all(len(v) == 1 for v in where.values())  # a context on one replica
        assert a.count and b.count and a.count + b.count == 32  # both used, each call once
        rows = pq.read_table(build / "responses.parquet").to_pylist()
        hits = sum(1 for x in rows if (x["cached_prompt_tokens"] or 0) > 0)
        possible = 32 - 8  # every question but the first of each context
        assert hits >= 0.9 * possible and hits == possible
        # rerun with the replicas in reverse order, the rows gone: every answer from the response cache
        (build / "responses.parquet").unlink()
        a.reset_counts(), b.reset_counts()
        r = _evaluate(build, f"{b.base_url},{a.base_url}")
        assert r.exit_code == 0, r.output
        assert a.count == 0 and b.count == 0 and "0 calls made, 32 from cache" in r.output


def test_a_rerun_with_one_replica_fewer_makes_no_call_and_a_file_names_the_deployment(tmp_path):
    build = make_build(tmp_path / "b", contexts=4, questions=2)
    with FakeOpenAIServer() as a, FakeOpenAIServer() as b, FakeOpenAIServer() as c:
        r = _evaluate(build, ",".join(s.base_url for s in (a, b, c)))
        assert r.exit_code == 0 and a.count + b.count + c.count == 8, r.output
        (build / "responses.parquet").unlink()
        dep = tmp_path / "dep.yaml"
        dep.write_text(f"replicas:\n  - {c.base_url}\n  - {a.base_url}\n", encoding="utf-8")
        a.reset_counts(), b.reset_counts(), c.reset_counts()
        r = _evaluate(build, str(dep))
        assert r.exit_code == 0, r.output
        assert a.count + b.count + c.count == 0 and "8 from cache" in r.output


def test_a_list_then_one_replica_in_a_file_and_a_url_then_the_url_twice_make_no_call(tmp_path):
    build = make_build(tmp_path / "b", contexts=3, questions=2)
    with FakeOpenAIServer() as a, FakeOpenAIServer() as b:
        r = _evaluate(build, f"{a.base_url},{b.base_url}")
        assert r.exit_code == 0 and a.count + b.count == 6, r.output
        (build / "responses.parquet").unlink()
        dep = tmp_path / "one.yaml"
        dep.write_text(f"replicas:\n  - {a.base_url}\n", encoding="utf-8")  # b gone: the one left in a file
        a.reset_counts(), b.reset_counts()
        r = _evaluate(build, str(dep))
        assert r.exit_code == 0 and a.count + b.count == 0 and "6 from cache" in r.output, r.output
        # a plain URL, then the same URL listed twice: one endpoint, one key
        build2 = make_build(tmp_path / "b2", contexts=3, questions=2)
        r = _evaluate(build2, a.base_url, "--max-tokens", "32")
        assert r.exit_code == 0 and a.count == 6, r.output
        (build2 / "responses.parquet").unlink()
        a.reset_counts()
        r = _evaluate(build2, f"{a.base_url},{a.base_url}", "--max-tokens", "32")
        assert r.exit_code == 0 and a.count == 0 and "6 from cache" in r.output, r.output


@pytest.mark.parametrize("fault", ["dead", "503", "killed"])
def test_a_failing_replica_is_taken_out_and_its_contexts_move(tmp_path, fault, monkeypatch):
    build = make_build(tmp_path / "b")
    routes = _routes(build, tmp_path, monkeypatch)
    assert len(routes) == 8  # one route per context
    with FakeOpenAIServer() as a, contextlib.ExitStack() as stack:
        # the replicas' ports are random and rendezvous hashing places contexts by URL: b is drawn until it serves
        # at least two contexts (else the fault could go unseen: 9 draws in 256 give it fewer)
        while True:
            b = stack.enter_context(FakeOpenAIServer())
            bad_url = f"http://127.0.0.1:{_free_port()}/v1" if fault == "dead" else b.base_url
            if _served_by(bad_url, a.base_url, routes) >= 2:
                break
        if fault == "503":
            b.outage(True, "503")
        elif fault == "killed":  # answers 5 calls, then its connections are reset (a replica killed mid-run)
            seen = []
            b.rule = lambda body: (seen.append(1) or None) if len(seen) < 5 else "reset"
        # "dead": nothing listens at bad_url, connection refused
        r = _evaluate(build, f"{a.base_url},{bad_url}")
        assert r.exit_code == 0, r.output
        assert f"replica {bad_url} taken out of service" in r.output.replace("\n", "")
        rows = pq.read_table(build / "responses.parquet").to_pylist()
        assert len(rows) == 32 and {x["status"] for x in rows} == {"ok"}
        answered = a.call_counts(ok_only=True) + b.call_counts(ok_only=True)
        assert len(answered) == 32 and set(answered.values()) == {1}  # no call answered twice
        # every context b could not serve moved whole to a: a saw all its questions
        moved = {_ledger(x) for x in a.requests}
        per = Counter(_ledger(x) for x in a.requests if call_id(x) in a.call_counts(ok_only=True))
        assert all(per[c] == 4 for c in moved if fault != "killed")


BAD_ENDPOINTS = [  # (URL, what the error says): each refused before anything runs, whatever command gets it
    ("http://[bad", "is not a valid URL (Invalid IPv6 URL)"),
    ("http://127.0.0.1:99999/v1", "is not a valid URL (Port out of range 0-65535)"),
    ("http://gpu1:eighty/v1", "is not a valid URL (Port could not be cast to integer value as 'eighty')"),
    ("http://:8000/v1", "has no host"),
    ("http://gpu 1:8000/v1", "has an invalid host 'gpu 1' (a space or a URL delimiter in it)"),
    ("http://gp%31:8000/v1", "has an invalid host 'gp%31'"),
    ("http://[fe80::1%25eth0]:8000/v1", "gives an IPv6 zone id ('fe80::1%25eth0'), which the HTTP client cannot"),
    ("ftp://gpu1/v1", "is not an http(s) URL"),
    ("gpu1:8000/v1", "is not an http(s) URL"),
]


@pytest.mark.parametrize("url, why", BAD_ENDPOINTS)
def test_an_endpoint_that_cannot_be_called_is_refused_by_name(tmp_path, url, why):
    """The CLI (exit 2, no traceback), a deployment of replicas, and EvalConfig (the flows' and the library's way
    in) refuse it alike, saying what is wrong, instead of a traceback or a failure on every call."""
    r = runner.invoke(app, ["evaluate", "--build", str(tmp_path), "--model", "openai/fake", "--base-url", url])
    assert r.exit_code == 2 and why in " ".join(r.output.split()), r.output
    assert "Traceback" not in r.output
    with pytest.raises(InputError, match=re.escape(f"--base-url: '{url}' {why}")):
        parse_deployment(f"http://ok:8000/v1,{url}", "openai/fake")
    with pytest.raises(CtxbenchError, match=re.escape(f"base_url: '{url}' {why}")):
        ev.EvalConfig(model="openai/fake", base_url=url)


def test_a_refused_base_url_never_shows_its_credentials():
    """EvalConfig (the flows' and the library's way in) names the URL redacted, and its error passes pydantic by
    (a pydantic error repeats its input: input_value=...), also where the config is a field of another model, as
    in a flow's parameters or BackfillConfig."""
    from ctxbench.run.backfill import BackfillConfig  # lazy: only this test builds one

    for url in ("http://bob:SECRETPW@host:99999/v1", "ftp://bob:SECRETPW@host/v1", "http://h:99999/v1?api_key=SECRETPW",
                "http://bob:SECRETPW@[::1"):
        with pytest.raises(CtxbenchError) as e:
            ev.EvalConfig(model="openai/fake", base_url=url)
        assert "SECRETPW" not in str(e.value) and "base_url" in str(e.value)
        with pytest.raises(CtxbenchError) as e:
            BackfillConfig.model_validate({"model": {"model": "openai/fake", "base_url": url}})
        assert "SECRETPW" not in str(e.value) and "[redacted]" in str(e.value)


def test_an_endpoint_that_can_be_called_is_kept_as_given():
    for url in ("http://127.0.0.1:8000/v1", "https://api.example.com/v1", "http://[::1]:8000/v1",
                "http://u:p@gpu-1.internal:8000/v1", " http://gpu_1:8000/v1 ", "http://héllo.example/v1"):
        assert ev.EvalConfig(model="openai/fake", base_url=url).base_url == url
        assert parse_deployment(url, "openai/fake").replicas == (url.strip(),)


def test_replica_credentials_never_reach_a_message(tmp_path):
    value = "http://u:pw1secret@a/v1,ftp://u:pw2secret@b"
    with pytest.raises(InputError) as e:
        parse_deployment(value, "openai/fake")
    assert "pw2secret" not in str(e.value) and "'ftp://[redacted]@b' is not an http(s) URL" in str(e.value)
    with pytest.raises(InputError) as e:  # no scheme: the user information is still hidden
        parse_deployment("http://a/v1,u:pw3secret@b:1", "openai/fake")
    assert "pw3secret" not in str(e.value) and "[redacted]@b:1" in str(e.value)
    r = runner.invoke(app, ["evaluate", "--build", str(tmp_path), "--model", "openai/fake", "--base-url", value])
    assert r.exit_code == 2 and "not an http(s) URL" in r.output and "pw2secret" not in r.output
    # a dead replica named with a password and a key in its URL: taken out, and named without either
    build = make_build(tmp_path / "b", contexts=16, questions=1)  # the dead one ranks first for some (1 - 2**-16)
    with FakeOpenAIServer() as a:
        bad = f"http://bob:pw4secret@127.0.0.1:{_free_port()}/v1?api_key=k5secret"
        r = _evaluate(build, f"{a.base_url},{bad}")
        out = r.output.replace("\n", "")
        assert r.exit_code == 0, r.output
        assert "replica http://[redacted]@127.0.0.1:" in out and "api_key=[redacted] taken out of service" in out
        assert "pw4secret" not in out and "k5secret" not in out and "bob" not in out
