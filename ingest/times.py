"""Time parsing shared by parsers: local or export time strings to naive UTC, Slurm durations."""

from __future__ import annotations

import polars as pl

NULL_TIMES = ["", "Unknown", "None", "N/A", "(null)", "0"]


_SKIPPED = "does not exist in {tz} (the hour skipped when DST starts)"
_REPEATED = "fall{s} in the hour repeated when DST ends in {tz}, and {evidence} does not tell which"


def local_to_utc(
    expr: pl.Expr, tz: str, fmt: str | None = None, order: list[pl.Expr] | None = None
) -> tuple[pl.Expr, pl.Expr]:
    """Parse zone-less timestamps written in ``tz``: (naive UTC, why it is null when the text is
    a valid time but no single instant): see ``wall_clock``."""
    return wall_clock(
        expr.str.strip_chars().str.to_datetime(format=fmt, strict=False, time_unit="us"), tz, order
    )


def wall_clock(
    naive: pl.Expr, tz: str, order: list[pl.Expr] | None = None
) -> tuple[pl.Expr, pl.Expr]:
    """(naive UTC, DST reason) of wall-clock datetimes ``naive`` read in ``tz``.

    A time in the hour a DST fall-back repeats is two instants. With ``order`` (the partition
    keys of a log written in time order, ``[]`` for the whole frame, rows in file order) the
    log decides: among one day's repeated-hour rows of a partition, those before the clock
    steps back are the first pass, those from the step on the second; a run with no step back
    is undecided. A time in a spring-forward gap exists nowhere. Undecided and nonexistent
    times are null, and the reason (a String, else null) says which, for the quarantine row.
    A record's start and end with its own duration or order: ``local_span``."""
    if tz.upper() == "UTC":
        return naive, pl.lit(None, pl.Utf8)
    early, late, gap = _readings(naive, tz)
    two = (early != late).fill_null(False)
    utc = pl.when(~two).then(early)
    if order is not None:
        keys = [*order, naive.dt.date(), two]
        back = (naive < naive.cum_max().shift(1)).fill_null(False)
        stepped = (back.cum_sum() > 0).over(keys)
        utc = utc.when(stepped).then(late).when(back.any().over(keys)).then(early)
    text = naive.dt.strftime("%Y-%m-%d %H:%M:%S")
    evidence = "the record" if order is None else "the log's order"
    why = (
        pl.when(gap)
        .then(pl.format("local time {} " + _SKIPPED.format(tz=tz), text))
        .when(two & utc.is_null())
        .then(pl.format("local time {} " + _REPEATED.format(s="s", tz=tz, evidence=evidence), text))
    )
    return utc, why


def local_span(
    start: pl.Expr,
    end: pl.Expr,
    tz: str,
    *,
    seconds: pl.Expr | None = None,
    tolerance_s: float = 1.0,
    names: tuple[str, str] = ("start", "end"),
    evidence: str | pl.Expr = "their order",
) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """(start, end, DST reason) of a record's wall-clock start and end (naive datetimes, as
    ``naive_times`` parses them) read in ``tz``.

    Where either falls in the hour a DST fall-back repeats, the record's own evidence decides:
    the one pair of readings ``seconds`` apart (within ``tolerance_s``) where the record states
    its duration, else the one pair with end not before start. A time no evidence decides is
    null; the reason names both texts and the ``evidence`` that did not tell which. A time in
    a spring-forward gap is null with its reason."""
    if tz.upper() == "UTC":  # no DST: nothing to decide
        return start, end, pl.lit(None, pl.Utf8)
    (se, sl, s_gap), (ee, el, e_gap) = _readings(start, tz), _readings(end, tz)
    two_s, two_e = (se != sl).fill_null(False), (ee != el).fill_null(False)

    def fits(a: pl.Expr, b: pl.Expr) -> pl.Expr:
        d = (b - a).dt.total_seconds()
        if seconds is None:
            return (d >= 0).fill_null(False)
        return (
            pl.when(seconds.is_null())
            .then(d >= 0)
            .otherwise((d - seconds).abs() <= tolerance_s)
            .fill_null(False)
        )

    pairs = [fits(se, ee), fits(se, el) & two_e, fits(sl, ee) & two_s, fits(sl, el) & two_s & two_e]
    one = pl.sum_horizontal(*[p.cast(pl.Int8) for p in pairs]) == 1
    s_utc = pl.when(~two_s).then(se).when(one & (pairs[2] | pairs[3])).then(sl).when(one).then(se)
    e_utc = pl.when(~two_e).then(ee).when(one & (pairs[1] | pairs[3])).then(el).when(one).then(ee)
    ev = pl.lit(evidence) if isinstance(evidence, str) else evidence
    s_text, e_text = (t.dt.strftime("%Y-%m-%d %H:%M:%S").fill_null("") for t in (start, end))
    repeated = _REPEATED.format(s="", tz=tz, evidence="{}")
    why = (
        pl.when(s_gap)
        .then(pl.format(f"{names[0]} '{{}}' " + _SKIPPED.format(tz=tz), s_text))
        .when(e_gap)
        .then(pl.format(f"{names[1]} '{{}}' " + _SKIPPED.format(tz=tz), e_text))
        .when((two_s | two_e) & ~one)
        .then(pl.format(f"{names[0]} '{{}}' / {names[1]} '{{}}' " + repeated, s_text, e_text, ev))
    )
    return s_utc, e_utc, why


