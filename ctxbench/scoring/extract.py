"""Answer filters, steps 4–4c of the default chain (:mod:`ctxbench.scoring.pipeline`): the answer a reply gives.
``final_answer`` (the last answer block, final-answer label or ``\\boxed{}``; an answer the reply withdraws or
strikes out is not the answer; issue 30), ``last_statement`` (what the end of a reply without a final-answer marker
asserts: :func:`last_statement`, :func:`sentences`) and ``drop_ruled_out`` (values the answer rules out:
:func:`drop_ruled_out_values`). The answer blocks and labels defined here are also read by
:mod:`ctxbench.scoring.strip` (a chat token before the answer; a repeated block holding a label)."""

from __future__ import annotations

import re

from ctxbench.scoring.filters import AnswerContext, finish_kind, register_filter
from ctxbench.scoring.numbers import inline_markers
from ctxbench.scoring.refusal import is_refusal

__all__ = ["drop_ruled_out", "drop_ruled_out_values", "final_answer", "last_statement", "last_statement_filter",
           "sentences"]


# -- 4. the final answer ---------------------------------------------------------------------------------------------

# (ANSWER_BLOCKS, LABEL_LINE, LABEL_INLINE, brace_content and SENT_BREAK below are read by ctxbench.scoring.strip
# and ctxbench.scoring.tidy too)
# group 1: the block's content; group 2: its closing tag ("" for a block the end of the reply closed)
ANSWER_BLOCKS = [re.compile(o + r"(.*?)(" + c + r"|\Z)", re.IGNORECASE | re.DOTALL) for o, c in (
    (r"<answer(?:\s[^>]*)?>", r"</answer\s*>"),
    (r"<response(?:\s[^>]*)?>", r"</response\s*>"),
    (r"<output(?:\s[^>]*)?>", r"</output\s*>"),
    (r"<final_answer(?:\s[^>]*)?>", r"</final_answer\s*>"),
    (r"<\|begin_of_solution\|>", r"<\|end_of_solution\|>"),
    (r"\[BEGIN FINAL RESPONSE\]", r"\[END FINAL RESPONSE\]"),
)]
_LABEL = r"(?:final answer|answer|最终答案|答案|回答|答)"
LABEL_LINE = re.compile(rf"(?im)^[ \t]*(?:[*_#>]+[ \t]*)*(?:the[ \t]+)?{_LABEL}[ \t]*[*_]*[ \t]*[:：][ \t]*(?:[*_]+[ \t]*)?"
                        r"|^[ \t]*####[ \t]+"
                        # a heading that is the label alone, the answer on the lines below ("**Final Answer**")
                        rf"|^[ \t]*(?:[*_#>]+[ \t]*)*(?:the[ \t]+)?{_LABEL}[ \t]*[*_#]*[ \t]*\n")
LABEL_INLINE = re.compile(r"\b(?:final answer|answer)[ \t]*[*_]*[ \t]*[:：][ \t]*(?:[*_]+[ \t]*)?"
                          r"|\bthe (?:final |correct )?answer is[ \t]*:?[ \t]*|答案(?:是|为)[：:]?", re.IGNORECASE)
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


def brace_content(text: str, start: int) -> tuple[str, int] | None:
    """The text inside the brace opened just before ``start`` (nested braces counted) and the index after the
    closing brace; None when it never closes."""
    depth = 1
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start:i], i + 1
    return None


# a line that starts what follows the answer: an explanation, a note, the reasoning given after it
_AFTER_ANSWER = re.compile(r"^[ \t]*(?:[*_#>]+[ \t]*)*(?:explanation|reasoning|rationale|justification|note|notes|"
                           r"because|reason|source|evidence|解释|说明|理由|注|备注|原因)\b[ \t]*[*_]*[ \t]*[:：]?",
                           re.IGNORECASE)


