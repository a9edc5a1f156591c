"""Certify's work done ahead in a helper process (issue 36, ctxbench.tracks.holobench.precertify): a build that
parses its contexts and checks their rows ahead writes the same bytes as one that does not; a stored context that
differs from the text parsed ahead is parsed again from its stored bytes; work done with another grammar is not
used; a column with NULLs is typed in bulk exactly as value by value."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pyarrow.parquet as pq
import pytest

import ctxbench.tracks.holobench as hbpkg
from ctxbench.core.track import get_track
from ctxbench.tracks.holobench import precertify
from ctxbench.tracks.holobench import verify as hv
from ctxbench.verify import typed_value, typed_values, verify_build

CFG = {"lengths": [2048], "db": "nycflights13",
       "question_ids": ["nycflights13-q01", "nycflights13-q02", "nycflights13-q05"]}
FILES = ("instances.parquet", "certificates.parquet", "quarantine.parquet", "manifest.json", "source.sqlite")


@pytest.fixture
def spy(monkeypatch):
    """What certify received from the work done ahead: a list of (errors, checks, answers) per call."""
    got = []
    orig = hv._parsed_ahead

    def wrapped(ahead, g, seed):
        out = orig(ahead, g, seed)
        got.append(out)
        return out

    monkeypatch.setattr(hv, "_parsed_ahead", wrapped)
    return got


def test_build_with_work_ahead_writes_the_same_bytes(tmp_path, monkeypatch, spy):
    monkeypatch.setenv("CTXBENCH_SIDECAR", "off")  # everything in the main process
    get_track("holobench").build(CFG, tmp_path / "plain")
    assert spy == [({}, {}, {})]
    monkeypatch.setenv("CTXBENCH_SIDECAR", "on")
    monkeypatch.setenv("CTXBENCH_CERTIFY_AHEAD", "on")  # whatever the machine's load
    monkeypatch.setattr(precertify, "MIN_TOKENS", 0)  # a 2,048-token build hands its contexts to the helper
    get_track("holobench").build(CFG, tmp_path / "ahead")
    errors, checks, answers = spy[1]
    rows = pq.read_table(tmp_path / "ahead" / "instances.parquet").to_pylist()
    contexts = {r["context"] for r in rows}
    assert set(errors) == contexts and set(errors.values()) == {None}  # every context parsed, every line
    # one rows check per context (its questions share its included rows), each finding the rows agree
    assert set(checks) == {(r["context"], r["included_rows"]) for r in rows} and set(checks.values()) == {None}
    # every instance's SQL answered over the rows read back from its context: its stored gold
    assert set(answers) == {(r["context"], r["sql"]) for r in rows}
    assert all(json.loads(r["gold"]) == answers[(r["context"], r["sql"])] for r in rows)
    for f in FILES:
        assert (tmp_path / "plain" / f).read_bytes() == (tmp_path / "ahead" / f).read_bytes(), f
    assert {c["status"] for c in pq.read_table(tmp_path / "ahead" / "certificates.parquet").to_pylist()} == \
        {"certified"}
    assert precertify.take(tmp_path / "ahead") is None  # the certify stage took it


def test_a_stored_context_unlike_the_parsed_text_is_parsed_from_its_bytes(tmp_path, monkeypatch, spy):
    """The builder writes a context other than the one it handed to the helper (a relevant sentence dropped on
    the way) and a gold other than the answer the helper found: certify parses the stored text and compares the
    stored gold itself, and both instances fail; the others are certified."""
    monkeypatch.setenv("CTXBENCH_CERTIFY_AHEAD", "on")
    monkeypatch.setattr(precertify, "MIN_TOKENS", 0)
    orig = hbpkg.write_stage
    victim = {}

    def lossy_write(loaded, src, instances, quarantine, asm):
        r = instances[0]
        lines = r["context"].split("\n")
        tables = hv.sql_tables(r["sql"], list(src.db.tables))
        words = {"flights": " flight ", "weather": " humidity", "airports": "latitude", "planes": " seats"}
        k = next(i for i, ln in enumerate(lines) if any(words[t] in ln for t in tables))
        victim["id"], victim["text"] = r["instance_id"], "\n".join(lines[:k] + lines[k + 1:])
        instances[0] = {**r, "context": victim["text"]}
        # and an edited gold: the answer worked out ahead is not it, so certify compares it again itself
        g = json.loads(instances[-1]["gold"])
        g[0][0] = (g[0][0] + 1) if isinstance(g[0][0], (int, float)) else str(g[0][0]) + "x"
        victim["gold_id"] = instances[-1]["instance_id"]
        instances[-1] = {**instances[-1], "gold": json.dumps(g)}
        return orig(loaded, src, instances, quarantine, asm)

    monkeypatch.setattr(hbpkg, "write_stage", lossy_write)
    out = tmp_path / "b"
    get_track("holobench").build(CFG, out)
    errors, _, _ = spy[0]
    assert errors and victim["text"] not in errors  # the helper parsed the contexts, not the altered one
    certs = {c["instance_id"]: c for c in pq.read_table(out / "certificates.parquet").to_pylist()}
    assert certs[victim["id"]]["status"] == "failed"
    assert ("stored gold" in certs[victim["id"]]["reason"]
            or "included row(s) not stated" in certs[victim["id"]]["reason"])
    assert certs[victim["gold_id"]]["status"] == "failed" and "stored gold" in certs[victim["gold_id"]]["reason"]
    assert all(c["status"] == "certified" for i, c in certs.items() if i not in (victim["id"], victim["gold_id"]))
    # the failed instance went to quarantine, as the certify stage does with any failure
    assert victim["id"] not in {r["instance_id"] for r in pq.read_table(out / "instances.parquet").to_pylist()}


def test_work_done_with_another_grammar_is_not_used(tmp_path, monkeypatch, spy):
    """A fingerprint differing from the written build's grammar (another source.sqlite) leaves certify to its own
    parse: a bogus parse handed over with it changes nothing."""
    monkeypatch.setenv("CTXBENCH_SIDECAR", "off")
    out = tmp_path / "b"
    get_track("holobench").build(CFG, out)
    rows = pq.read_table(out / "instances.parquet").to_pylist()

    class Fake:
        def parsed(self):
            return precertify.AheadResult("0" * 64, {r["context"]: "line 1: bogus" for r in rows}, {},
                                          {(r["context"], r["sql"], 0): [["bogus"]] for r in rows})

    precertify._AHEAD[out.resolve()] = Fake()
    res = verify_build(out, write=False)
    assert precertify.take(out) is None
    assert spy[-1] == ({}, {}, {})
    assert {c.status for c in res.certificates} == {"certified"}, [c.reason for c in res.certificates]

    class Broken:  # a failure of the work ahead (here: the helper's answer unreadable) leaves certify to itself
        def parsed(self):
            raise EOFError("the other side closed the pipe")

    precertify._AHEAD[out.resolve()] = Broken()
    res = verify_build(out, write=False)
    assert spy[-1] == ({}, {}, {})
    assert {c.status for c in res.certificates} == {"certified"}, [c.reason for c in res.certificates]


def test_grammar_fingerprint_follows_the_source_bytes_and_templates(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_SIDECAR", "off")
    out = tmp_path / "b"
    get_track("holobench").build(CFG, out)
    a = tmp_path / "a.sqlite"
    shutil.copy(out / "source.sqlite", a)
    assert hv.load_grammar("nycflights13", a).fingerprint() == hv.load_grammar("nycflights13",
                                                                               out / "source.sqlite").fingerprint()
    before = hv.load_grammar("nycflights13", a).fingerprint()
    con = sqlite3.connect(a)
    table, col = con.execute("SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p "
                             "WHERE m.type = 'table' AND p.cid = 0").fetchone()
    con.execute(f'UPDATE "{table}" SET "{col}" = "{col}" || \'x\' WHERE rowid = 1')  # a value, not a type
    con.commit()
    con.close()
    assert hv.load_grammar("nycflights13", a).fingerprint() != before
    g = hv.load_grammar("nycflights13", a)
    fp = g.fingerprint()
    g.templates[0].literals[0] += "!"  # an inverted template read otherwise
    assert g.fingerprint() != fp


def test_typed_values_with_nulls_equal_value_by_value():
    cols = [(["3", None, "-7", None, "12"], "INTEGER"), ([None, "2.5", "1e3", None], "REAL"),
            (["5", None, "n/a"], "INTEGER"), (["9223372036854775808", None, "1"], "BIGINT"),
            ([None, None], "INTEGER"), (["0.5", None, "4"], "INTEGER"), (["x", None], "TEXT")]
    for texts, ty in cols:
        got = typed_values(list(texts), ty)
        want = [typed_value(x, ty) for x in texts]
        assert got == want and list(map(type, got)) == list(map(type, want)), (texts, ty)
    assert typed_values(["3", None, "-7"], "INTEGER") == [3, None, -7]
    assert typed_values(["9223372036854775808", None], "INTEGER") == [9.223372036854775808e18, None]


def test_when_a_build_works_ahead(monkeypatch):
    monkeypatch.setattr(precertify, "MIN_TOKENS", 1000)
    monkeypatch.setattr(precertify.os, "cpu_count", lambda: 2)
    monkeypatch.delenv("CTXBENCH_CERTIFY_AHEAD", raising=False)
    monkeypatch.setattr(precertify.os, "getloadavg", lambda: (2.2, 1.0, 1.0))  # this build and a core to spare
    assert precertify.wanted(1000) and not precertify.wanted(999)
    monkeypatch.setattr(precertify.os, "getloadavg", lambda: (2.5, 1.0, 1.0))  # others' work as well
    assert not precertify.wanted(1000)
    monkeypatch.setenv("CTXBENCH_CERTIFY_AHEAD", "on")
    assert precertify.wanted(1000) and not precertify.wanted(999)
    monkeypatch.setenv("CTXBENCH_CERTIFY_AHEAD", "off")
    monkeypatch.setattr(precertify.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert not precertify.wanted(10**7)


def test_work_ahead_discarded_twice_or_after_collecting(monkeypatch, tmp_path):
    monkeypatch.setenv("CTXBENCH_SIDECAR", "off")  # no helper: every request fails, and the caller goes on
    a = precertify.Ahead("nycflights13", tmp_path / "source.sqlite", None)
    a.add("one context\n")
    assert a.parsed() is None
    a.discard()
    a.discard()


def test_many_contexts_ahead_never_fill_the_helpers_pipe_and_one_build_is_kept(tmp_path, monkeypatch):
    """Answers left unread until certify filled the helper's 64 KiB stdout pipe (some 2,400 requests; a review
    hung a build of 1,840 contexts so): the helper stopped reading, the sender blocked holding the helper's lock
    and certify waited on both for ever. The sender now reads each answer: 600 requests through pipes of one page
    all come back. A second build started in the process drops the first one's work, here and in the helper
    (before, both stayed: the helper kept every parsed row of a build that failed before certify)."""
    import fcntl
    import threading

    from ctxbench.core import sidecar

    monkeypatch.setenv("CTXBENCH_SIDECAR", "off")
    out = tmp_path / "b"
    get_track("holobench").build(CFG, out)
    monkeypatch.setenv("CTXBENCH_SIDECAR", "on")
    monkeypatch.setenv("CTXBENCH_CERTIFY_AHEAD", "on")
    monkeypatch.setattr(precertify, "MIN_TOKENS", 0)
    first = precertify.start(tmp_path / "first", "nycflights13", out / "source.sqlite", None, 2048)
    assert first is not None
    first.add("a context that stopped before its certify stage\n")
    a = precertify.start(out, "nycflights13", out / "source.sqlite", None, 2048)
    assert list(precertify._AHEAD) == [out.resolve()]  # the first build's work dropped
    # the helper's pipes at one page (4 KiB) instead of 64 KiB: some 150 unread answers fill its stdout, not 2,400
    for pipe in (sidecar.current(precertify.HELPER).proc.stdout, sidecar.current(precertify.HELPER).proc.stdin):
        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, 4096)
    texts = [f"line {i} that no template states\n" for i in range(600)]
    for t in texts:
        a.add(t)
    got = {}
    waiter = threading.Thread(target=lambda: got.setdefault("r", a.parsed()), daemon=True)
    waiter.start()
    waiter.join(300)
    assert not waiter.is_alive(), "parsed() still waits"
    r = got["r"]
    assert r is not None and set(r.errors) == set(texts) and all(r.errors.values())  # no line parses
    assert sidecar.submit("ctxbench.tracks.holobench.precertify_helper:kept", helper=precertify.HELPER).result() == 0
    assert precertify.take(out) is a  # kept for its certify stage until taken


def test_a_staged_file_already_moved_into_place_is_read_there(tmp_path):
    """A quick build can be written (its ``.source.sqlite.staging`` renamed ``source.sqlite``) before the helper
    reads its first request: the helper then reads the build's file of the same bytes; a path that is no staged
    file, or whose build file is missing too, is kept as given (and fails there, as before)."""
    from ctxbench.tracks.holobench.precertify_helper import placed

    staged = tmp_path / ".source.sqlite.staging"
    staged.write_bytes(b"x")
    assert placed(str(staged)) == staged  # still staged: read where it is
    staged.rename(tmp_path / "source.sqlite")
    assert placed(str(staged)) == tmp_path / "source.sqlite"
    assert placed(str(tmp_path / ".templates.yaml.staging")) == tmp_path / ".templates.yaml.staging"
    assert placed(str(tmp_path / "other.sqlite")) == tmp_path / "other.sqlite"
