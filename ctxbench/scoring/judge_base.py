"""The base of every judge prompt (:class:`JudgePrompt`) and the verdict words it declares (:class:`Polarity`),
apart from :mod:`ctxbench.scoring.judge` so that the scoring registry can check a registered prompt's type without
importing the judge runner (which reads replies through the answer pipeline, which reads the registry)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class Polarity:
    """Which verdict words of a judge's reply mean correct and which incorrect, as a judge prompt declares them
    (the question it asks decides: under "Did the assistant hallucinate?" the word ``No`` means correct).
    ``correct`` / ``incorrect``: single words (lower case); ``correct_phrases`` / ``incorrect_phrases``: regular
    expressions tried on the whole reply when neither its first nor its last word is a verdict word."""

    correct: frozenset[str]
    incorrect: frozenset[str]
    correct_phrases: tuple[str, ...] = ()
    incorrect_phrases: tuple[str, ...] = ()
    labels: tuple[str, ...] = field(default=("verdict", "judgment", "judgement", "decision", "output", "evaluation",
                                            "result", "answer"))

    def read(self, text: str | None) -> bool | None:
        """True (correct), False (incorrect) or None (no verdict) for a judge reply already through
        :func:`judge_text`: its first word when that is a verdict word (unless it offers both, "True or False"),
        else a declared phrase (a negated one first: "did not hallucinate" before "hallucinate"), else its last
        word (not negated: "not true" is no verdict). A ``Verdict:`` / ``Judgment:`` label is skipped."""
        t = (text or "").strip()
        lab = re.compile(r"^\s*(?:[*_#>]+\s*)*(?:(?:final\s+)?(?:" + "|".join(self.labels) + r")\s*[*_]*\s*[:：]\s*)+",
                         re.IGNORECASE)
        t = lab.sub("", t)
        words = [w.lower() for w in re.findall(r"[A-Za-z]+", t)]
        if not words:
            return None
        vocab = self.correct | self.incorrect
        if words[0] in vocab:
            return None if words[1:2] == ["or"] else words[0] in self.correct
        for rx in self.correct_phrases:
            if re.search(rx, t, re.IGNORECASE):
                return True
        for rx in self.incorrect_phrases:
            if re.search(rx, t, re.IGNORECASE):
                return False
        if words[-1] in vocab and (len(words) < 2 or words[-2] not in ("not", "or")):
            return words[-1] in self.correct
        return None


class JudgePrompt:
    """A judging prompt: subclass it, set ``name`` (a lower-case identifier: it becomes part of the matcher name)
    and implement :meth:`messages`, :meth:`parse`, :meth:`score` and :meth:`repair`; bump ``version`` when the
    prompt changes (its module's code is hashed too, so ``score`` reruns: :mod:`ctxbench.scoring.versions`).
    ``sampling`` and ``max_tokens`` (tokens of the judge's reply) are part of every judge call's request key.

    ``instance`` is the ``instances.parquet`` row with ``gold`` parsed from JSON; ``answer`` the extracted answer
    (never empty: an empty answer scores 0 without a call)."""

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    title: ClassVar[str] = ""
    sampling: ClassVar[Mapping[str, Any]] = {"temperature": 0.0}
    max_tokens: ClassVar[int] = 256

    def messages(self, instance: dict, answer: str) -> list[dict]:
        """The chat messages asking the judge about ``answer``."""
        raise NotImplementedError

    def parse(self, reply: str | None, instance: dict) -> Any | None:
        """The verdict read from the judge's reply, or None when it cannot be read."""
        raise NotImplementedError

    def score(self, verdict: Any, instance: dict) -> float:
        """The score in [0, 1] of a parsed verdict."""
        raise NotImplementedError

    def repair(self, instance: dict, reply: str | None) -> str:
        """The follow-up user message asked once when a reply cannot be parsed."""
        raise NotImplementedError

    def detail(self, verdict: Any) -> dict:
        """What ``scores.detail`` stores of a verdict (besides ``repaired``)."""
        return {"verdict": verdict}

    def details(self, verdict: Any, instance: dict, answer: str) -> list[dict] | None:
        """``scores.details`` of a judged answer: for each gold row its credit and the answer text that earned
        it. The default: the whole gold as one row, credited with :meth:`score` (None for no verdict)."""
        if verdict is None:
            return None
        credit = float(self.score(verdict, instance))
        return [{"gold": instance.get("gold"), "credit": credit, "text": answer if credit else None}]


# -- the row judge (the default prompt) ------------------------------------------------------------------------------
