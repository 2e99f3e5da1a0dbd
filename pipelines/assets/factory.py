"""What every asset module shares: the asset factory, the table writers it resolves inputs
through, and the metadata helpers (column schema, row counts, Markdown tables, skips).

An analysis asset declares the tables it reads once, in two roles: ``needs`` (no rows: the
analysis is skipped, its outputs written empty and the reason recorded in ``analysis_status``)
and ``reads`` (read when present). Its Dagster ``deps`` are the assets that write those tables
(``writers``), so the graph and the skip logic cannot disagree.
"""

import inspect
from collections.abc import Callable
from collections.abc import Iterable

import dagster as dg
import polars as pl

from analysis import status
from analysis.status import MissingInputs
from pipelines.resources import Settings
from warehouse.schemas import TABLES
from warehouse.store import Warehouse

OWNERS = ["team:fleet-goodput"]
POLARS = frozenset({"polars", "parquet"})
DUCKDB = frozenset({"duckdb", "parquet"})

# table -> the assets (or deps) that write it, in definition order; filled as asset modules
# are imported (pipelines/assets/__init__.py imports them in the data's direction)
_WRITERS: dict[str, list] = {}


def register(tables: Iterable[str], deps: Iterable) -> None:
    """Record ``deps`` (assets, keys or ``AssetDep``s) as writers of ``tables``."""
    for table in tables:
        _WRITERS.setdefault(table, []).extend(deps)


def writers(*tables: str, besides: str | None = None) -> list:
    """The deps of an asset reading ``tables``: every registered writer of each, once, in
    order (``besides``: an asset that writes one of them itself, left out)."""
    found: dict[str, object] = {}
    for table in tables:
        if table not in _WRITERS:
            raise KeyError(f"no asset writes {table!r}: import the module of its writer first")
        for dep in _WRITERS[table]:
            key = _key(dep)
            if key != besides:
                found.setdefault(key, dep)
    return list(found.values())


def written_by(key: str) -> set[str]:
    """The tables the asset (or asset spec) named ``key`` writes."""
    return {table for table, deps in _WRITERS.items() if any(_key(d) == key for d in deps)}


def every_writer() -> list:
    """The writers of every table registered so far: the deps of an asset reading the whole
    warehouse (the catalog)."""
    return writers(*_WRITERS)


def _key(dep) -> str:
    if isinstance(dep, dg.AssetDep):
        return dep.asset_key.to_user_string()
    if isinstance(dep, dg.AssetsDefinition):
        return dep.key.to_user_string()
    return str(dep)


def table_metadata(table: str) -> dict:
    """Definition metadata of an asset that writes ``table``: its declared columns."""
    cols = [dg.TableColumn(name, column_type(t)) for name, t in TABLES[table].columns.items()]
    return {"dagster/column_schema": dg.TableSchema(columns=cols), "table": table}


def column_type(dtype: pl.DataType) -> str:
    """A column's declared type as the UI shows it; times are naive UTC (warehouse/schemas.py)."""
    return f"Datetime({dtype.time_unit}, UTC)" if isinstance(dtype, pl.Datetime) else str(dtype)


def row_count(wh: Warehouse, table: str) -> dict:
    """``dagster/row_count``: the rows the table's view holds now."""
    if not wh.files(table):
        return {"dagster/row_count": dg.MetadataValue.int(0)}
    with wh.connect() as con:
        n = con.execute(f"SELECT count(*) FROM ({wh.view_sql(table)})").fetchall()[0][0]
    return {"dagster/row_count": dg.MetadataValue.int(int(n))}


