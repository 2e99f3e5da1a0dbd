"""What every layout shares: reading header names and fields, the class a file's name gives, and
the normalisation of canonical columns (text as the file has it) into ``component_history``
rows with the reason each rejected row is quarantined."""

import re
from pathlib import PurePath

import polars as pl

from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import implausible_time
from ingest.base import split_rejected
from ingest.component_names import CLASS_NAMES
from ingest.times import parse_span
from warehouse.schemas import conform
from warehouse.schemas import quarantine_frame

TRUE = ["true", "1", "yes", "y", "t"]
FALSE = ["false", "0", "no", "n", "f"]
FAILURE_REASON = r"(?i)fail|fault|error|dead|\brma\b|defect|broken|\bdbe\b|xid"


def header_key(name: str) -> str:
    """A header name as it is matched: lower case, without spaces, underscores or dashes."""
    return re.sub(r"[\s_\-]+", "", name.strip().lower())


def field(i: int) -> pl.Expr:
    """Field ``i`` of a row's ``fields`` list (null when the row has fewer)."""
    return pl.col("fields").list.get(i, null_on_oob=True)


def file_class(ctx: ParseContext) -> str | None:
    """The component class a file's name gives (``titan.gpu.history.txt`` -> gpu), else None."""
    tokens = re.split(r"[^a-z0-9]+", PurePath(ctx.path or "").name.lower())
    return next((CLASS_NAMES[t] for t in tokens if t in CLASS_NAMES), None)


def with_quarantine(res: ParseResult, bad: pl.DataFrame) -> ParseResult:
    """``res`` plus the layout's own rejected records (``line``, ``raw``, ``_error``)."""
    q = pl.concat([quarantine_frame(bad["line"], bad["raw"], bad["_error"]), res.quarantine]).sort(
        "line"
    )
    return ParseResult(res.tables, q, res.records + bad.height)


def _col(df: pl.DataFrame, name: str) -> pl.Expr:
    return pl.col(name) if name in df.columns else pl.lit(None, pl.Utf8)


def normalize(df: pl.DataFrame, ctx: ParseContext) -> ParseResult:
    """``component_history`` rows from canonical columns (``line``, ``raw`` and any of
    ``CANONICAL``, as text), and a quarantine row for each row that cannot be stored."""
    out = _typed(df, ctx).with_columns(_error=_row_error(ctx))
    ok, q = split_rejected(out, "_error")
    table = conform(
        "component_history",
        ok.drop("raw", "_error", "_dst", "_inst_raw", "_rem_raw", "_failed_raw")
        .rename({"line": "source_line"})
        .with_columns(
            failed=pl.col("failed").fill_null(False),
            source=pl.lit("component-history"),
            source_file=pl.lit(ctx.path),
        ),
    )
    tables = {"component_history": table} if table.height else {}
    return ParseResult(tables, q, table.height + q.height)


def _typed(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """The canonical columns read: class mapped to the taxonomy, slot and host / position from
    each other, times parsed, ``failed`` from its text or the removal reason; the raw texts
    stay beside them (``_inst_raw``, ``_rem_raw``, ``_failed_raw``) for the error messages."""
    fmt = ctx.options.get("time_format")
    slot = pl.coalesce(
        _col(df, "slot"),
        pl.when(_col(df, "host").is_not_null()).then(
            pl.concat_str(_col(df, "host"), pl.lit("/"), _col(df, "position").fill_null(""))
        ),
    )
    cls = _col(df, "component_class").str.to_lowercase()
    failed_text = _col(df, "failed").str.to_lowercase()
    # a unit is removed no earlier than installed: that decides a time in a repeated DST hour
    installed, removed, dst = parse_span(
        _col(df, "installed_at"),
        _col(df, "removed_at"),
        ctx.tz,
        fmt,
        names=("installed_at", "removed_at"),
    )
    failed_col = (
        pl.when(failed_text.is_in(TRUE)).then(True).when(failed_text.is_in(FALSE)).then(False)
    )
    if "failed" in df.columns:
        failed = failed_col
    else:
        failed = removed.is_not_null() & _col(df, "removal_reason").str.contains(
            FAILURE_REASON
        ).fill_null(False)
    return df.select(
        "line",
        "raw",
        component_class=cls.replace(CLASS_NAMES),
        serial=_col(df, "serial"),
        slot=slot,
        host=pl.coalesce(_col(df, "host"), slot.str.split("/").list.first()),
        position=pl.coalesce(
            _col(df, "position"),
            pl.when(slot.str.contains("/")).then(slot.str.splitn("/", 2).struct.field("field_1")),
        ),
        model=_col(df, "model"),
        installed_at=installed,
        _dst=dst,
        removed_at=removed,
        removal_reason=_col(df, "removal_reason"),
        failed=failed,
        _inst_raw=_col(df, "installed_at"),
        _rem_raw=_col(df, "removed_at"),
        _failed_raw=_col(df, "failed"),
    )


def _row_error(ctx: ParseContext) -> pl.Expr:
    """Why a row of ``_typed`` cannot be stored (the first reason that holds), else null."""
    return (
        pl.when(pl.col("serial").is_null())
        .then(pl.lit("empty serial"))
        .when(pl.col("component_class").is_null())
        .then(pl.lit("empty component_class"))
        .when(pl.col("slot").is_null())
        .then(pl.lit("empty slot / host"))
        .when(pl.col("_dst").is_not_null())
        .then("_dst")
        .when(pl.col("installed_at").is_null())
        .then(pl.format("unreadable installed_at '{}'", pl.col("_inst_raw").fill_null("")))
        .when(pl.col("_rem_raw").is_not_null() & pl.col("removed_at").is_null())
        .then(pl.format("unreadable removed_at '{}'", "_rem_raw"))
        .when(pl.col("removed_at") < pl.col("installed_at"))
        .then(pl.format("removed_at {} is before installed_at {}", "removed_at", "installed_at"))
        .when(implausible_time(pl.col("installed_at"), ctx).is_not_null())
        .then(pl.format("installed_at: {}", implausible_time(pl.col("installed_at"), ctx)))
        .when(implausible_time(pl.col("removed_at"), ctx).is_not_null())
        .then(pl.format("removed_at: {}", implausible_time(pl.col("removed_at"), ctx)))
        .when(pl.col("_failed_raw").is_not_null() & pl.col("failed").is_null())
        .then(pl.format("unreadable failed '{}' (want true/false, 1/0, yes/no)", "_failed_raw"))
        .when(pl.col("host").is_in(list(ctx.options.get("exclude_hosts", ()))))
        .then(pl.format("host {} excluded (--exclude-hosts)", "host"))
    )
