# PYTHON_ARGCOMPLETE_OK  (argcomplete's marker: tab completion, see `goodput completion`)
"""The ``goodput`` command line (docs/cli.md).

Every command takes ``--home`` and ``--warehouse-uri``. A user's mistake (missing path, unknown
format, bad duration, bad SQL, unreachable bucket) is one line on stderr and exit status 2, never
a traceback.

One module per command or group of related commands declares each command's sub-parser
(``add_<command>``) next to its handler (``cmd_<command>``); ``parser.build_parser`` assembles
them, ``entry.main`` runs one. Heavy libraries are imported inside the handlers, so a quick
command starts without them.
"""

from pipelines.cli.entry import main
from pipelines.cli.parser import build_parser

__all__ = ["build_parser", "main"]
