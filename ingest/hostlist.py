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


def expand_column(col: pl.Series) -> tuple[pl.Series, pl.Series]:
    """Expand a column of hostlists: (List[str] hosts, error message or null) per row."""
    uniq = col.unique().to_list()
    hosts: dict[str | None, list[str]] = {}
    errors: dict[str | None, str | None] = {}
    for u in uniq:
        try:
            hosts[u], errors[u] = expand(u), None
        except HostlistError as exc:
            hosts[u], errors[u] = [], str(exc)
    keys = pl.Series("k", uniq, dtype=pl.Utf8)
    lut = pl.DataFrame(
        {
            "k": keys,
            "hosts": pl.Series([hosts[u] for u in uniq], dtype=pl.List(pl.Utf8)),
            "err": pl.Series([errors[u] for u in uniq], dtype=pl.Utf8),
        }
    )
    joined = pl.DataFrame({"k": col.cast(pl.Utf8)}).join(lut, on="k", how="left", nulls_equal=True, maintain_order="left")
    return joined["hosts"], joined["err"]
