"""Bad inputs found by a hostile trial of the newer commands: none may lose a user's files or end in a traceback."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ctxbench.cli import app
from ctxbench.core.errors import InputError
from ctxbench.models.gateway import classify
from ctxbench.tracks.needles.questions import load_needle_set
from ctxbench.sources.corpus import fetch_corpus
from ctxbench.core.manifest import check_out_dir

runner = CliRunner()


def _volumes(d):
    d.mkdir(parents=True)
    (d / "001_one.txt").write_text("Volume one\nThe first paragraph is here. It has two sentences.\n", encoding="utf-8")
    return d


def test_fetch_corpus_never_replaces_a_foreign_directory(tmp_path):
    src = _volumes(tmp_path / "texts")
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("precious")
    with pytest.raises(InputError, match="holds no ctxbench corpus directory"):
        fetch_corpus(out, local=src)
    assert (out / "notes.txt").read_text() == "precious"
    # the source inside (or equal to) --out is refused even when --out is otherwise a corpus
    with pytest.raises(InputError, match="would delete the source"):
        fetch_corpus(tmp_path, local=src)
    with pytest.raises(InputError, match="would delete the source"):
        fetch_corpus(src, local=src)
    assert (src / "001_one.txt").exists()
    # a new directory, then the same corpus directory again, are fine
    fetch_corpus(tmp_path / "corpus", local=src)
    fetch_corpus(tmp_path / "corpus", local=src)
    assert json.loads((tmp_path / "corpus" / "corpus.json").read_text())["volumes"]


def test_build_refuses_a_directory_with_foreign_files(tmp_path):
    out = tmp_path / "b"
    out.mkdir()
    (out / "notes.txt").write_text("precious")
    with pytest.raises(InputError, match="holds no ctxbench build.*notes.txt"):
        check_out_dir(out, "abc")
    assert check_out_dir(out, "abc", force=True) is None
    # an interrupted build (artifacts and temporary files, no manifest yet) may be restarted
    rest = tmp_path / "r"
    rest.mkdir()
    (rest / "instances.parquet").write_bytes(b"x")
    (rest / ".quarantine.parquet.tmp-1").write_bytes(b"x")
    assert check_out_dir(rest, "abc") is None


def test_calibrate_never_overwrites_a_build_file(tmp_path):
    build = tmp_path / "build"
    build.mkdir()
    (build / "manifest.json").write_text("{}")
    (build / "instances.parquet").write_bytes(b"PAR1")
    other = tmp_path / "data.json"
    other.write_text('{"rows": 1}')
    for target, msg in ((build / "instances.parquet", "inside the build"), (other, "not an earlier calibration"),
                        (tmp_path / "nodir" / "x.json", "does not exist")):
        r = runner.invoke(app, ["calibrate", "--corpus", str(tmp_path), "--out", str(target)])
        assert r.exit_code == 2, r.output
        assert msg in r.output
    assert (build / "instances.parquet").read_bytes() == b"PAR1" and other.read_text() == '{"rows": 1}'


@pytest.mark.parametrize("text,msg", [("- a\n- b\n", "top level must be a mapping"),
                                      ("needles: [just a string]\n", "must be a list of mappings"),
                                      ("needles: [unclosed\n", "not a readable YAML needle set")])
def test_needle_set_of_the_wrong_shape_is_named(tmp_path, text, msg):
    p = tmp_path / "n.yaml"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=msg) as e:
        load_needle_set(str(p))
    assert str(p) in str(e.value)


def test_unknown_provider_is_a_configuration_error_not_a_stored_answer():
    class BadRequestError(Exception):
        status_code = 400

    e = classify(BadRequestError("litellm.BadRequestError: LLM Provider NOT provided. Pass in the LLM provider"))
    assert getattr(e, "status", None) == "config_error"


def test_a_sizing_model_is_evaluated_on_its_own_haystacks_only():
    import pyarrow as pa

    from ctxbench.tracks.needles import own_haystacks

    t = pa.table({"instance_id": ["a", "b", "c", "d"],
                  "sizing_model": ["gpt-4.1", "Qwen2.5-7B-Instruct-1M", "gpt-4.1", None]})
    assert own_haystacks(t, "openai/GPT-4.1").column("instance_id").to_pylist() == ["a", "c", "d"]
    assert own_haystacks(t, "qwen2.5-7b-instruct-1m").column("instance_id").to_pylist() == ["b", "d"]
    assert own_haystacks(t, "some-new-model").num_rows == 4  # sized nothing: every haystack
    assert own_haystacks(t.drop(["sizing_model"]), "gpt-4.1").num_rows == 4
