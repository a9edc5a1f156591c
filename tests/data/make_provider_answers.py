"""Writes tests/data/provider_answers.json: every provider answer (provider, request shape, billing provider,
cache hint, batch protocol, request-key endpoint, cache minimum) for a grid of model names and base URLs, through
the names that existed before ctxbench.models.providers (computed on the code before it; test_backends.py pins
the table). Run: PYTHONPATH=. python tests/data/make_provider_answers.py > tests/data/provider_answers.json"""
import json
from ctxbench.models.cache import endpoint_id, model_provider
from ctxbench.models.effort import provider_of as shape
from ctxbench.models.pricing import provider_of as billed, cache_min_tokens
from ctxbench.models.prompts import takes_cache_hint
from ctxbench.models.batch import batch_protocol
from ctxbench.core.errors import InputError
models = ["gpt-4o", "o3-mini", "claude-sonnet-4-20250514", "anthropic/claude-3-5-haiku-20241022",
          "bedrock/anthropic.claude-3-sonnet", "vertex_ai/claude-3-opus", "vertex_ai/gemini-2.5-pro",
          "openrouter/anthropic/claude-3.5-sonnet", "gemini/gemini-2.0-flash", "deepseek/deepseek-chat",
          "mistral/mistral-large-latest", "groq/llama-3.1-8b-instant", "openai/Qwen/Qwen3-8B",
          "smollm2-135m-instruct", "together_ai/meta-llama/Llama-3-70b", "gtp-4o"]
urls = [None, "https://api.openai.com/v1", "https://api.anthropic.com", "http://127.0.0.1:8000/v1",
        "https://api.deepseek.com/v1", "https://generativelanguage.googleapis.com/v1beta"]
out = []
for m in models:
    for u in urls:
        try:
            bp = list(batch_protocol(m, u))
        except InputError:
            bp = None
        out.append([m, u, model_provider(m), shape(m, u), billed(m), takes_cache_hint(m), bp, endpoint_id(m, u),
                    cache_min_tokens(m)])
print(json.dumps(out))
