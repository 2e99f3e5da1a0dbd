"""Slurm hostlist expressions: ``gpu[001-004,010]``, ``d09n04s[01-02]``, ``a[1-2]b[3-4]``.

Zero padding is kept (``[08-10]`` -> 08, 09, 10). Several bracket groups in one name expand
as a cartesian product, as Slurm does. Parsers map this over the *unique* expressions of a
column (there are far fewer of those than rows), so it need not be vectorized itself.
"""

from __future__ import annotations

import itertools
import re

import polars as pl

_GROUP = re.compile(r"\[([^\[\]]*)\]")


class HostlistError(ValueError):
    pass


def _split_top(expr: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    out, depth, cur = [], 0, []
    for ch in expr:
        if ch == "[":
            depth += 1
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
    return [s.strip() for s in out if s.strip()]


def _range(spec: str, expr: str) -> list[str]:
    out = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise HostlistError(f"bad range {part!r} in hostlist {expr!r}")
        if not sep:
            out.append(lo)
            continue
        width = len(lo) if lo.startswith("0") or len(lo) == len(hi) else 0
        a, b = int(lo), int(hi)
        if b < a or b - a > 1_000_000:
            raise HostlistError(f"bad range {part!r} in hostlist {expr!r}")
        out.extend(str(i).zfill(width) for i in range(a, b + 1))
    return out


def expand(expr: str | None) -> list[str]:
    """All host names of a hostlist expression (empty for None / '' / 'None assigned')."""
    if expr is None:
        return []
    expr = expr.strip()
    if not expr or expr.lower() in ("none assigned", "(null)", "none"):
        return []
    hosts: list[str] = []
    for item in _split_top(expr):
        pieces = _GROUP.split(item)  # literal, group, literal, group, ...
        choices = [[p] if i % 2 == 0 else _range(p, expr) for i, p in enumerate(pieces)]
        hosts.extend("".join(c) for c in itertools.product(*choices))
    return hosts


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
            runs.append(f"{start:0{width}d}" if start == prev else f"{start:0{width}d}-{prev:0{width}d}")
            if n is not None:
                start = prev = n
        out.append(f"{prefix}[{','.join(runs)}]")
    return ",".join(out)


_ITEM = r"[^,\[\]]*(?:\[[^\]]*\][^,\[\]]*)*"  # one top-level item: text with bracket groups


def expand_column(col: pl.Series) -> tuple[pl.Series, pl.Series]:
    """Expand a column of hostlists: (List[str] hosts, error message or null) per row.

    Vectorized for the shapes sacct prints (plain names and names with one bracket group);
    names with several bracket groups or malformed brackets go through ``expand`` per unique
    value, which is also where readable errors come from.
    """
    original = pl.DataFrame({"expr": col.cast(pl.Utf8)})
    df = original.unique(maintain_order=True).with_row_index("row")
    expr = pl.col("expr").str.strip_chars()
    empty = expr.is_null() | expr.str.to_lowercase().is_in(["", "none assigned", "(null)", "none"])
    brackets = expr.str.count_matches(r"\[", literal=False)
    simple = ~empty & (brackets == expr.str.count_matches(r"\]")) & ~expr.str.contains(r"\[[^\]]*\[|\][^,\[]*\[|\[[^\]]*$")
    df = df.with_columns(kind=pl.when(empty).then(0).when(simple).then(1).otherwise(2))
    # -- vectorized path: items -> (prefix, ranges, suffix) -> numbers -> names
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
        prefix=pl.col("g").struct.field("1"), spec=pl.col("g").struct.field("2"), suffix=pl.col("g").struct.field("3")
    )
    plain = parts.filter(pl.col("spec").is_null()).select("row", "pos", sub=pl.lit(0, pl.Int64), host=pl.col("item"))
    ranged = (
        parts.filter(pl.col("spec").is_not_null())
        .with_columns(r=pl.col("spec").str.split(","))
        .explode("r")
        .with_columns(rg=pl.col("r").str.strip_chars().str.extract_groups(r"^(\d+)(?:-(\d+))?$"))
        .with_columns(lo=pl.col("rg").struct.field("1"), hi=pl.col("rg").struct.field("2"))
    )
    bad_rows = ranged.filter(
        pl.col("lo").is_null()
        | (pl.col("hi").cast(pl.Int64, strict=False) < pl.col("lo").cast(pl.Int64, strict=False))
        | (pl.col("hi").cast(pl.Int64, strict=False) - pl.col("lo").cast(pl.Int64, strict=False) > 1_000_000)
    )["row"].unique()
    ranged = (
        ranged.filter(~pl.col("row").is_in(bad_rows.implode()))
        .with_columns(width=pl.col("lo").str.len_chars(), a=pl.col("lo").cast(pl.Int64))
        .with_columns(n=pl.int_ranges("a", pl.coalesce(pl.col("hi").cast(pl.Int64), "a") + 1))
        .explode("n")
        .with_columns(sub=pl.int_range(pl.len()).over("pos"))
        .select(
            "row", "pos", "sub",
            host=pl.concat_str("prefix", pl.col("n").cast(pl.Utf8).str.pad_start(pl.col("width"), "0"), "suffix"),
        )
    )
    fast = (
        pl.concat([plain, ranged])
        .sort("row", "pos", "sub")
        .group_by("row", maintain_order=True)
        .agg(hosts=pl.col("host"))
    )
    # -- fallback: complex or malformed expressions, once per unique value
    slow_exprs = df.filter((pl.col("kind") == 2) | pl.col("row").is_in(bad_rows.implode()))["expr"].unique().to_list()
    hosts_of, err_of = {}, {}
    for u in slow_exprs:
        try:
            hosts_of[u], err_of[u] = expand(u), None
        except HostlistError as exc:
            hosts_of[u], err_of[u] = [], str(exc)
    slow = pl.DataFrame(
        {
            "expr": pl.Series(slow_exprs, dtype=pl.Utf8),
            "slow_hosts": pl.Series([hosts_of[u] for u in slow_exprs], dtype=pl.List(pl.Utf8)),
            "err": pl.Series([err_of[u] for u in slow_exprs], dtype=pl.Utf8),
        }
    )
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
    )
    out = original.join(table, on="expr", how="left", nulls_equal=True, maintain_order="left")
    return out["hosts"], out["err"]
