"""``ctxbench plan`` (issue 24 item 2) through the CLI: the independent bound, the paired design from a pilot build
(discordance and design effect), tiers and costs. Expected values are worked out here from the formulas (scipy's
normal quantiles), litellm's price table and the rendered prompts counted with tiktoken."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import norm
from typer.testing import CliRunner

from ctxbench.cli import app
from test_compare_pairs import LENGTHS, S, build


def plan(*args):
    r = CliRunner().invoke(app, ["plan", *args])
    return r


def test_independent_bound_text_and_json():
    r = plan("--accuracy", "0.7", "--mde", "0.1")
    assert r.exit_code == 0 and "356" in r.output and "independent" in r.output
    r = plan("--accuracy", "0.8", "--mde", "0.05", "--power", "0.9", "--alpha", "0.01", "--json")
    assert r.exit_code == 0
    got = json.loads(r.stdout)  # standard output is only the JSON object
    p1, p2 = 0.8, 0.75
    pbar = (p1 + p2) / 2
    n = (norm.ppf(0.995) * math.sqrt(2 * pbar * (1 - pbar)) + norm.ppf(0.9) * math.sqrt(p1 * (1 - p1) + p2 * (1 - p2))
         ) ** 2 / 0.05 ** 2
    assert got["instances"] == math.ceil(n) and got["design"] == "independent"
    assert (got["accuracy"], got["mde"], got["power"], got["alpha"]) == (0.8, 0.05, 0.9, 0.01)


@pytest.mark.parametrize("args, word", [(["--mde", "0.1"], "--accuracy"), (["--accuracy", "0.7", "--mde", "0"], "--mde"),
                                        (["--accuracy", "1.5", "--mde", "0.1"], "--accuracy")])
def test_bad_inputs_name_the_option(args, word):
    r = plan(*args)
    assert r.exit_code != 0 and word in r.output


def test_paired_plan_from_a_pilot(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    b = build(tmp_path / "pilot", S)
    r = plan("--accuracy", "0.8", "--mde", "0.1", "--pilot", str(b), "--models", "m-a,m-c", "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    a = np.array(S["m-a"][1000] + S["m-a"][2000], float)
    c = np.array(S["m-c"][1000] + S["m-c"][2000], float)
    d = a - c
    psi = float(np.mean(d ** 2))  # discordant pairs / 24
    assert math.isclose(got["pilot"]["discordance"], psi) and got["pilot"]["n"] == 24
    cl = np.array([i // 2 for i in range(12)] + [6 + i // 2 for i in range(12)])
    sums = np.array([(d[cl == g] - d.mean()).sum() for g in range(12)])
    v_cl = 12 / 11 * (sums ** 2).sum() / 24 ** 2
    deff = max(1.0, v_cl / (d.var(ddof=1) / 24))
    assert math.isclose(got["pilot"]["deff"], deff)
    za, zb = norm.ppf(0.975), norm.ppf(0.8)
    var = d.var()  # the pilot's spread of the differences (ψ − d̄²); planned at D = 0.1: ψ_D = var + 0.01
    assert math.isclose(got["pilot"]["discordance_at_mde"], var + 0.01)
    n = (za + zb) ** 2 * var / 0.01 * deff
    assert got["instances"] == math.ceil(n) and got["design"] == "paired"
    assert got["instances"] < got["independent_instances"]  # pairing on near-identical models needs fewer
    assert [t["context_length"] for t in got["tiers"]] == list(LENGTHS)
    assert got["tiers"][0]["short_by"] == max(0, got["instances"] - 12)
    assert got["tiers_pooled"] == math.ceil(got["instances"] / 12)


def test_costs_per_model_with_batch_discount(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))
    import litellm
    import tiktoken

    from ctxbench.models.prompts import messages_text, render_messages

    b = build(tmp_path / "b", S)
    r = plan("--accuracy", "0.7", "--mde", "0.2", "--build", str(b), "--models", "gpt-4o-mini", "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    n = got["instances"]
    price = litellm.model_cost["gpt-4o-mini"]
    enc = tiktoken.get_encoding("o200k_base")
    import pyarrow.parquet as pq

    inst = pq.read_table(b / "instances.parquet").to_pylist()
    want = 0.0
    for L in LENGTHS:
        rows = [x for x in inst if x["target_tokens"] == L]
        toks = [len(enc.encode(messages_text(render_messages(x["context"], x["question"], "cot", "gpt-4o-mini",
                                                              benchmark="holobench", context_format="full_text"))))
                for x in rows]
        per = sum(t * price["input_cost_per_token"] + 4096 * price["output_cost_per_token"] for t in toks) / len(toks)
        want += per * n
    c = got["costs"]["gpt-4o-mini"]
    assert math.isclose(c["total"]["cost"], want, rel_tol=1e-4)
    assert math.isclose(c["total"]["cost_cached"], want, rel_tol=1e-4)  # prompts under 1,024 tokens: never cached
    assert math.isclose(c["total"]["cost_batch"], want * 0.5, rel_tol=1e-4)  # OpenAI's batch price: half
    r = plan("--accuracy", "0.7", "--mde", "0.2", "--build", str(b), "--models", "gpt-4o-mini")
    assert r.exit_code == 0 and "gpt-4o-mini" in r.output and "batch API" in r.output
