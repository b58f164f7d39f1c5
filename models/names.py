"""The "did you mean" of every unknown name (a method, a solver, a recipe, a flag's choice):
standard library only, so the command line's checks use it without loading numpy or torch.
The data package, which imports no other divopt package, words its own the same way."""
from __future__ import annotations

import difflib
from typing import Iterable

__all__ = ["did_you_mean"]


def did_you_mean(name: object, valid: Iterable[str]) -> str:
    """``"did you mean 'mmr'? "`` for the closest of ``valid`` to ``name`` (difflib's ratio
    >= 0.6), else ``""``: written between "unknown X 'name';" and "expected one of ..."."""
    close = difflib.get_close_matches(str(name), [str(v) for v in valid], n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}? " if close else ""
