"""Haystack adapter: ``DivoptRanker``, a ranker component (``pip install "divopt-rag[haystack]"``).

The component is defined in ``haystack_integrations.components.rankers.divopt`` (Haystack's home
for integrations, which its pipeline loader trusts); this package hands on the same class under
divopt's namespace (a package's API, as its ``__init__`` may). See that module's documentation.
"""
from divopt_rag.models.extras import require

require("haystack", "divopt_rag.integrations.haystack")  # one line naming the extra when missing
from haystack_integrations.components.rankers.divopt.ranker import DivoptRanker  # noqa: E402

__all__ = ["DivoptRanker"]
