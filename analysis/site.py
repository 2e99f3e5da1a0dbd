"""A home's own settings for its report: ``HOME/goodput.toml``, read once per command.

    goodput_target = 0.95        # the measured goodput the site aims at (a fraction)
    gpu_hour_cost = 2.5          # $ per GPU-hour (``--gpu-hour-cost`` on build/report wins)
    planned_job_gpus = 4096      # the job size the site plans to run: the actions are ranked there

    [action_cost]                # what an action would cost, in $, where the site knows it
    spare_node = 250000          # one spare node (the spares action: nodes x this)
    faster_restart = 120000      # the engineering that halves the restart time
    faster_checkpoint = 80000    # the engineering that halves the checkpoint cost

Every key is optional; without a file the report uses no target of its own (the best published
ETTR of ``analysis.references`` instead), no price and no planned size."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

SITE_CONFIG = "goodput.toml"
ACTION_COSTS = {  # key of [action_cost] -> the sensitivity knob it prices (analysis.whatif)
    "spare_node": "spares",
    "faster_restart": "restart_s",
    "faster_checkpoint": "ckpt_cost_s",
}
KEYS = {"goodput_target", "gpu_hour_cost", "planned_job_gpus", "action_cost"}


@dataclass(frozen=True)
class Site:
    """The settings of ``HOME/goodput.toml`` (None: not set)."""

    goodput_target: float | None = None
    gpu_hour_cost: float | None = None
    planned_job_gpus: int | None = None
    action_cost: dict[str, float] = field(default_factory=dict)  # knob -> $
    where: str = ""  # the file, for the report to name

    def cost_of(self, knob: str, step: int | None = None) -> float | None:
        """$ of one action (a sensitivity knob): the spares item's nodes x the price of one,
        a user-entered figure for the others, None when the site gave none."""
        price = self.action_cost.get(knob)
        if price is None:
            return None
        return price * step if knob == "spares" and step is not None else price


def _number(doc: dict, key: str, where: str, low: float, high: float | None = None):
    v = doc.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or v < low or (high and v > high):
        bound = f"between {low:g} and {high:g}" if high else f">= {low:g}"
        raise ValueError(f"{where}: {key} must be a number {bound}, not {v!r}")
    return v


def parse(text: str, where: str) -> Site:
    """The settings of one file's text; ValueError (one line) on a bad file."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{where}: not valid TOML: {exc}") from None
    unknown = set(doc) - KEYS
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    target = _number(doc, "goodput_target", where, 0.0, 1.0)
    if target is not None and not 0 < target <= 1:
        raise ValueError(f"{where}: goodput_target is a fraction in (0, 1], e.g. 0.95")
    planned = _number(doc, "planned_job_gpus", where, 1)
    if planned is not None and planned != int(planned):
        raise ValueError(f"{where}: planned_job_gpus must be a whole number of GPUs")
    costs = doc.get("action_cost", {})
    if not isinstance(costs, dict):  # a user's file: ValueError, the one-line error
        raise ValueError(f"{where}: action_cost is a table ([action_cost])")  # noqa: TRY004
    wrong = set(costs) - set(ACTION_COSTS)
    if wrong:
        raise ValueError(
            f"{where}: unknown action_cost key(s) {', '.join(sorted(wrong))} "
            f"(known: {', '.join(ACTION_COSTS)})"
        )
    priced = {ACTION_COSTS[k]: _number(costs, k, f"{where} [action_cost]", 0.0) for k in costs}
    return Site(
        goodput_target=None if target is None else float(target),
        gpu_hour_cost=_number(doc, "gpu_hour_cost", where, 0.0),
        planned_job_gpus=None if planned is None else int(planned),
        action_cost={k: float(v) for k, v in priced.items()},
        where=where,
    )


def load(home: Path | str | None) -> Site:
    """``HOME/goodput.toml``'s settings, or none when the home has no such file."""
    path = Path(home) / SITE_CONFIG if home is not None else None
    if path is None or not path.is_file():
        return Site()
    return parse(path.read_text(encoding="utf-8"), str(path))
