"""Analysis of builds and their scores, one module per concern: ``core`` (scores by context length, averages,
breakdowns, calls, variance), ``difficulty`` and ``language`` (instance properties written at build time),
``filters`` (instance inclusion criteria), ``regression`` (difficulty regression), ``rag`` (RAG versus long
context, answer position), ``closed_book`` (closed-book screen) and ``agreement`` (judge agreement with human
labels). A track's own analysis lives in its package (e.g. ``ctxbench.tracks.needles.analysis``); the report
(:mod:`ctxbench.report`) renders these tables."""
