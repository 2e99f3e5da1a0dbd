"""This fleet beside published fleets: each figure of ``analysis.references`` with the fleet's own
figure normalised the same way, its 95% CI, and the ratio of the two with its CI.

Takes a warehouse (``job_attempts``, ``interruptions``, ``availability`` and the rates a
projection uses); returns ``compare(...)`` rows, one per published figure. The fleet's figures:

- per 1,000 node-days / GPU-days: unexpected interruptions outside the jobs' own failures (the
  infrastructure scope, optionally only some cause classes) over the node- or GPU-days the job
  attempts ran (``rate_sources.exposure_hours``), with Garwood's exact Poisson CI;
- MTTI of one job at a size: the analytic projection at that size (``analysis.projection``, the
  infrastructure scope, as ``goodput project --gpus N``) with its band;
- system MTBF at a size: the same count's rate per GPU-hour, times the size, inverted;
- ETTR: the projected goodput of one job at that size with the default checkpoint and restart
  assumptions, and its band;
- repair time: the mean node outage of ``availability`` (down/drain to back in service).

The ratio ours / published has a CI from both sides on the log scale: ours from its interval,
a published count's from its Poisson error (1/sqrt(events)); a published value without a count
is taken as exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.assumptions import GPUS_PER_NODE
from analysis.job import Job
from analysis.lifetime_models.exponential import poisson_rate_ci
from analysis.numbers import in_hours
from analysis.numbers import num
from analysis.numbers import pct
from analysis.references import METRICS
from analysis.references import Figure
from analysis.references import load
from analysis.taxonomy import DEFAULT_SCOPE
from analysis.taxonomy import WORKLOAD_DOMAIN

Z95 = 1.959963984540054
HEADLINE = ("llama3", "mtti_hours")  # the first screen's one line: Llama 3's interruption rate


@dataclass(frozen=True)
class Ours:
    """The fleet's figure for one published one: value and 95% CI, what it rests on, or why it
    is missing (``missing``)."""

    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    basis: str = ""
    missing: str = ""


def unexpected_infrastructure(interruptions: pl.DataFrame) -> pl.DataFrame:
    """The interruptions every rate here counts: unplanned, outside the jobs' own failures."""
    return interruptions.filter(
        ~pl.col("planned").fill_null(False)
        & (pl.col("failure_domain").fill_null("unknown") != WORKLOAD_DOMAIN)
    )


def per_1k_unit_days(events: int, unit_hours: float, basis: str = "") -> Ours:
    """``events`` per 1,000 unit-days over ``unit_hours`` unit-hours, with Garwood's exact 95%
    CI: how a fleet's failures or interruptions per 1,000 node- or GPU-days are counted."""
    ci = poisson_rate_ci(np.array([events]), np.array([unit_hours]))
    rate, lo, hi = (24_000.0 * float(x[0]) for x in ci)
    return Ours(rate, lo, hi, basis)


def repair_minutes(availability: pl.DataFrame) -> Ours:
    """The mean time to repair a node over every repaired outage (``availability``'s systems,
    pooled: the mean over all repairs, as LANL's 355 minutes is), with its CI for one system."""
    a = availability
    if a.height == 0 or "level" not in a.columns:
        return Ours(missing="no node outages (node down/drain events or failure records)")
    systems = a.filter((pl.col("level") == "system") & pl.col("mttr_hours").is_not_null())
    if systems.height == 0:
        return Ours(missing="no repaired node outage")
    n = int(systems["repairs_known"].fill_null(0).sum())
    if systems.height == 1:
        r = systems.row(0, named=True)
        return Ours(60 * r["mttr_hours"], r["mttr_ci_low"] and 60 * r["mttr_ci_low"],
                    r["mttr_ci_high"] and 60 * r["mttr_ci_high"],
                    f"{n:,} repaired node outages")  # fmt: skip
    pooled = (systems["mttr_hours"] * systems["repairs_known"]).sum() / max(n, 1)
    return Ours(
        60 * pooled, None, None,
        f"{n:,} repaired node outages of {systems.height} systems (no pooled CI)",
    )  # fmt: skip


