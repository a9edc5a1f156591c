"""A generic registry of named things (backends, batch clients, ...): register by name with a decorator, look up
with an error that names the choices and the nearest one, and refer to an object lazily as ``"module:obj"``.

The pattern of lm-evaluation-harness's ``api/registry.py`` (``Registry[T]``, lazy placeholders, did-you-mean) and
inspect_ai's ``_util/registry.py``: the registry lives on the ground floor and never imports what it registers, so
a module registers itself with a decorator and an upper layer names a lazy ``"module:obj"`` that is imported only
when it is looked up. Names are compared as given (case-sensitive).

Example::

    BACKENDS: Registry[type] = Registry("backend")

    @BACKENDS.register("openai_http")
    class OpenAIHTTPBackend: ...

    BACKENDS.register_lazy("mine", "mypkg.backends:MyBackend")
    BACKENDS.get("openai_http")     # -> OpenAIHTTPBackend
    BACKENDS.get("openai-http")     # UnknownNameError: unknown backend 'openai-http' (did you mean openai_http?) ...
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError):
    """A name no entry of a :class:`Registry` has; its text names the nearest choices and all of them."""

    def __str__(self) -> str:  # KeyError's own str() quotes the message
        return str(self.args[0]) if self.args else ""


class Registry(Generic[T]):
    """Named objects of one kind (``what``: the word an error uses, e.g. ``"backend"``). An entry is the object itself
    or a lazy ``"module:obj"`` reference, imported (once) on the first :meth:`get`."""

    def __init__(self, what: str):
        self.what = what
        self._entries: dict[str, T | str] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """A decorator registering its object under ``name`` and returning it unchanged. Raises ValueError when
        ``name`` is already taken by another object (registering the same object again is allowed)."""
        def deco(obj: T) -> T:
            old = self._entries.get(name)
            if old is not None and old is not obj and not isinstance(old, str):
                raise ValueError(f"{self.what} {name!r} is already registered ({old!r}); pick another name")
            self._entries[name] = obj
            return obj
        return deco

    def register_lazy(self, name: str, ref: str) -> None:
        """Register ``name`` as the ``"module:obj"`` reference ``ref``, imported on the first lookup. Raises
        ValueError for a reference without ``:``. An object already registered under ``name`` is kept."""
        if ":" not in ref:
            raise ValueError(f"{self.what} {name!r}: lazy reference {ref!r} must be 'module:object'")
        self._entries.setdefault(name, ref)

    def get(self, name: str) -> T:
        """The object registered as ``name`` (a lazy reference imported now). Raises :class:`UnknownNameError` (a KeyError) naming the unknown
        name, the nearest registered ones (``difflib``) and all choices; ImportError/AttributeError from a lazy
        reference that does not resolve."""
        try:
            obj = self._entries[name]
        except KeyError:
            raise UnknownNameError(self.unknown(name)) from None
        if isinstance(obj, str):
            module, _, attr = obj.partition(":")
            resolved = importlib.import_module(module)
            for part in attr.split("."):
                resolved = getattr(resolved, part)
            self._entries[name] = obj = resolved
        return obj

    def unknown(self, name: str) -> str:
        """The one-line message for an unknown ``name``: the nearest choices and every registered name."""
        close = difflib.get_close_matches(str(name), list(self._entries), n=3, cutoff=0.6)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        return f"unknown {self.what} {name!r}{hint}: the {self.what}s are {', '.join(sorted(self._entries))}"

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)
