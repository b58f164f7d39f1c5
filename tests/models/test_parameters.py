"""One declaration per method, one validator (issue 38, item 1).

A throwaway selector declares one parameter of every kind (int range, float range, choice, bool,
array); every entry point a value can reach it through (``select``, the sweep's grid in the
library and on the command line, ``reproduce``'s settings and ``--set``, ``select_candidates``
and the LangChain, LlamaIndex and Haystack adapters) accepts the same values and refuses the
same values with the same one-line message, before the selector runs or a file is written.
The truth: the declaration's own words, written here by hand for each refusal.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from divopt_rag.experiments.cli import main as cli
from divopt_rag.experiments.methods import accepted_parameters, method_accepts, required_parameters, validate
from divopt_rag.experiments.reproduce.spec import ReproduceError, expand_settings
from divopt_rag.experiments.studies.grid import SweepConfig
from divopt_rag.experiments.studies.sweep import run_sweep
from divopt_rag.integrations.candidates import check_method_params, select_candidates
from divopt_rag.models import Instance
from divopt_rag.models.parameters import (ArrayLike, Declaration, InvalidParameterError, Interval, Options, Param,
                                          declare)
from divopt_rag.solvers import register, select
from divopt_rag.solvers.selection import METHOD_PARAMS, parameters, unregister

NAME = "_every_kind_test"
CALLS = {"n": 0}
TINY = {"name": "synthetic", "n": 30, "d": 6, "n_queries": 1}


def _every_kind(inst: Instance, *, count: int = 3, share: float = 0.5, rule: str = "relevance",
                reverse: bool = False, weights=None):
    """The k most relevant rows (or the first k by position), ``count`` only counted: a selector
    whose parameters are one of each kind."""
    CALLS["n"] += 1
    c = inst.relevance.double().cpu().numpy() * share
    if weights is not None:
        c = c + np.asarray(weights, dtype=np.float64)
    order = np.argsort(-c, kind="stable") if rule == "relevance" else np.arange(inst.n)
    idx = order[: inst.k]
    return (idx[::-1] if reverse else idx), count, {}


PARAMS = {"count": Interval(int, 1, 10), "share": Interval(float, 0.0, 1.0, closed="right"),
          "rule": Options({"relevance", "position"}), "reverse": bool, "weights": [ArrayLike(ndim=1), None]}

EXPECTED = {
    "count": "an int in the range [1, 10]",
    "share": "a float in the range (0, 1]",
    "rule": "a str among {'position', 'relevance'}",
    "reverse": "a bool",
    "weights": "an array-like with 1 dimension or None",
}
#: (parameter, value, how it is shown in the message); every value here is refused.
REFUSED = [
    ("count", 0, "0"), ("count", 11, "11"), ("count", 2.5, "2.5"), ("count", True, "True"), ("count", "3", "'3'"),
    ("count", None, "None"), ("count", 1e30, "1e+30"), ("share", 0, "0"), ("share", 1.5, "1.5"),
    ("share", math.nan, "nan"), ("share", math.inf, "inf"), ("share", "x", "'x'"), ("share", False, "False"),
    ("rule", "nosuch", "'nosuch'"), ("rule", 1, "1"), ("rule", None, "None"), ("reverse", 1, "1"),
    ("reverse", "true", "'true'"), ("reverse", None, "None"), ("weights", "abc", "'abc'"), ("weights", 3, "3"),
    ("weights", np.ones((2, 2)), "ndarray of shape (2, 2)"),
]
#: (parameter, value, what the selector receives); every value here is accepted.
ACCEPTED = [("count", 1, 1), ("count", 10, 10), ("count", 4.0, 4), ("count", np.int64(2), 2), ("share", 1, 1.0),
            ("share", 0.25, 0.25), ("rule", "position", "position"), ("reverse", True, True),
            ("reverse", np.bool_(False), False), ("weights", None, None)]


def message(param: str, shown: str) -> str:
    return f"The {param!r} parameter of {NAME} must be {EXPECTED[param]}. Got {shown} instead."


@pytest.fixture
def every_kind():
    register(NAME, params=PARAMS)(_every_kind)
    try:
        yield NAME
    finally:
        unregister(NAME)


def _instance(n: int = 12, k: int = 3) -> Instance:
    rng = np.random.default_rng(0)
    return Instance(rng.standard_normal((n, 5)), rng.standard_normal(5), k=k, theta=0.5, normalize=True)


def test_the_declaration_reads_defaults_from_the_signature(every_kind):
    decl = parameters(NAME)
    assert decl.defaults == {"count": 3, "share": 0.5, "rule": "relevance", "reverse": False, "weights": None}
    assert {p: decl.params[p].expected() for p in decl.params} == EXPECTED
    assert accepted_parameters(NAME) == frozenset(PARAMS) and required_parameters(NAME) == set()
    assert method_accepts(NAME, "share") and not method_accepts(NAME, "sigma")


@pytest.mark.parametrize("param,value,shown", REFUSED, ids=[f"{p}={s}" for p, _, s in REFUSED])
def test_select_and_the_adapters_refuse_with_one_message(every_kind, param, value, shown):
    inst = _instance()
    before = CALLS["n"]
    want = message(param, shown)
    for call in (lambda: select(inst, NAME, **{param: value}),
                 lambda: validate(NAME, {param: value}),
                 lambda: check_method_params(NAME, {param: value}),
                 lambda: select_candidates(np.ones(5), np.eye(12, 5) + 0.1, 3, 0.5, method=NAME, **{param: value})):
        with pytest.raises(InvalidParameterError) as info:
            call()
        assert str(info.value) == want
        assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)
    assert CALLS["n"] == before  # refused before the selector ran


@pytest.mark.parametrize("param,value,received", ACCEPTED, ids=[f"{p}={v!r}" for p, v, _ in ACCEPTED])
def test_select_and_the_adapters_accept_and_convert_the_same_values(every_kind, param, value, received):
    inst = _instance()
    assert validate(NAME, {param: value}) == {param: received}
    got = validate(NAME, {param: value})[param]
    assert type(got) is type(received)
    sel = select(inst, NAME, **{param: value})
    assert sel.indices.shape == (3,) and len(set(sel.indices.tolist())) == 3
    check_method_params(NAME, {param: value})
    assert len(select_candidates(np.ones(5), np.eye(12, 5) + 0.1, 3, 0.5, method=NAME, **{param: value}).indices) == 3


def test_an_array_parameter_reaches_the_selector(every_kind):
    inst = _instance()
    w = np.zeros(12)
    w[[7, 8, 9]] = 10.0  # weights that override relevance: the truth is rows 7, 8, 9
    assert sorted(select(inst, NAME, weights=w).indices.tolist()) == [7, 8, 9]
    assert sorted(select(inst, NAME, weights=w.tolist()).indices.tolist()) == [7, 8, 9]


def test_langchain_llamaindex_and_haystack_refuse_with_the_same_message(every_kind):
    want = message("count", "0")
    pytest.importorskip("langchain_core")
    from langchain_core.vectorstores import InMemoryVectorStore
    from pydantic import ValidationError

    from divopt_rag.integrations.langchain import DivoptRetriever
    from helpers.langchain_fakes import HashEmbedding

    with pytest.raises(ValidationError) as info:
        DivoptRetriever(vectorstore=InMemoryVectorStore(embedding=HashEmbedding()), method=NAME,
                        method_params={"count": 0})
    assert want in str(info.value)
    DivoptRetriever(vectorstore=InMemoryVectorStore(embedding=HashEmbedding()), method=NAME, method_params={"count": 2})
    pytest.importorskip("llama_index.core")
    from divopt_rag.integrations.llamaindex import DivoptPostprocessor

    with pytest.raises(ValidationError) as info:
        DivoptPostprocessor(method=NAME, method_params={"count": 0})
    assert want in str(info.value)
    DivoptPostprocessor(method=NAME, method_params={"count": 2})
    pytest.importorskip("haystack")
    from haystack_integrations.components.rankers.divopt.ranker import DivoptRanker

    with pytest.raises(InvalidParameterError) as info:
        DivoptRanker(method=NAME, method_params={"count": 0})
    assert str(info.value) == want
    DivoptRanker(method=NAME, method_params={"count": 2})


#: Values the command line can write (``--method-param NAME.P=TEXT``, read as a grid value).
CLI_REFUSED = [("count", "0", "0"), ("count", "2.5", "2.5"), ("count", "1e30", "1000000000000000000000000000000"), ("count", "true", "True"),
               ("share", "0", "0"), ("share", "abc", "'abc'"), ("rule", "nosuch", "'nosuch'"), ("rule", "none", "None"),
               ("reverse", "1", "1"), ("weights", "abc", "'abc'")]


@pytest.mark.parametrize("param,text,shown", CLI_REFUSED, ids=[f"{p}={t}" for p, t, _ in CLI_REFUSED])
def test_the_sweep_refuses_a_bad_grid_value_before_any_work(every_kind, tmp_path, capsys, param, text, shown):
    from divopt_rag.experiments.cli.flag_types import parse_value

    want = message(param, shown)
    before = CALLS["n"]
    cfg = SweepConfig.from_dict({"dataset": TINY, "methods": {NAME: {param: [parse_value(text)]}},
                                 "grid": {"k": [3], "theta": [0.5]}})
    with pytest.raises(ValueError) as info:
        run_sweep(cfg, tmp_path / "lib", n_workers=0, progress=False)
    assert str(info.value) == want
    rc = cli.main(["sweep", "--out", str(tmp_path / "cli"), "--dataset", "synthetic", "--dataset-opt", "n=30",
                   "--dataset-opt", "d=6", "--dataset-opt", "n_queries=1", "--methods", NAME, "--k", "3",
                   "--theta", "0.5", "--method-param", f"{NAME}.{param}={text}", "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err == [f"divopt-rag sweep: --param/--method-param: {want}"]
    # the same value as a common grid axis (--param) is the same refusal
    rc = cli.main(["sweep", "--out", str(tmp_path / "cli"), "--dataset", "synthetic", "--dataset-opt", "n=30",
                   "--methods", NAME, "--k", "3", "--param", f"{param}={text}", "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err == [f"divopt-rag sweep: --param/--method-param: {want}"]
    assert not (tmp_path / "lib").exists() and not (tmp_path / "cli").exists() and CALLS["n"] == before


@pytest.mark.parametrize("param,value,shown", [r for r in REFUSED if r[0] != "weights"],
                         ids=[f"{p}={s}" for p, _, s in REFUSED if p != "weights"])
def test_reproduce_settings_and_set_refuse_with_the_same_message(every_kind, param, value, shown):
    """``reproduce``'s settings (a recipe's method grid, and ``--set`` replacing an axis) go
    through the same validator; the recipe names the method in front."""
    want = f"method {NAME!r}: {message(param, shown)}"
    good = {"count": 2, "share": 1.0, "rule": "position", "reverse": False}[param]
    for methods, overrides in (({NAME: {param: [value]}}, {}), ({NAME: {param: [good]}}, {param: [value]})):
        with pytest.raises(ReproduceError) as info:
            expand_settings(methods, {"k": [3]}, overrides)
        assert str(info.value) == want
    assert expand_settings({NAME: {param: [good]}}, {"k": [3]}, {}) == [(NAME, {"k": 3, param: good})]


def test_a_sweep_runs_the_accepted_values(every_kind, tmp_path):
    cfg = SweepConfig.from_dict({"dataset": TINY, "methods": {NAME: {"count": [2, 4.0], "share": [1], "rule": ["position"],
                                                                     "reverse": [True]}},
                                 "grid": {"k": [3], "theta": [0.5]}})
    t = run_sweep(cfg, tmp_path, n_workers=0, progress=False).table
    assert (t["status"] == "ok").all() and sorted(t["iterations"]) == [2, 4]
    assert all(list(s) == ["q0-d2", "q0-d1", "q0-d0"] for s in t["selected"])  # rule=position, reversed


def test_the_issue_probe_is_refused_before_any_work(tmp_path, capsys):
    """issue 38: ``tabu_tenure_in=2.5`` passed the sweep's check and every run became an error row (the
    tenures are constants since issue 46: a count knob stands in)."""
    out = tmp_path / "T"
    rc = cli.main(["sweep", "--out", str(out), "--dataset", "synthetic", "--dataset-opt", "n=300", "--dataset-opt",
                   "n_queries=1", "--methods", "fw_ws_ms", "--method-param", "fw_ws_ms.tabu_walks=2.5", "--theta",
                   "0.5", "--k", "5"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err == ["divopt-rag sweep: --param/--method-param: The 'tabu_walks' parameter of fw_ws_ms "
                               "must be an int in the range [1, 1000]. Got 2.5 instead."]
    assert not out.exists()


@pytest.mark.parametrize("model,given,missing", [
    ("robust_l2", {"rho_vec": [0.1], "sparsity_penalty": [0.1]}, "rho_div"),
    ("nominal_sparsity", {"rho_div": [0.5]}, "sparsity_penalty"),
    ("robust_ksparse", {"rho_vec": [0.1], "sparsity_penalty": [0.1], "rho_div": [0.5]}, "attack_budget"),
])
def test_a_robust_model_without_a_required_parameter_is_refused_before_any_work(tmp_path, capsys, model, given, missing):
    args = [a for p, v in given.items() for a in ("--param", f"{p}={v[0]}")]
    rc = cli.main(["sweep", "--out", str(tmp_path / "s"), "--dataset", "synthetic", "--dataset-opt", "n=30",
                   "--methods", model, "--k", "3", *args])
    err = capsys.readouterr().err.strip().splitlines()
    kind = "an int in the range [0, 2147483647]" if missing == "attack_budget" else (
        "a float in the range [0, inf)" if missing == "sparsity_penalty" else "a float in the range (-inf, inf)")
    assert rc == 2 and err == [f"divopt-rag sweep: --param/--method-param: The {missing!r} parameter of {model} is "
                               f"required: it must be {kind}. Got none."]
    assert not (tmp_path / "s").exists()


def test_counts_are_declared_by_meaning():
    """issue 39: negative counts passed (``fw_ms`` n_random=-1, continuation_steps, perturb_rounds);
    fw_ws_ms's n_random may also be None (its rule in k)."""
    inst = _instance(40, 4)
    for method, names in (("fw_ms", ("n_random", "continuation_steps", "perturb_rounds")),
                          ("fw_ws_ms", ("n_random", "perturb_rounds"))):  # the default's path is a constant
        for name in names:
            with pytest.raises(InvalidParameterError, match=rf"^The '{name}' parameter of {method} must be an int in "
                                                            rf"the range \[0, \d+\]( or None)?\. Got -1 instead\.$"):
                select(inst, method, **{name: -1})
            assert METHOD_PARAMS[method].validate({name: 0}) == {name: 0}  # 0 switches the stage off


