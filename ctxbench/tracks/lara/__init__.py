"""LaRA import track (RAG versus long context): its build (``build``) and the modules only this track uses."""

from .build import (
    import_lara,
)

__all__ = [
    "import_lara",
]
