"""Hashes of the code behind a function: the source of the module that defines it and of every ctxbench module that
module imports at its top level (transitively), the data files it declares in a module-level ``SCORING_DATA``
(paths under ``assets/``), and the installed versions of the third-party packages those modules import anywhere.
Used to tell when stored scores are out of date (:mod:`ctxbench.scoring.versions`)."""


from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.metadata
import inspect
import sys
from functools import lru_cache
from pathlib import Path
from ctxbench.core.config import assets_dir
from ctxbench.core.manifest import import_names_to_distributions

__all__ = ["code_hash", "module_closure"]


def _resolve(modname: str, node: ast.ImportFrom) -> str | None:
    if node.level == 0:
        return node.module
    pkg = modname.split(".")
    base = pkg[:len(pkg) - node.level] if modname in sys.modules and not hasattr(sys.modules[modname], "__path__") \
        else pkg[:len(pkg) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


@lru_cache(maxsize=256)
def _imports(modname: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(ctxbench modules imported at the top level, third-party top-level packages imported anywhere) of a module."""
    mod = importlib.import_module(modname)
    try:
        tree = ast.parse(inspect.getsource(mod))
    except (OSError, TypeError):
        return (), ()
    own: set[str] = set()
    top_nodes = []
    for node in tree.body:
        if _is_type_checking(node):
            continue
        top_nodes.extend(ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else [node])
    for node in top_nodes:
        if isinstance(node, ast.ImportFrom):
            target = _resolve(modname, node)
            if target and target.split(".")[0] == "ctxbench":
                for alias in node.names:      # "from . import numbers" imports a module
                    sub = f"{target}.{alias.name}"
                    own.add(sub if _is_module(sub) else target)
        elif isinstance(node, ast.Import):
            own.update(a.name for a in node.names if a.name.split(".")[0] == "ctxbench")
    third: set[str] = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for n in names:
            top = n.split(".")[0]
            if top != "ctxbench" and top not in sys.stdlib_module_names and top != "__future__":
                third.add(top)
    return tuple(sorted(own)), tuple(sorted(third))


def _is_module(name: str) -> bool:
    try:
        importlib.import_module(name)
        return True
    except ImportError:
        return False


def module_closure(modname: str) -> list[str]:
    """``modname`` and every ctxbench module it imports at its top level, transitively (sorted)."""
    seen: set[str] = set()
    todo = [modname]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo.extend(_imports(m)[0])
    return sorted(seen)


# import names whose distribution is named otherwise (looked up first; scanning every distribution is slow)
_DIST_ALIASES = {"yaml": "PyYAML", "text_to_num": "text2num", "opencc": "opencc-python-reimplemented",
                 "sklearn": "scikit-learn"}


def _package_version(top: str) -> str:
    for d in (_DIST_ALIASES.get(top, top),):
        try:
            return f"{d}=={importlib.metadata.version(d)}"
        except importlib.metadata.PackageNotFoundError:
            pass
    dists = import_names_to_distributions().get(top) or (top,)
    for d in dists:
        try:
            return f"{d}=={importlib.metadata.version(d)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return f"{top}==?"


@lru_cache(maxsize=256)
def _module_hash(modname: str) -> str:
    h = hashlib.sha256()
    third: set[str] = set()
    for m in module_closure(modname):
        mod = importlib.import_module(m)
        try:
            h.update(m.encode() + b"\0" + inspect.getsource(mod).encode("utf-8") + b"\0")
        except (OSError, TypeError):
            h.update(m.encode() + b"\0?\0")
        third.update(_imports(m)[1])
        for rel in getattr(mod, "SCORING_DATA", ()) or ():
            p = Path(assets_dir()) / rel
            h.update(rel.encode() + b"\0" + (p.read_bytes() if p.exists() else b"?") + b"\0")
    for t in sorted(third):
        h.update(_package_version(t).encode() + b"\0")
    return h.hexdigest()[:16]


def code_hash(obj) -> str:
    """Hash of the code behind a function or class (module docstring), prefixed by its ``version`` attribute when
    it has one: ``"2:ab12…"`` or ``"ab12…"``. 16 hex digits of SHA-256."""
    mod = getattr(obj, "__module__", None) or ""
    h = _module_hash(mod) if mod else hashlib.sha256(repr(obj).encode()).hexdigest()[:16]
    v = getattr(obj, "version", None)
    return f"{v}:{h}" if isinstance(v, str) else h
