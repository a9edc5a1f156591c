"""Gold answers: SQL executed over exactly the rows a context contains, in two engines, with ambiguity checks."""

from ctxbench.gold.compare import results_equal
from ctxbench.gold.engines import GoldEngines
from ctxbench.gold.execute import GoldResult, compute_gold

__all__ = ["GoldEngines", "GoldResult", "compute_gold", "results_equal"]
