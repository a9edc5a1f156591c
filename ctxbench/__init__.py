"""ctxbench: a benchmark factory and evaluation harness for long-context language models.

The library is plain Python (no Prefect import); ``pipelines/`` wires it into Prefect flows.
"""

__version__ = "0.1.0"
