"""Boundaries of the code base (issue 12 item 7), checked on every run: no import cycle among ctxbench's and the
pipelines' modules (imports inside functions count, imports under ``if TYPE_CHECKING:`` do not), no private name
imported from another module, at most 5 references to track names in the generic layers (everything in
``ctxbench/`` and ``pipelines/`` outside ``ctxbench/tracks/``), ``py.typed`` shipped, and ruff clean with the
configuration in pyproject.toml.

``python tests/test_boundaries.py`` prints the figures (the README's architecture section quotes them)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LAYERS = ("ctxbench", "pipelines")
TRACK_NAMES = ("holobench", "scitrek", "needles", "lara")  # the built-in tracks, as the issue counted them


def modules(root: Path = REPO) -> dict[str, Path]:
    """Dotted module name → file, for every module of ctxbench/ and pipelines/."""
    out = {}
    for d in LAYERS:
        for p in sorted((root / d).rglob("*.py")):
            parts = list(p.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and ((isinstance(n.test, ast.Name) and n.test.id == "TYPE_CHECKING") or
                                      (isinstance(n.test, ast.Attribute) and n.test.attr == "TYPE_CHECKING")):
            for b in n.body:
                skip.update(id(x) for x in ast.walk(b))
    return skip


def import_graph(root: Path = REPO) -> dict[str, set[str]]:
    """Module → the ctxbench/pipelines modules it imports anywhere in its code (``from pkg import sub`` is an
    edge to the submodule ``pkg.sub``, to ``pkg`` only for names that are not submodules)."""
    mods = modules(root)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        tree = ast.parse(p.read_text(encoding="utf-8"))
        skip = _type_checking_nodes(tree)
        pkg = m if p.name == "__init__.py" else m.rpartition(".")[0]
        for n in ast.walk(tree):
            if id(n) in skip:
                continue
            if isinstance(n, ast.Import):
                graph[m].update(a.name for a in n.names if a.name in mods)
            elif isinstance(n, ast.ImportFrom):
                if n.level:
                    base = pkg.split(".")[: len(pkg.split(".")) - (n.level - 1)]
                    mod = ".".join(base + ([n.module] if n.module else []))
                else:
                    mod = n.module or ""
                subs = [f"{mod}.{a.name}" for a in n.names]
                graph[m].update(s for s in subs if s in mods)
                if mod in mods and any(s not in mods for s in subs):
                    graph[m].add(mod)
        graph[m].discard(m)
    return graph


def import_cycles(root: Path = REPO) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    graph = import_graph(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def private_imports(root: Path = REPO) -> list[str]:
    """``from x import _y`` in ctxbench/ and pipelines/ (a private helper used outside its module)."""
    out = []
    for p in modules(root).values():
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(n, ast.ImportFrom):
                out += [f"{p.relative_to(root)}:{n.lineno}: {a.name}" for a in n.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    return out


def track_references(root: Path = REPO) -> list[str]:
    """References to track names in the generic layers, by the issue's rule: in every .py file under ctxbench/
    and pipelines/ outside ctxbench/tracks/, string constants equal to a track name (case-insensitive), import
    statements naming a track module (1 each), Name nodes whose id contains a track name and Attribute nodes whose
    attr contains one (case-insensitive); docstrings and comments are not counted. (53 at 31cf554.)"""
    pat = re.compile(r"\b(" + "|".join(TRACK_NAMES) + r")\b")
    pati = re.compile("|".join(TRACK_NAMES), re.I)
    out = []
    for d in LAYERS:
        for p in sorted((root / d).rglob("*.py")):
            rel = p.relative_to(root).as_posix()
            if rel.startswith("ctxbench/tracks/"):
                continue
            for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
                if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.lower() in TRACK_NAMES:
                    out.append(f"{rel}:{n.lineno}: {n.value!r}")
                if isinstance(n, (ast.Import, ast.ImportFrom)):
                    s = " ".join([a.name for a in n.names] + [getattr(n, "module", None) or ""])
                    if pat.search(s):
                        out.append(f"{rel}:{n.lineno}: import {s}")
                if isinstance(n, ast.Name) and pati.search(n.id):
                    out.append(f"{rel}:{n.lineno}: {n.id}")
                if isinstance(n, ast.Attribute) and pati.search(n.attr):
                    out.append(f"{rel}:{n.lineno}: .{n.attr}")
    return out


# --------------------------------------------------------------------------------------------------- checks

def test_the_checkers_find_what_they_look_for(tmp_path):
    pkg = tmp_path / "ctxbench"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\nfrom .b import _helper\n")
    (pkg / "b.py").write_text("def f():\n    from .a import x\n    return 'needles'\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import T\n")
    (pkg / "d.py").write_text("from .c import y\nfrom ctxbench.tracks import holobench\nHoloBenchConfig = 1\n")
    (pkg / "sub" / "__init__.py").write_text("from .e import z\n")
    (pkg / "sub" / "e.py").write_text("from . import f\n")  # a sibling submodule, not the package
    (pkg / "sub" / "f.py").write_text("")
    assert import_cycles(tmp_path) == [["ctxbench.a", "ctxbench.b"]]  # inside a function counts; TYPE_CHECKING not
    assert private_imports(tmp_path) == ["ctxbench/a.py:2: _helper"]
    assert sorted(track_references(tmp_path)) == ["ctxbench/b.py:3: 'needles'",
                                                  "ctxbench/d.py:2: import holobench ctxbench.tracks",
                                                  "ctxbench/d.py:3: HoloBenchConfig"]


def test_no_import_cycle():
    assert import_cycles() == []


def test_no_private_helper_imported_across_modules():
    assert private_imports() == []


def test_generic_layers_name_at_most_five_tracks():
    refs = track_references()
    assert len(refs) <= 5, "\n".join(refs)


def test_py_typed_is_shipped():
    assert (REPO / "ctxbench" / "py.typed").exists()
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert "py.typed" in cfg["tool"]["setuptools"]["package-data"]["ctxbench"]


def test_ruff_is_clean():
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert "ruff" in cfg["tool"] and any(d.startswith("ruff") for d in cfg["project"]["optional-dependencies"]["test"])
    pytest.importorskip("ruff", reason="ruff is not installed (pip install -e '.[test]')")
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(REPO)], capture_output=True,
                       text=True, cwd=REPO)
    assert r.returncode == 0, r.stdout + r.stderr


if __name__ == "__main__":  # the figures of the README's architecture section
    refs = track_references()
    print(f"track-name references in the generic layers: {len(refs)}")
    print("\n".join(f"  {r}" for r in refs))
    cyc = import_cycles()
    print(f"import cycles: {len(cyc)}" + "".join(f"\n  {' <-> '.join(c)}" for c in cyc))
    print(f"private imports across modules: {len(private_imports())}")
