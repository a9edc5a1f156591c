"""Gold answers: SQL executed over exactly the rows a context contains, in two engines, with ambiguity checks."""

from ctxbench.gold.execute import GoldEngines, GoldResult, compute_gold, results_equal

__all__ = ["GoldEngines", "GoldResult", "compute_gold", "results_equal"]
