"""divopt_rag.data: corpora loaders behind one entry point, embeddings with a cache, candidate
pools, synthetic generators and benchmark builders.

``load(spec)`` (:mod:`divopt_rag.data.registry`) returns an :class:`EmbeddedDataset` for every
registered dataset, keyed by the content it is made from (:func:`dataset_key`); every cache
file records a checksum that is verified before use (:mod:`divopt_rag.data.integrity`). Data flows one way: texts -> embeddings E, queries q, labels ->
divopt_rag.models. This package imports only third-party libraries (never divopt_rag.models/solvers).
"""
import importlib.metadata

from . import download
from .dataset import DataFormatError, Dataset
from .embed import (
    DEFAULT_MODEL_ID,
    embed,
    embed_dataset,
    embed_queries,
    load_model,
    model_fingerprint,
    model_revision,
)
from .embedding_cache import CACHE_ENV, EmbeddingCache, embedding_cache_dir
from .hashing import fingerprint, path_digest
from .integrity import CacheIntegrityError, CacheWarning
from .chunking import PAPER_CHUNK_WORDS, chunk_texts, chunk_words
from .embedded import EmbeddedDataset, unit_rows
from .loaders import load_beir, load_ir_datasets, load_mini_wikipedia, load_rgb, read_trec_qrels
from .npz_files import load_npz
from .longbench import INFINITEBENCH_QA_TASKS, LONGBENCH_QA_TASKS, load_infinitebench_qa, load_longbench
from .qa import load_asqa, load_passages, load_qampari
from .science_qa import load_arc_da, load_openbookqa, load_sciq
from .pools import BM25Index, CandidatePool, bm25_pool, ccbqp_pool, dense_pool, union_pool
from .registry import DATASETS, dataset_key, load, parse_spec, register_dataset
from .hashing import stable_hash
from .rerank import CrossEncoderScorer, cross_encoder_scorer, load_cross_encoder
from .synthetic import narrow_cone, narrow_cone_npy, synthetic_dataset, synthetic_pools, toy_corpus, toy_dataset
from .wordnet import DEFAULT_WORDS, find_wordnet_dir, load_wordnet, load_wordnet_glosses

try:  # the installed distribution's version (data imports no other divopt package, so it reads it too)
    __version__ = importlib.metadata.version("divopt-rag")
except importlib.metadata.PackageNotFoundError:  # sources on the path without an install
    __version__ = "0+unknown"

__all__ = [
    "__version__",
    "load",
    "DATASETS",
    "register_dataset",
    "parse_spec",
    "stable_hash",
    "dataset_key",
    "fingerprint",
    "path_digest",
    "model_fingerprint",
    "model_revision",
    "CacheIntegrityError",
    "CacheWarning",
    "EmbeddedDataset",
    "unit_rows",
    "download",
    "Dataset",
    "DataFormatError",
    "DEFAULT_MODEL_ID",
    "EmbeddingCache",
    "embedding_cache_dir",
    "CACHE_ENV",
    "embed",
    "embed_queries",
    "embed_dataset",
    "load_model",
    "CrossEncoderScorer",
    "cross_encoder_scorer",
    "load_cross_encoder",
    "load_beir",
    "load_mini_wikipedia",
    "load_rgb",
    "load_npz",
    "read_trec_qrels",
    "load_ir_datasets",
    "load_asqa",
    "load_qampari",
    "load_longbench",
    "load_infinitebench_qa",
    "INFINITEBENCH_QA_TASKS",
    "LONGBENCH_QA_TASKS",
    "load_arc_da",
    "load_openbookqa",
    "load_sciq",
    "load_passages",
    "chunk_words",
    "chunk_texts",
    "PAPER_CHUNK_WORDS",
    "BM25Index",
    "CandidatePool",
    "bm25_pool",
    "dense_pool",
    "union_pool",
    "ccbqp_pool",
    "narrow_cone",
    "narrow_cone_npy",
    "synthetic_dataset",
    "synthetic_pools",
    "toy_corpus",
    "toy_dataset",
    "DEFAULT_WORDS",
    "find_wordnet_dir",
    "load_wordnet",
    "load_wordnet_glosses",
]
