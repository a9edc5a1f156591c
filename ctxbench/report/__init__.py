"""Report: analysis tables (Parquet) and an HTML page from a build's instances, responses and scores."""

from .context import ReportContext
from .html import build_report, results_table

__all__ = ["ReportContext", "build_report", "results_table"]
