"""divopt-rag's Haystack ranker, where Haystack's integrations live (``haystack_integrations``).

Haystack loads pipelines only from trusted modules, ``haystack_integrations`` among them, so a
pipeline that holds a :class:`DivoptRanker` round-trips with ``Pipeline.loads(pipe.dumps())`` and
no ``allowed_modules``. ``divopt_rag.integrations.haystack`` is the same class.
"""
from .ranker import DivoptRanker

__all__ = ["DivoptRanker"]
