"""The order in which category values are listed (report tables, figures, the instance browser's filters).

Ordinal words are listed in their meaning's order, not the alphabet's: ``easy, medium, hard`` (HoloBench A.3's
difficulty), ``low, medium, high``, ``beginning, middle, end`` (positions), ``short, medium, long``. Other values
keep their natural order: numbers by value, then text alphabetically.
"""

from __future__ import annotations

from typing import Any

# each scale is one ordered vocabulary; a value belongs to the first scale that names it
ORDINAL_SCALES: tuple[tuple[str, ...], ...] = (
    ("easy", "medium", "hard", "extra hard"),
    ("low", "medium", "high"),
    ("short", "medium", "long"),
    ("beginning", "middle", "end"),
)
_RANK = {}
for _scale in ORDINAL_SCALES:
    for _i, _w in enumerate(_scale):
        _RANK.setdefault(_w, _i)


def value_order(v: Any) -> tuple:
    """A sort key: numbers first by value, then the words of an ordinal scale by rank, then other text
    alphabetically; ``None`` last. ``sorted(["hard", "easy", "medium"], key=value_order)`` is
    ``["easy", "medium", "hard"]``."""
    if v is None:
        return (3, 0, "")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        s = str(v)
        rank = _RANK.get(s.strip().lower())
        return (1, rank, s) if rank is not None else (2, 0, s)
    return (0, v, "")