def test_every_builtin_parameter_is_declared_with_a_constraint():
    """No built-in method leaves a parameter to "any value" (that is for plugins without a
    declaration), and every default meets its own declaration (checked at registration)."""
    from divopt_rag.experiments.methods import available_methods, method_parameters, resolve_method
    from divopt_rag.models.parameters import AnyValue

    builtin = [m for m in available_methods() if resolve_method(m)[1].__module__.startswith("divopt_rag.")]
    assert {"fw", "fw_ws_ms", "robust_ksparse_cp", "exact", "full_scale"} <= set(builtin)
    for m in builtin:
        for name, p in method_parameters(m).params.items():
            assert not any(isinstance(c, AnyValue) for c in p.constraints), (m, name)


def test_declare_refuses_a_declaration_that_disagrees_with_the_function():
    def fn(inst, *, a: int = 1, b: float = 0.5):
        return None

    with pytest.raises(TypeError, match="parameter 'b' of fn is not declared"):
        declare("x", fn, {"a": Interval(int, 0, 3)})
    with pytest.raises(TypeError, match="declared parameter 'c' is not a parameter of fn"):
        declare("x", fn, {"a": Interval(int, 0, 3), "b": Interval(float), "c": bool})
    with pytest.raises(TypeError, match=r"the default 1 of parameter 'a' is refused by its own declaration"):
        declare("x", fn, {"a": Interval(int, 2, 3), "b": Interval(float)})
    plugin = declare("x", fn)  # a plugin without a declaration: its names, any value
    assert plugin.accepted == {"a", "b"} and plugin.validate({"a": "anything"}) == {"a": "anything"}
    with pytest.raises(InvalidParameterError, match=r"^x has no parameter 'aa' \(did you mean 'a'\?\)"):
        plugin.validate({"aa": 1})
    assert Declaration("y", {"r": Param.of(Interval(float))}).required == {"r"}
