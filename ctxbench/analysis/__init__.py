"""Analysis: instance difficulty properties (LURCH) and, later, regressions and agreement statistics."""
