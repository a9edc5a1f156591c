"""A throw-away PostgreSQL server for tests (Debian's ``postgresql`` package): ``initdb`` into a temporary
directory, started by ``pg_ctl`` on a free loopback port with trust authentication and fsync off, stopped and
removed at the end. As root (PostgreSQL refuses to run as root) the server runs as the ``postgres`` user (else
``nobody``) through ``runuser``. :func:`pg_binaries` finds ``initdb``; :class:`PgServer` is the context manager."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def pg_binaries() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl`` (``pg_config --bindir``, the newest
    ``/usr/lib/postgresql/*/bin``, or the PATH), or None when PostgreSQL is not installed."""
    cands = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name)
                   if Path(p).parent.name.isdigit() else 0, reverse=True)
    found = shutil.which("initdb")
    cands += [str(Path(found).parent)] if found else []
    for c in cands:
        if (Path(c) / "initdb").exists() and (Path(c) / "pg_ctl").exists():
            return Path(c)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    """``with PgServer() as pg: pg.url`` (``postgresql://ctxbench@127.0.0.1:PORT/postgres``). :meth:`database`
    creates a fresh database and gives its URL."""

    def __init__(self) -> None:
        self.bindir = pg_binaries()
        if self.bindir is None:
            raise FileNotFoundError("PostgreSQL is not installed (apt-get install postgresql)")
        self.dir = Path(tempfile.mkdtemp(prefix="ctxbench-pg-"))
        self.port = _free_port()
        self.user = None
        if os.geteuid() == 0:
            for name in ("postgres", "nobody"):
                try:
                    pw = pwd.getpwnam(name)
                except KeyError:
                    continue
                self.user = name
                os.chown(self.dir, pw.pw_uid, pw.pw_gid)
                break
        self._n = 0

    def _run(self, *args: str) -> None:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    @property
    def url(self) -> str:
        return f"postgresql://ctxbench@127.0.0.1:{self.port}/postgres"

    def database(self) -> str:
        """A new empty database on this server; returns its URL."""
        import psycopg

        self._n += 1
        name = f"t{self._n}"
        with psycopg.connect(self.url, autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        return f"postgresql://ctxbench@127.0.0.1:{self.port}/{name}"

    def __enter__(self) -> "PgServer":
        data = self.dir / "data"
        self._run("initdb", "-D", str(data), "-U", "ctxbench", "--auth=trust", "-E", "UTF8")
        self._run("pg_ctl", "-D", str(data), "-l", str(self.dir / "log"), "-w", "-t", "60", "-o",
                  f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                  f"-c max_connections=200", "start")
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.dir / "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
