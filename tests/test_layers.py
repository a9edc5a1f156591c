"""The package in layers (issue 33; docs/design/architecture.md): the import-linter contracts in pyproject.toml hold,
no import cycle exists between modules or between top-level folders counting imports inside functions, few of our
own imports sit inside functions (each with its reason on the line), at most 4 modules sit directly under
``ctxbench/``, no file of the package is over 800 lines and no file of the CLI package over 400, and the deprecated
``ctxbench.tracks.base`` still offers the track contract. The import graph is read with :mod:`ast` from the files,
so every import counts, at the top of a module or inside a function; those under ``if TYPE_CHECKING:`` do not run
and do not count."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "ctxbench"
LAZY_MARK = "# lazy:"  # an import kept inside a function says why on its line


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts)
        out[name[: -len(".__init__")] if name.endswith(".__init__") else name] = p
    return out


def _in_type_checking(node: ast.AST, parents: dict) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def _in_function(node: ast.AST, parents: dict) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return True
    return False


def import_graph() -> list[tuple[str, str, bool, Path, int]]:
    """Every import of one ctxbench module by another: ``(importer, imported, inside_a_function, file, line)``.
    ``from a.b import c`` names the module ``a.b.c`` when that is a module, else ``a.b``; relative imports are
    resolved against the importer's package."""
    mods = _modules()
    edges = []
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or _in_type_checking(node, parents):
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or "" if node.level == 0 else ".".join(
                    pkg[: len(pkg) - node.level + 1] + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for t in targets:
                while t not in mods and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in mods and t != name and t.startswith("ctxbench"):
                    edges.append((name, t, _in_function(node, parents), path, node.lineno))
    return edges


def _cycles(edges: list[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    adj: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        adj[a].add(b)
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]
    for root in sorted(adj):
        if root in index:
            continue
        work = [(root, iter(sorted(adj[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(adj.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return comps


def _part(m: str) -> str:
    return ".".join(m.split(".")[:2])


def test_the_cycle_finder_finds_a_cycle():
    # a -> b -> c -> a is one cycle of three; d -> a hangs off it; e alone
    assert _cycles([("a", "b"), ("b", "c"), ("c", "a"), ("d", "a"), ("e", "d")]) == [["a", "b", "c"]]
    assert _cycles([("a", "b"), ("b", "c")]) == []


def test_no_import_cycle_between_modules_or_folders():
    edges = import_graph()
    assert _cycles([(a, b) for a, b, *_ in edges]) == []
    assert _cycles([(_part(a), _part(b)) for a, b, *_ in edges if _part(a) != _part(b)]) == []


def test_few_imports_sit_inside_functions_and_each_says_why():
    edges = import_graph()
    statements = {(p, line) for _, _, _, p, line in edges}
    inside = {(p, line) for _, _, f, p, line in edges if f}
    assert len(inside) <= 0.15 * len(statements), (len(inside), len(statements))
    unexplained = [f"{p.relative_to(ROOT)}:{line}" for p, line in sorted(inside)
                   if LAZY_MARK not in "".join(p.read_text(encoding="utf-8").splitlines()[line - 1:line + 2])]
    assert not unexplained, f"imports inside functions without a '{LAZY_MARK} <reason>' comment: {unexplained}"


def test_at_most_four_modules_sit_directly_under_the_package():
    top = sorted(p.name for p in PKG.glob("*.py"))
    assert len(top) <= 4, top


def test_no_file_is_over_800_lines_and_no_cli_file_over_400():
    long = {str(p.relative_to(ROOT)): n for p in PKG.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 800}
    assert not long, long
    cli = {str(p.relative_to(ROOT)): n for p in (PKG / "cli").rglob("*.py")
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert not cli, cli


def test_the_import_contracts_hold():
    """`lint-imports` (import-linter) checks the layers contract of pyproject.toml: a folder imports only folders on
    the lines below its own, at module level or inside a function."""
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(exe).exists():
        if os.environ.get("CI") == "true":
            pytest.fail("lint-imports is missing: pip install -e '.[test]' installs import-linter")
        pytest.skip("lint-imports is not installed (pip install -e '.[test]')")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "BROKEN" not in r.stdout and "KEPT" in r.stdout


def test_the_old_track_import_path_still_works():
    """Third-party tracks written against ``ctxbench.tracks.base`` keep working for one release (CHANGELOG.md)."""
    from ctxbench.core import track as core
    from ctxbench.tracks import base

    for name in ("Stage", "Track", "register_track", "get_track", "tracks", "default_track", "track_of_build"):
        assert getattr(base, name) is getattr(core, name)
    assert base.get_track("holobench").name == "holobench"


def test_the_moved_modules_keep_their_old_paths_for_one_release():
    """Every module the layers change moved imports under its old name too: the same module object, with a
    DeprecationWarning naming the new path (CHANGELOG.md); the names that moved between modules still import from
    their old module."""
    import importlib
    import warnings

    from ctxbench import MOVED_MODULES

    assert len(MOVED_MODULES) == 12 + 9 + 3 + 5  # core, run, features, and five single moves
    for old, new in MOVED_MODULES.items():
        sys.modules.pop(old, None)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            mod = importlib.import_module(old)
        assert mod is importlib.import_module(new), old
        assert any(issubclass(x.category, DeprecationWarning) and new in str(x.message) for x in w), old
        sys.modules.pop(old, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from ctxbench.gold.execute import REL_TOL, text_number  # noqa: F401
        from ctxbench.incremental import latest_build, scoring_code  # noqa: F401
        from ctxbench.scoring.pipeline import final_answer, strip_code_fences, tidy  # noqa: F401
        from ctxbench.tracks.base import PROMPT_KEYS, RUN_KEYS  # noqa: F401
        from ctxbench.tracks.common import BuildResult, TrackSource, read_manifest  # noqa: F401


def test_a_track_file_that_cannot_import_is_one_line(tmp_path):
    """A plugin track importing a module this installation lacks (e.g. an old path removed later) is named in one
    line with exit 2, whichever command loads the tracks; no traceback."""
    bad = tmp_path / "oldtrack.py"
    bad.write_text("import ctxbench.no_such_module\n", encoding="utf-8")
    env = {**os.environ, "CTXBENCH_TRACKS": str(bad),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    for args in (["tracks"], ["build", "holobench", "--help"]):
        r = subprocess.run([sys.executable, "-m", "ctxbench.cli", *args], capture_output=True, text=True, env=env,
                           cwd=tmp_path)
        out = r.stdout + r.stderr
        assert r.returncode == 2, out
        assert f"cannot import track file {bad}" in " ".join(out.split()) and "Traceback" not in out, out