def _answer_paragraph(after: str) -> str:
    """The answer that follows a final-answer label: its paragraph (the label's line and the lines under it, e.g.
    a list, up to a blank line; lines right after a label alone on its line skip blank lines first), ending before
    a line that starts an explanation (``Explanation:``, ``Note:``, ``Because``, ``解释：``…). Text after the final
    answer is not the answer: ``Answer: 17\n\nThe table also lists 42`` is ``17``."""
    lines = after.split("\n")
    out: list[str] = []
    for i, ln in enumerate(lines):
        if not ln.strip():
            if any(x.strip() for x in out):
                break
            out.append(ln)
            continue
        if _AFTER_ANSWER.match(ln) and any(x.strip() for x in out):
            break
        out.append(ln)
    return "\n".join(out) if len(out) < len(lines) else after


def _complete_lines(text: str) -> str:
    """``text`` up to its last line break: a reply the output budget cut keeps only its finished lines."""
    i = text.rfind("\n")
    return "" if i < 0 else text[:i]


# the labels of a corrected or final answer written inside a line ("... the Napa rows. Final answer: 17",
# "The correct answer is 17", "正确答案是十七"): the last of them, when it follows the last line label, is the answer
_STRONG_INLINE = re.compile(
    r"\b(?:final|corrected|correct|revised|updated|actual|real|right|true|new)[ \t]+answer[ \t]*[*_]*[ \t]*[:：]"
    r"[ \t]*(?:[*_]+[ \t]*)?"
    r"|\b(?:so[ \t]+|thus[ \t]+|therefore[ \t]+)?the[ \t]+(?:final|correct|corrected|revised|updated|actual|real|right|"
    r"true)[ \t]+answer[ \t]+(?:is|should[ \t]+be|would[ \t]+be)[ \t]*:?[ \t]*"
    r"|\bcorrection[ \t]*[*_]*[ \t]*[:：][ \t]*(?:[*_]+[ \t]*)?"
    r"|(?:正确答案|更正后的答案|最终答案|最后答案)(?:应为|应该是|是|为)?[ \t]*[：:]?", re.IGNORECASE)
# discourse markers that withdraw what the reply said before them: "Wait, …", "Actually, …", "No, …", "Correction:",
# "I mean …", "Oops, …", "make that …", "I miscounted …", "EDIT:", 不对 / 错了 / 更正 / 改正 / 纠正 / 应为 / 其实 / 实际上 / 等等.
# A marker counts where a sentence or clause opens (start of a line, after . ! ? ; : , — or a bracket); "wait" only
# followed by punctuation ("Wait Until Dark", "wait times" are no marker), "no" only opening a sentence
_CUE_EN = re.compile(
    r"(?:(?<=^)|(?<=[\n.!?;:,(\u2014\u2013])|(?<=[.!?;:,(\u2014\u2013*_][ \t])|(?<=[.!?;:,(\u2014\u2013*_][ \t]{2}))[ \t]*"
    r"[*_]*(?:(?:hmm+|oh|ah|uh|um)[,.!]?[ \t]+)?"
    r"(?:(?:no[ \t]*,?[ \t]+)?wait(?:[ \t]+a[ \t]+(?:sec(?:ond)?|minute|moment))?[ \t]*(?:\.\.\.|…|[,.!:;\u2014\u2013])"
    r"|hold[ \t]+on[ \t]*(?:\.\.\.|…|[,.!:;\u2014\u2013])"
    r"|actually(?:[ \t]*[,:\u2014\u2013]|[ \t]+(?=[a-z0-9$]))"
    r"|(?:on[ \t]+)?second[ \t]+thought[s]?[ \t]*[,:.]?"
    r"|correction[ \t]*[,:.!]?|(?:let[ \t]+me[ \t]+)?correct(?:ing)?[ \t]+(?:that|myself)[ \t]*[,:.!]?"
    r"|I[ \t]+mean[t]?[ \t]*[,:]?|oops[ \t]*[,.!:\u2014\u2013]|scratch[ \t]+that[ \t]*[,.!:]?|(?:edit|update)[ \t]*:"
    r"|make[ \t]+that\b|I[ \t]+(?:miscounted|misread|misspoke|made[ \t]+(?:a[ \t]+)?(?:mistake|an[ \t]+error)|was[ \t]+wrong)"
    r"\b[ \t]*[,.!:;]?"
    r"|(?:that(?:'|’)?s|that[ \t]+is|this[ \t]+is)[ \t]+(?:wrong|incorrect|not[ \t]+right)\b[ \t]*[,.!:;]?"
    r"|(?<![\w,])no[ \t]*[,!:\u2014\u2013](?![ \t]*(?:one|such|data|rows?|results?)\b))",
    re.IGNORECASE | re.MULTILINE)
