"""Slurm hostlist expressions: ``gpu[001-004,010]``, ``d09n04s[01-02]``, ``a[1-2]b[3-4]``.

Zero padding is kept (``[08-10]`` -> 08, 09, 10). Several bracket groups in one name expand
as a cartesian product, as Slurm does. Parsers map this over the *unique* expressions of a
column (there are far fewer of those than rows), so it need not be vectorized itself.

Expansion is bounded: hosts are counted before any is made, and an expression naming more
than MAX_HOSTS hosts, or more than its record's node count (NNodes) when the caller knows
it, is an error for that record, so one corrupt line can neither exhaust memory nor add a
million hosts to the fleet. Malformed lists (unbalanced or nested brackets, an empty name
between commas) are errors too, never hosts with brackets in their names.
"""

from __future__ import annotations

import itertools
import math
import re

import polars as pl

# The most hosts one hostlist may name: well above the node count of the largest machines
# (El Capitan, Frontier and Aurora have 9,000 to 12,000 nodes). Also the bound of a job's
# node count (``ingest.job_checks``).
MAX_HOSTS = 100_000

_GROUP = re.compile(r"\[([^\[\]]*)\]")


class HostlistError(ValueError):
    pass


def _split_top(expr: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    out, depth, cur = [], 0, []
    for ch in expr:
        if ch == "[":
            depth += 1
            if depth > 1:
                raise HostlistError(f"nested '[' in hostlist {expr!r}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in hostlist {expr!r}")
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise HostlistError(f"unbalanced '[' in hostlist {expr!r}")
    out.append("".join(cur))
    items = [s.strip() for s in out]
    if "" in items:
        raise HostlistError(f"empty host name between commas in hostlist {expr!r}")
    return items


def _bounds(spec: str, expr: str) -> list[tuple[int, int, int]]:
    """(first, last, zero-padded width) of each range of a bracket group."""
    out = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise HostlistError(f"bad range {part!r} in hostlist {expr!r}")
        hi = hi if sep else lo
        width = len(lo) if lo.startswith("0") or len(lo) == len(hi) else 0
        if int(hi) < int(lo):
            raise HostlistError(f"bad range {part!r} in hostlist {expr!r}")
        out.append((int(lo), int(hi), width))
    return out


def _too_many(n: int, expr: str, limit: int) -> HostlistError:
    return HostlistError(
        f"hostlist {expr[:80]!r} names {n:,} hosts, more than the limit of {limit:,}"
    )


def expand(expr: str | None, limit: int = MAX_HOSTS) -> list[str]:
    """All host names of a hostlist expression (empty for None / '' / 'None assigned'); more
    than ``limit`` hosts is an error, raised before any is made."""
    if expr is None:
        return []
    expr = expr.strip()
    if not expr or expr.lower() in ("none assigned", "(null)", "none"):
        return []
    items = [
        [
            p if i % 2 == 0 else _bounds(p, expr) for i, p in enumerate(_GROUP.split(item))
        ]  # literal, group, ...
        for item in _split_top(expr)
    ]
    n = sum(math.prod(map(_size, pieces)) for pieces in items)
    if n > limit:
        raise _too_many(n, expr, limit)
    return ["".join(c) for pieces in items for c in itertools.product(*map(_names, pieces))]


def _size(piece: str | list[tuple[int, int, int]]) -> int:
    return 1 if isinstance(piece, str) else sum(b - a + 1 for a, b, _ in piece)


def _names(piece: str | list[tuple[int, int, int]]) -> list[str]:
    return (
        [piece]
        if isinstance(piece, str)
        else [str(i).zfill(w) for a, b, w in piece for i in range(a, b + 1)]
    )


def compress(hosts: list[str]) -> str:
    """The inverse of ``expand`` for names with one trailing number (what sacct prints)."""
    groups: dict[tuple[str, int], list[int]] = {}
    plain: list[str] = []
    for h in hosts:
        m = re.fullmatch(r"(.*?)(\d+)", h)
        if not m:
            plain.append(h)
            continue
        groups.setdefault((m.group(1), len(m.group(2))), []).append(int(m.group(2)))
    out = list(plain)
    for (prefix, width), nums in groups.items():
        nums = sorted(set(nums))
        if len(nums) == 1:
            out.append(f"{prefix}{nums[0]:0{width}d}")
            continue
        runs, start, prev = [], nums[0], nums[0]
        for n in nums[1:] + [None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            runs.append(
                f"{start:0{width}d}" if start == prev else f"{start:0{width}d}-{prev:0{width}d}"
            )
            if n is not None:
                start = prev = n
        out.append(f"{prefix}[{','.join(runs)}]")
    return ",".join(out)


_ITEM = r"[^,\[\]]*(?:\[[^\]]*\][^,\[\]]*)*"  # one top-level item: text with bracket groups


def expand_column(
    col: pl.Series, nodes: pl.Series | None = None, limit: int = MAX_HOSTS
) -> tuple[pl.Series, pl.Series]:
    """Expand a column of hostlists: (List[str] hosts, error message or null) per row.

    ``nodes``: each row's node count (NNodes), where known (null or 0: not known): a row whose
    hostlist names more hosts is an error. Hosts are counted before they are made, so a row over
    ``limit`` or its node count costs nothing. Vectorized for the shapes sacct prints (plain names
    and names with one bracket group); names with several bracket groups or malformed brackets go
    through ``expand`` per unique value, which is also where readable errors come from.
    """
    original = pl.DataFrame({"expr": col.cast(pl.Utf8)})
    df = original.unique(maintain_order=True).with_row_index("row")
    expr = pl.col("expr").str.strip_chars()
    empty = expr.is_null() | expr.str.to_lowercase().is_in(["", "none assigned", "(null)", "none"])
    brackets = expr.str.count_matches(r"\[", literal=False)
    simple = (
        ~empty
        & (brackets == expr.str.count_matches(r"\]"))
        & ~expr.str.contains(r"\[[^\]]*\[|\][^,\[]*\[|\[[^\]]*$|^,|,$|,\s*,")
    )
    df = df.with_columns(kind=pl.when(empty).then(0).when(simple).then(1).otherwise(2))
    fast, bad_rows = _expand_simple(df, limit)
    slow = _expand_slow(df, bad_rows, limit)
    table = (
        df.join(fast, on="row", how="left")
        .join(slow, on="expr", how="left", nulls_equal=True)
        .select(
            "expr",
            hosts=pl.when(pl.col("kind") == 0)
            .then(pl.lit([], dtype=pl.List(pl.Utf8)))
            .otherwise(pl.coalesce("slow_hosts", "hosts", pl.lit([], dtype=pl.List(pl.Utf8)))),
            err=pl.col("err"),
        )
        .with_columns(n=pl.col("hosts").list.len())
    )
    return _per_row(original, table, nodes)


def _expand_simple(df: pl.DataFrame, limit: int) -> tuple[pl.DataFrame, pl.Series]:
    """The vectorized path for the unique expressions of ``kind`` 1: items -> (prefix, ranges,
    suffix) -> counts -> numbers -> names. Returns (row, hosts) and the rows it leaves to
    ``expand`` (malformed ranges, more hosts than ``limit``)."""
    items = (
        df.filter(pl.col("kind") == 1)
        .select("row", item=pl.col("expr").str.strip_chars().str.extract_all(_ITEM))
        .explode("item")
        .filter(pl.col("item") != "")
        .with_row_index("pos")
    )
    parts = items.with_columns(
        g=pl.col("item").str.extract_groups(r"^([^\[]*)\[([^\]]*)\](.*)$")
    ).with_columns(
        prefix=pl.col("g").struct.field("1"),
        spec=pl.col("g").struct.field("2"),
        suffix=pl.col("g").struct.field("3"),
    )
    plain = parts.filter(pl.col("spec").is_null()).select(
        "row", "pos", sub=pl.lit(0, pl.Int64), host=pl.col("item")
    )
    ranged = (
        parts.filter(pl.col("spec").is_not_null())
        .with_columns(r=pl.col("spec").str.split(","))
        .explode("r")
        .filter(pl.col("r").str.strip_chars() != "")
        .with_columns(rg=pl.col("r").str.strip_chars().str.extract_groups(r"^(\d+)(?:-(\d+))?$"))
        .with_columns(lo=pl.col("rg").struct.field("1"), hi=pl.col("rg").struct.field("2"))
        .with_columns(
            a=pl.col("lo").cast(pl.Int64, strict=False),
            b=pl.coalesce(pl.col("hi"), pl.col("lo")).cast(pl.Int64, strict=False),
        )
    )
    counts = (
        pl.concat(
            [
                plain.select("row", n=pl.lit(1, pl.Int64)),
                ranged.select("row", n=(pl.col("b") - pl.col("a") + 1).clip(0)),
            ]
        )
        .group_by("row")
        .agg(n=pl.col("n").sum())
    )
    big = counts.filter(pl.col("n") > limit)["row"]
    bad_rows = pl.concat(
        [
            ranged.filter(
                pl.col("lo").is_null()
                | pl.col("a").is_null()
                | pl.col("b").is_null()
                | (pl.col("b") < pl.col("a"))
            )["row"],
            big,
        ]
    ).unique()
    ranged = (
        ranged.filter(~pl.col("row").is_in(bad_rows.implode()))
        .with_columns(width=pl.col("lo").str.len_chars())  # the same names as expand's widths
        .with_columns(n=pl.int_ranges("a", pl.col("b") + 1))
        .explode("n")
        .with_columns(sub=pl.int_range(pl.len()).over("pos"))
        .select(
            "row",
            "pos",
            "sub",
            host=pl.concat_str(
                "prefix", pl.col("n").cast(pl.Utf8).str.pad_start(pl.col("width"), "0"), "suffix"
            ),
        )
    )
    fast = (
        pl.concat([plain.filter(~pl.col("row").is_in(bad_rows.implode())), ranged])
        .sort("row", "pos", "sub")
        .group_by("row", maintain_order=True)
        .agg(hosts=pl.col("host"))
    )
    return fast, bad_rows


def _expand_slow(df: pl.DataFrame, bad_rows: pl.Series, limit: int) -> pl.DataFrame:
    """The fallback: complex or malformed expressions through ``expand``, once per unique
    value: (expr, slow_hosts, err)."""
    slow_exprs = (
        df.filter((pl.col("kind") == 2) | pl.col("row").is_in(bad_rows.implode()))["expr"]
        .unique()
        .to_list()
    )
    hosts_of, err_of = {}, {}
    for u in slow_exprs:
        try:
            hosts_of[u], err_of[u] = expand(u, limit), None
        except HostlistError as exc:
            hosts_of[u], err_of[u] = [], str(exc)
    return pl.DataFrame(
        {
            "expr": pl.Series(slow_exprs, dtype=pl.Utf8),
            "slow_hosts": pl.Series([hosts_of[u] for u in slow_exprs], dtype=pl.List(pl.Utf8)),
            "err": pl.Series([err_of[u] for u in slow_exprs], dtype=pl.Utf8),
        }
    )


def _per_row(
    original: pl.DataFrame, table: pl.DataFrame, nodes: pl.Series | None
) -> tuple[pl.Series, pl.Series]:
    """Each row of ``original`` its expression's hosts and error (``table``), with the error of
    naming more hosts than its node count."""
    # each row's error first; hosts are joined only to rows without one (a row over its node
    # count never gets a copy of the list)
    rows = (
        original.with_columns(
            nodes=pl.lit(None, pl.Int64) if nodes is None else nodes.cast(pl.Int64, strict=False)
        )
        .with_row_index("i")
        .join(
            table.select("expr", "err", "n"),
            on="expr",
            how="left",
            nulls_equal=True,
            maintain_order="left",
        )
    )
    rows = rows.with_columns(
        err=pl.coalesce(
            "err",
            pl.when(
                (pl.col("n") > pl.col("nodes")) & (pl.col("nodes") > 0)
            ).then(  # 0: none allocated
                pl.format(
                    "hostlist {} names {} hosts but the record has NNodes {}",
                    pl.col("expr").str.slice(0, 80),
                    "n",
                    "nodes",
                )
            ),
        )
    )
    good = (
        rows.filter(pl.col("err").is_null())
        .select("i", "expr")
        .join(table.select("expr", "hosts"), on="expr", how="left", nulls_equal=True)
    )
    out = rows.join(good.select("i", "hosts"), on="i", how="left", maintain_order="left")
    return out["hosts"].fill_null(pl.lit([], dtype=pl.List(pl.Utf8))), out["err"]
