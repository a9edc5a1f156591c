"""SQL → question by an LLM, validated by the round trip back to SQL (SciTrek section 3.3): a question is kept
only when the model's translation of it back into SQL gives the same result as the original query on the
collection's database; up to ``max_attempts`` questions are tried per (SQL, collection), else the query is
dropped and counted.

Every call goes through the call runner (``ctxbench/models/runner.py``: gateway, response cache, claims, retries),
keyed by model, endpoint, messages, sampling parameters and max tokens, so a rebuild pays for no call twice. Attempt ``a`` samples with seed ``a``
(temperature 0 for the first attempt, ``retry_temperature`` after), so attempts differ and reruns repeat them.
Prompts: ``assets/prompts/<prompts>.yaml`` (``scitrek_questions`` for article collections, ``holobench_questions``
for a verbalized database), each with ``system``, ``sql_to_question`` and ``question_to_sql``.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from functools import lru_cache


from ctxbench.core.config import assets_dir
from ctxbench.gold.compare import norm_rows, results_equal
from ctxbench.models.cache import ResponseCache
from ctxbench.core.errors import InputError
from ctxbench.core.userfiles import open_sqlite_readonly
from ctxbench.questions.sqlinfo import sql_is_ordered
from ctxbench.core.config import read_yaml
from ctxbench.models.runner import complete_all

MAX_TOKENS = 512


@lru_cache(maxsize=4)
def _prompts(name: str = "scitrek_questions") -> dict:
    return read_yaml(assets_dir() / "prompts" / f"{name}.yaml", "prompt file")


def question_messages(sql: str, schema: str, prompts: str = "scitrek_questions") -> list[dict]:
    """Messages asking for the question that ``sql`` computes."""
    p = _prompts(prompts)
    return [{"role": "system", "content": p["system"].strip()},
            {"role": "user", "content": p["sql_to_question"].format(schema=schema, sql=sql)}]


def sql_messages(question: str, schema: str, prompts: str = "scitrek_questions") -> list[dict]:
    """Messages asking for the SQL that answers ``question``."""
    p = _prompts(prompts)
    return [{"role": "system", "content": p["system"].strip()},
            {"role": "user", "content": p["question_to_sql"].format(schema=schema, question=question)}]


def parse_question(text: str | None) -> str | None:
    """The question of a reply (after ``Question:`` where present; first non-empty line), or None."""
    if not text:
        return None
    m = re.search(r"(?im)^\s*\**question\**\s*:\s*(.+)$", text)
    q = (m.group(1) if m else next((ln for ln in text.splitlines() if ln.strip()), "")).strip().strip('"')
    return q or None


def parse_sql(text: str | None) -> str | None:
    """The SQL of a reply (inside a ```sql block where present, else the text from the first SELECT), or None."""
    if not text:
        return None
    m = re.search(r"```(?:sql|sqlite)?\s*(.+?)```", text, re.DOTALL | re.IGNORECASE)
    s = m.group(1) if m else text[text.upper().find("SELECT"):] if "SELECT" in text.upper() else ""
    s = s.strip().rstrip(";").strip()
    return s or None


def run_sqlite(db_path: str, sql: str) -> list[list] | None:
    """Rows of ``sql`` on the SQLite file (read-only), or None when it fails or is not one SELECT."""
    if not sql.lstrip().upper().startswith(("SELECT", "WITH")):
        return None
    try:
        con = open_sqlite_readonly(db_path)
    except InputError:
        return None
    try:
        return norm_rows(con.execute(sql).fetchall())
    except (sqlite3.Error, sqlite3.Warning):
        return None
    finally:
        con.close()


@dataclass
class RoundTripItem:
    """One query to phrase: its SQL, the gold rows, and the SQLite file of its collection."""

    sql: str
    gold: list[list]
    db_path: str


@dataclass
class RoundTripOutcome:
    """The validated question (None when every attempt failed), attempts used and what each attempt gave."""

    question: str | None
    attempts: int
    trace: list[dict] = field(default_factory=list)


def phrase_questions(items: list[RoundTripItem], model: str, schema: str, base_url: str | None = None,
                     api_key_env: str | None = None, max_attempts: int = 10, retry_temperature: float = 0.7,
                     concurrency: int = 4, cache: ResponseCache | None = None,
                     prompts: str = "scitrek_questions") -> list[RoundTripOutcome]:
    """Phrase each item's SQL as a question with ``model`` and validate it by the round trip (module docstring).

    Attempts run in rounds: round ``a`` asks every item still without a valid question for a question (seed
    ``a``), then for the SQL of each question, through :func:`ctxbench.models.runner.complete_all` (the call
    runner: gateway, response cache, claims, retries), with the prompts of ``assets/prompts/<prompts>.yaml``.
    Returns one outcome per item, in order. A failed call counts as a failed attempt (transient errors are retried
    first); nothing raises for a bad reply.
    """
    cache = cache or ResponseCache()
    outs = [RoundTripOutcome(None, 0) for _ in items]
    ordered = [sql_is_ordered(it.sql) for it in items]
    todo = list(range(len(items)))
    for a in range(max_attempts):
        if not todo:
            break
        sampling = {"temperature": 0.0 if a == 0 else retry_temperature, "seed": a}
        qs = complete_all([question_messages(items[i].sql, schema, prompts) for i in todo], model, base_url,
                          concurrency, cache, api_key_env, sampling, MAX_TOKENS)
        asked = [(i, parse_question(c.text)) for i, c in zip(todo, qs)]
        for i, q in asked:
            outs[i].attempts = a + 1
            if q is None:
                outs[i].trace.append({"attempt": a, "question": None, "why": "no question in the reply"})
        asked = [(i, q) for i, q in asked if q is not None]
        backs = complete_all([sql_messages(q, schema, prompts) for _, q in asked], model, base_url, concurrency,
                             cache, api_key_env, {"temperature": 0.0, "seed": 0}, MAX_TOKENS)
        for (i, q), c in zip(asked, backs):
            back = parse_sql(c.text)
            rows = run_sqlite(items[i].db_path, back) if back else None
            ok = rows is not None and results_equal(rows, items[i].gold, ordered[i])
            outs[i].trace.append({"attempt": a, "question": q, "sql": back,
                                  "why": "ok" if ok else "SQL failed" if rows is None else "different result"})
            if ok:
                outs[i].question = q
        todo = [i for i in todo if outs[i].question is None]
    return outs