_CUE_ZH = re.compile(r"(?:(?<=^)|(?<=[\s。！？；，、：.!?;,:（(]))(?:不对|错了|说错了|更正|改正|纠正|修正|应为|应该是|其实|"
                     r"实际上|等等|等一下)[，,：:]?", re.MULTILINE)
# what a reply says after a marker when it keeps its answer ("Wait, let me check: 12 + 30 = 42. Yes.")
_AFFIRM = re.compile(r"^\W*(?:yes|yep|yeah|correct|confirmed|right|indeed|that(?:'|’)?s (?:right|correct)|"
                     r"it(?:'|’)?s correct|the answer stands|没错|是的|对的|正确|确认无误|无误)\W*$", re.IGNORECASE)
# what confirms the answer after a marker without giving another ("Wait — the question asks for Napa, which is what
# I counted", "Actually, the answer stands", 答案不变)
_CONFIRMS = re.compile(r"\bwhich is (?:what|exactly what) I\b|\bas I (?:said|counted|stated|wrote)\b|"
                       r"\b(?:answer|count|total|result)s? (?:stands|remains|is (?:still )?(?:correct|right|unchanged))\b|"
                       r"\bconsistent with (?:my|the) answer\b|\bso (?:it|that) is (?:correct|right)\b|"
                       r"答案不变|答案无误|答案正确|没有问题", re.IGNORECASE)
# struck-through text (Markdown ~~42~~, HTML <del>, <strike>): the reply withdrew it
_STRUCK = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~|<(del|strike)(?:\s[^>]*)?>.*?</\2\s*>", re.IGNORECASE | re.DOTALL)


# what may stand before a marker that opens a line: markup and interjections ("Sorry, I misread…", "Hmm, wait")
_LINE_OPENING = re.compile(r"[\s*_>#-]*(?:(?:sorry|oops|hmm+|oh|ah|ok(?:ay)?|well|no|yes)\b[\s*_,.!\u2014\u2013-]*)*",
                           re.IGNORECASE)


def _has_content(s: str) -> bool:
    return re.search(r"\w", s) is not None


def _last_correction(text: str, whole_reply: bool = False) -> re.Match | None:
    """The last withdrawal marker of ``text`` (:data:`_CUE_EN`, :data:`_CUE_ZH`) that follows some answer (a marker
    opening the text withdraws nothing), where a marker takes back the answer: in the answer's own paragraph (the
    first), in the reply's last paragraph, or opening a line ("Answer: 42\n\nWait, I miscounted…"); never after an
    explanation line (``Explanation:``, ``Note:``…: a marker inside the reasons given after the answer withdraws
    nothing, and neither does one in the middle of a paragraph of evidence)."""
    scope = len(text)
    for m in re.finditer(r"(?m)^.*$", text):
        if _AFTER_ANSWER.match(m.group(0)) and _has_content(text[:m.start()]):
            scope = m.start()
            break
    paras = [m.start() for m in re.finditer(r"\n[ \t]*\n", text[:scope])]
    first_end = paras[0] if paras else scope
    last_start = paras[-1] if paras else 0
    best = None
    for rx in (_CUE_EN, _CUE_ZH):
        for m in rx.finditer(text, 0, scope):
            s = m.start()
            line_open = _LINE_OPENING.fullmatch(text[text.rfind("\n", 0, s) + 1:s]) is not None
            if not (s < first_end or (whole_reply and s >= last_start) or line_open):
                continue
            if re.fullmatch(r"[\s*_]*no[\s,!:\u2014\u2013]*", m.group(0), re.IGNORECASE):
                nxt = re.split(r"[.!?;\n]", text[m.end():scope], maxsplit=1)[0]
                if re.search(r"\b(?:not|never|no longer)\b|n[’']t\b", nxt, re.IGNORECASE):
                    continue                # "No, London is not in the table": a negation, not a correction
            if _has_content(text[:s]) and (best is None or s > best.start()):
                best = m
    return best


