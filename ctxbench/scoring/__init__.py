"""Scoring: answer extraction, deterministic matchers, metrics."""
