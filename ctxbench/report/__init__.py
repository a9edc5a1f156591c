"""Report: analysis tables (Parquet) and an HTML page from a build's instances, responses and scores."""

from .html import build_report, results_table

__all__ = ["build_report", "results_table"]
