"""Each method's parameters, declared once, and the one validator every entry point calls.

In the manner of scikit-learn's ``_parameter_constraints`` / ``validate_params``: where a method
is registered (:func:`divopt_rag.solvers.register`, the robust models' table, the experiment
methods of :mod:`divopt_rag.experiments.methods`, the knobs of the default's config dataclass),
each parameter gets its constraints, e.g. ::

    @register("fw", params={"max_iter": Interval(int, 1, 10**6), "tol": [Interval(float, 0, None), None],
                            "init": [Options({"topk", "uniform", "random"}), ArrayLike(ndim=1)], ...})

and :meth:`Declaration.validate` checks a call's keyword parameters against them, before any
work, for ``select``, sweep, certify, bench, reproduce and every RAG adapter alike. Its message is
one line naming the method, the parameter, what was expected and what was received::

    The 'max_iter' parameter of fw must be an int in the range [1, 1000000]. Got -1 instead.

The default of each parameter is written once too: in the method's signature (or the config
dataclass's field), from which :func:`declare` reads it; :func:`declare` refuses a signature
parameter without constraints, a constraint without a parameter, and a default its own
constraints refuse, so the declaration and the function cannot drift apart.

Every size is bounded in its declaration (the upper ends are :mod:`divopt_rag.models.domains`'):
a count's interval has an upper end (a value past it would allocate or loop without end, e.g. a
billion random starts) or is clipped to the pool by its method, so no value the validator passes
can start unbounded work.

Value rules, the same at every entry point: an int parameter takes an int or an integral real
(``1e6`` as written on a command line or in a JSON file) and receives the int; a real parameter
takes an int or a finite real; a bool is neither an int nor a real, and a bool parameter takes
only True or False.
"""
from __future__ import annotations

import dataclasses
import difflib
import inspect
import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from .domains import SEED_MAX

__all__ = [
    "Constraint",
    "Interval",
    "Options",
    "Boolean",
    "Text",
    "ArrayLike",
    "Sequence",
    "IsCallable",
    "AnyValue",
    "Param",
    "Declaration",
    "InvalidParameterError",
    "REQUIRED",
    "declare",
    "declare_dataclass",
    "SEED",
]



class InvalidParameterError(ValueError, TypeError):
    """A parameter a method does not take, a value its declaration refuses, or a required one
    missing. A ValueError and a TypeError (as scikit-learn's), so callers catching either work."""


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: The default of a parameter that has none (the caller must give it).
REQUIRED: Any = _Required()
_MISMATCH = object()


class Constraint:
    """One kind of value a parameter takes: :meth:`convert` returns the value as the method
    receives it, or ``_MISMATCH``; ``str()`` says what it takes, in words."""

    def convert(self, value: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def __str__(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self})"


def _num(v: float) -> str:
    if v == math.inf:
        return "inf"
    if v == -math.inf:
        return "-inf"
    return f"{v:g}" if isinstance(v, float) and not float(v).is_integer() else str(int(v))


class Interval(Constraint):
    """An int or a real in [low, high] (None: unbounded; ``closed``: "both", "left", "right" or
    "neither", which ends are allowed values), as scikit-learn's ``Interval``."""

    def __init__(self, kind: type, low: float | None = None, high: float | None = None, *, closed: str = "both"):
        if kind not in (int, float):
            raise TypeError(f"Interval kind must be int or float, got {kind!r}")
        if closed not in ("both", "left", "right", "neither"):
            raise ValueError(f"closed must be 'both', 'left', 'right' or 'neither', got {closed!r}")
        self.kind, self.low, self.high, self.closed = kind, low, high, closed

    def convert(self, value: Any) -> Any:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.integer, np.floating)):
            return _MISMATCH
        if self.kind is int:
            if isinstance(value, (numbers.Integral, np.integer)):
                v: Any = int(value)
            else:
                f = float(value)
                if not math.isfinite(f) or not f.is_integer():
                    return _MISMATCH
                v = int(f)
        else:
            v = float(value)
            if not math.isfinite(v):
                return _MISMATCH
        lo_ok = self.closed in ("both", "left")
        hi_ok = self.closed in ("both", "right")
        if self.low is not None and (v < self.low or (v == self.low and not lo_ok)):
            return _MISMATCH
        if self.high is not None and (v > self.high or (v == self.high and not hi_ok)):
            return _MISMATCH
        return v

    def __str__(self) -> str:
        lo = "-inf" if self.low is None else _num(self.low)
        hi = "inf" if self.high is None else _num(self.high)
        left = "[" if self.closed in ("both", "left") and self.low is not None else "("
        right = "]" if self.closed in ("both", "right") and self.high is not None else ")"
        return f"{'an int' if self.kind is int else 'a float'} in the range {left}{lo}, {hi}{right}"