def _labelled(text: str) -> re.Match | None:
    """The last final-answer label: the last line label, or a later corrected/final label inside a line
    (:data:`_STRONG_INLINE`); else the last inline ``answer:`` / ``the answer is``."""
    last = None
    for last in LABEL_LINE.finditer(text):
        pass
    strong = None
    for strong in _STRONG_INLINE.finditer(text):
        pass
    if strong is not None and (last is None or strong.start() >= last.end()):
        last = strong
    if last is None:
        for last in LABEL_INLINE.finditer(text):
            pass
    return last


@register_filter("final_answer", version="4")
def final_answer(text: str, ctx: AnswerContext) -> str:
    """The final answer: the last answer block, else the text after the last final-answer label (a corrected or
    final label inside a line counts when it follows the last line label), else the last ``\\boxed{}``, else the
    whole reply (which ``last_statement`` then narrows). An answer the reply withdraws is not the answer: struck-out
    text (``~~42~~``) is removed, and after a withdrawal marker that follows the answer (``Wait, …``,
    ``Actually, …``, ``No, …``, ``Correction:``, ``I mean``, ``I miscounted``, 不对, 应为, 更正, 其实…:
    :func:`_last_correction`) the
    answer is read again from what follows the marker alone (note ``withdrawn``), unless that only affirms it
    ("Yes."). When the output budget ended the reply (``ctx.finish_reason`` ``length``…) only a finished answer
    counts: a closed block or box, or the complete lines after the label; a reply cut before its answer has none
    (``""``, note ``cut_off``)."""
    return _final(_STRUCK.sub(" ", text) if ("~~" in text or "<" in text) else text, ctx, 0)


def _withdrawn(answer: str, ctx: AnswerContext, depth: int, unmarked: bool = False) -> str:
    """``answer`` (what a label, block or box gave, or the whole unmarked reply), or, where a withdrawal marker
    follows an answer in it, the answer read from the text after the marker."""
    cue = _last_correction(answer, unmarked) if depth < 4 else None
    if cue is None:
        if unmarked:
            ctx.notes.add("_unmarked")
        return answer
    after = answer[cue.end():].lstrip(" \t,，:：\u2014\u2013-")
    for m in re.finditer(r"(?m)^.*$", after):             # the reasons given after the corrected answer
        if _AFTER_ANSWER.match(m.group(0)) and _has_content(after[:m.start()]):
            after = after[:m.start()]
            break
    sub = AnswerContext(ctx.reasoning, ctx.finish_reason)
    new = _final(after, sub, depth + 1)
    if _AFFIRM.match(last_statement(new) if "_unmarked" in sub.notes else new.strip() or "x") or (
            _CONFIRMS.search(after) and not re.search(r"\d", after)):
        kept = answer[:cue.start()]             # the reply affirmed its answer after checking it
        if unmarked:
            ctx.notes.add("_unmarked")
            return kept.strip()
        return _answer_paragraph(kept).strip()
    ctx.notes.update(sub.notes)
    ctx.notes.add("withdrawn")
    return new


def _final(text: str, ctx: AnswerContext, depth: int) -> str:
    cut = finish_kind(ctx.finish_reason) == "length"
    for rx in ANSWER_BLOCKS:
        last = None
        for last in rx.finditer(text):
            pass
        if last is not None:
            if cut and not last.group(2):
                ctx.notes.add("cut_off")      # an answer block the budget ended before it closed
                return ""
            return _withdrawn(last.group(1).strip(), ctx, depth)
    last = _labelled(text)
    if last is not None:
        prev = None
        for rx in (LABEL_LINE, _STRONG_INLINE):
            for m in rx.finditer(text, 0, last.start()):
                if m.end() <= last.start() and (prev is None or m.end() > prev.end()):
                    prev = m
        if prev is not None and _last_correction(text[prev.end():last.start()]) is not None:
            ctx.notes.add("withdrawn")      # an earlier answer taken back before the final label
        rest = text[last.end():]
        if cut:
            after = _answer_paragraph(rest)
            if after is rest:               # the answer runs to where the budget cut: its finished lines only
                rest = _complete_lines(rest)
                if not rest.strip():
                    ctx.notes.add("cut_off")
                    return ""
        cue = _last_correction(rest) if depth < 4 else None
        if cue is not None:
            return _withdrawn(rest.strip(), ctx, depth)
        return _answer_paragraph(rest).strip()
    boxed = None
    for m in _BOXED.finditer(text):
        boxed = brace_content(text, m.end()) or boxed
    if boxed is not None:
        tail = text[boxed[1]:]
        if depth < 4 and not cut and _last_correction(boxed[0] + tail) is not None:
            return _withdrawn(boxed[0].strip() + tail, ctx, depth)   # "\boxed{42} Wait, actually 17"
        return boxed[0].strip()
    if cut:
        ctx.notes.add("cut_off")   # ended by the budget with no final answer: whatever it quoted is not one
        return ""
    return _withdrawn(text.strip(), ctx, depth, unmarked=True)


