"""Published reliability figures of other fleets: ``data/reference_fleets.toml`` (versioned with
the code, each figure with its source and definition), extended or overridden by a site's own
``HOME/references.toml``. Takes nothing of the project (the taxonomy and the job defaults read
Llama 3's run from here); returns ``Figure`` rows, each normalised as one of ``METRICS``."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REFERENCE_FILE = Path(__file__).parent / "data" / "reference_fleets.toml"
SITE_FILE = "references.toml"  # in the home: a site's own targets and fleets
HOURS_PER_DAY = 24.0


@dataclass(frozen=True)
class Metric:
    """How a figure is normalised: its name, unit, and which way is better."""

    name: str
    unit: str
    higher_is_better: bool
    sized: bool = False  # holds at a job or system size (``at_gpus``)
    percent: bool = False  # a share, shown as a percentage


METRICS = {
    "failures_per_1k_node_days": Metric("failures per 1,000 node-days", "", False),
    "interruptions_per_1k_gpu_days": Metric("interruptions per 1,000 GPU-days", "", False),
    "mtti_hours": Metric("MTTI", "h", True, sized=True),
    "system_mtbf_hours": Metric("system MTBF", "h", True, sized=True),
    "ettr": Metric("ETTR (goodput)", "", True, sized=True, percent=True),
    "repair_minutes": Metric("mean node repair time", "min", False),
}
BOUNDS = ("", "about", "at least")
FLEET_KEYS = {"id", "name", "short", "source", "url", "gpus", "nodes", "days", "period", "verified",
              "figure"}  # fmt: skip
FIGURE_KEYS = {"metric", "value", "events", "bound", "at_gpus", "classes", "label", "definition",
               "reproduce"}  # fmt: skip


@dataclass(frozen=True)
class Fleet:
    """A published fleet: who, how large, over what period, and where it was published."""

    id: str
    name: str
    source: str = ""
    url: str = ""
    gpus: int | None = None
    nodes: int | None = None
    days: float | None = None
    period: str = ""
    verified: str = ""
    short: str = ""  # how a sentence names it ("Llama 3"); the name when not given

    @property
    def label(self) -> str:
        return self.short or self.name

    @property
    def size(self) -> str:
        parts = [f"{self.gpus:,} GPUs" if self.gpus else "", f"{self.nodes:,} nodes" if self.nodes
                 else ""]  # fmt: skip
        return ", ".join(p for p in parts if p)


@dataclass(frozen=True)
class Figure:
    """One published figure of one fleet, normalised as ``METRICS[metric]``."""

    fleet: Fleet
    metric: str
    value: float
    definition: str
    events: int | None = None
    bound: str = ""
    at_gpus: int | None = None
    classes: tuple[str, ...] | None = None
    label: str = ""
    reproduce: str | None = None

    @property
    def shown(self) -> str:
        """The figure as the source gives it, with its unit (and its bound in words)."""
        m = METRICS[self.metric]
        text = f"{100 * self.value:.0f}%" if m.percent else f"{self.value:.3g}"
        text += f" {m.unit}" if m.unit and not m.percent else ""
        return f"{self.bound} {text}".strip()

    @property
    def what(self) -> str:
        """What the figure is, with where it holds: "MTTI of a 16,384-GPU job", "system MTBF at
        18,688 GPUs, 2016-Q4", "mean node repair time (min)"."""
        m = METRICS[self.metric]
        if self.metric == "system_mtbf_hours":
            text = f"{m.name} at {self.at_gpus:,} GPUs"
        elif m.sized:
            text = f"{m.name} of a {self.at_gpus:,}-GPU job"
        else:
            text = m.name + (f" ({m.unit})" if m.unit else "")
        return text + (f", {self.label}" if self.label else "")