def _readings(naive: pl.Expr, tz: str) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """(earliest, latest, nonexistent) UTC readings of naive wall-clock times in ``tz``; in UTC,
    which has no DST, the times themselves (no zone conversion: it is most of a parse's cost)."""
    if tz.upper() == "UTC":
        return naive, naive, pl.lit(False)
    early, late = (
        naive.dt.replace_time_zone(tz, ambiguous=a, non_existent="null")
        .dt.convert_time_zone("UTC")
        .dt.replace_time_zone(None)
        for a in ("earliest", "latest")
    )
    return early, late, naive.is_not_null() & early.is_null()


def local_candidates(
    expr: pl.Expr, tz: str, fmt: str | None = None
) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """(earliest, latest, nonexistent) readings of zone-less timestamps written in ``tz``: the
    two naive UTC instants a wall-clock time can be (they differ only in the hour a DST
    fall-back repeats; both null when unparseable or in a spring-forward gap), and whether
    the text is a valid time that does not exist in ``tz`` (Boolean)."""
    parsed = expr.str.strip_chars().str.to_datetime(format=fmt, strict=False, time_unit="us")
    return _readings(parsed, tz)


def slurm_duration_s(expr: pl.Expr) -> pl.Expr:
    """``[D-]HH:MM:SS[.fff]`` / ``MM:SS`` / ``MM:SS.fff`` to seconds; UNLIMITED etc. to null."""
    s = expr.str.strip_chars()
    m = s.str.extract_groups(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$")
    days = m.struct.field("1").cast(pl.Float64).fill_null(0)
    hours = m.struct.field("2").cast(pl.Float64).fill_null(0)
    mins = m.struct.field("3").cast(pl.Float64)
    secs = m.struct.field("4").cast(pl.Float64)
    return days * 86400 + hours * 3600 + mins * 60 + secs


# Tried in order; zone-aware forms first. All are applied vectorized and coalesced.
AWARE_FORMATS = ("%Y-%m-%dT%H:%M:%S%.f%z", "%Y-%m-%d %H:%M:%S%.f%z")
NAIVE_FORMATS = (
    "%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M",
    "%Y-%m-%d", "%m/%d/%Y %H:%M:%S", "%m/%d/%Y %H:%M", "%m/%d/%Y", "%d.%m.%Y %H:%M:%S",
    "%d.%m.%Y %H:%M", "%d.%m.%Y", "%Y/%m/%d %H:%M:%S", "%Y/%m/%d %H:%M", "%Y/%m/%d",
)  # fmt: skip


def naive_times(expr: pl.Expr, fmt: str | None = None) -> pl.Expr:
    """Zone-less export time texts to naive datetimes (``fmt``, else the first of
    ``NAIVE_FORMATS`` that parses), null when none does."""
    s = expr.str.strip_chars()
    return pl.coalesce(
        [
            s.str.to_datetime(f, strict=False, time_unit="us")
            for f in ((fmt,) if fmt else NAIVE_FORMATS)
        ]
    )


def parse_times(
    expr: pl.Expr, tz: str, fmt: str | None = None, order: list[pl.Expr] | None = None
) -> tuple[pl.Expr, pl.Expr]:
    """Several export time forms, vectorized: the first format that parses wins; (naive UTC,
    DST reason) as ``wall_clock`` gives them for the zone-less forms."""
    s = expr.str.strip_chars().str.replace(r"[zZ]$", "+00:00").str.replace(r" UTC$", "+00:00")
    aware = pl.coalesce(
        [s.str.to_datetime(f, strict=False, time_zone="UTC", time_unit="us") for f in AWARE_FORMATS]
    ).dt.replace_time_zone(None)
    naive, why = wall_clock(naive_times(s, fmt), tz, order)
    epoch = pl.when(s.str.contains(r"^\d{9,10}(?:\.\d+)?$")).then(
        pl.from_epoch((s.cast(pl.Float64, strict=False) * 1e6).cast(pl.Int64), time_unit="us")
    )
    zoned = s.str.contains(r"[+-]\d{2}:?\d{2}$")
    return pl.when(zoned).then(aware).otherwise(pl.coalesce(naive, epoch)), pl.when(~zoned).then(
        why
    )


def parse_span(
    start: pl.Expr, end: pl.Expr, tz: str, fmt: str | None = None, **evidence
) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """``parse_times`` of a record's start and end texts, where a zone-less one falls in a DST
    change decided by ``local_span`` (``evidence``: its keyword arguments): (start, end, reason)."""
    (s, s_why), (e, e_why) = parse_times(start, tz, fmt), parse_times(end, tz, fmt)
    span_s, span_e, why = local_span(naive_times(start, fmt), naive_times(end, fmt), tz, **evidence)
    dst = s_why.is_not_null() | e_why.is_not_null()
    return (
        pl.when(dst).then(span_s).otherwise(s),
        pl.when(dst).then(span_e).otherwise(e),
        pl.when(dst).then(why),
    )
