"""tests/data/tricky_inputs.yaml, section ``corpus_names`` (issue 13, item 13): every volume name read to its order
key or rejected, and every listed corpus put in its canonical order or refused with an error naming its files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ctxbench.core.errors import InputError
from ctxbench.sources.corpus import (ORDER_BY_NAME, ORDER_BY_NUMBER, VolumeKey, fetch_corpus, load_corpus,
                                     volume_key)

ENTRIES = yaml.safe_load((Path(__file__).parent / "data" / "tricky_inputs.yaml").read_text(encoding="utf-8"))[
    "corpus_names"]
NAMES = [e for e in ENTRIES if "name" in e]
CORPORA = [e for e in ENTRIES if "corpus" in e]


def test_section_is_filled():
    assert len(NAMES) >= 50 and len(CORPORA) >= 15
    assert all(("key" in e) != ("reject" in e) for e in NAMES)


def _write(d: Path, stems: list[str]) -> Path:
    d.mkdir(parents=True)
    for i, stem in enumerate(stems):
        (d / f"{stem}.txt").write_text(f"{stem}\n第{i}段。\n", encoding="utf-8")
    return d


@pytest.mark.parametrize("e", NAMES, ids=[e["name"] for e in NAMES])
def test_volume_name(e, tmp_path):
    if "key" in e:
        assert volume_key(e["name"]) == VolumeKey(*e["key"])
        return
    assert volume_key(e["name"]) is None
    # beside numbered volumes the name is refused, and the message names its file
    src = _write(tmp_path / "c", [e["name"], "卷九十一", "卷九十二"])
    with pytest.raises(InputError) as err:
        load_corpus(src)
    assert f"{e['name']}.txt" in str(err.value) and "卷九十一.txt" not in str(err.value)


@pytest.mark.parametrize("e", CORPORA, ids=["|".join(e["corpus"]) for e in CORPORA])
def test_corpus_order(e, tmp_path):
    src = _write(tmp_path / "src", e["corpus"])
    if "reject" in e:
        for load in (lambda: load_corpus(src), lambda: fetch_corpus(tmp_path / "out", local=src)):
            with pytest.raises(InputError) as err:
                load()
            msg = str(err.value)
            assert all(f"'{n}.txt'" in msg for n in e["reject"]), msg
            assert not [n for n in e["corpus"] if n not in e["reject"] and f"'{n}.txt'" in msg], msg
        assert not (tmp_path / "out").exists()
        return
    c = load_corpus(src)
    assert [v.name for v in c.volumes] == e["order"]
    # each volume's own paragraphs follow it (the order is of the files, not only of their names)
    assert [v.paragraphs[0] for v in c.volumes] == e["order"]
    assert c.order == (ORDER_BY_NAME if e.get("order_by") == "name" else ORDER_BY_NUMBER)
    # a fetched copy keeps the order and the keys, and an exclusion by label takes the halves of that number
    f = fetch_corpus(tmp_path / "out", local=src)
    again = load_corpus(tmp_path / "out")
    assert [v.name for v in f.volumes] == [v.name for v in again.volumes] == e["order"]
    assert [v.key for v in again.volumes] == [v.key for v in c.volumes] and again.order == c.order


def test_exclusion_by_label_takes_every_half(tmp_path):
    src = _write(tmp_path / "src", ["卷一上", "卷一下", "卷二", "卷首"])
    c = load_corpus(src, exclude=["卷一"])
    assert [v.name for v in c.volumes] == ["卷首", "卷二"] and sorted(c.excluded) == ["卷一上", "卷一下"]
    c = load_corpus(src, exclude=["卷一下"])
    assert [v.name for v in c.volumes] == ["卷首", "卷一上", "卷二"]
    c = load_corpus(src, exclude=["第二卷", "0"])  # another form of the same label; 0 is the front matter
    assert [v.name for v in c.volumes] == ["卷一上", "卷一下"]


def test_halves_from_the_ctext_api_titles(tmp_path, monkeypatch):
    """Titles of the API's subsections go through the same reading: halves in order, an unreadable one named with
    its URN."""
    from ctxbench.sources import corpus as corpus_mod

    book = {"ctp:b": {"title": "某書", "subsections": ["ctp:b/3", "ctp:b/2", "ctp:b/1"]},
            "ctp:b/1": {"title": "卷一下", "fulltext": ["一下。"]},
            "ctp:b/2": {"title": "卷一上", "fulltext": ["一上。"]},
            "ctp:b/3": {"title": "卷之二", "fulltext": ["二。"]}}
    monkeypatch.setattr(corpus_mod.CtextClient, "gettext", lambda self, urn: book[urn])
    c = fetch_corpus(tmp_path / "c", urn="ctp:b", base_url="http://127.0.0.1:9")
    assert c.paragraphs() == ["一上。", "一下。", "二。"]
    book["ctp:b/3"]["title"] = "附錄"
    with pytest.raises(InputError, match=r"'附錄' \(ctp:b/3\)"):
        fetch_corpus(tmp_path / "d", urn="ctp:b", base_url="http://127.0.0.1:9")
