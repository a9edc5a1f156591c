"""A small hand-made needles build (instances, responses, manifest, needle set) for the scoring, analysis and report
tests. Every reply is written by hand; the expected verdicts, tags and tables are worked out in the tests."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ctxbench.core.hashing import canonical_json
from ctxbench.core.storage import to_table, write_json, write_parquet

NEEDLE_SET = """\
language: zh
needles:
  - id: N1
    subject: 魏了翁
    subject_aliases: [鶴山先生, 魏華父]
    attribute: age_at_death
    statement: "鶴山先生魏了翁卒於家，年{value}。"
    question: 根據文中記載，魏了翁去世時享年幾歲？
    real: {value: 六十, accepted: ["60"]}
    altered: {value: 七十三, accepted: ["73"]}
  - id: N2
    subject: 真德秀
    subject_aliases: [西山先生, 真景元]
    attribute: place_of_origin
    statement: "真德秀，字景元，{value}人也。"
    question: 根據文中記載，真德秀是哪裏人？
    real: {value: 建州浦城, accepted: [浦城]}
    altered: {value: 婺州蘭溪, accepted: [蘭溪]}
chains:
  - id: C1
    attribute: age_at_death
    names: [甄子敬, 葛元方, 闕仲章]
    statements: [甄子敬少從葛元方學。, 葛元方與闕仲章為友。, 闕仲章卒年六十一。]
    question: 根據文中記載，甄子敬的老師的朋友去世時享年幾歲？
    answer: 六十一
    accepted: ["61"]
