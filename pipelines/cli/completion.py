"""``goodput completion`` and the tab completers of options whose values come from the
warehouse or the format registry."""

from __future__ import annotations

import sys

from pipelines.cli.options import command
from pipelines.cli.options import option

COMPLETION_SHELLS = ("bash", "zsh", "fish")


def cmd_completion(args) -> int:
    """argcomplete's script for the shell: it calls ``goodput`` back to complete commands,
    options, choices and paths from this parser, so it never goes stale."""
    import argcomplete

    sys.stdout.write(argcomplete.shellcode(["goodput"], shell=args.shell))
    return 0


def _complete_formats(**_) -> list[str]:
    from ingest.registry import formats

    return ["auto", *sorted(formats())]


def _complete_from_warehouse(column: str):
    """A tab completer: the values of ``job_attempts.<column>`` in the warehouse of the command
    line's --home (nothing when there is none)."""

    def complete(parsed_args=None, **_) -> list[str]:
        from warehouse.store import Warehouse

        try:
            wh = Warehouse(
                getattr(parsed_args, "home", None),
                getattr(parsed_args, "warehouse_uri", None),
                read_only=True,
            )
            if not wh.home.is_dir():
                return []
            # one table's view, not the reader's every view: a completion answers in a blink
            with wh.connect() as con:
                rows = con.execute(
                    f"SELECT DISTINCT {column} FROM ({wh.view_sql('job_attempts')}) "
                    f"WHERE {column} IS NOT NULL ORDER BY 1"
                ).fetchall()
            return [str(v) for (v,) in rows]
        except Exception:  # noqa: BLE001 - a completion never fails the shell
            return []

    return complete


# options completed from the warehouse or the format registry, by their destination
COMPLETERS = {
    "scope_cluster": _complete_from_warehouse("cluster"),
    "cluster": _complete_from_warehouse("cluster"),
    "scope_partition": _complete_from_warehouse("partition"),
    "scope_account": _complete_from_warehouse("account"),
    "scope_user": _complete_from_warehouse('"user"'),
    "format": _complete_formats,
}


def add_completion(sub) -> None:
    command(
        sub,
        cmd_completion,
        option("shell", choices=COMPLETION_SHELLS, help="the shell to complete in"),
        home=False,
        examples=('eval "$(goodput completion bash)"    # in ~/.bashrc',),
        help="print the shell's tab-completion script: "
        'eval "$(goodput completion bash)" in ~/.bashrc (zsh, fish alike)',
    )
