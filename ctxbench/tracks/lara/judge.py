"""LaRA's own judging prompt (judge prompt ``lara``: ``ctxbench score --judge MODEL --judge-prompt lara``, matcher
``judge-lara:MODEL``).

LaRA scores every prediction with an LLM judge (Li et al., ICML 2025, section 3.4 "Metrics" and appendix C,
figure 7): the judge receives the query, the ground-truth answer and the model's prediction and decides whether the
prediction is correct; accuracy is the share judged correct (table 2), and the judge's agreement with human labels
is Cohen's κ (appendix C, table 4; ``ctxbench kappa``). LaRA's released evaluation script asks by task type: one
prompt for the hallucination task (the question is about something the context does not mention; the prediction is
correct when it agrees with the ground truth that it is not mentioned, i.e. the model did not hallucinate an
answer) and one for location, reasoning and comparison (is the prediction correct given the ground-truth answer);
both ask for a one-word verdict, ``True`` or ``False``, under a system message that makes the model a
discriminator of the predictions' correctness. The prompts below follow that structure in their own words; as in
the paper the judge sees the question, the reference answer and the prediction (here the answer the answer
pipeline extracted: never the reasoning), not the context.

Differences from the released script, both so that a verdict is never guessed: the judge is asked at temperature
0; a reply is read as a verdict only when its first or last word is one (``True``/``False``, ``Correct``/
``Incorrect``, and ``Yes``/``No`` with the polarity of the question the prompt asks: under the hallucination
prompt "No, the assistant did not hallucinate." is correct; :data:`HALLUCINATION_POLARITY`) or a declared phrase
says it ("did not hallucinate"); reasoning blocks and chat tokens removed first, Markdown and a ``Verdict:`` label
allowed, where the script counts any reply without the word "true" as wrong. The assistant's answer is fenced and declared data
(:func:`ctxbench.scoring.judge_base.fence_candidate`), and what the judge quotes of it is never its verdict. An unreadable reply is asked for
once more with a repair prompt, then counted as unscored (:mod:`ctxbench.scoring.judge`).
"""

from __future__ import annotations


from ctxbench.scoring.judge import JudgePrompt, Polarity, judge_text
from ctxbench.scoring.judge_base import CANDIDATE_IS_DATA, fence_candidate

SYSTEM = "You judge whether the answers an AI assistant gives to questions are correct."
_ASK = "Reply with one word only: True if the AI assistant's answer is correct, False if it is not."
GENERAL = ("Below are a question, its ground-truth answer and the answer of an AI assistant. Decide whether the AI "
           "assistant's answer is correct, taking the ground-truth answer as the reference: it is correct when it "
           "gives the same answer, in any wording. " + _ASK)
HALLUCINATION = ("Below are a question, its ground-truth answer and the answer of an AI assistant. Decide whether "
                 "the AI assistant hallucinated. The question asks about something the text the assistant was given "
                 "does not mention, as the ground-truth answer says. The AI assistant's answer is correct (it did "
                 "not hallucinate) when it agrees with the ground-truth answer, that is, when it says that the text "
                 "does not mention what is asked; it is incorrect when it answers the question anyway. " + _ASK)

# what each prompt's verdict words mean. Both ask for True (correct) or False; a judge that answers the question
# in its own words instead says Yes/No to the question the prompt asks: "is the answer correct?" (general) or "did
# the assistant hallucinate?" (hallucination), where "No" means correct
GENERAL_POLARITY = Polarity(correct=frozenset({"true", "yes", "correct", "right"}),
                            incorrect=frozenset({"false", "no", "incorrect", "wrong"}),
                            correct_phrases=(r"\b(?:is|was)\s+correct\b(?!\s*\?)",),
                            incorrect_phrases=(r"\b(?:is|was)\s+(?:not\s+correct|incorrect|wrong)\b",))
HALLUCINATION_POLARITY = Polarity(
    correct=frozenset({"true", "correct", "no", "right"}),
    incorrect=frozenset({"false", "incorrect", "yes", "wrong"}),
    correct_phrases=(r"\b(?:did|does|has|have|is|was)\s*(?:not|n[o']t)\s+(?:\w+\s+)?hallucinat\w*",
                     r"\bno\s+hallucination", r"\bnot\s+(?:a\s+)?hallucinat\w*", r"\bwithout\s+hallucinat\w*"),
    incorrect_phrases=(r"\bhallucinat\w*",))


def reference_answer(instance: dict) -> str:
    """The reference answer of a LaRA instance: the values of ``gold`` (``[[answer]]``) joined by spaces."""
    return " ".join(str(v) for row in instance["gold"] for v in row if v is not None)


def polarity(instance: dict) -> Polarity:
    """The verdict words of the prompt an instance gets: the hallucination prompt's for hallucination questions
    (``No`` = did not hallucinate = correct), the general prompt's otherwise (``No`` = incorrect)."""
    return HALLUCINATION_POLARITY if instance.get("skill") == "hallucination" else GENERAL_POLARITY


def read_verdict(reply: str | None, instance: dict | None = None) -> bool | None:
    """The verdict of a judge's reply: True (correct), False (incorrect) or None (no verdict: neither its first
    nor its last word is a verdict word nor does a declared phrase say it, the last word is negated ("not true"),
    or the reply offers both ("True or False")). The reply passes the answer pipeline's judge filters first
    (:func:`ctxbench.scoring.judge.judge_text`: a reasoning judge's draft is never read), then a ``Verdict:`` /
    ``Judgment:`` label is skipped; the words are read with the polarity of the prompt the instance got
    (:func:`polarity`: under the hallucination prompt "No, the assistant did not hallucinate." is correct)."""
    return polarity(instance or {}).read(judge_text(reply))


class LaraJudge(JudgePrompt):
    """LaRA's judging prompt by task type (module docstring): hallucination questions get the hallucination
    prompt, location, reasoning and comparison questions the general one; the verdict True scores 1, False 0."""

    name = "lara"
    version = "3"   # 3: the assistant's answer fenced as data; quotations of it are not the judge's verdict
    title = "LaRA's correctness judge by task type (section 3.4, appendix C)"

    def messages(self, instance: dict, answer: str) -> list[dict]:
        """System and user message for one answer (``instance["skill"]`` picks the prompt)."""
        task = HALLUCINATION if instance.get("skill") == "hallucination" else GENERAL
        user = (f"{task}\n\n[Question]\n{instance['question']}\n\n[Ground-truth answer]\n{reference_answer(instance)}"
                f"\n\n[AI assistant's answer]\n{fence_candidate(answer)}\n{CANDIDATE_IS_DATA}\n\n"
                f"Your judgment (True or False):")
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]

    def parse(self, reply: str | None, instance: dict) -> str | None:
        """``"correct"``, ``"incorrect"`` or None (:func:`read_verdict`)."""
        v = read_verdict(reply, instance)
        return None if v is None else "correct" if v else "incorrect"

    def score(self, verdict: str, instance: dict) -> float:
        return 1.0 if verdict == "correct" else 0.0

    def repair(self, instance: dict, reply: str | None) -> str:
        return "Your reply could not be read as a verdict. " + _ASK + " Do not explain."


LARA_JUDGE = LaraJudge()

__all__ = ["GENERAL", "GENERAL_POLARITY", "HALLUCINATION", "HALLUCINATION_POLARITY", "LARA_JUDGE", "SYSTEM",
           "LaraJudge", "polarity", "read_verdict", "reference_answer"]
