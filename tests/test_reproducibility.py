"""Reproducibility: the same configuration and seed built twice (different --out) gives byte-identical artifacts,
and so do evaluation, scoring and report on them (answers from the same deterministic server); the manifest
records library versions and the tokenizer file's hash, checked here independently."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ctxbench.cli import app
from fakeserver import FakeOpenAIServer

runner = CliRunner()
TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def tree(d: Path) -> dict[str, str]:
    """sha256 of every file under ``d`` by relative name."""
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*"))
            if p.is_file()}


def build(db: str, out: Path, seed: int = 0) -> None:
    r = runner.invoke(app, ["build", "holobench", "--db", db, "--lengths", "1024,2048", "--position",
                            "uniform,end", "--seed", str(seed), "--out", str(out)])
    assert r.exit_code == 0, r.output


@pytest.fixture(scope="module")
def two_builds(spider_db, tmp_path_factory):
    root = tmp_path_factory.mktemp("repro")
    db = str(spider_db("wine_1"))
    build(db, root / "a" / "first")
    build(db, root / "elsewhere" / "b")
    return root / "a" / "first", root / "elsewhere" / "b", db


def test_two_builds_of_one_config_are_byte_identical(two_builds):
    a, b, _ = two_builds
    ta, tb = tree(a), tree(b)
    assert set(ta) == {"instances.parquet", "quarantine.parquet", "source.sqlite", "manifest.json", "certificates.parquet"}
    assert ta == tb


def test_another_seed_changes_the_hash_and_the_instances(two_builds, tmp_path):
    a, _, db = two_builds
    build(db, tmp_path / "s1", seed=1)
    ma, m1 = (json.loads((d / "manifest.json").read_text()) for d in (a, tmp_path / "s1"))
    assert ma["build_hash"] != m1["build_hash"]
    ctx_a = pq.read_table(a / "instances.parquet", columns=["context"]).column("context").to_pylist()
    ctx_1 = pq.read_table(tmp_path / "s1" / "instances.parquet", columns=["context"]).column("context").to_pylist()
    assert set(ctx_a) != set(ctx_1)  # the sampled rows differ, so the comparison above can fail


def test_manifest_records_library_versions_and_tokenizer_file_hash(two_builds, tiktoken_enc):
    a, _, _ = two_builds
    m = json.loads((a / "manifest.json").read_text())
    for pkg in ("pyarrow", "duckdb", "sqlglot", "tiktoken", "tokenizers", "litellm", "pydantic", "numpy"):
        assert m["versions"][pkg] == importlib.metadata.version(pkg), pkg
    assert m["python"] == platform.python_version()
    # the BPE file tiktoken loads, found and hashed without ctxbench's registry
    import litellm

    f = Path(litellm.__file__).parent / "litellm_core_utils" / "tokenizers" / hashlib.sha1(TIKTOKEN_URL.encode()).hexdigest()
    assert m["tokenizer"] == {"name": "cl100k_base", "file_sha256": hashlib.sha256(f.read_bytes()).hexdigest()}
    assert m["source"]["sha256"] == hashlib.sha256(Path(two_builds[2]).read_bytes()).hexdigest()


def test_evaluate_score_report_reproduce_too(two_builds, tmp_path, monkeypatch):
    a, b, _ = two_builds
    import shutil

    # work on copies: the module's builds stay pristine for the other tests
    a2, b2 = tmp_path / "a", tmp_path / "b"
    shutil.copytree(a, a2)
    shutil.copytree(b, b2)
    with FakeOpenAIServer() as srv:
        for d, home in ((a2, "home-a"), (b2, "home-b")):  # separate caches: both runs really call the server
            monkeypatch.setenv("CTXBENCH_HOME", str(tmp_path / home))
            for cmd in (["evaluate", "--build", str(d), "--model", "openai/fake", "--base-url", srv.base_url],
                        ["score", "--build", str(d)], ["report", "--build", str(d)]):
                r = runner.invoke(app, cmd)
                assert r.exit_code == 0, r.output
        n = len(pq.read_table(a / "instances.parquet"))
        assert srv.count == 2 * n
    ta, tb = tree(a2), tree(b2)
    assert set(ta) == set(tb)
    differ = sorted(k for k in ta if ta[k] != tb[k])
    # responses hold each call's measured latency, in the order the answers arrived; everything else is equal
    # byte for byte
    assert differ == ["responses.parquet"], differ
    ra, rb = (pq.read_table(d / "responses.parquet").drop_columns(["latency_s"]).sort_by("request_key")
              for d in (a2, b2))
    assert ra.equals(rb)
    assert "scores.parquet" in ta and "report/index.html" in ta