"""

QUESTIONS = {"N1": "根據文中記載，魏了翁去世時享年幾歲？", "N2": "根據文中記載，真德秀是哪裏人？",
             "C1": "根據文中記載，甄子敬的老師的朋友去世時享年幾歲？"}
GOLD = {("N1", "real"): ("六十", ["60"]), ("N1", "altered"): ("七十三", ["73"]),
        ("N2", "real"): ("建州浦城", ["浦城"]), ("N2", "altered"): ("婺州蘭溪", ["蘭溪"]),
        ("C1", "chain"): ("六十一", ["61"])}
T1, T2 = 1000, 2000

# (model, sizing model, tier, needle, variant, depth) → visible reply
REPLIES: dict[tuple, str] = {
    # tier T1: every real cell right; altered N1 right (73 in Arabic digits for 七十三); altered N2 answered with the
    # real, remembered value 浦城 at both depths; the chain right
    ("gpt-4.1", "gpt-4.1", T1, "N1", "real", 0.25): "魏了翁卒年六十。",
    ("gpt-4.1", "gpt-4.1", T1, "N1", "real", 0.75): "Answer: 60",
    ("gpt-4.1", "gpt-4.1", T1, "N2", "real", 0.25): "真德秀是建州浦城人。",
    ("gpt-4.1", "gpt-4.1", T1, "N2", "real", 0.75): "浦城",
    ("gpt-4.1", "gpt-4.1", T1, "N1", "altered", 0.25): "享年73歲",
    ("gpt-4.1", "gpt-4.1", T1, "N1", "altered", 0.75): "七十三",
    ("gpt-4.1", "gpt-4.1", T1, "N2", "altered", 0.25): "文中未載，但據史籍，真德秀為建州浦城人。",
    ("gpt-4.1", "gpt-4.1", T1, "N2", "altered", 0.75): "浦城",
    ("gpt-4.1", "gpt-4.1", T1, "C1", "chain", None): "甄子敬師葛元方，葛元方之友闕仲章卒年六十一。",
    # tier T2: real N1 at 75% a refusal, real N2 at 75% a made-up place; altered N2 at 75% the remembered value;
    # the chain stops at the teacher
    ("gpt-4.1", "gpt-4.1", T2, "N1", "real", 0.25): "六十",
    ("gpt-4.1", "gpt-4.1", T2, "N1", "real", 0.75): "文中未提及魏了翁的卒年。",
    ("gpt-4.1", "gpt-4.1", T2, "N2", "real", 0.25): "浦城人",
    ("gpt-4.1", "gpt-4.1", T2, "N2", "real", 0.75): "他是建陽人",
    ("gpt-4.1", "gpt-4.1", T2, "N1", "altered", 0.25): "七十三歲",
    ("gpt-4.1", "gpt-4.1", T2, "N1", "altered", 0.75): "seventy-three",
    ("gpt-4.1", "gpt-4.1", T2, "N2", "altered", 0.25): "蘭溪",
    ("gpt-4.1", "gpt-4.1", T2, "N2", "altered", 0.75): "浦城",
    ("gpt-4.1", "gpt-4.1", T2, "C1", "chain", None): "甄子敬的老師是葛元方，葛元方卒年五十。",
    # one haystack sized with an approximate tokenizer (the registry marks claude-sonnet-4-20250514 approximate)
    ("claude-sonnet-4-20250514", "claude-sonnet-4-20250514", T1, "N1", "real", 0.25): "六十",
}


def instance_id(sizing, tier, nid, variant, depth) -> str:
    return hashlib.sha256(f"{sizing}|{tier}|{nid}|{variant}|{depth}".encode()).hexdigest()[:24]


def write_needles_build(out: Path, replies: dict[tuple, str] = REPLIES, with_needle_set: bool = True) -> Path:
    """Write the build to ``out`` (instances, quarantine, responses, manifest; the needle set beside it)."""
    out.mkdir(parents=True)
    inst, resp = {}, []
    for (model, sizing, tier, nid, variant, depth), reply in replies.items():
        iid = instance_id(sizing, tier, nid, variant, depth)
        gold, acc = GOLD[(nid, variant)]
        inst[iid] = {
            "instance_id": iid, "benchmark": "needles", "source_id": "songyuan_xuean", "question": QUESTIONS[nid],
            "question_id": nid, "gold": canonical_json([[gold]]), "accepted_answers": canonical_json(acc),
            "context": "……" * 10, "tokenizer": "o200k_base", "target_tokens": tier, "context_tokens": tier - 10,
            "context_format": "full_text", "depth": depth,
            # placed at its token depth, as a build does (a chain: at its first statement's)
            "achieved_depth_tokens": round((depth if depth is not None else 0.25) * (tier - 10)),
            "achieved_depth": depth if depth is not None else 0.25, "achieved_depth_paragraphs": depth, "sizing_model": sizing, "needle_id": nid, "variant": variant,
            "query_types": "[]", "evidence_spans": "[[5, 9]]", "language": "zh", "build_hash": "test"}
        resp.append({"request_key": hashlib.sha256(f"{model}|{iid}".encode()).hexdigest(), "instance_id": iid,
                     "model": model, "mode": "lc", "sample": 0, "prompt_variant": "direct", "response": reply,
                     "reasoning": "（推理：文中所記為六十一、七十三、浦城……）", "cached": False, "status": "ok",
                     "retries": 0})
    write_parquet(to_table("instances", list(inst.values())), out / "instances.parquet")
    write_parquet(to_table("quarantine", []), out / "quarantine.parquet")
    write_parquet(to_table("responses", resp), out / "responses.parquet")
    manifest = {"track": "needles", "build_hash": "test"}
    if with_needle_set:
        ns = out.parent / f"{out.name}-needles.yaml"
        ns.write_text(NEEDLE_SET, encoding="utf-8")
        manifest["needle_set"] = {"file": str(ns), "sha256": hashlib.sha256(ns.read_bytes()).hexdigest()}
    write_json(manifest, out / "manifest.json")
    return out


def instance_rows() -> dict[tuple, dict]:
    """(nid, variant) → an instance row with gold parsed (for rule tests without a build)."""
    return {(nid, v): {"instance_id": f"{nid}-{v}", "benchmark": "needles", "needle_id": nid, "variant": v,
                       "question": QUESTIONS[nid], "gold": [[g]], "accepted_answers": acc}
            for (nid, v), (g, acc) in GOLD.items()}


def dumps(x) -> str:
    return json.dumps(x, ensure_ascii=False)
