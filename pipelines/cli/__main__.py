# PYTHON_ARGCOMPLETE_OK  (argcomplete's marker: tab completion, see `goodput completion`)
"""``python -m pipelines.cli``: the ``goodput`` command."""

import sys

from pipelines.cli import main

sys.exit(main())
