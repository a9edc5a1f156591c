"""Issue 36, evaluation throughput: the work between a run's calls overlaps the calls. An answer is checked and
stored after its concurrency slot is freed, so the next call does not wait for it. The truncation check's tokenizer
loads in a thread (ctxbench.models.truncation.truncation_check_soon). The heap is frozen for the garbage collector
while the calls run (ctxbench.core.heap.frozen_heap)."""

from __future__ import annotations

import gc
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ctxbench.core.heap import frozen_heap
from ctxbench.core.storage import read_parquet
from ctxbench.models.backends.openai_http import chat_url
from ctxbench.models.cache import ResponseCache
from ctxbench.models.runner import CallRunner, Request, TruncationCheck
from ctxbench.models.truncation import TOLERANCE_ESTIMATE, truncation_check, truncation_check_soon
from fakeserver import FakeOpenAIServer


def test_frozen_heap_nests_and_leaves_a_freeze_of_someone_else():
    # The permanent generation's count falls when another thread frees a frozen object, so the checks compare with
    # 1,000 containers made after a freeze: a second freeze would add them, a lifted one would leave 0.
    if gc.get_freeze_count():
        pytest.skip("the heap is frozen already in this process")
    with frozen_heap():
        frozen = gc.get_freeze_count()
        assert frozen > 0
        made_after = [[] for _ in range(1000)]
        with frozen_heap():  # nested (or another thread's): one freeze, lifted by the last one out
            assert 0 < gc.get_freeze_count() <= frozen
        assert 0 < gc.get_freeze_count() <= frozen
    assert gc.get_freeze_count() == 0
    gc.freeze()  # someone else's (e.g. a pre-forking server): kept as it is
    try:
        theirs = gc.get_freeze_count()
        made_after = [[] for _ in range(1000)]
        with frozen_heap():
            assert 0 < gc.get_freeze_count() <= theirs  # not frozen again
        assert 0 < gc.get_freeze_count() <= theirs  # nor lifted
    finally:
        gc.unfreeze()
    del made_after


def test_truncation_check_soon_is_the_check_of_truncation_check():
    now = truncation_check_soon("openai/fake", len)  # a counter given: nothing to load, done at once
    assert now.done() and now.result().count is len
    assert now.result() == truncation_check("openai/fake", len)
    later = truncation_check_soon("openai/fake").result(timeout=60)  # an unregistered model: a cl100k estimate
    assert (later.tokenizer, later.exact, later.tolerance) == ("cl100k_base", False, TOLERANCE_ESTIMATE)
    assert later.count("hello world") == 2  # cl100k_base: "hello", " world"


def test_the_next_call_starts_while_an_answer_is_checked(tmp_path):
    """Concurrency 1 and a prompt count that takes 0.6 s: the second request reaches the server before the first
    answer's count has ended (before issue 36 the count held the run's only slot, so it came 0.6 s later). Every
    answer is still stored in the cache before the run hands it over."""
    arrived: list[float] = []
    counted: list[float] = []

    def answer(body):
        arrived.append(time.monotonic())
        return "Answer: 7"

    def slow_count(text: str) -> int:
        time.sleep(0.6)
        counted.append(time.monotonic())
        return len(text.split())

    cache = ResponseCache(tmp_path / "cache.sqlite")
    seen_stored: list[bool] = []
    lock = threading.Lock()
    reqs = [Request(f"k{i}", [{"role": "user", "content": f"question {i}"}], {"temperature": 0.0}, 16)
            for i in range(3)]
    with FakeOpenAIServer(answer_fn=answer) as srv:
        runner = CallRunner("openai/fake", srv.base_url, cache=cache, concurrency=1,
                            truncation=TruncationCheck(slow_count, 0.5, "words", False))

        def on_outcome(o):
            with lock:
                seen_stored.append(cache.get(o.request.key) is not None)

        out = runner.run(reqs, on_outcome)
    assert [o.result.status for o in out] == ["ok"] * 3 and seen_stored == [True] * 3
    assert len(arrived) == 3 and len(counted) == 3
    assert arrived[1] < counted[0]  # the second call was sent while the first answer was being counted


def test_read_parquet_reads_what_read_table_reads_and_refuses_an_unknown_column(tmp_path):
    """core.storage.read_parquet (one file, without pyarrow's dataset layer and the pandas import it brings)."""
    p = tmp_path / "t.parquet"
    t = pa.table({"a": [1, 2, None], "b": ["x", "ü", None], "c": [[1], [], None]})
    pq.write_table(t.replace_schema_metadata({"k": "v"}), p)
    for cols in (None, ["b"], ["c", "a"], ["a", "b", "a"], []):
        assert read_parquet(p, columns=cols).equals(pq.read_table(p, columns=cols), check_metadata=True)
    for other in (t.slice(0, 0), pa.table({"d": pa.array(["x", "y", "x"]).dictionary_encode()})):  # empty, dict
        pq.write_table(other, p)
        assert read_parquet(p).equals(pq.read_table(p), check_metadata=True)
    with pytest.raises(pa.ArrowInvalid, match="zz"):
        read_parquet(p, columns=["a", "zz"])


@pytest.mark.parametrize("base, url", [
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1/chat/completions"),
    ("http://h/v1/", "http://h/v1/chat/completions"),
    ("https://api.example.com/v1beta/openai", "https://api.example.com/v1beta/openai/chat/completions"),
    ("http://u:pw@h:5/v1?api_key=k", "http://u:pw@h:5/v1/chat/completions?api_key=k"),
])
def test_the_chat_url_extends_the_path_and_keeps_the_query(base, url):
    assert str(chat_url(base)) == url
