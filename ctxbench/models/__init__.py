"""Models: registry, response cache, gateway (litellm / OpenAI-compatible HTTP), embedded local server."""
