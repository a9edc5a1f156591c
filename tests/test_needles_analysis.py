"""Needles analysis: decay regimes on hand-made curves, failure-mode rules, the memorization probe and the tables of
a hand-made scored build (tests/needles_build.py), with every expected number worked out by hand in the comments."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
import yaml
from needles_build import NEEDLE_SET, T1, T2, instance_rows, write_needles_build

from ctxbench.tracks.needles.analysis import (
    FAILURE_MODES,
    RegimeThresholds,
    analyse,
    classify_regime,
    facts_from_instances,
    facts_from_needle_set,
    parse_failure_mode,
    rule_tags,
    settings,
)
from ctxbench.run.score import score_build


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / "home"))


# -- decay regimes ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("curve,regime", [
    # the study's curves on 5-cell tiers (section 4.2)
    ([1.0, 1.0, 1.0], "stable"),             # Gemini: 5/5 5/5 5/5
    ([0.8, 0.8, 0.6], "stable"),             # Claude: ≥4/5 then 3/5
    ([1.0, 0.8, 0.4], "late_cliff"),         # GPT: drops 0.2 then 0.4 (= 2 × 0.2) from ≥0.8 to below 0.6
    ([0.8, 0.8, 0.0], "late_cliff"),         # Qwen: 4/5 4/5 0/5
    ([0.8, 0.4, 0.0], "smooth_decline"),     # DeepSeek: steps 0.4 and 0.4, each 50% of the fall of 0.8
    # four tiers
    ([1.0, 0.9, 0.6, 0.3], "smooth_decline"),  # min 0.3; steps .1 .3 .3 (no cliff ≥ .4); largest step 43% of .7
    ([1.0, 1.0, 0.9, 0.1], "late_cliff"),      # 0.8 in the last step ≥ 2 × 0.1
    # neither
    ([0.2, 0.2, 0.2], "unclassified"),       # low and flat
    ([1.0, 0.2, 1.0], "unclassified"),       # rises by 0.8
    ([0.7, 0.2], "unclassified"),            # one step of 0.5 from below 0.8: not a cliff, 100% in one step
    ([0.6], "insufficient_tiers"),
    ([1.0, 0.0], "late_cliff"),              # two tiers: 1.0 then 0.0
])
def test_regimes_on_hand_made_curves(curve, regime):
    assert classify_regime(curve, RegimeThresholds())[0] == regime


def test_regime_reads_tiers_in_ascending_order():
    # the dict is unsorted; ascending: 0.8 (256K), 0.4 (512K), 0.0 (1M) → smooth decline
    assert classify_regime({1_000_000: 0.0, 262_144: 0.8, 524_288: 0.4}, RegimeThresholds())[0] == "smooth_decline"


def test_regime_thresholds_are_configurable():
    curve = [0.8, 0.8, 0.6]
    assert classify_regime(curve, RegimeThresholds())[0] == "stable"
    # floor raised to 0.7: not stable; fall 0.2 < decline_min 0.3 → unclassified
    assert classify_regime(curve, RegimeThresholds(stable_floor=0.7))[0] == "unclassified"
    # ... and with decline_min 0.2 and one step allowed to carry it all → smooth decline
    th = RegimeThresholds(stable_floor=0.7, decline_min=0.2, max_step_share=1.0)
    assert classify_regime(curve, th)[0] == "smooth_decline"
    # a cliff needs cliff_drop: with 0.5, GPT's 0.4 drop is no cliff; steps .2 .4 carry 67% ≤ 75% → smooth
    assert classify_regime([1.0, 0.8, 0.4], RegimeThresholds(cliff_drop=0.5))[0] == "smooth_decline"


def test_thresholds_from_settings_and_overrides(tmp_path):
    assert RegimeThresholds.from_settings() == RegimeThresholds()      # the file holds the documented defaults
    assert RegimeThresholds.from_settings({"high": 0.9}).high == 0.9
    with pytest.raises(ValueError, match="cliff_dorp"):
        RegimeThresholds.from_settings({"cliff_dorp": 0.3})
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"regimes": {"stable_floor": 0.5, "variants": ["chain"]}}))
    th = RegimeThresholds.from_settings(path=p)
    assert (th.stable_floor, th.variants, th.high) == (0.5, ("chain",), 0.8)


# -- failure-mode rules ----------------------------------------------------------------------------------------------

FACTS = facts_from_needle_set(yaml.safe_load(NEEDLE_SET))
INST = instance_rows()


@pytest.mark.parametrize("key,reply,tags", [
    # 1. altered cell answered with the real value (the study's 浦城 case), even behind a "not recorded" hedge
    (("N2", "altered"), "真德秀是建州浦城人。", ["fabrication", "memorized_value"]),
    (("N2", "altered"), "文中未載，但據史籍為浦城人", ["fabrication", "memorized_value"]),
    (("N1", "altered"), "享年六十", ["fabrication", "memorized_value"]),
    # 2. another needle's value: N1's altered age 七十三 for the chain; N2's place for N1
    (("C1", "chain"), "七十三歲", ["wrong_attribute"]),
    (("N1", "real"), "浦城", ["wrong_attribute"]),
    # 3. another needle's subject (traditional or simplified), or a substitution phrase
    (("C1", "chain"), "此人即魏了翁，享年五十", ["subject_substitution"]),
    (("C1", "chain"), "闕仲章應是指闕中章，卒年五十", ["subject_substitution"]),
    (("N1", "real"), "This probably refers to a different scholar; he died at fifty.", ["subject_substitution"]),
    # 4. refusals in zh (traditional, folded) and en
    (("C1", "chain"), "對不起，我不能提供和評價這類信息", ["refusal"]),
    (("N1", "real"), "文中沒有記載。", ["refusal"]),
    (("N2", "real"), "The document does not mention where he was born.", ["refusal"]),
    (("N2", "real"), "The text makes no mention of his birthplace.", ["refusal"]),     # LaRA's detector
    (("N2", "real"), "I\u2019m sorry, but I can\u2019t help with that.", ["refusal"]),   # compliance, curly quotes
    # 5. the chain stops at the teacher (B named, the friend C not)
    (("C1", "chain"), "甄子敬的老師是葛元方，葛元方卒年五十。", ["truncated_chain"]),
    # 6. the friend named, a wrong value: fabricated
    (("C1", "chain"), "闕仲章卒年五十", ["fabrication"]),
    (("N2", "real"), "他是建陽人", ["fabrication"]),
    # empty: no failure tag (the matcher's null_answer stands)
    (("N1", "real"), "", []),
])
def test_rule_tags(key, reply, tags):
    assert rule_tags(reply, INST[key], FACTS) == tags


def test_rules_without_a_needle_set_use_the_other_variant_gold():
    facts = facts_from_instances(list(INST.values()))
    assert facts["N2"].real == ["建州浦城", "浦城"] and facts["N2"].names == []
    assert rule_tags("浦城", INST[("N2", "altered")], facts) == ["fabrication", "memorized_value"]
    # no names known: the truncated chain cannot be seen and falls to fabrication
    assert rule_tags("甄子敬的老師是葛元方，葛元方卒年五十。", INST[("C1", "chain")], facts) == ["fabrication"]


def test_settings_name_the_five_modes_phrases():
    s = settings()
    assert set(s["refusal_phrases"]) == {"en", "zh"} and set(s["substitution_cues"]) == {"en", "zh"}
    assert FAILURE_MODES == ("subject_substitution", "wrong_attribute", "truncated_chain", "fabrication", "refusal")


def test_parse_failure_mode():
    assert parse_failure_mode('{"mode": "refusal"}') == "refusal"
    assert parse_failure_mode('Verdict: {"mode": "Truncated_Chain"}') == "truncated_chain"
    assert parse_failure_mode('{"mode": "confused"}') is None
    assert parse_failure_mode("no json") is None and parse_failure_mode(None) is None


# -- a scored build ----------------------------------------------------------------------------------------------------

def scored(tmp_path, **kw):
    b = write_needles_build(tmp_path / "b", **kw)
    score_build(b)
    return b


def test_scores_and_tags_in_scores_parquet(tmp_path):
    b = scored(tmp_path)
    rows = [r for r in pq.read_table(b / "scores.parquet").to_pylist()]
    assert {r["matcher"] for r in rows} == {"substring"} and len(rows) == 19
    # 19 replies; wrong: T1 altered N2 ×2, T2 real N1@75, real N2@75, altered N2@75, chain → 6
    wrong = [r for r in rows if r["score"] == 0.0]
    assert len(wrong) == 6
    tags = sorted(tuple(json.loads(r["tags"])) for r in wrong)
    assert tags == sorted([("fabrication", "memorized_value")] * 3 + [("refusal",), ("fabrication",),
                                                                      ("truncated_chain",)])
    assert all(json.loads(r["detail"])["tagged_by"] == "rules" for r in wrong)
    assert all(json.loads(r["detail"])["facts"].startswith("needle_set:") for r in wrong)
    assert all(json.loads(r["tags"]) == [] for r in rows if r["score"] == 1.0)


def test_analysis_tables(tmp_path):
    a = analyse(scored(tmp_path))
    acc = {(r["model"], r["tier"], r["depth"], r["variant"]): (r["correct"], r["n"]) for r in a.accuracy}
    # by hand from tests/needles_build.py
    assert acc[("gpt-4.1", T1, "25%", "real")] == (2, 2)
    assert acc[("gpt-4.1", T1, "25%", "altered")] == (1, 2)   # N1 right, N2 remembered
    assert acc[("gpt-4.1", T2, "75%", "real")] == (0, 2)      # refusal, 建陽
    assert acc[("gpt-4.1", T2, "75%", "altered")] == (1, 2)
    assert acc[("gpt-4.1", T1, "chain", "chain")] == (1, 1)
    assert acc[("gpt-4.1", T2, "chain", "chain")] == (0, 1)
    assert acc[("claude-sonnet-4-20250514", T1, "25%", "real")] == (1, 1)
    assert len(a.accuracy) == 2 * (2 * 2 + 1) + 1

    reg = {r["model"]: r for r in a.regimes}
    # gpt-4.1: T1 7/9 = 0.778, T2 5/9 = 0.556: below 0.6, not from ≥0.8, fall 0.222 < 0.3 → unclassified
    assert reg["gpt-4.1"]["regime"] == "unclassified"
    assert json.loads(reg["gpt-4.1"]["curve"]) == [[T1, 7, 9], [T2, 5, 9]]
    assert reg["claude-sonnet-4-20250514"]["regime"] == "insufficient_tiers"
    assert {r["model"]: r["regime"] for r in analyse(tmp_path / "b", {"stable_floor": 0.5}).regimes}["gpt-4.1"] \
        == "stable"

    mem = {r["model"]: r for r in a.memorization if r["tier"] == "all"}["gpt-4.1"]
    assert (mem["real_correct"], mem["real_n"], mem["altered_correct"], mem["altered_n"]) == (6, 8, 5, 8)
    assert mem["pairs"] == 8 and mem["altered_answered_real"] == 3
    # paired real − altered: N1 [0, 0, 0, −1], N2 [1, 1, 0, 0]; mean 1/8. Cluster sums of (d − 1/8): −1.5, +1.5;
    # var = 2/1 × (2.25 + 2.25) / 8² = 0.140625, half-width 1.96 × 0.375 = 0.735
    assert mem["asymmetry"] == pytest.approx(0.125)
    assert mem["asymmetry_ci_low"] == pytest.approx(0.125 - 0.735)
    assert mem["asymmetry_ci_high"] == pytest.approx(0.125 + 0.735)
    assert mem["asymmetric"] is False
    # real: N1 [1,1,1,0], N2 [1,1,1,0]: both clusters sum to 0 → interval collapses to 0.75
    assert (mem["real_accuracy"], mem["real_ci_low"], mem["real_ci_high"]) == pytest.approx((0.75, 0.75, 0.75))
    # altered: N1 [1,1,1,1], N2 [0,0,1,0]: mean 5/8, half-width 0.735 → [0, 1] after clipping
    assert (mem["altered_accuracy"], mem["altered_ci_low"], mem["altered_ci_high"]) == pytest.approx((0.625, 0, 1))

    # per tier: T1 real 4/4, altered 2/4 (N2 remembered twice), pairs N1 [0, 0], N2 [1, 1] → asymmetry 0.5;
    # T2 real 2/4, altered 3/4, pairs N1 [0, −1], N2 [0, 0] → −0.25
    per = {r["tier"]: r for r in a.memorization if r["model"] == "gpt-4.1"}
    assert set(per) == {"all", str(T1), str(T2)}
    assert (per[str(T1)]["real_correct"], per[str(T1)]["altered_correct"], per[str(T1)]["asymmetry"],
            per[str(T1)]["altered_answered_real"]) == (4, 2, 0.5, 2)
    assert (per[str(T2)]["real_correct"], per[str(T2)]["altered_correct"], per[str(T2)]["asymmetry"],
            per[str(T2)]["altered_answered_real"]) == (2, 3, -0.25, 1)
    # the claude haystack has one tier: only the pooled row
    assert [r["tier"] for r in a.memorization if r["model"] == "claude-sonnet-4-20250514"] == ["all"]

    fail = {(r["model"], r["variant"]): r for r in a.failures}
    assert {k: fail[("gpt-4.1", "real")][k] for k in ("cells", "wrong", "refusal", "fabrication")} == \
        {"cells": 8, "wrong": 2, "refusal": 1, "fabrication": 1}
    assert {k: fail[("gpt-4.1", "altered")][k] for k in ("wrong", "fabrication", "memorized_value")} == \
        {"wrong": 3, "fabrication": 3, "memorized_value": 3}
    assert fail[("gpt-4.1", "chain")]["truncated_chain"] == 1
    assert sum(fail[("gpt-4.1", v)][m] for v in ("real", "altered", "chain") for m in FAILURE_MODES) == 6

    h = a.heatmaps[("gpt-4.1", "lc", "gpt-4.1")]
    assert h["tiers"] == [T1, T2] and h["depths"] == ["25%", "75%", "chain"]
    assert h["cells"][("25%", T1)] == (3, 4) and h["cells"][("75%", T2)] == (1, 4)
    assert h["cells"][("25%", T2)] == (4, 4) and h["cells"][("chain", T2)] == (0, 1)


def test_memorization_probe_flags_a_reciting_model(tmp_path):
    # a model right on every real cell and wrong (answering the real value) on every altered cell, over 2 needles ×
    # 2 depths × 2 tiers: asymmetry 1 in every pair, zero variance → interval [1, 1], asymmetric
    from needles_build import REPLIES

    replies = {k: v for k, v in REPLIES.items() if k[0] == "gpt-4.1" and k[4] == "real"}
    for (m, s, t, n, _, d), v in list(replies.items()):
        replies[(m, s, t, n, "altered", d)] = {"N1": "六十", "N2": "浦城"}[n]
        replies[(m, s, t, n, "real", d)] = {"N1": "六十", "N2": "浦城"}[n]
    a = analyse(scored(tmp_path, replies=replies))
    mem = a.memorization[0]
    assert mem["tier"] == "all"
    assert (mem["real_correct"], mem["altered_correct"], mem["altered_answered_real"]) == (8, 0, 8)
    assert (mem["asymmetry"], mem["asymmetry_ci_low"], mem["asymmetry_ci_high"]) == (1.0, 1.0, 1.0)
    assert mem["asymmetric"] is True


def test_reasoning_is_not_scored(tmp_path):
    # every reasoning text names 六十一 (the chain's answer); the T2 chain reply does not: it stays wrong
    b = scored(tmp_path)
    cells = [c for c in analyse(b).accuracy if c["variant"] == "chain" and c["tier"] == T2]
    assert cells[0]["correct"] == 0


# -- failure modes by a judge model (local OpenAI-compatible server) ---------------------------------------------------

def test_judge_tags_through_gateway_and_cache(tmp_path):
    from fakeserver import FakeOpenAIServer, message_text

    from ctxbench.tracks.needles.analysis import JUDGE_FAILURE_SYSTEM
    from ctxbench.scoring.judge import JUDGE_SYSTEM

    def fake(body):  # the question is the first user message (a repair prompt comes after the first reply)
        system, user = body["messages"][0]["content"], message_text(body["messages"][1]["content"])
        if system == JUDGE_FAILURE_SYSTEM:
            return "I am not sure." if "建陽" in user else json.dumps({"mode": "subject_substitution"})
        assert system == JUDGE_SYSTEM
        return json.dumps({"verdicts": ["none"]})

    def failure_calls(srv):
        return [b for b in srv.requests if b["messages"][0]["content"] == JUDGE_FAILURE_SYSTEM]

    b = write_needles_build(tmp_path / "b")
    with FakeOpenAIServer(answer_fn=fake) as srv:
        s = score_build(b, judge="openai/judge", judge_base_url=srv.base_url)
        calls = failure_calls(srv)
        # one per distinct prompt of the 6 wrong, non-empty replies (two share one: asked once), and one repair
        # prompt (建陽, whose reply stays unreadable)
        assert len(calls) == 5 + 1
        repair = [c for c in calls if len(c["messages"]) == 4]
        assert len(repair) == 1 and repair[0]["messages"][2]["content"] == "I am not sure."
        t = s.tagging["needles"]
        assert (t.tagged_by_judge, t.tagged_by_rules, t.unparseable_judge) == (5, 1, 1)
        chain = [message_text(c["messages"][-1]["content"]) for c in calls
                 if "甄子敬的老師的朋友" in message_text(c["messages"][-1]["content"])]
        assert "甄子敬 → 葛元方 → 闕仲章" in chain[0]
        assert "Planted in the document: 甄子敬少從葛元方學。 葛元方與闕仲章為友。 闕仲章卒年六十一。" in chain[0]
        n2alt = [message_text(c["messages"][-1]["content"]) for c in calls
                 if "真德秀是哪裏人" in message_text(c["messages"][-1]["content"])
                 and "婺州蘭溪人也" in message_text(c["messages"][-1]["content"])]
        assert n2alt and "historically known value is 建州浦城" in n2alt[0]
        rows = [r for r in pq.read_table(b / "scores.parquet").to_pylist()
                if r["matcher"] == "substring" and r["score"] == 0.0]
        by = sorted((json.loads(r["tags"]), json.loads(r["detail"])["tagged_by"]) for r in rows)
        assert by == sorted([(["subject_substitution"], "judge:openai/judge")] * 5 + [(["fabrication"], "rules")])
        # a second scoring reads every verdict from the response cache
        score_build(b, judge="openai/judge", judge_base_url=srv.base_url)
        assert len(failure_calls(srv)) == 5 + 1


def test_parse_threshold_overrides():
    from ctxbench.tracks.needles.analysis import parse_threshold_overrides
    from ctxbench.core.errors import InputError

    assert parse_threshold_overrides(["stable_floor=0.5", "variants=chain, real"]) == \
        {"stable_floor": 0.5, "variants": ["chain", "real"]}
    assert parse_threshold_overrides(None) == {}
    with pytest.raises(InputError, match="KEY=VALUE"):
        parse_threshold_overrides(["=0.5"])
    th = RegimeThresholds.from_settings(parse_threshold_overrides(["variants=chain"]))
    assert th.variants == ("chain",)


def test_regime_table_orders_tiers_by_number():
    from ctxbench.tracks.needles.analysis import regime_table

    # 8,192 before 16,384 although "16384" < "8192" as text: 4/5 then 0/5 is a late cliff, not a rise
    cells = [{"model": "m", "mode": "lc", "sizing_model": "m", "tier": t, "variant": "chain", "needle_id": f"C{i}",
              "score": float(i < k)} for t, k in ((8192, 4), (16384, 0)) for i in range(5)]
    r = regime_table(cells, RegimeThresholds())[0]
    assert r["regime"] == "late_cliff" and json.loads(r["curve"]) == [[8192, 4, 5], [16384, 0, 5]]


def test_accuracy_rows_order_depths_by_number():
    from ctxbench.tracks.needles.analysis import accuracy_table, depth_label

    cells = [{"model": "m", "mode": "lc", "sizing_model": "m", "tier": 1, "variant": "real", "needle_id": "N1",
              "depth_label": depth_label(d, "real"), "score": 1.0} for d in (0.5, 1.0, 0.05)]
    assert [r["depth"] for r in accuracy_table(cells)] == ["5%", "50%", "100%"]
    assert depth_label(0.333333, "real") == "33.3%" and depth_label(None, "chain") == "chain"