def derived_value(fleet: Fleet, metric: str, events: int, at_gpus: int | None) -> float:
    """A figure from a published count: ``events`` over the fleet's units x days, normalised
    as ``metric`` (a rate per 1,000 unit-days, or the mean time between them at its size)."""
    if not fleet.days:
        raise ValueError(f"fleet {fleet.id!r}: a figure given by events needs the fleet's days")
    if metric == "failures_per_1k_node_days":
        units = fleet.nodes
    elif metric == "interruptions_per_1k_gpu_days":
        units = fleet.gpus
    elif metric in ("mtti_hours", "system_mtbf_hours"):
        if at_gpus not in (None, fleet.gpus):
            raise ValueError(f"fleet {fleet.id!r}: a {metric} from events holds at its own GPUs")
        return fleet.days * HOURS_PER_DAY / events
    else:
        raise ValueError(f"fleet {fleet.id!r}: metric {metric!r} cannot be given as events")
    if not units:
        raise ValueError(f"fleet {fleet.id!r}: {metric} from events needs the fleet's size")
    return 1000.0 * events / (units * fleet.days)


def _figure(fleet: Fleet, raw: dict, where: str) -> Figure:
    unknown = set(raw) - FIGURE_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    metric = raw.get("metric")
    if metric not in METRICS:
        raise ValueError(f"{where}: metric {metric!r} is not one of {', '.join(METRICS)}")
    if ("value" in raw) == ("events" in raw):
        raise ValueError(f"{where}: give value or events, one of them")
    bound = raw.get("bound", "")
    if bound not in BOUNDS:
        raise ValueError(f"{where}: bound {bound!r} is not one of {', '.join(map(repr, BOUNDS))}")
    at = raw.get("at_gpus")
    if METRICS[metric].sized and at is None:
        at = fleet.gpus
        if at is None:
            raise ValueError(f"{where}: {metric} needs at_gpus (or the fleet's gpus)")
    events = raw.get("events")
    try:
        value = float(raw["value"]) if events is None else derived_value(fleet, metric, events, at)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None
    if not value > 0 or (METRICS[metric].percent and value > 1):
        raise ValueError(f"{where}: value {value!r} out of range")
    classes = raw.get("classes")
    return Figure(
        fleet, metric, value, str(raw.get("definition", "")), events, bound,
        None if at is None else int(at), tuple(classes) if classes else None,
        str(raw.get("label", "")), raw.get("reproduce"),
    )  # fmt: skip


def parse(text: str, name: str) -> list[Figure]:
    """The figures of one reference file's text (``name`` for the errors: one line each)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{name}: not valid TOML: {exc}") from None
    out = []
    for i, raw in enumerate(doc.get("fleet", []), 1):
        where = f"{name}: fleet {raw.get('id', i)!r}"
        unknown = set(raw) - FLEET_KEYS
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        if not raw.get("id") or not raw.get("name"):
            raise ValueError(f"{where}: needs an id and a name")
        fleet = Fleet(**{k: v for k, v in raw.items() if k != "figure"})
        for j, fig in enumerate(raw.get("figure", []), 1):
            out.append(_figure(fleet, fig, f"{where} figure {j}"))
    return out


@cache
def published() -> tuple[Figure, ...]:
    """The figures of the versioned file."""
    return tuple(parse(REFERENCE_FILE.read_text(encoding="utf-8"), REFERENCE_FILE.name))


def load(home: Path | str | None = None) -> list[Figure]:
    """The published figures, then the site's: a fleet id of ``HOME/references.toml`` replaces
    the same id's figures, a new id is added. Raises ValueError (one line) on a bad file."""
    figures = list(published())
    site = Path(home) / SITE_FILE if home is not None else None
    if site is not None and site.is_file():
        own = parse(site.read_text(encoding="utf-8"), str(site))
        replaced = {f.fleet.id for f in own}
        figures = [f for f in figures if f.fleet.id not in replaced] + own
    return figures


def fleet(fleet_id: str) -> Fleet:
    """A published fleet of the versioned file, by id."""
    return next(f.fleet for f in published() if f.fleet.id == fleet_id)


def published_events(fleet_id: str, metric: str) -> int:
    """The published count behind a figure of the versioned file (e.g. Llama 3's 419)."""
    return next(
        f.events
        for f in published()
        if f.fleet.id == fleet_id and f.metric == metric and f.events is not None
    )
