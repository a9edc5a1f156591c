"""Benchmark tracks: each turns sources into instances with the shared core (contexts, gold, storage)."""