class Options(Constraint):
    """One of a few strings (scikit-learn's ``StrOptions``)."""

    def __init__(self, options: Iterable[str]):
        self.options = tuple(sorted(options))

    def convert(self, value: Any) -> Any:
        return value if isinstance(value, str) and value in self.options else _MISMATCH

    def __str__(self) -> str:
        return "a str among {" + ", ".join(repr(o) for o in self.options) + "}"


class Boolean(Constraint):
    """True or False (numpy's bools too); never 0 or 1."""

    def convert(self, value: Any) -> Any:
        return bool(value) if isinstance(value, (bool, np.bool_)) else _MISMATCH

    def __str__(self) -> str:
        return "a bool"


class _NoneValue(Constraint):
    def convert(self, value: Any) -> Any:
        return None if value is None else _MISMATCH

    def __str__(self) -> str:
        return "None"


class Text(Constraint):
    """Any string (a query text, a passage id); ``max_length`` bounds it."""

    def __init__(self, max_length: int | None = None):
        self.max_length = max_length

    def convert(self, value: Any) -> Any:
        if not isinstance(value, str) or (self.max_length is not None and len(value) > self.max_length):
            return _MISMATCH
        return value

    def __str__(self) -> str:
        return "a str" + (f" of at most {self.max_length} characters" if self.max_length is not None else "")


def _array_shape(value: Any) -> tuple[int, ...] | None:
    """The shape of an array-like of numbers (numpy, torch, nested lists/tuples), else None."""
    if isinstance(value, (str, bytes, Mapping)) or value is None:
        return None
    if hasattr(value, "shape") and hasattr(value, "dtype"):  # numpy arrays, torch tensors
        kind = str(value.dtype)
        if not any(w in kind for w in ("float", "int", "bool", "complex")) or "complex" in kind:
            return None
        return tuple(int(s) for s in value.shape)
    if isinstance(value, (list, tuple)):
        try:
            arr = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            return None
        return tuple(arr.shape)
    return None


class ArrayLike(Constraint):
    """An array of numbers (numpy, torch or nested lists); ``ndim`` and ``shape`` (None entries
    free) constrain it. Sizes that depend on the instance (length n) are the method's to check."""

    def __init__(self, ndim: int | None = None, shape: tuple[int | None, ...] | None = None):
        self.ndim = len(shape) if shape is not None else ndim
        self.shape = shape

    def convert(self, value: Any) -> Any:
        shape = _array_shape(value)
        if shape is None or (self.ndim is not None and len(shape) != self.ndim):
            return _MISMATCH
        if self.shape is not None and any(w is not None and w != s for w, s in zip(self.shape, shape)):
            return _MISMATCH
        return value

    def __str__(self) -> str:
        if self.shape is not None:
            return "an array-like of shape (" + ", ".join("n" if s is None else str(s) for s in self.shape) + \
                ("," if len(self.shape) == 1 else "") + ")"
        return "an array-like" + (f" with {self.ndim} dimension{'s' * (self.ndim != 1)}" if self.ndim else "")


class Sequence(Constraint):
    """A list or tuple (``arrays``: also a 1-D numpy array) of ``item`` values (None: any), at
    most ``max_items`` (None: any number) of them; e.g. selector names, whose existence is the
    method's to check (they may be registered later), or the n passages of a pool."""

    def __init__(self, what: str, item: type | None = str, max_items: int | None = None, arrays: bool = False):
        self.what, self.item, self.max_items, self.arrays = what, item, max_items, arrays

    def convert(self, value: Any) -> Any:
        ok = isinstance(value, (list, tuple)) or (self.arrays and isinstance(value, np.ndarray) and value.ndim == 1)
        if not ok or (self.max_items is not None and len(value) > self.max_items):
            return _MISMATCH
        if self.item is not None and not all(isinstance(v, self.item) for v in value):
            return _MISMATCH
        return tuple(value) if isinstance(value, list) and self.item is str else value

    def __str__(self) -> str:
        return f"a list of {'at most ' + str(self.max_items) + ' ' if self.max_items is not None else ''}{self.what}"


class IsCallable(Constraint):
    """A callable (a model, a scoring function)."""

    def __init__(self, what: str = "a callable"):
        self.what = what

    def convert(self, value: Any) -> Any:
        return value if callable(value) else _MISMATCH

    def __str__(self) -> str:
        return self.what


