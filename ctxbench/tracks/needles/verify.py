"""Certificates of planted-fact instances (needles and multi-hop chains; method: "Retrieval and Multi-Hop
Reasoning in 1M-Token Context Windows: Evaluating LLMs on Classical Chinese Text", 2026, sections 3.4-3.5).

From the needle definitions (``assets/needles/<set>.yaml``, the file the manifest names) and the context alone:

1. **Once, where recorded.** Each statement the instance plants (the needle's statement with its variant's value,
   or every hop of a chain) occurs in the context exactly once. Its token span, computed here with the sizing
   model's tokenizer over the whole context, must equal the recorded ``evidence_spans`` entry, and the context's
   token count the recorded ``context_tokens`` (read only to compare).
2. **Answer stated.** The needle's value is read back from the context through the statement's pattern (the text
   around ``{value}``); the stored gold answer itself must be that value or one of the definition's accepted forms
   of it (an edited gold fails even when its accepted answers still hold the value), and (chains) be the chain's
   answer or an accepted form of it, stated in the last hop.
3. **Altered differs.** An ``altered`` instance's value is neither the real value nor one of its accepted forms.
4. **No competing value.** No other sentence of the haystack names the needle's subject or one of its aliases
   (``subject_aliases`` and ``aliases``, e.g. a pen name) together with an attribute keyword (``fact_terms``) and a
   value of the answer's type other than the gold: for a numeric answer a number (digits, Chinese or English
   numerals) led by the statement's own words before ``{value}`` (年 in "年{value}"), else another value the
   definition knows (the other variant's value and accepted forms). A chain's
   fictional names occur nowhere but in its statements.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ctxbench.core.config import assets_dir
from ctxbench.verify import Certificate
from ctxbench.core.errors import InputError
from ctxbench.core.hashing import file_sha256
from ctxbench.models.registry import sizing_tokenizer
from ctxbench.tracks.needles.questions import load_needle_set

METHOD = "needle text located once at its token span, value read back, haystack searched for competing values"
_CJK_NUM = "〇零一二三四五六七八九十百千萬两兩廿卅"
_EN_NUM = (r"(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
           r"sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred)"
           r"(?:[- ](?:one|two|three|four|five|six|seven|eight|nine|hundred))*")
NUMBER = re.compile(rf"\d+(?:\.\d+)?|[{_CJK_NUM}]+|\b{_EN_NUM}\b", re.I)


def _is_number(v: str) -> bool:
    return bool(NUMBER.fullmatch(v.strip()))


def needle_set_path(name: str) -> Path:
    """The needle set a manifest names (an asset file name, or a path)."""
    p = assets_dir() / "needles" / name
    return p if p.exists() else Path(name)


def subjects(n: dict) -> list[str]:
    """A needle's subject and every alias it lists (``subject_aliases``, ``aliases``), longest first."""
    names = [n.get("subject"), *(n.get("subject_aliases") or []), *(n.get("aliases") or [])]
    return sorted({str(x) for x in names if x}, key=len, reverse=True)


def _competing(text: str, n: dict, variant: str, gold_forms: set[str], spans: list[tuple[int, int]]) -> str | None:
    """A sentence of ``text`` (outside the planted statements' character ``spans``) stating a competing value."""
    names, terms = subjects(n), [str(t) for t in n.get("fact_terms") or []]
    numeric = any(_is_number(f) for f in gold_forms)
    known = set()
    for v in ("real", "altered"):
        if isinstance(n.get(v), dict):
            known |= {str(n[v]["value"]), *map(str, n[v].get("accepted") or [])}
    others = sorted(known - gold_forms, key=len, reverse=True)
    low_terms = [t.casefold() for t in terms]
    # a number is a value of the answer's type where the statement's own words lead to it: the text just before
    # {value} (its last character in CJK script, else its last word), e.g. 年 in "年{value}", "of " in "age of {value}"
    pre = str(n.get("statement", "")).partition("{value}")[0]
    if pre and re.match(r"[\u3400-\u9fff\uf900-\ufaff]", pre[-1]):
        word = pre[-1]
    else:
        m = re.search(r"\S+\s*$", pre)
        word = m.group() if m else ""
    lead = re.compile(re.escape(word) + rf"({NUMBER.pattern})", re.I)
    seen: set[int] = set()
    for name in names:
        i = text.find(name)
        while i >= 0:
            a = max(text.rfind(ch, 0, i) for ch in "。！？!?\n") + 1
            if a not in seen and not any(s <= i < e for s, e in spans):
                seen.add(a)
                ends = [k for k in (text.find(ch, i) for ch in "。！？!?\n") if k >= 0]
                sent = text[a:(min(ends) + 1 if ends else len(text))]
                low = sent.casefold()
                if not low_terms or any(t in low for t in low_terms):
                    rest = sent.replace(name, " ")
                    vals = [m.group(1) for m in lead.finditer(rest)] if numeric else []
                    vals = [v for v in vals if v not in gold_forms and not any(v in f for f in gold_forms)]
                    vals += [o for o in others if o in rest and not any(o in f for f in gold_forms if o != f)]
                    if vals:
                        return (f"another sentence states a competing value {vals[0]!r} for {name} "
                                f"({'/'.join(terms) or n.get('attribute')}): {sent.strip()[:120]!r}")
            i = text.find(name, i + len(name))
    return None


def _value_pattern(statement: str) -> re.Pattern:
    pre, _, post = statement.partition("{value}")
    return re.compile(re.escape(pre) + r"(.+?)" + re.escape(post), re.S)