class FleetFigures:
    """The fleet's figures, each computed once however many published figures ask for it."""

    def __init__(self, wh, attempts: pl.DataFrame, interruptions: pl.DataFrame,
                 availability: pl.DataFrame, gpus_per_node: int = GPUS_PER_NODE):  # fmt: skip
        from analysis.rate_sources import exposure_hours

        self.wh = wh
        self.counted = unexpected_infrastructure(interruptions)
        self.exposure = exposure_hours(attempts, gpus_per_node)
        self.availability = availability
        self.gpus_per_node = gpus_per_node
        self._projections: dict[int, dict] = {}
        self._rates = None

    def events(self, classes: tuple[str, ...] | None) -> int:
        if classes is None:
            return self.counted.height
        return self.counted.filter(pl.col("cause_class").is_in(list(classes))).height

    def _what(self, classes) -> str:
        return "unexpected interruptions" + (f" of {', '.join(classes)}" if classes else "")

    def per_unit_days(self, unit: str, classes=None) -> Ours:
        """Interruptions per 1,000 unit-days of job time, Garwood's CI."""
        hours = self.exposure[unit]
        if hours <= 0:
            return Ours(missing="no job time to count over (job_attempts without start and end)")
        days = f"{hours / 24:,.0f} {'GPU' if unit == 'gpu' else unit}-days"
        n = self.events(classes)
        return per_1k_unit_days(n, hours, f"{n:,} {self._what(classes)} over {days}")

    def system_mtbf(self, at_gpus: int, classes=None) -> Ours:
        """1 / (the classes' interruptions per GPU-hour x ``at_gpus``), CI inverted."""
        per = self.per_unit_days("gpu", classes)
        if per.missing:
            return per
        inv = 24_000.0 / at_gpus
        if per.value == 0:  # no failure: only the CI's bound says something
            bound = inv / per.ci_high
            return Ours(None, bound, None, per.basis, f"none: at least {bound:,.3g} h")
        return Ours(inv / per.value, inv / per.ci_high, inv / per.ci_low if per.ci_low else None,
                    per.basis + f", scaled to {at_gpus:,} GPUs")  # fmt: skip

    def projection(self, at_gpus: int) -> dict | None:
        """The analytic projection of one job of ``at_gpus`` GPUs at the warehouse's rates
        (infrastructure scope), or None when there is nothing to project from."""
        if at_gpus not in self._projections:
            from analysis.rate_sources import scoped_rates
            from analysis.scenario import evaluate

            if self._rates is None:
                try:
                    self._rates = scoped_rates(self.wh, DEFAULT_SCOPE, self.gpus_per_node)
                except ValueError:
                    self._rates = False
            self._projections[at_gpus] = (
                evaluate(self._rates, Job(at_gpus, self.gpus_per_node)) if self._rates else None
            )
        return self._projections[at_gpus]

    def mtti(self, at_gpus: int) -> Ours:
        p = self.projection(at_gpus)
        if p is None:
            return Ours(missing="no failure rates or interruptions to project from")
        return Ours(p["mtti_hours"], p["mtti_ci_low"], p["mtti_ci_high"],
                    f"projected for one {at_gpus:,}-GPU job ({DEFAULT_SCOPE} scope)")  # fmt: skip

    def ettr(self, at_gpus: int) -> Ours:
        p = self.projection(at_gpus)
        if p is None:
            return Ours(missing="no failure rates or interruptions to project from")
        how = (
            f"projected goodput of one {at_gpus:,}-GPU job (checkpoint {p['ckpt_cost_s']:g} s, "
            f"restart {p['restart_s']:g} s, Daly's interval)"
        )
        return Ours(p["goodput"], p["goodput_ci_low"], p["goodput_ci_high"], how)

    def repair_minutes(self) -> Ours:
        return repair_minutes(self.availability)

    def of(self, f: Figure) -> Ours:
        if f.metric == "failures_per_1k_node_days":
            return self.per_unit_days("node", f.classes)
        if f.metric == "interruptions_per_1k_gpu_days":
            return self.per_unit_days("gpu", f.classes)
        if f.metric == "mtti_hours":
            return self.mtti(f.at_gpus)
        if f.metric == "system_mtbf_hours":
            return self.system_mtbf(f.at_gpus, f.classes)
        if f.metric == "ettr":
            return self.ettr(f.at_gpus)
        if f.metric == "repair_minutes":
            return self.repair_minutes()
        raise ValueError(f"no fleet figure for metric {f.metric!r}")


