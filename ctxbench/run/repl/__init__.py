"""``evaluate --mode repl``: the context read as an environment (Recursive Language Models, arXiv 2512.24601).

:mod:`.protocol` (the prompt and the parsing of replies), :mod:`.sandbox` (the process the model's code runs in,
under bubblewrap), :mod:`.child` (that process's own program, standard library only), :mod:`.loop` (one answer:
root turns, code steps, ``llm_query`` sub-calls, the statuses that end it) and :mod:`.answers` (the answers of an
evaluation: request keys, rows of ``responses.parquet`` and ``steps.parquet``)."""

from ctxbench.run.repl.answers import STEPS_FILE, evaluate_repl, repl_request, sandbox_warning
from ctxbench.run.repl.loop import REPL_STATUSES, ReplConfig
from ctxbench.run.repl.sandbox import SANDBOXES, require_sandbox

__all__ = ["REPL_STATUSES", "SANDBOXES", "STEPS_FILE", "ReplConfig", "evaluate_repl", "repl_request",
           "require_sandbox", "sandbox_warning"]
