"""Prefect flows and tasks wiring the ctxbench library (thin: no benchmark logic here)."""
