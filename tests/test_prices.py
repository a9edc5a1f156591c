"""litellm's price table read without importing litellm (ctxbench.models.providers.price_table): the same table
litellm loads offline, entry for entry, and a price lookup that needs no litellm import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _in_fresh_process(code: str) -> dict:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300,
                       env={"PATH": "/usr/bin:/bin", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def litellms_table() -> dict:
    """litellm's own ``model_cost``, loaded by litellm in a process of its own (importing it takes seconds)."""
    return _in_fresh_process(
        "import json, litellm; print(json.dumps({k: dict(v) for k, v in litellm.model_cost.items()}))")


def test_the_table_read_from_litellms_file_is_litellms_own_table(litellms_table):
    # the file read by ctxbench in one process, litellm's model_cost in another (each sees only its own source)
    ours = _in_fresh_process(
        "import json, sys; from ctxbench.models.providers import price_table; t = price_table(); "
        "assert 'litellm' not in sys.modules; print(json.dumps({k: dict(v) for k, v in t.items()}))")
    theirs = litellms_table
    assert len(theirs) > 1000  # a real table, not an empty one on both sides
    assert ours.keys() == theirs.keys()
    assert [k for k in theirs if ours[k] != theirs[k]] == []
    # alias rows resolved as litellm resolves them: some name whose row in the file is {"alias_of": ...}
    import importlib.util

    spec = importlib.util.find_spec("litellm")
    raw = json.loads((Path(list(spec.submodule_search_locations)[0])
                      / "model_prices_and_context_window_backup.json").read_text(encoding="utf-8"))
    pointers = {k: v["alias_of"] for k, v in raw.items() if isinstance(v, dict) and isinstance(v.get("alias_of"), str)}
    resolved = [k for k, t in pointers.items() if k in theirs]
    assert resolved, "litellm's file has no alias rows any more: pick another check of the alias resolution"
    for k in resolved:
        assert ours[k] == theirs[pointers[k]] and "alias_of" not in ours[k]


def test_a_price_lookup_imports_no_litellm(litellms_table):
    got = _in_fresh_process(
        "import json, sys; from ctxbench.models.pricing import model_prices; from ctxbench.models.providers import "
        "price_entry, price_provider; p = model_prices('gpt-4o-mini'); "
        "print(json.dumps({'input': p.input, 'output': p.output, 'self_hosted': price_entry('openai/my-model'), "
        "'provider': price_provider('openai/my-model'), 'litellm': 'litellm' in sys.modules}))")
    assert got["litellm"] is False
    e = litellms_table["gpt-4o-mini"]
    assert [got["input"], got["output"]] == [e["input_cost_per_token"], e["output_cost_per_token"]]
    assert got["self_hosted"] == {} and got["provider"] == "openai"


def test_an_imported_litellm_is_asked_itself(monkeypatch):
    # a process that imported litellm (and may have registered models there) reads litellm's live table
    import types

    from ctxbench.models.providers import price_entry

    fake = types.SimpleNamespace(model_cost={"my-model": {"input_cost_per_token": 1e-6}})
    monkeypatch.setitem(sys.modules, "litellm", fake)
    assert price_entry("openai/my-model") == {"input_cost_per_token": 1e-6}
    assert price_entry("gpt-4o-mini") == {}
