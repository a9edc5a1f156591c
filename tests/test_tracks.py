"""The track registry (ctxbench.core.track): the four built-in tracks, what each declares, registration checks and
the scoring lookups that read from it (no default matcher)."""

from __future__ import annotations

import pytest

from ctxbench.core.errors import InputError
from ctxbench.core.track import Stage, Track, check_track, get_track, register_track, track_names


def test_the_four_built_in_tracks_are_registered_with_their_stages_and_matchers():
    assert track_names()[:4] == ["holobench", "scitrek", "needles", "lara"]
    d = {n: get_track(n).describe() for n in ("holobench", "scitrek", "needles", "lara")}
    assert d["holobench"]["stages"] == ["load", "verbalize", "assemble", "gold", "validate", "write",
                                        "certify"]
    assert d["needles"]["stages"] == ["load", "verify", "count", "assemble", "validate", "write", "certify"]
    assert d["scitrek"]["stages"] == ["fetch-s2", "fetch", "convert", "database", "collections", "questions",
                                      "instances", "validate", "write", "certify"]
    assert d["lara"]["stages"] == ["load", "instances", "validate", "write", "certify"] and "import" in d["lara"]["verbs"]
    assert [d[n]["primary_matcher"] for n in d] == ["row_match", "exact_match", "substring", "lara_fallback"]
    assert d["needles"]["tagger"] == "ctxbench.tracks.needles.analysis:tag_failures"


def test_an_unknown_track_is_named_with_close_matches():
    with pytest.raises(InputError, match=r"unknown track 'holobnch' \(did you mean holobench\?\)"):
        get_track("holobnch")


def test_scoring_reads_the_track_and_has_no_default_matcher():
    from ctxbench.scoring.registry import is_fallback, matcher, matchers_for, tagger
    from ctxbench.tracks.lara.scoring import f1_instance
    from ctxbench.tracks.scitrek.scoring import f1

    assert matchers_for("scitrek") == ["exact_match", "f1"] and matchers_for("lara")[1:] == ["f1", "containment"]
    assert matcher("f1", "scitrek") is f1 and matcher("f1", "lara") is f1_instance  # each track's own F1
    with pytest.raises(InputError, match="differs between tracks lara, scitrek"):
        matcher("f1")
    with pytest.raises(InputError, match="benchmark 'nosuch' cannot be scored"):
        matchers_for("nosuch")
    with pytest.raises(InputError, match="cannot be scored"):
        matchers_for(None)  # no silent row_match for an instance without a benchmark
    with pytest.raises(InputError, match="track holobench has no matcher 'substring'"):
        matcher("substring", "holobench")
    assert tagger("holobench") is None and tagger("needles").__name__ == "tag_failures"
    assert is_fallback("f1", "lara") and not is_fallback("f1", "scitrek")


def _ok(*a):
    return a


def test_a_track_declaration_is_checked_when_it_is_registered():
    class Cfg:  # not a pydantic model
        pass

    from pydantic import BaseModel

    class Good(BaseModel):
        n: int = 1

    def track(**kw):
        return type("T", (Track,), {"name": "t_check", "Config": Good, "matchers": {"m": "a.b:c"},
                                    "stages": (Stage("load", _ok, ("cfg",), ("loaded",)),), **kw})()

    check_track(track())
    with pytest.raises(InputError, match="pydantic"):
        check_track(track(Config=Cfg))
    with pytest.raises(InputError, match=r"stage 'write' reads \['asm'\], which no earlier stage outputs"):
        check_track(track(stages=(Stage("load", _ok, ("cfg",), ("loaded",)), Stage("write", _ok, ("loaded", "asm")))))
    with pytest.raises(InputError, match="not a 'module:function' reference"):
        check_track(track(matchers={"m": "no_colon"}))
    with pytest.raises(InputError, match="lower-case identifier"):
        check_track(track(name="Bad Name"))


def test_a_name_taken_by_another_track_class_is_refused():
    from pydantic import BaseModel

    class C(BaseModel):
        pass

    cls = type("Impostor", (Track,), {"name": "holobench", "Config": C, "matchers": {"m": "a.b:c"},
                                      "stages": (Stage("s", _ok),)})
    with pytest.raises(InputError, match="registered twice"):
        register_track(cls)
    assert type(get_track("holobench")).__name__ == "HoloBench"


# ------------------------------------------------------------------------------------------------- the CLI

OLD_FLAGS = {  # every option of the four hand-written commands before the CLI was generated from the configs
    ("build", "holobench"): ["--db", "--queries", "--tokenizer", "--lengths", "--setting", "--position",
                             "--amount-tokens", "--density", "--seed", "--out", "--force"],
    ("build", "scitrek"): ["--pdfs", "--metadata", "--unarxive", "--markdown", "--s2orc", "--min-fill", "--tokenizer", "--lengths", "--samplings", "--formats",
                           "--collections-per-tier", "--templates-per-collection", "--misaligned", "--question-model",
                           "--question-base-url", "--question-api-key-env", "--seed", "--out", "--force"],
    ("build", "needles"): ["--corpus", "--models", "--lengths", "--depths", "--fill", "--boundary", "--needles",
                           "--exclude", "--output-budget", "--out", "--force"],
    ("import", "lara"): ["--data", "--out", "--tokenizer", "--force"],
}


