"""Cross-encoders from local model directories, as the scoring callables the selectors take.

``load_cross_encoder(path)`` loads a sentence-transformers ``CrossEncoder`` from a local
directory (the Hugging Face hub is never contacted) and returns a :class:`CrossEncoderScorer`:
``scorer(pairs) -> np.ndarray`` of float64 raw logits, one per (left, right) pair. Raw logits
(no sigmoid) are the scale of the Dartboard paper's rescaling range (-11.6, 11.4) for
cross-encoder/ms-marco-MiniLM-L-6-v2. Scores are memoized per pair, so a sigma sweep or a second
method on the same query does not re-run the model.

    from divopt_rag.data import load_cross_encoder
    ce = load_cross_encoder("/models/ms-marco-MiniLM-L-6-v2")
    select(inst, "dartboard_cc", cross_encoder=ce, query=query_text, passages=texts)
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

__all__ = ["CrossEncoderScorer", "cross_encoder_scorer", "load_cross_encoder"]


class CrossEncoderScorer:
    """Callable scoring (left, right) text pairs with a sentence-transformers CrossEncoder.

    ``scorer(pairs)`` returns float64 raw logits (activation = identity), one per pair.
    ``cache`` memoizes scores by pair; ``progress`` is passed to ``predict`` as
    ``show_progress_bar`` (None: sentence-transformers decides). ``model_id`` names the model in
    run keys and tables (a resolved directory path for :func:`load_cross_encoder`).
    """

    def __init__(self, model: Any, *, batch_size: int = 32, cache: bool = True, progress: bool | None = None,
                 model_id: str | None = None):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        self.model = model
        self.model_id = model_id or str(getattr(model, "name_or_path", None) or getattr(
            getattr(model, "config", None), "_name_or_path", None) or type(model).__qualname__)
        self.batch_size = batch_size
        self.progress = progress
        self._cache: dict[tuple[str, str], float] | None = {} if cache else None

    def _predict(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        import torch  # here, not at import: ``import divopt_rag.data`` loads no torch

        out = self.model.predict(pairs, batch_size=self.batch_size, show_progress_bar=self.progress,
                                 activation_fn=torch.nn.Identity(), convert_to_numpy=True)
        return np.asarray(out, dtype=np.float64).reshape(len(pairs), -1)[:, 0]

    def __call__(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        pairs = [(str(a), str(b)) for a, b in pairs]
        if not pairs:
            return np.zeros(0)
        if self._cache is None:
            return self._predict(pairs)
        todo = list(dict.fromkeys(p for p in pairs if p not in self._cache))
        if todo:
            self._cache.update(zip(todo, self._predict(todo).tolist()))
        return np.array([self._cache[p] for p in pairs], dtype=np.float64)

    def __repr__(self) -> str:
        cached = "off" if self._cache is None else len(self._cache)
        return f"CrossEncoderScorer({type(self.model).__name__}, batch_size={self.batch_size}, cached={cached})"


def cross_encoder_scorer(model: Any, *, batch_size: int = 32, cache: bool = True,
                         progress: bool | None = None) -> CrossEncoderScorer:
    """Wrap an already loaded sentence-transformers ``CrossEncoder`` (raw logits, memoized)."""
    if not hasattr(model, "predict"):
        raise TypeError(f"model must be a sentence-transformers CrossEncoder (with .predict), got {type(model).__name__}")
    return CrossEncoderScorer(model, batch_size=batch_size, cache=cache, progress=progress)


def load_cross_encoder(path: str | os.PathLike, *, device: str | None = None, batch_size: int = 32,
                       max_length: int | None = None, cache: bool = True,
                       progress: bool | None = None) -> CrossEncoderScorer:
    """Load a CrossEncoder from the local model directory ``path`` (no download) as a scorer.

    ``path`` must be a directory holding a saved model (``config.json``), e.g. a snapshot of
    cross-encoder/ms-marco-MiniLM-L-6-v2 (the paper's model). ``device`` defaults to
    sentence-transformers' choice; ``max_length`` truncates pairs (default: the model's).
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"cross-encoder directory {str(p)!r} does not exist")
    if not p.is_dir() or not (p / "config.json").is_file():
        raise ValueError(f"cross-encoder path {str(p)!r} must be a model directory holding config.json "
                         "(a saved sentence-transformers CrossEncoder or transformers sequence classifier)")
    from .embed import _sentence_transformers

    CrossEncoder = _sentence_transformers("divopt_rag.data.rerank (cross-encoders)").CrossEncoder
    model = CrossEncoder(str(p), device=device, max_length=max_length, local_files_only=True)
    return CrossEncoderScorer(model, batch_size=batch_size, cache=cache, progress=progress, model_id=str(p.resolve()))