# -- 4b. the last statement of a reply without a final-answer marker ---------------------------------------------------

# a line of a list or table: a bullet, "1." / "1)" / "(1)" / "[1]" / "a)" marker, or a table row
_LIST_LINE = re.compile(r"^\s*(?:[-*•·‣◦]|\(?\d{1,3}[.)、]|\[\d{1,3}\]|\(?[a-zA-Z][.)](?=\s)|\|)\s*\S")
_PLEASANTRY = re.compile(r"^\s*(?:i hope|hope this|let me know|feel free|if you (?:have|need|want|would)|please let|"
                         r"is there anything|happy to help|good luck|i'?m happy|glad to help|希望|如有|如果您?还有)",
                         re.IGNORECASE)
_ABBREV = frozenset("e.g i.e vs etc mr mrs ms dr no st fig al approx ca jr sr inc ltd co cf resp vol pp p".split())
SENT_BREAK = re.compile(r"[.!?]+[\"'”’)\]]*\s+|[。！？]+[”’」』）]*")


def sentences(text: str) -> list[str]:
    """``text`` split into sentences: after ``.``, ``!``, ``?`` followed by a space (not after an abbreviation such as
    ``e.g.``, ``Dr.`` or an initial ``J.``; a decimal point is never followed by a space) and after ``。！？``.
    Line breaks end sentences too; the marker of a list numbered inside a line (``1. John Smith 2. Jane Doe``)
    ends none. Empty pieces are dropped."""
    out: list[str] = []
    for line in text.splitlines():
        pos = 0
        marks = inline_markers(line)
        for m in SENT_BREAK.finditer(line):
            if any(a <= m.start() < b for a, b in marks):
                continue
            if m.group(0)[0] == ".":
                word = re.search(r"([A-Za-z][A-Za-z.]*)\.*$", line[:m.start()])
                w = word.group(1).lower().rstrip(".") if word else ""
                if w in _ABBREV or (word and len(word.group(1)) == 1 and word.group(1).isupper()):
                    continue
            piece = line[pos:m.end()].strip()
            if piece:
                out.append(piece)
            pos = m.end()
        if line[pos:].strip():
            out.append(line[pos:].strip())
    return out


def last_statement(text: str) -> str:
    """What the end of a reply without a final-answer marker asserts: the list (or table) that ends it, whole
    (with no line that only introduces it), else its last sentence; closing pleasantries ("I hope this helps",
    "Let me know…") skipped. Steps, lists and values quoted before it are evidence, not the answer."""
    blocks = [b for b in re.split(r"\n[ \t]*\n", text.strip()) if b.strip()]
    while len(blocks) > 1 and _PLEASANTRY.match(blocks[-1]):
        blocks.pop()
    if not blocks:
        return ""
    lines = [ln for ln in blocks[-1].splitlines() if ln.strip()]
    k = len(lines)
    while k > 0 and _LIST_LINE.match(lines[k - 1]):
        k -= 1
    if k < len(lines) and (len(lines) - k >= 2 or k == 0 or lines[k - 1].rstrip().endswith((":", "："))):
        return "\n".join(ln.strip() for ln in lines[k:])
    sents = sentences("\n".join(lines))
    while len(sents) > 1 and (_PLEASANTRY.match(sents[-1]) or not re.search(r"\w", sents[-1])):
        sents.pop()
    return sents[-1] if sents else ""


