"""SciTrek template kinds added from the released set (issue 15 item 3): each template's gold answer on the five
group-A articles, worked out by hand from ../shared/data/articles/pdfs/metadata.json (A01: 8 title words, 23
authors, 27 references; A02: 7, 5, 57; A03: 7, 5, 55; A04: 12, 17, 53; A05: 12, 7, 65; citations among them
A02>A01, A03>A01, A04>A01, A04>A03, A04>A05, A05>A02) or computed from the raw JSON in Python, not in SQL."""

from __future__ import annotations

import json

import pytest

from ctxbench.sources.articles import citation_edges, load_metadata
from ctxbench.tracks.scitrek import questions as sq


@pytest.fixture(scope="module")
def raw(shared_data):
    from conftest import require_path

    p = require_path(shared_data / "articles" / "pdfs" / "metadata.json", "article metadata")
    return p, {r["id"]: r for r in json.loads(p.read_text())}


def _db(path, ids):
    metas = {a.id: a for a in load_metadata(path)}
    arts = [metas[i] for i in ids]
    return sq.metadata_database("c", arts, citation_edges(arts))


A5 = ["A01", "A02", "A03", "A04", "A05"]


def _gold(path, tid, values, ids=A5):
    tpl = next(t for t in sq.load_templates() if t.id == tid)
    inst = sq.fill(tpl, values)
    g = sq.gold_answer(inst.sql, _db(path, ids))
    assert g.ok, (inst.sql, g.reason)
    return g.rows, inst


def test_new_kinds_by_hand(raw):
    path, r = raw
    t = {i: r[i]["title"] for i in A5}
    cases = [
        ("filt_refs_minus_authors", {"article_title": t["A02"]}, [[52]]),                    # 57 - 5
        ("filt_titles_refs_ten_per_author", {}, sorted([[t["A02"]], [t["A03"]]])),          # 57 >= 50, 55 >= 50
        ("fagg_max_authors_plus_title_words", {"reference_count": 54}, [[19]]),            # A05: 7 + 12
        ("filt_author_counts_refs_or_short_title", {"reference_count": 56, "title_word_count": 8},
         [[5], [5], [7]]),                                                                  # A02, A03, A05
        ("filt_titles_author_count_in", {"author_count": 17, "author_count_2": 5},
         sorted([[t["A02"]], [t["A03"]], [t["A04"]]])),
        ("fagg_sum_references_of_two_titles", {"article_title": t["A01"], "article_title_2": t["A04"]}, [[80]]),
        ("fagg_count_titles_word_or_authors", {"title_word": "scholar", "author_count": 10}, [[3]]),  # A01 A03 A04
        ("agg_distinct_author_counts", {}, [[5], [7], [17], [23]]),
        ("fsort_distinct_author_counts_many_refs", {"reference_count": 55}, [[7], [5]]),
        ("agg_group_title_word_counts", {}, [[7, 2], [8, 1], [12, 2]]),
        ("fagg_group_authors_by_position", {"author_position": 1}, [[0, 5], [1, 5]]),
        ("rel_most_cited_titles_ties", {}, [[t["A01"]]]),                                  # cited 3 times
        ("fagg_titles_most_references", {}, [[t["A05"]]]),                                 # 65
        ("filt_first_author_of_title", {"article_title": t["A04"]}, [["Kyle Lo"]]),
        ("rel_titles_first_authored_by", {"first_author": "Kyle Lo"}, sorted([[t["A03"]], [t["A04"]]])),
        ("rel_last_authors", {}, sorted([["Oren Etzioni"], ["Daniel S. Weld"], ["Daniel S. Weld"],
                                          ["Luca Soldaini"], ["Daniel S. Weld"]])),
        ("fsort_authors_before_position", {"article_title": t["A05"], "author_position": 3},
         [["Jonathan Bragg"], ["Amy X. Zhang"], ["Joseph Chee Chang"]]),
        ("sort_first_authors_by_references", {}, [["Joseph Chee Chang"], ["Arman Cohan"], ["Kyle Lo"], ["Kyle Lo"],
                                                  ["Waleed Ammar"]]),                      # 65 57 55 53 27
        ("fsort_title_words_author_count_in", {"author_count": 5, "author_count_2": 7}, [[12], [7], [7]]),
    ]
    for tid, values, expected in cases:
        rows, _ = _gold(path, tid, values)
        assert rows == expected, tid
    # lists worked out from the raw file in Python
    after4 = {a for i in A5 for a in r[i]["authors"][5:]}
    assert _gold(path, "fagg_count_authors_after_position", {"author_position": 4})[0] == [[len(after4)]]
    assert _gold(path, "filt_authors_not_first_of_title", {"article_title": t["A03"]})[0] == \
        sorted([a] for a in r["A03"]["authors"][1:])


def test_most_cited_keeps_ties(raw):
    path, r = raw
    # without A01: A04>A03, A04>A05, A05>A02 — A02, A03 and A05 are each cited once
    rows, _ = _gold(path, "rel_most_cited_titles_ties", {}, ["A02", "A03", "A04", "A05"])
    assert rows == sorted([r[i]["title"]] for i in ("A02", "A03", "A05"))


def test_integer_division_stays_integer(raw):
    """SQLite's integer division: A05 has 65 references and 7 authors, 65 / 7 = 9. The gold answer is 9, or the
    instance is rejected because an engine read it otherwise; never 9.29 (a gold engine reading SQL as DuckDB)."""
    path, r = raw
    tpl = next(t for t in sq.load_templates() if t.id == "filt_refs_per_author")
    g = sq.gold_answer(sq.fill(tpl, {"article_title": r["A05"]["title"]}).sql, _db(path, A5))
    if g.ok:
        assert g.rows == [[9]] and isinstance(g.rows[0][0], int)
    else:
        assert "disagree" in g.reason and g.detail["sqlite"] == [[9]]


def test_second_values_differ_and_are_quoted(raw):
    import random

    path, _ = raw
    db = _db(path, A5)
    tpl = next(t for t in sq.load_templates() if t.id == "fagg_sum_references_of_two_titles")
    for seed in range(10):
        inst = sq.instantiate(tpl, db, random.Random(seed))
        assert inst.values["article_title"] != inst.values["article_title_2"]
        assert inst.sql.count("'") >= 4 and "{" not in inst.sql
    first = next(t for t in sq.load_templates() if t.id == "rel_titles_first_authored_by")
    firsts = {sq.instantiate(first, db, random.Random(s)).values["first_author"] for s in range(30)}
    assert firsts == {"Waleed Ammar", "Arman Cohan", "Kyle Lo", "Joseph Chee Chang"}  # position 0 only


def test_every_skill_topic_cell_of_the_paper():
    """SciTrek table 4 and section 3.2: the five non-relational skills over the five topics, relational
    filtering over author and citation relations; and the SQL kinds of table 11 (OR, IN, DISTINCT, GROUP BY,
    + - * /)."""
    ts = sq.load_templates()
    cells = {(t.skill, t.topic) for t in ts}
    for skill in sq.SKILLS[:5]:
        for topic in sq.TOPICS[:5]:
            assert (skill, topic) in cells, (skill, topic)
    assert {("relational_filtering", "author_relation"), ("relational_filtering", "citation_relation")} <= cells
    sqls = " ".join(t.sql for t in ts)
    for word in (" OR ", " IN (", "DISTINCT", "GROUP BY", " - ", " + ", " * ", " / ", "<>", "BETWEEN", "NOT "):
        assert word in sqls, word
