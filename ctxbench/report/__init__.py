"""Report: analysis tables (Parquet) and an HTML page from a build's instances, responses and scores."""

from ctxbench.report.context import ReportContext
from ctxbench.report.html import build_report, results_table

__all__ = ["ReportContext", "build_report", "results_table"]
