"""Word chunking of long contexts into passages (the DF-RAG paper's protocol).

DF-RAG (Khan et al., Findings of EACL 2026) retrieves from the context of each LongBench
sample cut into chunks of w words, w in {100, 200, 300}. Its public script (``run_dfrag.py``,
``chunked_by_word``) splits the context on whitespace and joins windows of ``w`` words with
single spaces, starting a new window every ``w - overlap`` words (overlap 0 in the paper):

    words = text.split();  chunk_j = " ".join(words[j*s : j*s + w]),  s = w - overlap,
    j = 0, 1, ... while j*s < len(words).

With an overlap the last windows are shorter suffixes of earlier ones (the script's
behaviour, kept so that w/overlap grids match it). Whitespace inside a chunk is therefore
normalized to single spaces; an empty or all-whitespace text has no chunks.
"""
from __future__ import annotations

from typing import Iterable

__all__ = ["PAPER_CHUNK_WORDS", "chunk_words", "chunk_texts"]

#: The chunk sizes (words) of DF-RAG's experiments.
PAPER_CHUNK_WORDS = (100, 200, 300)


def _check_sizes(words: int, overlap: int) -> tuple[int, int]:
    if isinstance(words, bool) or not isinstance(words, int) or words < 1:
        raise ValueError(f"words must be an integer >= 1 (words per chunk), got {words!r}")
    if isinstance(overlap, bool) or not isinstance(overlap, int) or not 0 <= overlap < words:
        raise ValueError(f"overlap must be an integer in [0, words) = [0, {words}), got {overlap!r}")
    return words, overlap


def chunk_words(text: str, words: int = 100, overlap: int = 0) -> list[str]:
    """Chunks of ``words`` whitespace-separated words, a new chunk every ``words - overlap``
    words (see module docstring)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    w, o = _check_sizes(words, overlap)
    tokens = text.split()
    step = w - o
    return [" ".join(tokens[i : i + w]) for i in range(0, len(tokens), step)]


def chunk_texts(texts: Iterable[str], words: int = 100, overlap: int = 0) -> list[tuple[int, int, str]]:
    """Chunk many texts: one ``(text_index, chunk_index, chunk)`` triple per chunk, in order."""
    _check_sizes(words, overlap)
    return [(i, j, c) for i, t in enumerate(texts) for j, c in enumerate(chunk_words(t, words, overlap))]