class AnyValue(Constraint):
    """Anything: the parameters of a plugin method registered without a declaration."""

    def convert(self, value: Any) -> Any:
        return value

    def __str__(self) -> str:
        return "any value"


#: A seed: the range every generator takes (numpy, torch, Python), as the command line's --seed.
SEED = Interval(int, 0, SEED_MAX)


def _constraint(c: Any) -> Constraint:
    if c is None:
        return _NoneValue()
    if isinstance(c, Constraint):
        return c
    if c is bool:
        return Boolean()
    if c is str:
        return Text()
    if isinstance(c, (set, frozenset)):
        return Options(c)
    raise TypeError(f"a parameter constraint is a Constraint, None, bool, str or a set of strings, got {c!r}")


@dataclass(frozen=True)
class Param:
    """A parameter's constraints (a value must meet one) and its default (:data:`REQUIRED`: none)."""

    constraints: tuple[Constraint, ...]
    default: Any = REQUIRED

    @classmethod
    def of(cls, spec: Any, default: Any = REQUIRED) -> "Param":
        """A Param from a constraint, a list or tuple of them (``None`` among them: None allowed),
        or a Param (whose own default wins over ``default``)."""
        if isinstance(spec, Param):
            return spec if spec.default is not REQUIRED or default is REQUIRED else dataclasses.replace(spec, default=default)
        items = spec if isinstance(spec, (list, tuple)) else [spec]
        return cls(tuple(_constraint(c) for c in items), default)

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def expected(self) -> str:
        """What the parameter takes, in words: "an int in the range [1, inf) or None"."""
        words = [str(c) for c in self.constraints]
        return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]

    def accepts(self, value: Any) -> bool:
        """Whether one of the constraints takes ``value``."""
        return self.convert(value) is not _MISMATCH

    def convert(self, value: Any) -> Any:
        """The value as the method receives it, or ``_MISMATCH``."""
        for c in self.constraints:
            v = c.convert(value)
            if v is not _MISMATCH:
                return v
        return _MISMATCH


