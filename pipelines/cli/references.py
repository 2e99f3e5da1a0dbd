"""``goodput references``: this fleet beside published fleets (Llama 3, Meta's RSC clusters,
ByteRobust, StepFun, Titan, LANL, and a site's own targets in HOME/references.toml)."""

from __future__ import annotations

from pipelines.cli.errors import CliError
from pipelines.cli.home import reading_warehouse
from pipelines.cli.options import command
from pipelines.cli.options import gpus_per_node
from pipelines.cli.output import output_format
from pipelines.cli.output import print_frame
from pipelines.cli.output import print_rows


def cmd_references(args) -> int:
    from analysis.reference_comparison import HEADER
    from analysis.reference_comparison import cells
    from analysis.reference_comparison import compare
    from analysis.reference_comparison import headline
    from analysis.reference_comparison import missing_reasons

    wh = reading_warehouse(args)
    try:
        rows = compare(wh, wh.home, args.gpus_per_node)
    except ValueError as exc:  # a site's references.toml that does not parse
        raise CliError(str(exc)) from None
    line = headline(rows)
    fmt = output_format(args)
    meta = {"headline": None if line is None else line.text}
    if fmt != "table":
        print_frame(rows, fmt, meta=meta)
        return 0
    if line is not None:
        print(f"{line.text[0].upper()}{line.text[1:]}.")
    print_rows([tuple(HEADER), *(tuple(cells(r)) for r in rows.iter_rows(named=True))])
    print("\nthis fleet:")
    for basis in dict.fromkeys(rows["ours_basis"].drop_nulls()):
        print(f"  {basis}")
    for why in missing_reasons(rows):
        print(f"  n/a: {why}")
    print("sources (definitions: goodput references --format json):")
    for r in rows.unique("fleet", keep="first", maintain_order=True).iter_rows(named=True):
        print(f"  {r['short']}: {r['source']}" + (f" <{r['url']}>" if r["url"] else ""))
    return 0


def add_references(sub) -> None:
    command(
        sub,
        cmd_references,
        gpus_per_node(),
        formats=True,
        examples=("goodput references", "goodput references --format json"),
        help="this fleet beside published fleets (Llama 3, Meta RSC, ByteRobust, StepFun, "
        "Titan, LANL), each figure normalised the same way, with 95%% CIs",
        description=(
            "Each published figure of analysis/data/reference_fleets.toml (and of "
            "HOME/references.toml, a site's own targets) beside this fleet's figure normalised "
            "the same way: failures per 1,000 node-days, interruptions per 1,000 GPU-days, the "
            "MTTI and ETTR of one job of the reference's size, system MTBF, node repair time."
        ),
    )