def table_asset(
    *outputs: str,
    needs: tuple[str, ...] = (),
    reads: tuple[str, ...] = (),
    any_of: bool = False,
    name: str | None = None,
    analysis: str | None = None,
    kinds: frozenset[str] = POLARS,
    rows: Callable = lambda result: result.height,
    describe: Callable = lambda result, wh, settings: {},
    descriptions: dict[str, str] | None = None,
):
    """An analysis asset (group ``analysis``) around ``compute(wh, settings) -> result``, run
    on the analysis warehouse (a scope's, when one is set) and recorded in ``analysis_status``.

    ``outputs``: the tables it writes (the first names the asset unless ``name`` does; written
    empty when it is skipped). One output: the docstring is the description and
    ``describe(result, wh, settings)`` the metadata besides ``dagster/row_count``, which is
    ``rows(result)``. Several: a multi-asset (op ``name``), one spec per output described by
    ``descriptions``, and ``describe`` returns metadata per output. ``analysis``: the name in
    ``analysis_status`` (default: the asset's or op's name). ``rows``: the row count recorded
    for a result."""

    def decorate(compute: Callable[[Warehouse, Settings], object]):
        key = name or outputs[0]
        label = analysis or key
        deps = writers(*needs, *reads, besides=key)
        run = _runner(compute, label, outputs, needs, any_of, rows)
        if descriptions is None:

            def meta(result, wh, settings) -> dict:
                return {"dagster/row_count": rows(result), **describe(result, wh, settings)}

            return _single_asset(key, label, outputs, deps, kinds, compute.__doc__, run, meta)
        return _multi_asset(key, label, outputs, deps, kinds, descriptions, run, describe)

    return decorate


def _runner(compute, label: str, outputs, needs, any_of: bool, rows: Callable) -> Callable:
    """``run(settings) -> (wh, result)``: ``compute`` on the analysis warehouse once its
    ``needs`` hold, guarded (``guarded``); a skip's result is None."""

    def run(settings: Settings):
        wh = settings.analysis_warehouse()

        def work():
            if needs:
                status.require(wh, label, needs, any_of=any_of)
            return compute(wh, settings)

        return wh, guarded(wh, label, outputs, work, rows)

    return run


def _single_asset(key, label, outputs, deps, kinds, doc, run, describe) -> dg.AssetsDefinition:
    """The asset of an analysis described by its compute's docstring, with its first
    output's columns."""

    @dg.asset(
        name=key,
        group_name="analysis",
        deps=deps,
        kinds=set(kinds),
        owners=OWNERS,
        metadata=table_metadata(outputs[0]),
        description=inspect.cleandoc(doc),
    )
    def single(settings: Settings) -> dg.MaterializeResult:
        wh, result = run(settings)
        if result is None:
            return dg.MaterializeResult(metadata=skipped_meta(wh, label))
        return dg.MaterializeResult(metadata=describe(result, wh, settings))

    register(outputs, [single])
    return single


def _multi_asset(key, label, outputs, deps, kinds, descriptions, run, describe):
    """The multi-asset (op ``key``) of an analysis that writes several tables, one spec each."""
    specs = [
        dg.AssetSpec(
            out,
            deps=deps,
            kinds=set(kinds),
            owners=OWNERS,
            metadata=table_metadata(out),
            description=descriptions[out],
        )
        for out in outputs
    ]

    @dg.multi_asset(name=key, group_name="analysis", specs=specs)
    def multi(settings: Settings):
        wh, result = run(settings)
        meta = (
            {out: skipped_meta(wh, label) for out in outputs}
            if result is None
            else (describe(result, wh, settings))
        )
        for out in outputs:
            yield dg.MaterializeResult(asset_key=out, metadata=meta[out])

    for out in outputs:
        register([out], [out])
    return multi


def guarded(wh, analysis: str, outputs: tuple[str, ...], run, rows=lambda r: r.height):
    """Run one analysis and record its outcome in ``analysis_status``. Missing inputs: its
    output tables are written empty, the reason recorded, and None returned (the run goes on).
    Any other error is recorded as 'failed' with its one-line cause and re-raised."""
    try:
        result = run()
    except MissingInputs as exc:
        for table in outputs:
            wh.replace_table(table, TABLES[table].empty())
        status.record(wh, analysis, "skipped", str(exc), 0)
        return None
    except Exception as exc:
        status.record(wh, analysis, "failed", one_line(exc))
        raise
    status.record(wh, analysis, "ok", None, rows(result))
    return result


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line: what a user reads when a step fails."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def skipped_meta(wh, analysis: str) -> dict:
    reason = wh.read("analysis_status", f"analysis = '{analysis}'")["reason"]
    return {"skipped": reason[0] if reason.len() else "no inputs"}


def md(df) -> str:
    """A small frame as a Markdown table for the Dagster UI."""
    if df.height == 0:
        return "(none)"
    head = "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns) + "\n"
    return head + "\n".join("| " + " | ".join(map(_cell, row)) + " |" for row in df.rows())


def _cell(value) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)