def certify(build_dir: Path, instances: list[dict], manifest: Any) -> tuple[list[Certificate], list[str]]:
    """Certificates of a needles build's instances (module docstring). Notes: a needle set whose hash differs
    from the manifest's."""
    extra = getattr(manifest, "model_extra", None) or {}
    rec = extra.get("needle_set") or {}
    notes: list[str] = []
    try:
        p = needle_set_path(rec.get("file") or "")
        ns = load_needle_set(str(p))
    except InputError as e:
        return [Certificate(r["instance_id"], "uncertifiable", f"needle definitions unreadable: {e}", METHOD)
                for r in instances], notes
    if rec.get("sha256") and file_sha256(p) != rec["sha256"]:
        notes.append(f"manifest hash mismatch: {p} has changed since the build (the manifest records sha256 "
                     f"{rec['sha256'][:12]}); instances are checked against the current definitions")
    needles = {n["id"]: n for n in ns.needles}
    chains = {c["id"]: c for c in ns.chains}
    toks: dict[str, Any] = {}
    encoded: dict[tuple, tuple] = {}
    certs = []
    for inst in instances:
        iid = inst["instance_id"]

        def fail(why: str) -> None:
            certs.append(Certificate(iid, "failed", why, METHOD))

        nid, variant, text = inst.get("needle_id"), inst.get("variant"), inst.get("context") or ""
        if variant == "chain":
            c = chains.get(nid)
            if c is None:
                fail(f"chain {nid!r} is not in the needle set {p.name}")
                continue
            statements = list(c["statements"])
        else:
            n = needles.get(nid)
            if n is None or variant not in ("real", "altered"):
                fail(f"needle {nid!r} ({variant}) is not in the needle set {p.name}")
                continue
            statements = [n["statement"].format(value=n[variant]["value"])]
        # 1. each statement exactly once (derived from the text and the definitions only)
        offsets, bad = [], None
        for k, st in enumerate(statements):
            cnt = text.count(st)
            if cnt != 1:
                bad = (f"{'hop ' + str(k + 1) + ' of chain' if variant == 'chain' else 'needle'} {nid} "
                       f"({variant}) statement {st!r} occurs {cnt} times in the context (once expected)")
                break
            offsets.append((text.find(st), text.find(st) + len(st)))
        if bad:
            fail(bad)
            continue
        # 2. the value read back from the context
        if variant == "chain":
            derived = None
        else:
            ms = list(_value_pattern(n["statement"]).finditer(text))
            if len(ms) != 1:
                fail(f"needle {nid} statement pattern matches {len(ms)} times in the context (once expected)")
                continue
            derived = ms[0].group(1)
        model = inst.get("sizing_model") or ""
        try:
            if model not in toks:
                toks[model] = sizing_tokenizer(model)[1]
        except InputError as e:
            certs.append(Certificate(iid, "uncertifiable", f"sizing model's tokenizer unavailable: {e}", METHOD))
            continue
        tok = toks[model]
        ek = (tok.name, text)
        if ek not in encoded:  # one encoding per distinct context, its token starts kept as an array
            ids, starts = tok.encode_with_starts(text)
            encoded[ek] = (len(ids), starts)
        n_tokens, starts = encoded[ek]
        spans = tok.token_spans(starts, offsets)
        # --- the builder's bookkeeping, read only to compare
        try:
            gold = json.loads(inst["gold"])[0][0]
            accepted = json.loads(inst.get("accepted_answers") or "[]") or []
            recorded = json.loads(inst.get("evidence_spans") or "[]")
        except (TypeError, ValueError, IndexError, KeyError):
            fail("stored gold, accepted_answers or evidence_spans is not the JSON SCHEMA.md describes")
            continue
        forms = {str(gold), *map(str, accepted)}
        why: list[str] = []  # every check that no longer holds, in order
        if sorted(map(list, recorded)) != sorted(spans):
            why.append(f"needle text is at token span(s) {spans} in {tok.name}, the instance records {recorded}")
        if inst.get("context_tokens") is not None and int(inst["context_tokens"]) != n_tokens:
            why.append(f"context holds {n_tokens} tokens of {tok.name}, the instance records "
                       f"{inst['context_tokens']}")
        if variant == "chain":
            defined = {str(c.get("answer")), *map(str, c.get("accepted") or [])}
            if str(gold) not in defined:
                why.append(f"stored gold {gold!r} is not chain {nid}'s answer {c.get('answer')!r} (or an accepted "
                           f"form {sorted(defined - {str(c.get('answer'))})})")
            if not any(f in statements[-1] for f in forms):
                why.append(f"stored gold {gold!r} (or an accepted form) is not stated in the chain's last hop "
                           f"{statements[-1]!r}")
            planted = "".join(statements)
            bad = next((nm for nm in c["names"] if text.count(nm) != planted.count(nm)), None)
            if bad:
                why.append(f"chain name {bad!r} occurs {text.count(bad)} times in the context, "
                           f"{planted.count(bad)} in the chain's statements")
        else:
            defined = {str(n[variant]["value"]), *map(str, n[variant].get("accepted") or [])}
            # the gold itself is the stated value or, where the text states the defined value, one of its forms
            # (its accepted answers holding the value do not make an edited gold right)
            if str(gold) != derived and not (derived in defined and str(gold) in defined):
                why.append(f"stored gold {gold!r} (accepted {sorted(forms - {str(gold)})}) differs from the value "
                           f"the needle text states: {derived!r}")
            if variant == "altered":
                real = {str(n["real"]["value"]), *map(str, n["real"].get("accepted") or [])}
                if derived in real or str(gold) in real:
                    why.append(f"altered needle {nid} states {derived!r}, the real fact's value")
            # 4. no competing value elsewhere in the haystack
            comp = _competing(text, n, variant, forms | {derived}, offsets)
            if comp:
                why.append(comp)
        if why:
            fail("; ".join(why))
            continue
        certs.append(Certificate(iid, "certified", "", METHOD))
    return certs, notes
