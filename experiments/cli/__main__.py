"""``python -m divopt_rag.experiments.cli``: the ``divopt-rag`` command."""
import sys

from divopt_rag.experiments.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
