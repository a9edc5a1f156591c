"""The build's helper process (ctxbench.core.sidecar): it runs the same functions on the same arguments, its failures
fall back to the main process, and the validation suite and language detection give the same answers through it
as without it."""

from __future__ import annotations

import os
import signal

import pyarrow as pa
import pytest

from ctxbench.core import sidecar
from ctxbench.features import language
from ctxbench.core.errors import ValidationError
from ctxbench.core.storage import to_table
from ctxbench.tracks.validate import derive_checks, run_expectations, suite_expectations, validate_build


@pytest.fixture
def helper(monkeypatch):
    monkeypatch.setenv("CTXBENCH_SIDECAR", "on")
    sidecar.stop()
    h = sidecar.start()
    assert h is not None
    yield h
    sidecar.stop()


def test_runs_functions_in_another_process(helper):
    p = helper.submit("os:getpid")
    q = helper.submit("math:comb", 10, 3)
    assert q.result() == 120  # answers are matched to their requests, whatever order they are read in
    assert p.result() == helper.proc.pid != os.getpid()
    assert p.result() == helper.proc.pid  # kept for a second read


def test_errors_and_death_are_reported(helper):
    with pytest.raises(sidecar.SidecarError, match="ZeroDivisionError"):
        helper.submit("operator:truediv", 1, 0).result()
    assert helper.submit("operator:add", 2, 3).result() == 5  # an error there does not end the helper
    os.kill(helper.proc.pid, signal.SIGKILL)
    helper.proc.wait()
    with pytest.raises(sidecar.SidecarError, match="ended|cannot take requests"):
        helper.submit("operator:add", 2, 3).result()
    assert sidecar.current() is None  # nothing more is sent to a dead helper


def test_a_helper_works_under_the_settings_of_each_request(helper, tmp_path, monkeypatch):
    """A helper runs each request under the CTXBENCH_* settings the main process has when it sends it (its cache
    home, the caches' switches): after they change, the same process answers for the new ones, with no new start
    (no second import of great-expectations), and a setting removed here is gone there too."""
    assert helper.submit("os:getenv", "CTXBENCH_HOME").result() == os.environ["CTXBENCH_HOME"]
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("CTXBENCH_LANGUAGE_CACHE", "off")
    assert sidecar.current("validate") is helper and sidecar.start("validate") is helper
    assert helper.submit("os:getenv", "CTXBENCH_HOME").result() == str(tmp_path / "elsewhere")
    assert helper.submit("os:getenv", "CTXBENCH_LANGUAGE_CACHE").result() == "off"
    monkeypatch.delenv("CTXBENCH_LANGUAGE_CACHE")
    assert helper.submit("os:getenv", "CTXBENCH_LANGUAGE_CACHE").result() is None
    assert helper.submit("os:getenv", "CTXBENCH_HOME").result() == str(tmp_path / "elsewhere")
    assert helper.proc.poll() is None and helper.submit("os:getpid").result() == helper.proc.pid
    # switched off: no helper is used (the work is done here), and none is started
    monkeypatch.setenv("CTXBENCH_SIDECAR", "off")
    assert sidecar.current("validate") is None and sidecar.start("validate") is None


def test_language_codes_follow_the_home_of_each_request(helper, tmp_path, monkeypatch):
    """The language helper keeps its codes in the home of the request: two homes, two stores, one process."""
    monkeypatch.delenv("CTXBENCH_LANGUAGE_CACHE", raising=False)
    h = sidecar.start("language")
    assert h is not None
    for home, text in (("a", "The quick brown fox jumps over the lazy dog near the river bank. "),
                       ("b", "Der schnelle braune Fuchs springt über den faulen Hund am Flussufer. ")):
        monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / home))
        got = sidecar.submit("ctxbench.features.language:detect_samples", [text * 10], helper="language").result()
        assert got == [{"a": "en", "b": "de"}[home]]
        assert (tmp_path / home / "cache" / "language.sqlite").is_file()
    assert sidecar.start("language") is h and h.proc.poll() is None


def test_off_runs_nothing_beside(monkeypatch):
    monkeypatch.setenv("CTXBENCH_SIDECAR", "off")
    sidecar.stop()
    assert sidecar.start() is None and sidecar.current() is None
    with pytest.raises(sidecar.SidecarError):
        sidecar.submit("operator:add", 1, 2).result()


def _rows(n: int = 3) -> list[dict]:
    return [{"instance_id": f"i{k}", "benchmark": "holobench", "source_id": "s", "question": "q?", "question_id": "q",
             "gold": "[[1]]", "context": "a\nb\n", "tokenizer": "cl100k_base", "target_tokens": 10,
             "context_tokens": 4, "context_format": "full_text", "query_types": "[]", "evidence_spans": "[[0, 2]]",
             "build_hash": "h"} for k in range(n)]