def shown(value: Any) -> str:
    """A received value in a message: its repr, or its kind and shape for an array."""
    if isinstance(value, (bool, np.bool_, numbers.Number, str, type(None))):
        text = repr(value.item() if hasattr(value, "item") else value)
    elif hasattr(value, "shape"):
        text = f"{type(value).__name__} of shape {tuple(value.shape)}"
    elif isinstance(value, (list, tuple)) and len(value) > 8:
        text = f"{type(value).__name__} of length {len(value)}"
    else:
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass(frozen=True)
class Declaration:
    """The parameters of one method (``owner``: its name in messages), in order; ``open``: it
    also takes names not declared here (a plugin's ``**kwargs``), unchecked."""

    owner: str
    params: Mapping[str, Param] = field(default_factory=dict)
    open: bool = False
    retired: Mapping[str, str] = field(default_factory=dict)  # a former parameter -> what it became

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    @property
    def accepted(self) -> frozenset[str]:
        return frozenset(self.params)

    @property
    def required(self) -> frozenset[str]:
        return frozenset(n for n, p in self.params.items() if p.required)

    @property
    def defaults(self) -> dict[str, Any]:
        return {n: p.default for n, p in self.params.items() if not p.required}

    def accepts(self, name: str) -> bool:
        return self.open or name in self.params

    def unknown_message(self, name: str) -> str:
        valid = sorted(self.params)
        close = difflib.get_close_matches(name, valid, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        if name in self.retired:
            hint = f" (no longer a parameter: {self.retired[name]})"
        return f"{self.owner} has no parameter {name!r}{hint}; its parameters: {valid}"

    def check_value(self, name: str, value: Any) -> Any:
        """One parameter's value, converted (an int for an integral real where an int is
        declared, ...); :class:`InvalidParameterError` in one line otherwise."""
        p = self.params.get(name)
        if p is None:
            if self.open:
                return value
            raise InvalidParameterError(self.unknown_message(name))
        v = p.convert(value)
        if v is _MISMATCH:
            raise InvalidParameterError(f"The {name!r} parameter of {self.owner} must be {p.expected()}. "
                                        f"Got {shown(value)} instead.")
        return v

    def validate(self, given: Mapping[str, Any], *, complete: bool = True) -> dict[str, Any]:
        """``given`` checked and converted, before any work: an unknown name, a value the
        declaration refuses and (``complete``) a required parameter left out are each an
        :class:`InvalidParameterError` of one line. Returns the given parameters only (the
        method's defaults stay the method's)."""
        if not isinstance(given, Mapping):
            raise InvalidParameterError(f"the parameters of {self.owner} must be a mapping of names to values, "
                                        f"got {type(given).__name__}")
        out = {name: self.check_value(name, value) for name, value in given.items()}
        if complete:
            self.check_required(given)
        return out

    def check_required(self, given: Iterable[str]) -> None:
        """:class:`InvalidParameterError` naming the first required parameter not in ``given``."""
        given = set(given)
        for name, p in self.params.items():
            if p.required and name not in given:
                raise InvalidParameterError(f"The {name!r} parameter of {self.owner} is required: it must be "
                                            f"{p.expected()}. Got none.")


def _check_default(owner: str, name: str, p: Param) -> None:
    if not p.required and p.convert(p.default) is _MISMATCH:
        raise TypeError(f"{owner}: the default {p.default!r} of parameter {name!r} is refused by its own "
                        f"declaration ({p.expected()})")


def declare(owner: str, fn: Callable | None, spec: Mapping[str, Any] | None = None, *,
            base: Declaration | None = None) -> Declaration:
    """The declaration of ``fn(instance, **params)``: ``spec`` maps each keyword parameter to
    its constraints (a :class:`Constraint`, a list of them, ``None`` for None, or a
    :class:`Param`); defaults are read from the signature (a parameter without one is required),
    or from ``base`` (the declaration of a method ``fn`` forwards ``**params`` to) and the
    spec's Params for names only ``**params`` takes.

    Without ``spec`` (a plugin that declares nothing): every keyword parameter takes any value,
    and a ``**kwargs`` signature any name. TypeError when the spec and the signature disagree.
    """
    sig_params: list[inspect.Parameter] = []
    var_kw = False
    if fn is not None:
        try:
            ps = list(inspect.signature(fn).parameters.values())[1:]
        except (TypeError, ValueError):
            ps = []
            var_kw = True
        kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        sig_params = [p for p in ps if p.kind in kinds]
        var_kw = var_kw or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in ps)
    params: dict[str, Param] = dict(base.params) if base is not None else {}
    if spec is None:
        for p in sig_params:
            params[p.name] = Param((AnyValue(),), REQUIRED if p.default is p.empty else p.default)
        return Declaration(owner, params, open=var_kw and base is None)
    names = {p.name for p in sig_params}
    undeclared = sorted(names - set(spec) - set(params))
    if undeclared:
        raise TypeError(f"{owner}: parameter {undeclared[0]!r} of {getattr(fn, '__name__', fn)} is not declared "
                        f"(give its constraints in params=)")
    extra = sorted(set(spec) - names)
    if extra and not var_kw:
        raise TypeError(f"{owner}: declared parameter {extra[0]!r} is not a parameter of {getattr(fn, '__name__', fn)}")
    for p in sig_params:
        if p.name in spec:
            params[p.name] = Param.of(spec[p.name], REQUIRED if p.default is p.empty else p.default)
    for name in extra:
        params[name] = Param.of(spec[name], base.params[name].default if base is not None and name in base.params
                                else REQUIRED)
    for name, p in params.items():
        _check_default(owner, name, p)
    return Declaration(owner, params)


def declare_dataclass(owner: str, cls: type) -> Declaration:
    """The declaration of a config dataclass whose fields are a method's parameters: the
    constraints in its ``_parameter_constraints`` (field name -> constraints, as scikit-learn's
    estimators), the defaults its fields', and the former parameters its optional
    ``_retired_knobs`` names (name -> what it became, said by the error that refuses it).
    TypeError for a field without constraints."""
    constraints = getattr(cls, "_parameter_constraints", None)
    if not isinstance(constraints, Mapping):
        raise TypeError(f"{cls.__name__} has no _parameter_constraints mapping")
    params: dict[str, Param] = {}
    names = [f.name for f in dataclasses.fields(cls)]
    for f in dataclasses.fields(cls):
        if f.name not in constraints:
            raise TypeError(f"{owner}: knob {f.name!r} of {cls.__name__} has no entry in _parameter_constraints")
        default = f.default if f.default is not dataclasses.MISSING else REQUIRED
        params[f.name] = Param.of(constraints[f.name], default)
        _check_default(owner, f.name, params[f.name])
    extra = sorted(set(constraints) - set(names))
    if extra:
        raise TypeError(f"{owner}: _parameter_constraints names {extra[0]!r}, which is not a field of {cls.__name__}")
    retired = dict(getattr(cls, "_retired_knobs", {}))
    return Declaration(owner, params, retired={n: why for n, why in retired.items() if n not in params})