@pytest.mark.parametrize("cmd", sorted(OLD_FLAGS))
def test_generated_build_commands_keep_every_flag(cmd):
    import click
    from typer.main import get_command

    from ctxbench.cli import app

    root = get_command(app)
    ctx = click.Context(root)
    group = root.get_command(ctx, cmd[0])
    c = group.get_command(click.Context(group, parent=ctx), cmd[1])
    flags = {o for p in c.params for o in p.opts}
    assert set(OLD_FLAGS[cmd]) <= flags, set(OLD_FLAGS[cmd]) - flags


def test_tracks_command_lists_stages_and_matchers_and_wrong_verbs_are_named():
    import json

    from typer.testing import CliRunner

    from ctxbench.cli import app

    r = CliRunner().invoke(app, ["tracks", "--json"])
    assert r.exit_code == 0, r.output
    d = {x["name"]: x for x in json.loads(r.output)}
    assert d["needles"]["matchers"] == ["substring"] and d["lara"]["verbs"] == ["build", "import"]
    assert d["holobench"]["stages"][0] == "load" and d["holobench"]["stages"][-2:] == ["write", "certify"]
    r = CliRunner().invoke(app, ["import", "holobench"])
    assert r.exit_code == 2 and "not offered by `ctxbench import`" in r.output
    r = CliRunner().invoke(app, ["build", "needels"])
    assert r.exit_code == 2 and "did you mean needles" in r.output


def test_option_kinds_from_config_fields():
    from typing import Literal

    import typer
    from pydantic import BaseModel, Field

    from ctxbench.cli.options import config_values, option_specs

    class C(BaseModel):
        lengths: list[int] = Field([4096], description="tiers")
        depths: list[float] | None = None
        words: list[str] = Field(default_factory=list)
        mode: Literal["a", "b"] = "a"
        on: bool = True
        path: str = Field(..., description="where")

    specs = {s.field: s for s in option_specs(C, {"words": "word"})}
    assert [specs[k].kind for k in ("lengths", "depths", "words", "mode", "on", "path")] == [
        "ints", "floats", "words", "choice", "bool", "str"]
    assert specs["lengths"].default == "4096" and specs["path"].default is ... and specs["words"].flag == "word"
    assert "(a | b)" in specs["mode"].help
    v = config_values(list(specs.values()), {"lengths": "4k, 1m", "depths": "0.25,0.5", "words": "x, ,y", "path": "p"})
    assert v == {"lengths": [4096, 1048576], "depths": [0.25, 0.5], "words": ["x", "y"], "path": "p"}
    with pytest.raises(typer.BadParameter, match="--lengths must be comma-separated integers"):
        config_values(list(specs.values()), {"lengths": "4k,abc"})
    with pytest.raises(typer.BadParameter, match="--lengths needs at least one value, e.g. 4096"):
        config_values(list(specs.values()), {"lengths": " , "})
    assert config_values(list(specs.values()), {"words": ""}) == {"words": []}  # its default is empty


def test_a_built_in_track_asked_first_is_imported_alone_and_the_list_keeps_its_order(tmp_path):
    """A fresh process asking for one built-in track (what evaluating a build does) imports that track only; the
    registry loaded afterwards lists the built-ins in their fixed order whichever came first, and with
    CTXBENCH_TRACKS set every plugin is loaded before the answer (its name may be the one asked for)."""
    import json
    import os
    import subprocess
    import sys

    code = ("import json, sys\nfrom ctxbench.core.track import get_track, track_names\n"
            "t = get_track('needles')\n"
            "alone = sorted(m for m in sys.modules if m.startswith('ctxbench.tracks.') and m.endswith('.track'))\n"
            "print(json.dumps([type(t).__name__, alone, track_names()]))")
    env = {k: v for k, v in os.environ.items() if k != "CTXBENCH_TRACKS"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    name, alone, names = json.loads(r.stdout)
    assert name == "Needles" and alone == ["ctxbench.tracks.needles.track"]
    assert names[:4] == ["holobench", "scitrek", "needles", "lara"]
    found = ("import json, sys\nfrom ctxbench.core.track import find_track\n"  # the prompts' lookup: the same
             "t = find_track('lara')\n"
             "alone = sorted(m for m in sys.modules if m.startswith('ctxbench.tracks.') and m.endswith('.track'))\n"
             "print(json.dumps([type(t).__name__, alone, find_track('no-such-track'), len(alone) < len([\n"
             "    m for m in sys.modules if m.startswith('ctxbench.tracks.') and m.endswith('.track')])]))")
    r = subprocess.run([sys.executable, "-c", found], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == ["Lara", ["ctxbench.tracks.lara.track"], None, True]
    plugin = tmp_path / "dup_needles.py"  # a plugin taking a built-in's name: refused, also when asked first
    plugin.write_text("from ctxbench.core.track import register_track\n"
                      "from ctxbench.tracks.needles.track import Needles\n\n\n"
                      "@register_track\nclass Needles(Needles):\n    pass\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**env, "CTXBENCH_TRACKS": str(plugin)})
    assert r.returncode != 0 and "registered twice" in r.stderr, r.stderr
