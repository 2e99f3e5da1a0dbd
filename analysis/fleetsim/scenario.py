"""A fleet scenario: its schema (``SCHEMA``, the one place keys, defaults and bounds are
declared), YAML reading and validation into a plain normalised dict, and knob setting.

A scenario is a nested mapping (docs/fleetsim.md shows every key). ``load`` / ``validate``
return the same mapping with every default filled in; any unknown key, wrong type or value
out of range raises ``ScenarioError`` with one line naming the key. A key that accepts the
word ``estimated`` (``ESTIMATED``) keeps it: ``run.resolve`` replaces it with the warehouse's
estimate (``fleetsim.estimate``). ``with_knob`` returns a
validated copy with one knob changed: a dotted path (``fleet.hot_spares``, ``repair.
technicians``, ``triage.detect_prob``, ``retirement.failures``), ``jobs.<key>`` (every job
of the mix) or ``rate:<class>`` (that class's rate multiplier).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from pathlib import Path

from analysis.assumptions import CKPT_COST_S
from analysis.assumptions import CKPT_INTERVAL_S
from analysis.assumptions import GPUS_PER_NODE
from analysis.assumptions import RESTART_S
from analysis.assumptions import SLOW_DETECT_HOURS
from analysis.taxonomy import DEFAULT_SCOPE
from analysis.taxonomy import SCOPES


class ScenarioError(ValueError):
    """A scenario a user wrote is wrong: one line naming the key."""


ESTIMATED = "estimated"  # the word a numeric key takes to be estimated from the warehouse


@dataclass(frozen=True)
class Key:
    kind: type  # int | float | str | bool | dict
    default: object = None  # None: optional (absent stays None)
    lo: float | None = None
    hi: float | None = None
    choices: tuple | None = None
    doc: str = ""
    estimated: bool = False  # also takes the word ESTIMATED
    infinite: bool = False  # also takes .inf


INF = math.inf
JOB = {
    "gpus": Key(int, None, 1, doc="GPUs the gang job needs (whole nodes are allocated)"),
    "count": Key(int, 1, 1, doc="slots (or fixed-work jobs) of this kind"),
    "checkpoint_interval_hours": Key(
        float, CKPT_INTERVAL_S / 3600, 0, doc="0: every step durable, a failure loses no work"
    ),
    "checkpoint_cost_s": Key(float, CKPT_COST_S, 0),
    "restart_s": Key(float, RESTART_S, 0),
    "work_hours": Key(float, None, 1e-9, doc="fixed work: the job ends when it is done"),
    "standbys": Key(int, 0, 0, doc="idle nodes the job holds to replace a failed one at once"),
    "submit_hours": Key(float, 0.0, 0, doc="first submission"),
    "interarrival_hours": Key(float, 0.0, 0, doc="mean time between submissions (Poisson)"),
}
CLOCKS = ("wall", "compute")  # when failures strike (docs/fleetsim.md, recovery semantics)
PLACEMENTS = ("first_free", "fewest_failures", "avoid_recent")
SCHEMA: dict[str, Key | dict] = {
    "name": Key(str, "scenario"),
    "seed": Key(int, 0, 0),
    "horizon_days": Key(float, 365.0, 1e-6),
    "rates": Key(str, "warehouse", doc="'warehouse' (the selected fits) or a rates CSV path"),
    "scope": Key(str, DEFAULT_SCOPE, choices=SCOPES),
    "idle_failure_factor": Key(float, 1.0, 0, 1, doc="rate of idle nodes / rate in a job"),
    "failure_clock": Key(str, "wall", choices=CLOCKS, doc="failures in wall-clock or compute time"),
    "fleet": {
        "nodes": Key(int, None, 1),
        "gpus_per_node": Key(int, GPUS_PER_NODE, 1),
        "hot_spares": Key(int, 0, 0),
        "warm_standbys": Key(int, 0, 0),
        "warm_activation_hours": Key(float, 0.5, 0),
        "warm_before_free": Key(bool, True, doc="replace from warm standbys before free nodes"),
    },
    "scheduler": {
        "policy": Key(str, "fifo", choices=("fifo", "backfill")),
        "backfill_depth": Key(int, 100, 1, doc="queued jobs a backfill pass looks at"),
        "placement": Key(str, "first_free", choices=PLACEMENTS),
        "host_selection_hours": Key(float, 0.0, 0, doc="to place a job on free nodes"),
    },
    "bad_nodes": {
        "share": Key(float, 0.0, 0, 1, estimated=True, doc="share of nodes failing more often"),
        "multiplier": Key(float, 1.0, 1, estimated=True, doc="their failure rate / a good node's"),
        "cure_prob": Key(float, 1.0, 0, 1, doc="a repair that works makes a bad node good"),
        "appear_per_day": Key(float, 0.0, 0, doc="good nodes turning bad, fleet-wide"),
    },
    "triage": {
        "hours": Key(float, 0.25, 0, doc="automatic triage time of each pulled node"),
        "model": Key(str, "fixed", doc="'fixed' (hours) or a lifetime model of the triage time"),
        "params": Key(dict, None, doc="that model's parameters (hours)"),
        "detect_prob": Key(float, 0.5, 0, 1, doc="share fixed by automatic triage"),
        "diagnosis_prob": Key(float, 1.0, 0, 1, doc="share of hardware failures pinned on a node"),
        "silent_fail_prob": Key(float, None, 0, 1, doc="automatic fixes that do not fix"),
        "false_blame_prob": Key(
            float,
            0.0,
            0,
            1,
            doc="share of job failures blamed on a "
            "healthy node of the job; the faulty one stays in",
        ),
        "refail_hours": Key(
            float,
            24.0,
            1e-9,
            estimated=True,
            infinite=True,
            doc="mean time until a faulty node left in service fails again",
        ),
    },
    "repair": {
        "technicians": Key(int, None, 1, doc="manual repair servers (absent: unlimited)"),
        "model": Key(str, "fitted", doc="'fitted' (repair_fits) or a lifetime model name"),
        "params": Key(dict, None, doc="that model's parameters (hours)"),
        "silent_fail_prob": Key(float, 0.0, 0, 1, estimated=True, doc="repairs that do not fix"),
    },
    "retirement": {
        "policy": Key(str, "window", choices=("window", "score")),
        "failures": Key(int, None, 1, doc="retire a node at this many failures ..."),
        "window_days": Key(float, 30.0, 1e-9, doc="... within this window"),
        "score_initial": Key(float, 100.0),
        "score_penalty": Key(float, 30.0, 0, doc="taken per blamed failure"),
        "score_credit": Key(float, 10.0, 0, doc="given per full period of failure-free service"),
        "score_period_days": Key(float, 1.0, 1e-9),
        "score_threshold": Key(float, 0.0, doc="retire at or below"),
    },
    "maintenance": {
        "every_days": Key(float, None, 1e-6),
        "hours": Key(float, 4.0, 0),
        "group_nodes": Key(int, 32, 1, doc="nodes taken down together (a rack)"),
    },
    "fail_slow": {
        "detect_hours": Key(
            float,
            SLOW_DETECT_HOURS,
            0,
            infinite=True,
            doc="a slow GPU is replaced this long after it slowed (.inf: never)",
        ),
        "rate_per_1k_gpu_days": Key(
            float, None, 0, doc="episodes (absent: the rates' fail_slow row; 0: none)"
        ),
        "model": Key(str, None, doc="the episode-length law with that rate (a lifetime model)"),
        "params": Key(dict, None, doc="its parameters (hours)"),
        "factor": Key(float, None, 1, doc="the job's slowdown meanwhile (absent: measured)"),
    },
    "replications": {
        "min": Key(int, 5, 2),
        "max": Key(int, 30, 2),
        "rel_halfwidth": Key(
            float, 0.05, 0, doc="stop when every 95% CI half-width is within this share of its mean"
        ),
        "fit_uncertainty": Key(bool, True, doc="draw the failure laws from their fits"),
    },
}
LISTS = ("jobs", "rate_multipliers", "sweeps", "spare_curve")  # validated by their own rules
INPUTS = ("name", "seed", "rates", "scope")  # pick the inputs or the seeds: not knobs


def _value(path: str, key: Key, v):
    if key.estimated and v == ESTIMATED:
        return v
    if key.kind is bool:
        if not isinstance(v, bool):
            raise ScenarioError(f"{path}: want true or false, got {v!r}")
        return v
    if key.kind is dict:
        if not isinstance(v, dict):
            raise ScenarioError(f"{path}: want a mapping, got {v!r}")
        return dict(v)
    if key.kind is str:
        if not isinstance(v, str) or not v.strip():
            raise ScenarioError(f"{path}: want text, got {v!r}")
        v = v.strip()
        if key.choices and v not in key.choices:
            raise ScenarioError(f"{path}: {v!r} is not one of {', '.join(key.choices)}")
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ScenarioError(f"{path}: want a number, got {v!r}")
    if key.kind is int and float(v) != int(v):
        raise ScenarioError(f"{path}: want a whole number, got {v!r}")
    v = key.kind(v)
    if key.infinite and v == INF:
        return v
    if not math.isfinite(v):
        raise ScenarioError(f"{path}: want a finite number, got {v!r}")
    if key.lo is not None and v < key.lo:
        raise ScenarioError(f"{path}: {v!r} is below {key.lo:g}")
    if key.hi is not None and v > key.hi:
        raise ScenarioError(f"{path}: {v!r} is above {key.hi:g}")
    return v


def _section(path: str, schema: dict, given) -> dict:
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise ScenarioError(f"{path}: want a mapping, got {given!r}")
    unknown = [k for k in given if k not in schema]
    if unknown:
        raise ScenarioError(f"{path}{unknown[0]}: unknown key; known: {', '.join(schema)}")
    out = {}
    for k, key in schema.items():
        v = given.get(k)
        out[k] = key.default if v is None else _value(f"{path}{k}", key, v)
    return out


def _jobs(given) -> list[dict] | str:
    if given is None or given == "measured":
        return "measured"
    if not isinstance(given, list) or not given:
        raise ScenarioError("jobs: want 'measured' or a list of jobs (gpus, count, ...)")
    out = []
    for i, j in enumerate(given):
        job = _section(f"jobs[{i}].", JOB, j)
        if job["gpus"] is None:
            raise ScenarioError(f"jobs[{i}].gpus: required")
        if job["checkpoint_interval_hours"] == 0 and job["checkpoint_cost_s"] > 0:
            raise ScenarioError(
                f"jobs[{i}].checkpoint_cost_s: a job whose every step is durable "
                "(checkpoint_interval_hours 0) has no checkpoint to pay for: set it to 0"
            )
        if job["work_hours"] is None and job["interarrival_hours"] > 0:
            raise ScenarioError(
                f"jobs[{i}].interarrival_hours: only jobs with work_hours arrive over time "
                "(a slot without work_hours runs jobs back to back from its submission)"
            )
        out.append(job)
    return out


def validate(raw) -> dict:
    """The scenario with every default filled in; ``ScenarioError`` on the first problem."""
    if not isinstance(raw, dict):
        raise ScenarioError(f"a scenario is a mapping of keys, got {type(raw).__name__}")
    known = [*SCHEMA, *LISTS]
    unknown = [k for k in raw if k not in known]
    if unknown:
        raise ScenarioError(f"{unknown[0]}: unknown key; known: {', '.join(known)}")
    top = {k: v for k, v in SCHEMA.items() if isinstance(v, Key)}
    out = _section("", top, {k: raw.get(k) for k in top})
    for name, sub in SCHEMA.items():
        if isinstance(sub, dict):
            out[name] = _section(f"{name}.", sub, raw.get(name))
    if out["fleet"]["nodes"] is None:
        raise ScenarioError("fleet.nodes: required")
    f = out["fleet"]
    if f["hot_spares"] + f["warm_standbys"] >= f["nodes"]:
        raise ScenarioError("fleet: hot_spares + warm_standbys must be fewer than nodes")
    r = out["replications"]
    if r["min"] > r["max"]:
        raise ScenarioError(f"replications.min ({r['min']}) is above replications.max ({r['max']})")
    for section, fixed in (("repair", "fitted"), ("triage", "fixed")):
        if out[section]["model"] != fixed:
            from analysis import lifetime_models

            try:
                law = lifetime_models.get(out[section]["model"])
                law(**(out[section]["params"] or {}))
            except (ValueError, TypeError) as exc:
                raise ScenarioError(f"{section}: {exc}") from None
    if (out["bad_nodes"]["share"] == ESTIMATED) != (out["bad_nodes"]["multiplier"] == ESTIMATED):
        raise ScenarioError(
            "bad_nodes: share and multiplier are estimated together (both 'estimated') or given"
        )
    out["jobs"] = _jobs(raw.get("jobs"))
    if isinstance(out["jobs"], list):
        g = f["gpus_per_node"]
        room = f["nodes"] - f["hot_spares"] - f["warm_standbys"]
        slots = [j for j in out["jobs"] if j["work_hours"] is None]
        need = sum((math.ceil(j["gpus"] / g) + j["standbys"]) * j["count"] for j in slots)
        if need > room:
            raise ScenarioError(
                f"jobs: the mix needs {need} nodes but {room} are outside the "
                "spare pools (slots hold their nodes: the rest would never run)"
            )
        for i, j in enumerate(out["jobs"]):
            if math.ceil(j["gpus"] / g) + j["standbys"] > room:
                raise ScenarioError(
                    f"jobs[{i}]: needs {math.ceil(j['gpus'] / g) + j['standbys']} nodes "
                    f"(standbys included) but {room} are outside the spare pools"
                )
    mult = raw.get("rate_multipliers") or {}
    if not isinstance(mult, dict):
        raise ScenarioError("rate_multipliers: want a mapping class: factor")
    out["rate_multipliers"] = {
        str(c): _value(f"rate_multipliers.{c}", Key(float, None, 0), v) for c, v in mult.items()
    }
    out["sweeps"] = _sweeps(raw.get("sweeps"))
    curve = raw.get("spare_curve") or []
    if not isinstance(curve, list):
        raise ScenarioError("spare_curve: want a list of hot-spare counts")
    out["spare_curve"] = [_value("spare_curve", Key(int, None, 0), v) for v in curve]
    bare = {**out, "sweeps": [], "spare_curve": []}
    for i, sw in enumerate(out["sweeps"]):  # every point is a valid scenario, checked now
        for v in sw["values"]:
            try:
                with_knob(bare, sw["knob"], v)
            except ScenarioError as exc:
                raise ScenarioError(f"sweeps[{i}]: {exc}") from None
    return out


def _sweeps(given) -> list[dict]:
    if not given:
        return []
    if not isinstance(given, list):
        raise ScenarioError("sweeps: want a list of {knob, values}")
    out = []
    for i, s in enumerate(given):
        if not isinstance(s, dict) or set(s) != {"knob", "values"}:
            raise ScenarioError(f"sweeps[{i}]: want exactly the keys knob and values")
        if not isinstance(s["values"], list) or not s["values"]:
            raise ScenarioError(f"sweeps[{i}].values: want a non-empty list")
        out.append({"knob": str(s["knob"]), "values": list(s["values"])})
    return out


def with_knob(spec: dict, knob: str, value) -> dict:
    """A validated copy of ``spec`` with one knob set (module docstring)."""
    raw = copy.deepcopy(spec)
    if knob.startswith("rate:"):
        raw["rate_multipliers"][knob.split(":", 1)[1]] = value
        return validate(raw)
    section, _, key = knob.partition(".")
    if section == "jobs" and key in JOB:
        if not isinstance(raw["jobs"], list):
            raise ScenarioError(f"{knob}: a measured job mix has no per-job keys; list the jobs")
        for j in raw["jobs"]:
            j[key] = value
        return validate(raw)
    sub = SCHEMA.get(section)
    if key and isinstance(sub, dict) and key in sub:
        raw[section][key] = value
    elif not key and isinstance(sub, Key) and section not in INPUTS:
        raw[section] = value
    else:
        raise ScenarioError(
            f"knob {knob!r}: use section.key (e.g. fleet.hot_spares), jobs.<key>, rate:<class>, "
            "horizon_days or idle_failure_factor"
        )
    return validate(raw)


def load(path) -> dict:
    """Read and validate a scenario YAML file (a bad file is one ``ScenarioError`` line); a
    relative rates path is relative to the scenario file."""
    import yaml

    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise ScenarioError(f"cannot read scenario {p}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ScenarioError(f"scenario {p} is not valid YAML{where}") from None
    try:
        spec = validate(raw)
    except ScenarioError as exc:
        raise ScenarioError(f"scenario {p}: {exc}") from None
    if spec["rates"] != "warehouse" and not Path(spec["rates"]).is_absolute():
        spec["rates"] = str(p.parent / spec["rates"])  # a rates file beside the scenario
    return spec
