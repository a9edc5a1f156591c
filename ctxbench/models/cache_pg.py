"""The response cache and its call claims in PostgreSQL (``CTXBENCH_CACHE_URL=postgresql://user@host/db``), for
many machines sharing one cache where SQLite on a network file system is fragile (its locks are only as good as the
file system's). The same tables, protocol and answers as the SQLite cache (:class:`ctxbench.models.cache
.ResponseCache`, which gives an instance of this class when the variable names a PostgreSQL database): a
response per request key (the first stored wins), and claims with an owner and a lease.

Atomic claims: :meth:`PgResponseCache.claim` and :meth:`PgResponseCache.put` of one key run in transactions that
first take a transaction-level advisory lock on the key (``pg_advisory_xact_lock``), so the check "no answer, no
live claim" and the insert of the claim are one step for every worker on every machine, as ``BEGIN IMMEDIATE`` makes
them in SQLite. Uses psycopg 3 (the ``service`` extra).
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from typing import Callable
from urllib.parse import parse_qsl, urlsplit

from ctxbench.core.errors import InputError
from ctxbench.core.extras import require
from ctxbench.core.redact import MARK, redact, register

PG_SCHEMA = ("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT, payload TEXT NOT NULL, "
             "created_at DOUBLE PRECISION)",
             "CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at DOUBLE "
             "PRECISION NOT NULL)")
_SCHEMA_LOCK = 7_360_036  # advisory lock id of the schema set-up (concurrent CREATE TABLE IF NOT EXISTS can race)


def is_pg_url(url: str | None) -> bool:
    """Whether ``url`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)."""
    return bool(url) and str(url).strip().lower().split("://", 1)[0] in ("postgresql", "postgres")


# a password given as a parameter: ``?password=...`` / ``&sslpassword=...`` of a URL, or ``password=...`` (quoted
# or not) of a key=value connection string (libpq's conninfo: ``host=db user=bob password=s3cret``)
_PASSWORD_PARAM_RE = re.compile(r"(?P<name>(?<![\w-])(?:ssl)?password\s*=\s*)"
                                r"(?P<value>'(?:[^'\\]|\\.)*'?|[^\s&#]+)", re.I)


def shown_url(url: str) -> str:
    """``url`` (a ``postgresql://`` URL or a key=value connection string) as messages show it: the password of its
    user information, a ``password``/``sslpassword`` parameter of its query or of a connection string (quoted or
    not), and any other credential :func:`ctxbench.core.redact.redact` knows replaced by ``[redacted]``. Never
    raises."""
    return redact(_PASSWORD_PARAM_RE.sub(lambda m: m.group("name") + MARK, str(url)))


def register_passwords(url: str) -> None:
    """Register the passwords ``url`` carries (its user information, its ``password`` parameters, a connection
    string's ``password=``) with :func:`ctxbench.core.redact.register`, so no later text (a driver's error, a log
    line) shows them. Never raises."""
    try:
        u = urlsplit(url)
        register(u.password, *(v for k, v in parse_qsl(u.query) if k.lower() in ("password", "sslpassword")))
    except ValueError:
        pass
    for m in _PASSWORD_PARAM_RE.finditer(url):
        v = m.group("value")
        register(v[1:-1] if len(v) > 1 and v[0] == v[-1] == "'" else v)


DEADLOCK_RETRIES = 5  # a group commit PostgreSQL aborted as a deadlock's victim: run again at most this often


class PgResponseCache:
    """Key -> stored response (a JSON object) in the PostgreSQL database at ``url``, with the claims protocol of
    :class:`ctxbench.models.cache.ResponseCache` (same methods, same answers). ``dead_owner(owner)`` tells a
    claim owner that is a dead process of this machine (its claims need not wait for their lease). Raises
    InputError naming the URL (passwords hidden: :func:`shown_url`) when the database cannot be reached, and CtxbenchError naming
    the extra when psycopg is not installed."""

    def __init__(self, url: str, dead_owner: Callable[[str], bool] = lambda owner: False,
                 connect_timeout_s: float = 10.0):
        psycopg = require("psycopg", "CTXBENCH_CACHE_URL=postgresql://... (the response cache in PostgreSQL)")
        register_passwords(url)
        self.url, self.path = url, None
        self._dead_owner = dead_owner
        self._lock = threading.Lock()
        self._writer: PgResponseCache | None = None  # the connection of writer threads (writer())
        self._writer_lock = threading.Lock()
        try:
            self._con = psycopg.connect(url, autocommit=True, connect_timeout=int(max(connect_timeout_s, 1)))
        except psycopg.Error as e:
            raise InputError(f"CTXBENCH_CACHE_URL {shown_url(url)}: cannot connect to the PostgreSQL cache "
                             f"({shown_url(str(e).strip().splitlines()[0]) if str(e).strip() else type(e).__name__}); "
                             f"start the server or fix the URL") from None
        with self._lock, self._con.transaction():
            self._con.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            for sql in PG_SCHEMA:
                self._con.execute(sql)

    def _key_lock(self, key: str) -> None:
        """Inside a transaction: wait for, then hold until it ends, the advisory lock of ``key``."""
        self._con.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))

    def get(self, key: str) -> dict | None:
        with self._lock:
            r = self._con.execute("SELECT payload FROM responses WHERE key = %s", (key,)).fetchone()
        return json.loads(r[0]) if r else None

    def get_many(self, keys: list[str]) -> dict[str, dict]:
        out: dict[str, dict] = {}
        with self._lock:
            for i in range(0, len(keys), 1000):
                chunk = keys[i:i + 1000]
                for k, p in self._con.execute("SELECT key, payload FROM responses WHERE key = ANY(%s)", (chunk,)):
                    out[k] = json.loads(p)
        return out

    def drop(self, key: str, payload: dict) -> bool:
        """Remove the stored answer of ``key`` if it is still ``payload``; returns whether it was removed."""
        with self._lock:
            cur = self._con.execute("DELETE FROM responses WHERE key = %s AND payload = %s",
                                    (key, json.dumps(payload, ensure_ascii=False)))
            return cur.rowcount > 0

    def put(self, key: str, model: str, payload: dict) -> None:
        """Store an answer (the first one stored for a key wins) and drop any claim on the key."""
        self.apply([("put", key, model, payload)])

    def claim(self, key: str, owner: str, lease_s: float = 120.0) -> str:
        """``"claimed"``, ``"cached"`` or ``"taken"``, as :meth:`ctxbench.models.cache.ResponseCache.claim`:
        atomic across every process and machine (the key's advisory lock is held from the check to the insert)."""
        now = time.time()
        con = self._con
        with self._lock:
            # a read first (no lock): most answers for keys another worker holds are "taken" or "cached"
            if con.execute("SELECT 1 FROM responses WHERE key = %s", (key,)).fetchone():
                return "cached"
            held = con.execute("SELECT owner, expires_at FROM claims WHERE key = %s", (key,)).fetchone()
            if held and held[0] != owner and held[1] >= now and not self._dead_owner(held[0]):
                return "taken"
            with con.transaction():
                self._key_lock(key)
                return self._claim_in(key, owner, lease_s, now)

    def _claim_in(self, key: str, owner: str, lease_s: float, now: float) -> str:
        """Inside a transaction holding ``key``'s advisory lock: the claim (:meth:`claim`'s answer)."""
        con = self._con
        if con.execute("SELECT 1 FROM responses WHERE key = %s", (key,)).fetchone():
            return "cached"
        con.execute("DELETE FROM claims WHERE key = %s AND (expires_at < %s OR owner = %s)", (key, now, owner))
        held = con.execute("SELECT owner FROM claims WHERE key = %s", (key,)).fetchone()
        if held and self._dead_owner(held[0]):  # a crashed process on this machine: no need to wait
            con.execute("DELETE FROM claims WHERE key = %s", (key,))
        cur = con.execute("INSERT INTO claims VALUES (%s, %s, %s) ON CONFLICT (key) DO NOTHING",
                          (key, owner, now + lease_s))
        return "claimed" if cur.rowcount == 1 else "taken"

    def apply(self, ops: list[tuple]) -> list:
        """Run ``ops`` in order in one transaction and return their results in order, as
        :meth:`ctxbench.models.cache.ResponseCache.apply` (the group commit of
        :class:`ctxbench.models.cache.GroupCommit`). The advisory locks of every key the ops name are taken first,
        in sorted order, so two processes committing groups that share keys wait for each other instead of
        deadlocking. Row locks can still close a cycle (a group renewing its owner's claims and taking over another
        owner's lapsed claim, while that owner does the same the other way): PostgreSQL then aborts one of the
        transactions, which committed nothing and is run again (up to :data:`DEADLOCK_RETRIES` times). Raises
        ValueError for an unknown op (nothing committed)."""
        import psycopg  # lazy: an optional extra, present once this object exists

        for attempt in range(DEADLOCK_RETRIES + 1):
            try:
                return self._apply_once(ops)
            except psycopg.errors.DeadlockDetected:
                if attempt == DEADLOCK_RETRIES:
                    raise
                time.sleep(random.uniform(0.0, 0.05 * (attempt + 1)))  # apart from the other writer's retry
        raise AssertionError("unreachable")

    def _apply_once(self, ops: list[tuple]) -> list:
        """One try of :meth:`apply`: one transaction."""
        con = self._con
        keys = sorted({op[1] for op in ops if op[0] in ("claim", "put")})
        with self._lock, con.transaction():
            for k in keys:
                self._key_lock(k)
            now = time.time()
            out: list = []
            for op in ops:
                kind = op[0]
                if kind == "claim":
                    out.append(self._claim_in(op[1], op[2], op[3], now))
                elif kind == "put":
                    con.execute("INSERT INTO responses VALUES (%s, %s, %s, %s) ON CONFLICT (key) DO NOTHING",
                                (op[1], op[2], json.dumps(op[3], ensure_ascii=False), time.time()))
                    con.execute("DELETE FROM claims WHERE key = %s", (op[1],))
                    out.append(None)
                elif kind == "release":
                    con.execute("DELETE FROM claims WHERE key = %s AND owner = %s", (op[1], op[2]))
                    out.append(None)
                elif kind == "renew":
                    out.append(con.execute("UPDATE claims SET expires_at = %s WHERE owner = %s",
                                           (now + op[2], op[1])).rowcount)
                else:
                    raise ValueError(f"unknown cache op {kind!r}: claim, put, release or renew")
            return out

    def writer(self) -> "PgResponseCache":
        """Another connection to the same database, for writer threads (as
        :meth:`ctxbench.models.cache.ResponseCache.writer`): made on first use, then the same one, closed by
        :meth:`close`."""
        with self._writer_lock:
            if self._writer is None:
                self._writer = PgResponseCache(self.url, self._dead_owner)
            return self._writer

    def release(self, key: str, owner: str) -> None:
        """Give up ``owner``'s claim on ``key``."""
        self.apply([("release", key, owner)])

    def renew(self, owner: str, lease_s: float = 120.0) -> int:
        """Extend every claim ``owner`` holds to ``lease_s`` seconds from now; returns how many it holds."""
        return self.apply([("renew", owner, lease_s)])[0]

    def claims(self) -> dict[str, tuple[str, float]]:
        """Current claims: key -> (owner, expires_at as a Unix time), expired ones included."""
        with self._lock:
            return {k: (o, e) for k, o, e in self._con.execute("SELECT key, owner, expires_at FROM claims")}

    def __bool__(self) -> bool:
        return True

    def __len__(self) -> int:
        with self._lock:
            return self._con.execute("SELECT count(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        """Close the connection (and the writer threads' connection, if one was made)."""
        if self._writer is not None:
            self._writer.close()
        self._con.close()
