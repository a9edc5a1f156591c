"""Refusal detection: does an answer decline because the context lacks the information?

Used by matchers that must tell a refusal from an answer (right for an unanswerable question, wrong elsewhere) and
by failure taggers (tag ``refusal``). Phrases stating that the context does not give the information ("not
mentioned", "does not provide/specify/state ...", "no information", "cannot be determined", "I don't know", ...),
matched on the extracted answer with whitespace collapsed. Checked against a real benchmark's reference answers:
every reference answer to an unanswerable question is recognised and no other is (tests/test_lara.py).
"""

from __future__ import annotations

import re

__all__ = ["is_refusal"]

_REFUSAL_RE = re.compile(
    r"\b(?:not (?:be )?(?:mentioned|provided|specified|stated|given|included|discussed|addressed|disclosed|"
    r"described|detailed|available|found|listed|known|reported|indicated|covered)"
    r"|(?:does|do|did|is|are|was|were) not (?:\w+ ){0,3}(?:mention|provide|specify|state|say|contain|include|"
    r"discuss|address|disclose|describe|detail|give|indicate|report|list|cover|offer|reveal|present|propose|suggest|"
    r"examine|explore|outline|explain|elaborate|investigate|analy[sz]e|evaluate|identify|reference)\w*"
    r"|(?:doesn't|don't|didn't|isn't|aren't) (?:\w+ ){0,3}(?:mention|provide|specify|state|say|contain|include|"
    r"discuss|address|disclose|describe|detail|give|indicate|report|list|cover|propose|suggest|examine|explore|"
    r"outline|explain)\w*"
    r"|no (?:\w+ ){0,2}(?:information|mention|details?|data|indication|record|evidence)"
    r"|(?:cannot|can't|can ?not|unable to) (?:be )?(?:determine|answer|find|tell|say|infer|identify)\w*"
    r"|(?:i )?(?:do not|don't) know|not enough information|insufficient information|unanswerable"
    r"|there is no (?:\w+ ){0,3}(?:about|regarding|on|of)|makes no mention|silent on)\b", re.IGNORECASE)


def is_refusal(answer: str | None) -> bool:
    """Whether ``answer`` (the extracted answer) declines to answer because the context lacks the information."""
    return bool(answer) and _REFUSAL_RE.search(" ".join(str(answer).replace("’", "'").split())) is not None