def test_suite_gives_the_same_failures_through_the_helper(helper):
    good = to_table("instances", _rows())
    bad_rows = _rows()
    bad_rows[1]["context_tokens"] = 99  # over its target
    bad_rows[2]["instance_id"] = "i0"  # a duplicate id
    bad_rows[0]["evidence_spans"] = "[[0, 50]]"  # a span past the context's end
    bad = to_table("instances", bad_rows)
    here = run_expectations(derive_checks(bad).to_pandas(), "instances", suite_expectations())
    assert sorted(here) == ["ExpectColumnPairValuesAToBeGreaterThanB(target_tokens,context_tokens)",
                            "ExpectColumnValuesToBeInSet(_spans_in_context)",
                            "ExpectColumnValuesToBeUnique(instance_id)"]
    validate_build(good)  # through the helper
    with pytest.raises(ValidationError) as ei:
        validate_build(bad)
    assert sorted(str(ei.value).split(": ", 1)[1].split(", ")) == sorted(here)


def test_validation_falls_back_when_the_helper_died(helper):
    os.kill(helper.proc.pid, signal.SIGKILL)
    helper.proc.wait()
    rows = _rows()
    rows[0]["context_tokens"] = 0
    with pytest.raises(ValidationError, match=r"ExpectColumnValuesToBeBetween\(context_tokens\)"):
        validate_build(to_table("instances", rows))


def test_derived_columns_only_the_suites():
    t = derive_checks(to_table("instances", _rows(2)))
    assert "context" not in t.column_names and "question" not in t.column_names
    assert {"instance_id", "gold", "context_tokens", "_query_types_valid", "_spans_in_context",
            "_included_sentences_once"} <= set(t.column_names)
    assert t.column("_spans_in_context").type == pa.bool_()


def test_included_sentences_checked_per_distinct_context():
    rows = _rows(3)
    for r in rows:
        r["included_rows"] = '{"t": [1, 2]}'
    rows[2]["context"] = "a\na\nb\n"  # the sentence of row 1 twice
    calls = []

    def sentence_of(t, rid):
        calls.append((t, rid))
        return {1: "a", 2: "b"}[rid]

    t = derive_checks(to_table("instances", rows), sentence_of)
    assert t.column("_included_sentences_once").to_pylist() == [True, True, False]
    assert calls == [("t", 1), ("t", 2), ("t", 1)]  # two distinct contexts; the second fails at its first row


def test_language_through_the_helper_is_the_same(helper, tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))  # an empty language store (the helper's too)
    en = "The committee met on Tuesday to discuss the new budget for the public library. " * 30
    de = "Der Ausschuss traf sich am Dienstag, um den neuen Haushalt der Bibliothek zu besprechen. " * 30
    text = en * 5 + de * 20  # sampled windows: one English, four German
    expected = [language._detect_now(language._sample(t, 5, 2000)) for t in (text, en, de)]
    language.warm_up()  # the language helper, beside the validation helper
    assert sidecar.current("language").proc.pid not in (helper.proc.pid, os.getpid())
    language._RESOLVED.clear()
    language._PREFETCHED.clear()
    language.prefetch_languages([text, en, de, None, ""])
    assert set(language._PREFETCHED) == {language._sample(t, 5, 2000) for t in (text, en, de)}
    assert [language.detect_language(t) for t in (text, en, de)] == expected == ["de", "en", "de"]
    assert not language._PREFETCHED and len(language._RESOLVED) == 3
    assert language.detect_language(text) == "de"  # asked again: the answer kept


def test_language_store_keeps_codes_across_processes(tmp_path, monkeypatch):
    """A code detected once is read back by a later process (here: the memo cleared) without detecting again; off,
    nothing is kept."""
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    zh = "天地玄黃，宇宙洪荒。日月盈昃，辰宿列張。寒來暑往，秋收冬藏。閏餘成歲，律呂調陽。" * 20
    en = "The committee met on Tuesday to discuss the new budget for the public library. " * 30
    language._detect.cache_clear()
    language._RESOLVED.clear()  # (answers a helper gave in an earlier test)
    first = [language.detect_language(t) for t in (zh, en, "12345 678")]
    assert first[1] == "en" and first[0].startswith("zh") and first[2] is None
    assert (tmp_path / "home" / "cache" / "language.sqlite").exists()
    language._detect.cache_clear()
    monkeypatch.setattr(language, "_detect_now", lambda s: (_ for _ in ()).throw(AssertionError("detected again")))
    assert [language.detect_language(t) for t in (zh, en, "12345 678")] == first
    monkeypatch.setenv("CTXBENCH_LANGUAGE_CACHE", "off")
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home2"))
    language._detect.cache_clear()
    monkeypatch.setattr(language, "_detect_now", lambda s: "xx")
    assert language.detect_language(en) == "xx"
    assert not (tmp_path / "home2" / "cache" / "language.sqlite").exists()
    language._detect.cache_clear()
