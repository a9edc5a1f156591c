"""Deployments: several replicas of one model behind one ``--base-url`` (the usual vLLM / SGLang set-up), and the
sharding of contexts over them.

``--base-url`` takes one endpoint (``http://gpu1:8000/v1``: today's behaviour, keys unchanged), several separated by
commas (``http://gpu1:8000/v1,http://gpu2:8000/v1``), or the path of a deployment file (YAML or JSON)::

    name: llama-70b-prod          # what the request keys name (default: the model's served name)
    replicas:
      - http://gpu1:8000/v1
      - http://gpu2:8000/v1
    fail_after: 3                 # consecutive failures that take a replica out (default 3)

The request key of a deployment names the deployment (``deployment:<name>``), never a replica, so a rerun with the
replicas in another order, with one fewer, or with one listed twice makes no call again
(:func:`ctxbench.models.cache.endpoint_id`). The rule (keys of a single ``--base-url URL`` stay what they were
before deployments existed):

* one URL, or a comma list that holds one distinct URL once duplicates are dropped (``A,`` ``A,A``): keyed by that
  URL, as a plain ``--base-url A``;
* a comma list of two or more distinct URLs: ``deployment:<served name of the model>``;
* a deployment file: ``deployment:<name>`` (``name:``, else the model's served name), even with one replica, so a
  deployment can go down to one replica (a file listing it) without asking anything again.

Going from a list to a bare single URL (``A,B`` to ``A``) or back changes the key; write the one replica left in a
deployment file instead.

Sharding: every request carries a route (its context's shared-prefix hash, :class:`ctxbench.models.runner.Request`
``prefix``); the replica a route goes to is chosen by rendezvous hashing (highest SHA-256 of replica and route,
Thaler and Ravishankar 1998), so every question of a context reaches the same replica (its prefix cache serves
the context once), the choice does not depend on the order replicas are listed in, and a replica taken out moves
only its own contexts, each to the replica that ranks next for it. A replica fails on connection errors, timeouts
and 5xx answers (not on 429: a busy replica is not a broken one); after ``fail_after`` consecutive failures it is
taken out for the rest of the run (:class:`ReplicaHealth`).
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from ctxbench.core.errors import InputError
from ctxbench.core.redact import MARK, redact

FAIL_AFTER = 3  # consecutive failures (connection errors, timeouts, 5xx) that take a replica out
DEPLOYMENT_SUFFIXES = (".yaml", ".yml", ".json")

# the route of the call being made (a context's shared-prefix hash): set by the call runner around each call, read
# by the replicas backend (ctxbench.models.backends.replicas); an asyncio task copies it into the tasks it starts
ROUTE: contextvars.ContextVar[str | None] = contextvars.ContextVar("ctxbench_route", default=None)


@dataclass(frozen=True)
class Deployment:
    """One model served by ``replicas`` (URLs as given). ``name``: what request keys name (None: a single distinct
    URL given as a URL or a comma list, keyed by its normalised URL as before); ``fail_after``: consecutive failures that take a replica out."""

    replicas: tuple[str, ...]
    name: str | None = None
    fail_after: int = FAIL_AFTER

    @property
    def several(self) -> bool:
        """True for a deployment keyed by its name (two or more distinct URLs in a list, or a deployment file)."""
        return self.name is not None


def is_deployment(base_url: str | None) -> bool:
    """Whether ``base_url`` names a deployment (several comma-separated URLs, or a deployment file) rather than
    one endpoint. Never raises."""
    if not base_url:
        return False
    v = base_url.strip()
    if "," in v:
        return True
    return v.lower().endswith(DEPLOYMENT_SUFFIXES) and "://" not in v


def shown(url: str) -> str:
    """``url`` as messages show it: user information (``http://user:password@host``, also without a scheme) and
    key-, token- and password-like query parameters replaced by ``[redacted]`` (:func:`ctxbench.core.redact
    .redact`). Never raises."""
    t = redact(str(url))
    if "://" not in t and "@" in t:  # user:password@host without a scheme: redact's URL rule needs one
        t = f"{MARK}@{t.rsplit('@', 1)[1]}"
    return t


_NOT_IN_A_HOST = re.compile(r"[\s/\\?#@%<>\"{}|^`]")  # characters no host name or address holds


def check_endpoint(url: str, where: str | None, example: str = "write each replica like http://HOST:PORT/v1") -> str:
    """``url`` stripped, when it is an endpoint a call can be sent to: an ``http``/``https`` URL that parses, with a
    host (a name without spaces or URL delimiters, or an IP address) and a port in 0-65535 where it gives one.
    Raises InputError naming ``where`` (the option; None: a CLI option's check, whose error names it already), the
    URL (credentials redacted: :func:`shown`), what is wrong, and ``example``. A URL caught here is refused before
    anything runs, instead of failing every call."""
    u = url.strip()
    head = f"{where}: {shown(url)!r}" if where else repr(shown(url))
    try:
        parts = urlsplit(u)
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as e:
        raise InputError(f"{head} is not a valid URL ({e}): {example}") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InputError(f"{head} is not an http(s) URL: {example}")
    if not parts.hostname:
        raise InputError(f"{head} has no host: {example}")
    if ":" in parts.hostname and "%" in parts.hostname:
        raise InputError(f"{head} gives an IPv6 zone id ({parts.hostname!r}), which the HTTP client cannot connect "
                         f"with: give the address without its zone (%...) or a host name: {example}")
    if _NOT_IN_A_HOST.search(parts.hostname):
        raise InputError(f"{head} has an invalid host {parts.hostname!r} (a space or a URL delimiter in it): "
                         f"{example}")
    return u


def parse_deployment(base_url: str, model: str) -> Deployment:
    """The :class:`Deployment` ``base_url`` names for ``model``: one URL (name None), comma-separated URLs (named
    after the model's served name, a leading ``openai/`` dropped, when two or more distinct URLs remain: a list of
    one distinct URL, ``A,`` or ``A,A``, is that URL, name None), or a deployment file (module docstring; its
    ``name``, else the model's served name, whatever the number of replicas). Duplicate replicas (the same
    normalised URL) count once. Raises
    InputError naming the value and the fix for an empty list, a URL that is not http(s), or a file that cannot
    be read or holds no ``replicas`` list."""
    v = base_url.strip()
    served = model[len("openai/"):] if model.startswith("openai/") else model
    fail_after = FAIL_AFTER
    if v.lower().endswith(DEPLOYMENT_SUFFIXES) and "://" not in v:
        p = Path(v)
        try:
            doc = yaml.safe_load(p.read_text(encoding="utf-8"))  # JSON is YAML
        except (OSError, yaml.YAMLError) as e:
            raise InputError(f"--base-url {v}: cannot read the deployment file ({e}); give a YAML file with "
                             f"'replicas: [http://HOST:PORT/v1, ...]'") from None
        reps = doc.get("replicas") if isinstance(doc, dict) else None
        if not isinstance(reps, list) or not reps or not all(isinstance(r, str) for r in reps):
            raise InputError(f"--base-url {v}: the deployment file needs 'replicas:', a list of URLs "
                             f"(e.g. replicas: [http://gpu1:8000/v1, http://gpu2:8000/v1])")
        name = doc.get("name") if doc.get("name") is not None else served
        if not isinstance(name, str) or not name.strip():
            raise InputError(f"--base-url {v}: 'name' must be a non-empty string (what the request keys name)")
        fa = doc.get("fail_after", FAIL_AFTER)
        if not isinstance(fa, int) or isinstance(fa, bool) or fa < 1:
            raise InputError(f"--base-url {v}: 'fail_after' must be a whole number of at least 1 (got {fa!r})")
        urls, name, fail_after = [check_endpoint(r, f"--base-url {v}") for r in reps], name.strip(), fa
    else:
        parts = [x for x in (s.strip() for s in v.split(",")) if x]
        if not parts:
            raise InputError(f"--base-url {shown(base_url)!r} names no endpoint: write it like "
                             f"http://HOST:PORT/v1")
        urls = [check_endpoint(x, "--base-url") for x in parts]
        name = None  # named below when more than one distinct URL is left
    seen: dict[str, str] = {}
    for u in urls:
        seen.setdefault(_norm(u), u)
    if name is None and len(seen) > 1:
        name = served
    return Deployment(tuple(seen.values()), name, fail_after)


def _norm(url: str) -> str:
    """The normalised spelling of a replica URL (the cache's, :func:`ctxbench.models.cache.normalise_base_url`
    rules, repeated here so this module needs nothing above it): lower-cased scheme and host, loopback names as
    ``localhost``, trailing slashes dropped."""
    u = urlsplit(url.strip())
    host = (u.hostname or "").lower()
    if host in ("127.0.0.1", "::1", "0.0.0.0"):
        host = "localhost"
    port = f":{u.port}" if u.port else ""
    return f"{u.scheme.lower()}://{host}{port}{u.path.rstrip('/')}"


def deployment_key(dep: Deployment) -> str:
    """What the request keys of a named deployment hold as their endpoint: ``deployment:<name>``."""
    return f"deployment:{dep.name}"


def rank(route: str, replicas: tuple[str, ...] | list[str]) -> list[str]:
    """``replicas`` in the order ``route`` prefers them: by descending SHA-256 of ``<normalised replica>|<route>``
    (rendezvous hashing). The first is where the route's calls go; when it is taken out, the next. The same for
    any order of ``replicas``."""
    return sorted(replicas, key=lambda r: hashlib.sha256(f"{_norm(r)}|{route}".encode()).hexdigest(), reverse=True)


def route_of(messages: list[dict]) -> str:
    """A route for a call made without one (a caller that names no shared prefix): SHA-256 of the messages'
    canonical JSON, so the same call always reaches the same replica."""
    return hashlib.sha256(json.dumps(messages, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


@dataclass
class ReplicaHealth:
    """Which replicas of a deployment are in service. :meth:`pick` gives the replica a route goes to (the first
    in :func:`rank` order still in service); :meth:`failed` counts a failure of a replica and takes it out after
    ``fail_after`` in a row; :meth:`ok` resets its count. Thread-safe. ``down`` maps each replica taken out to
    the last error it gave."""

    replicas: tuple[str, ...]
    fail_after: int = FAIL_AFTER
    down: dict[str, str] = field(default_factory=dict)
    _fails: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def live(self) -> list[str]:
        """The replicas still in service, in the order given."""
        with self._lock:
            return [r for r in self.replicas if r not in self.down]

    def pick(self, route: str) -> str | None:
        """The replica ``route``'s calls go to now; None when every replica is out."""
        live = self.live()
        return rank(route, live)[0] if live else None

    def failed(self, replica: str, error: str) -> bool:
        """Count one failure of ``replica``; returns True when it is (now or already) out of service."""
        with self._lock:
            if replica in self.down:
                return True
            self._fails[replica] = self._fails.get(replica, 0) + 1
            if self._fails[replica] >= self.fail_after:
                self.down[replica] = error
                return True
            return False

    def ok(self, replica: str) -> None:
        """An answer from ``replica``: its failure count starts again."""
        with self._lock:
            self._fails[replica] = 0