def ratio_ci(ours: Ours, f: Figure) -> tuple[float | None, float | None, float | None]:
    """ours / published, with a 95% CI on the log scale from both sides' errors."""
    if ours.value is None or not ours.value > 0:
        return None, None, None
    r = ours.value / f.value
    s2 = (1.0 / f.events) if f.events else 0.0
    if ours.ci_low and ours.ci_high and ours.ci_low > 0:
        s2 += (math.log(ours.ci_high / ours.ci_low) / (2 * Z95)) ** 2
    elif not s2:
        return r, None, None
    s = math.sqrt(s2)
    return r, r * math.exp(-Z95 * s), r * math.exp(Z95 * s)


def times(x: float) -> str:
    """A ratio as "0.046x", "1.4x", "22x"."""
    if x >= 9.95:
        return f"{x:,.0f}x"
    return f"{x:.1f}x" if x >= 0.995 else f"{x:.2g}x"


def verdict(f: Figure, ratio: float | None, lo: float | None, hi: float | None) -> str:
    """Better, worse or no different from the published figure (a CI that holds 1: no
    different)."""
    if ratio is None:
        return ""
    if lo is not None and hi is not None and lo <= 1 <= hi:
        return "no different"
    better = (ratio > 1) == METRICS[f.metric].higher_is_better
    if f.bound == "at least" and not better and hi is not None and hi >= 1:
        return "no different"
    return "better" if better else "worse"


def compare(wh, home=None, gpus_per_node: int = GPUS_PER_NODE, tables: dict | None = None,
            figures: list[Figure] | None = None) -> pl.DataFrame:  # fmt: skip
    """One row per published figure (``analysis.references.load(home)``, or ``figures``) with the
    fleet's own beside it; ``tables`` holds job_attempts, interruptions and availability when
    they were read already."""
    t = tables or {}

    def table(name):
        return t[name] if name in t else wh.read(name)

    ours = FleetFigures(wh, table("job_attempts"), table("interruptions"),
                        table("availability"), gpus_per_node)  # fmt: skip
    rows = []
    for f in load(home) if figures is None else figures:
        o = ours.of(f)
        r, lo, hi = ratio_ci(o, f)
        m = METRICS[f.metric]
        rows.append({
            "fleet": f.fleet.id, "reference": f.fleet.name, "short": f.fleet.label,
            "metric": f.metric, "figure": f.what, "unit": m.unit, "at_gpus": f.at_gpus,
            "label": f.label or None,
            "published": f.value, "bound": f.bound or None, "published_shown": f.shown,
            "ours": o.value, "ours_ci_low": o.ci_low, "ours_ci_high": o.ci_high,
            "ours_basis": o.basis or None, "missing": o.missing or None,
            "ratio": r, "ratio_ci_low": lo, "ratio_ci_high": hi,
            "verdict": verdict(f, r, lo, hi) or None, "definition": f.definition,
            "source": f.fleet.source, "url": f.fleet.url or None, "fleet_size": f.fleet.size,
            "period": f.fleet.period, "verified": f.fleet.verified,
        })  # fmt: skip
    return pl.DataFrame(rows, schema=COLUMNS)


S, F, I = pl.Utf8, pl.Float64, pl.Int64
COLUMNS = {
    "fleet": S, "reference": S, "short": S, "metric": S, "figure": S, "unit": S, "at_gpus": I,
    "label": S,
    "published": F, "bound": S, "published_shown": S, "ours": F, "ours_ci_low": F,
    "ours_ci_high": F, "ours_basis": S, "missing": S, "ratio": F, "ratio_ci_low": F,
    "ratio_ci_high": F, "verdict": S, "definition": S, "source": S, "url": S, "fleet_size": S,
    "period": S, "verified": S,
}  # fmt: skip


