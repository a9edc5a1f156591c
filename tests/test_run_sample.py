"""The default run's sample (issue 26 item 3): on 2 CPU cores the embedded model processes a 4,096-token context in
about a minute, so `ctxbench run` draws each length's questions from as few contexts as possible (the server keeps a
context's prefix: each further question costs its own tokens), and its forecast counts a kept prefix once."""

from __future__ import annotations

import hashlib

import pyarrow as pa

from ctxbench.run.evaluate import _prompt_spans, select_instances
from ctxbench.models.prompts import messages_text


def _h(iid: str, seed: int = 0) -> str:
    return hashlib.sha256(f"{seed}|{iid}".encode()).hexdigest()


def _table():
    # length 100: context A holds 3 instances, C 2, B 1; length 200: context D 2, E 2
    rows = [("a1", 100, "A"), ("a2", 100, "A"), ("a3", 100, "A"), ("b1", 100, "B"), ("c1", 100, "C"),
            ("c2", 100, "C"), ("d1", 200, "D"), ("d2", 200, "D"), ("e1", 200, "E"), ("e2", 200, "E")]
    return pa.table({"instance_id": [r[0] for r in rows], "target_tokens": [r[1] for r in rows],
                     "context": [r[2] for r in rows]})


def test_shared_contexts_take_the_largest_context_first():
    got = select_instances(_table(), 4, seed=0, share_contexts=True).to_pylist()
    by_len = {}
    for r in got:
        by_len.setdefault(r["target_tokens"], []).append(r)
    # length 100: A's 3 instances, then the one of C (the next largest) whose hash is the smaller
    c_first = min(["c1", "c2"], key=_h)
    assert sorted(r["instance_id"] for r in by_len[100]) == sorted(["a1", "a2", "a3", c_first])
    assert sorted(r["instance_id"] for r in by_len[200]) == ["d1", "d2", "e1", "e2"]  # all 4
    assert [r["instance_id"] for r in got] == [r for r in _table().column("instance_id").to_pylist()
                                               if r in {g["instance_id"] for g in got}]  # table order kept


def test_contexts_of_one_size_are_taken_by_their_smallest_instance_hash():
    got = select_instances(_table(), 3, seed=0, share_contexts=True).to_pylist()
    got200 = sorted(r["instance_id"] for r in got if r["target_tokens"] == 200)
    first, second = sorted("de", key=lambda c: min(_h(c + "1"), _h(c + "2")))
    assert got200 == sorted([first + "1", first + "2", min([second + "1", second + "2"], key=_h)])


def test_without_sharing_the_sample_is_the_instance_hash_order():
    got = select_instances(_table(), 2, seed=3).to_pylist()
    want = sorted(["a1", "a2", "a3", "b1", "c1", "c2"], key=lambda i: _h(i, 3))[:2] + sorted(
        ["d1", "d2", "e1", "e2"], key=lambda i: _h(i, 3))[:2]
    assert sorted(r["instance_id"] for r in got) == sorted(want)


def test_a_prefix_the_server_keeps_is_counted_once():
    ctx = "x" * 300
    def call(q: str, tokens: int, prefix: str) -> dict:
        msgs = [{"role": "system", "content": "S"},
                {"role": "user", "content": f"Intro\n\n<document>\n{ctx}\n</document>\n\nQuestion: {q}"}]
        return {"_messages": msgs, "_context": ctx, "_prefix": prefix, "_prompt_tokens": tokens}

    a, b = call("How many?", 100, "p1"), call("Which one is it?", 120, "p1")
    other = call("How many?", 90, "p2")
    text_b = messages_text(b["_messages"])
    # b shares everything up to the document's end: "S\nIntro\n\n<document>\n" + 300 x + "\n</document>"
    kept = len("S\nIntro\n\n<document>\n") + 300 + len("\n</document>")
    def to_process(calls):
        return sum(end - start for start, end in _prompt_spans(calls))

    assert to_process([a, b, other]) == 100 + round(120 * (len(text_b) - kept) / len(text_b)) + 90
    assert to_process([a, other]) == 190  # different prefixes: each processed whole
    assert _prompt_spans([a, b])[1] == (120 - round(120 * (len(text_b) - kept) / len(text_b)), 120)
