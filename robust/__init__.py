"""divopt_rag.robust: uncertainty sets, worst-case oracles, robust counterparts, cutting planes.

* :mod:`~divopt_rag.robust.sets`: l1 / l2 / linf balls and the k-sparse polyhedral set (with
  protected coordinates) on document embeddings;
* :mod:`~divopt_rag.robust.relevance`: worst-case relevance, the report's cosine by default (exact
  for the l2 ball, sound bounds otherwise) or the inner product (exact: dual norms / top-K of |q|);
* :mod:`~divopt_rag.robust.oracles`: sound worst-case bounds on pairwise (inner-product or cosine)
  similarity (the relevance oracle is :mod:`~divopt_rag.robust.relevance`);
* :mod:`~divopt_rag.robust.models`: Pyomo builders of the robust sparsity-penalty model (compact
  MILPs; LP-dual form of the budgeted set; the cutting-plane master);
* :mod:`~divopt_rag.robust.cutting_planes`: scenario generation for the k-sparse set, with a log;
* :mod:`~divopt_rag.robust.records`: sweep-ready record functions and :data:`ROBUST_MODELS`.
"""
from divopt_rag.models import __version__
from .cutting_planes import CuttingPlaneOptions, CuttingPlaneResult, cutting_plane_ksparse
from .models import (
    RobustModelInfo,
    add_scenario_cut,
    build_ksparse_lpdual_model,
    build_ksparse_master_model,
    build_nominal_model,
    build_robust_model,
    build_robust_norm_model,
    robust_value,
)
from .relevance import QUERY_SIMILARITIES, WorstCaseRelevance, worst_case_relevance
from .oracles import average_similarity, similarity_upper_bounds, worst_case_average_similarity
from .records import MODEL_PARAMETERS, ROBUST_MODELS, evaluate_selection
from .sets import KSparse, NormBall, make_set, protect_top

__all__ = [
    "__version__",
    "NormBall", "KSparse", "make_set", "protect_top",
    "QUERY_SIMILARITIES", "WorstCaseRelevance", "worst_case_relevance", "similarity_upper_bounds",
    "worst_case_average_similarity", "average_similarity",
    "build_robust_model", "build_robust_norm_model", "build_nominal_model", "build_ksparse_lpdual_model",
    "build_ksparse_master_model", "add_scenario_cut", "robust_value", "RobustModelInfo",
    "CuttingPlaneOptions", "CuttingPlaneResult", "cutting_plane_ksparse",
    "ROBUST_MODELS", "MODEL_PARAMETERS", "evaluate_selection",
]