@dataclass(frozen=True)
class Headline:
    """The one-line comparison for the first screen, with its numbers."""

    text: str
    ratio: float
    ci_low: float | None
    ci_high: float | None
    reference: str
    at_gpus: int | None


def headline(rows: pl.DataFrame) -> Headline | None:
    """The first screen's line: the interruption rate of one job of Llama 3's size (the inverse
    of its MTTI) against Llama 3's, from ``compare`` rows, e.g. "interruption rate 1.4x Llama
    3's at the same size (16,384 GPUs; 95% CI 1.1x-1.8x)"; None without a projection."""
    fleet, metric = HEADLINE
    row = rows.filter((pl.col("fleet") == fleet) & (pl.col("metric") == metric)
                      & pl.col("ratio").is_not_null())  # fmt: skip
    if row.height == 0:
        return None
    r = row.row(0, named=True)
    # a mean time's ratio inverted: the rate of interruptions, ours / theirs
    ratio = 1.0 / r["ratio"]
    lo = 1.0 / r["ratio_ci_high"] if r["ratio_ci_high"] else None
    hi = 1.0 / r["ratio_ci_low"] if r["ratio_ci_low"] else None
    ci = f"; 95% CI {times(lo)}–{times(hi)}" if lo and hi else ""
    text = (f"interruption rate {times(ratio)} {r['short']}'s at the same size "
            f"({r['at_gpus']:,} GPUs{ci})")  # fmt: skip
    return Headline(text, ratio, lo, hi, r["reference"], r["at_gpus"])


def first_screen_line(wh, home=None, tables: dict | None = None,
                      gpus_per_node: int = GPUS_PER_NODE) -> Headline | None:  # fmt: skip
    """``headline`` computed for its one figure only (the first screen's line)."""
    fleet, metric = HEADLINE
    figures = [f for f in load(home) if (f.fleet.id, f.metric) == (fleet, metric)]
    return headline(compare(wh, home, gpus_per_node, tables, figures)) if figures else None


def best_ettr(home=None) -> Figure | None:
    """The highest published ETTR of the reference file (and the site's): the report's goodput
    target when the home sets none."""
    ettr = [f for f in load(home) if f.metric == "ettr"]
    return max(ettr, key=lambda f: f.value) if ettr else None


def shown(metric: str, value: float | None, unit: bool = True) -> str:
    """A value of ``metric`` as the report and the CLI print it (``unit``: with its unit)."""
    m = METRICS[metric]
    if m.percent:
        return pct(value)
    text = in_hours(value).removesuffix(" h") if m.unit == "h" else num(value)
    return f"{text} {m.unit}" if unit and value is not None and m.unit == "h" else text


def cells(r: dict) -> list[str]:
    """One ``compare`` row as text: reference, what the figure is, published, ours with its 95%
    CI, ours / published with its CI, and the verdict."""
    published = f"{r['bound']} " if r["bound"] else ""
    published += shown(r["metric"], r["published"])
    if r["ours"] is None:  # why: ``missing_reasons``
        return [r["short"], r["figure"], published, "n/a", "", ""]
    ours = shown(r["metric"], r["ours"])
    if r["ours_ci_low"] is not None and r["ours_ci_high"] is not None:
        ours += (f" ({shown(r['metric'], r['ours_ci_low'], False)}–"
                 f"{shown(r['metric'], r['ours_ci_high'], False)})")  # fmt: skip
    ratio = times(r["ratio"])
    if r["ratio_ci_low"] is not None:
        ratio += f" ({times(r['ratio_ci_low'])}–{times(r['ratio_ci_high'])})"
    return [r["short"], r["figure"], published, ours, ratio, r["verdict"] or ""]


HEADER = ["reference", "figure", "published", "this fleet (95% CI)", "ours / theirs", "verdict"]


def missing_reasons(rows: pl.DataFrame) -> list[str]:
    """Why this fleet has no figure for some published ones, each reason once."""
    return list(dict.fromkeys(rows["missing"].drop_nulls()))
