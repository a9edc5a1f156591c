"""Judge validation: Cohen's κ with its interval on worked examples (LaRA appendix C), κ of every judge of a scored
build against a labels file, and the terminal labelling command fed through stdin."""

from __future__ import annotations

import json
import math

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ctxbench.analysis.agreement import cohens_kappa, judge_agreement, read_labels
from ctxbench.cli import app
from ctxbench.core.errors import InputError
from ctxbench.run.evaluate import evaluate_build
from ctxbench.run.score import score_build
from fakeserver import FakeOpenAIServer
from test_evaluate import _env, cfg, make_build  # noqa: F401 (fixture reused)
from test_judge import judge_or_model


def test_kappa_worked_example():
    # human correct & judge correct 20, human correct & judge incorrect 5, human incorrect & judge correct 10,
    # both incorrect 15; n = 50. P_o = 35/50 = 0.7; P_e = (25*30 + 25*20)/50^2 = 0.5; kappa = 0.2/0.5 = 0.4
    human = [True] * 25 + [False] * 25
    judge = [True] * 20 + [False] * 5 + [True] * 10 + [False] * 15
    k = cohens_kappa(human, judge)
    assert (k.n, k.tp, k.fn, k.fp, k.tn) == (50, 20, 5, 10, 15)
    assert k.po == pytest.approx(0.7) and k.pe == pytest.approx(0.5) and k.kappa == pytest.approx(0.4)
    # Fleiss, Cohen & Everitt (1969) by hand: p11=.4 p12=.1 p21=.2 p22=.3, rows .5/.5, columns .6/.4
    # .4(1-1.1*.6)^2 + .3(1-.9*.6)^2 = .10972; .36(.1*1.1^2 + .2*.9^2) = .10188; (.4-.5*.6)^2 = .01
    se = math.sqrt((0.10972 + 0.10188 - 0.01) / (50 * 0.5 ** 2))
    assert k.se == pytest.approx(se) and se == pytest.approx(0.126996, abs=1e-6)
    assert (k.ci_low, k.ci_high) == (pytest.approx(0.4 - 1.959964 * se), pytest.approx(0.4 + 1.959964 * se))


def test_kappa_edge_cases():
    assert cohens_kappa([True, False, True], [True, False, True]).kappa == pytest.approx(1.0)
    k = cohens_kappa([True, True], [True, True])          # one verdict throughout: P_e = 1, kappa undefined
    assert k.kappa is None and k.po == 1.0 and k.pe == 1.0
    with pytest.raises(InputError):
        cohens_kappa([], [])


def _labels(build, path):
    """Human verdicts on the 10 answers of test_evaluate's build: correct for items 0-6 except 5, partial for 7,
    incorrect for 8 and 9; half by request key, half by answer text; one label of an unknown instance."""
    resp = {r["instance_id"]: r for r in pq.read_table(build / "responses.parquet").to_pylist()}
    lines = []
    for i in range(10):
        r = resp[f"inst-{i:02d}"]
        v = "partial" if i == 7 else "incorrect" if i in (5, 8, 9) else "correct"
        ref = {"request_key": r["request_key"]} if i % 2 else {"answer": r["response"]}
        lines.append({"instance_id": r["instance_id"], **ref, "verdict": v})
    lines.append({"instance_id": "nope", "answer": "x", "verdict": True})
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def test_kappa_of_every_judge_on_a_build(tmp_path):
    build = make_build(tmp_path / "b")
    with FakeOpenAIServer(answer_fn=judge_or_model) as srv:
        evaluate_build(build, cfg(srv))
        score_build(build, judge="openai/judge", judge_base_url=srv.base_url)
    rows, counts = judge_agreement(build, _labels(build, tmp_path / "labels.jsonl"))
    assert counts == {"labels": 11, "unmatched": 1}
    by = {r["matcher"]: r for r in rows}
    # row_match: 1 for items 0-6, 0.5 for 7 and 9, 0 for 8 -> correct 0-6. Human correct 0-4, 6.
    # tp 6, fp 1 (item 5), tn 3, fn 0: P_o = .9, P_e = (6*7 + 3*4)/100 = .54, kappa = .36/.46
    rm = by["row_match"]
    assert (rm["n"], rm["tp"], rm["fp"], rm["tn"], rm["fn"]) == (10, 6, 1, 3, 0)
    assert rm["kappa"] == pytest.approx(0.36 / 0.46)
    # the fake judge says exact for all but Cedar (item 2, unparseable: not scored): 9 pairs, judge always
    # correct -> P_o = 5/9 = P_e, kappa 0
    j = by["judge:openai/judge"]
    assert (j["n"], j["tp"], j["fp"]) == (9, 5, 4) and j["kappa"] == pytest.approx(0.0)
    # threshold 0.5: the human's partial (7) and row_match's 0.5 (7, 9) now count as correct
    rows5, _ = judge_agreement(build, tmp_path / "labels.jsonl", threshold=0.5)
    rm5 = next(r for r in rows5 if r["matcher"] == "row_match")
    assert (rm5["tp"], rm5["fp"], rm5["tn"], rm5["fn"]) == (7, 2, 1, 0)
    r = CliRunner().invoke(app, ["kappa", "--build", str(build), "--labels", str(tmp_path / "labels.jsonl")])
    assert r.exit_code == 0, r.output
    assert "0.783" in r.output
    assert {x["matcher"] for x in pq.read_table(build / "kappa.parquet").to_pylist()} == set(by)


def test_bad_labels_file(tmp_path):
    p = tmp_path / "l.jsonl"
    p.write_text('{"instance_id": "a", "answer": "x", "verdict": "maybe"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"l.jsonl:1: verdict must be"):
        read_labels(p)
    p.write_text('{"instance_id": "a", "verdict": "correct"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="request_key or answer"):
        read_labels(p)


def test_label_command_reads_stdin_and_resumes(tmp_path):
    build = make_build(tmp_path / "b")
    with FakeOpenAIServer(answer_fn=judge_or_model) as srv:
        evaluate_build(build, cfg(srv))
    out = tmp_path / "labels.jsonl"
    runner = CliRunner()
    # c, then an invalid reply (asked again) and i, then s (skipped), then p, then q (quit before the 5th)
    r = runner.invoke(app, ["label", "--build", str(build), "--n", "5", "--out", str(out)],
                      input="c\nmaybe\ni\ns\np\nq\n")
    assert r.exit_code == 0, r.output
    assert "Gold answer:" in r.output and "3 labels added" in r.output
    labs = read_labels(out)
    assert [x["verdict"] for x in labs] == ["correct", "incorrect", "partial"]
    keys = {x["request_key"] for x in labs}
    resp = {x["request_key"]: x for x in pq.read_table(build / "responses.parquet").to_pylist()}
    assert keys <= set(resp) and all(resp[x["request_key"]]["response"] == x["answer"] for x in labs)
    # resume: 3 done, 2 more asked, none of them labelled before
    r = runner.invoke(app, ["label", "--build", str(build), "--n", "5", "--out", str(out)], input="c\nc\n")
    assert r.exit_code == 0 and "3 already labelled" in r.output and "2 labels added" in r.output
    labs = read_labels(out)
    assert len(labs) == 5 and len({x["request_key"] for x in labs}) == 5