@register_filter("last_statement")
def last_statement_filter(text: str, ctx: AnswerContext) -> str:
    """Without a final-answer marker (no label, block or box: ``final_answer`` kept the whole reply), the answer
    is what the reply's end asserts (:func:`last_statement`); a marked answer passes unchanged."""
    if "_unmarked" not in ctx.notes:
        return text
    return last_statement(text)


# -- 4c. values the answer rules out --------------------------------------------------------------------------------

# cues that rule a value out. Bare "not" only after a separator ("17 (not 42)", "17, not 42", "17 and not 42"):
# "is not mentioned" is a statement, not a value ruled out; the other cues anywhere
_RULE_OUT_EN = re.compile(
    r"(?P<open>[(\[（【]\s*)?"
    r"(?:(?:(?<=[(\[（【,，;；:：—–.!?。])|(?<=\s[-—–])|(?<=^))\s*(?:but\s+|and\s+)?not\b|(?<![\w])(?:but|and)\s+not\b"
    r"|(?<![\w])(?:rather\s+than|instead\s+of|as\s+opposed\s+to|excluding|except(?:\s+for)?|as\s+distinct\s+from|"
    r"in\s+place\s+of)\b)"
    r"(?P<body>[^)）\]】,，;；。!?！？\n]*?)"
    r"(?=\s*(?:$|[)）\]】,，;；。!?！？\n]|\.(?:\s|$)|\bbut\b))(?P<close>\s*[)）\]】])?",
    re.IGNORECASE | re.MULTILINE)
_RULE_OUT_ZH = re.compile(
    r"(?P<open>[(（【\[]\s*)?(?:而非|而不是|并非|并不是|也不是|(?<!是)不是|而并非|而绝非|绝非)"
    r"(?P<body>[^)）\]】,，;；。!?！？\n]*?)(?=$|[)）\]】,，;；。!?！？\n]|而是)(?P<close>[)）\]】])?", re.MULTILINE)


def drop_ruled_out_values(text: str) -> str:
    """``text`` without the values it rules out: a cue (``not`` after a separator, ``rather than``, ``instead
    of``, ``as opposed to``, ``excluding``, ``except``, ``而非``, ``而不是``, ``不是``, ``并非``…) and what follows
    it up to the end of its clause or bracket. ``Answer: 17 (not 42)`` → ``17``; ``六十（而非七十三）`` → ``六十``;
    ``不是七十三而是六十`` → ``而是六十``. A refusal (``not mentioned``) is a statement and is kept."""
    def drop(m: re.Match) -> str:
        body = m.group("body")
        if not body.strip() or is_refusal(m.group(0)):
            return m.group(0)
        if m.group("open") and not m.group("close"):
            return m.group(0)       # a bracket opened before the cue and not closed by it: leave it
        return " "

    out = _RULE_OUT_EN.sub(drop, text)
    out = _RULE_OUT_ZH.sub(drop, out)
    if out == text:
        return text
    out = re.sub(r"[(\[（【]\s*[)\]）】]", " ", out)          # brackets left empty
    out = re.sub(r"[ \t]*[—–-][ \t]*(?=[,，;；.。!?！？]|[ \t]*$)", "", out, flags=re.MULTILINE)  # a dash left dangling
    out = re.sub(r"\s*[,，;；]\s*(?=[,，;；.。)）]|$)", "", out, flags=re.MULTILINE)  # a separator left dangling
    out = re.sub(r"[ \t]+([,，;；.。!?！？])", r"\1", out)
    out = re.sub(r"([.。!?！？])(?:[ \t]*[.。])+", r"\1", out)          # "17. Not 42." → "17."
    return re.sub(r"[ \t]{2,}", " ", out).strip()


@register_filter("drop_ruled_out")
def drop_ruled_out(text: str, ctx: AnswerContext) -> str:
    """Remove the values the answer rules out (:func:`drop_ruled_out_values`): the answer is the value asserted."""
    out = drop_ruled_out_values(text)
    if out != text:
        ctx.notes.add("ruled_out")
    return out
