"""The glossary: every term the report uses that a reader outside reliability engineering may
not know, in one sentence each (the terms are kept here once; a test checks the report uses
no listed jargon this list lacks)."""

from __future__ import annotations

import html

from analysis.headline import BAND_COVERS
from analysis.taxonomy import LLAMA3_DAYS
from analysis.taxonomy import LLAMA3_GPUS
from analysis.taxonomy import LLAMA3_TABLE
from analysis.taxonomy import WORKLOAD_DOMAIN
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.sections.causes import COMPARED
from dashboards.sections.causes import NOT_COMPARED

KEY = "glossary"
TITLE = "Glossary"
TABLES = ()

GLOSSARY: dict[str, str] = {
    "goodput": "the share of the GPU time jobs held that went into progress they kept: time not "
    "lost to redoing work after an interruption, restarting, checkpointing or waiting to run "
    "again.",
    "measured goodput": "goodput of the jobs that ran, from the scheduler's records, weighted by "
    "GPU-hours.",
    "projected goodput": "the goodput one job of a given size would get at the fitted failure "
    "rates, with its checkpoint interval set to the best one (Daly's).",
    "badput": "the GPU time that is not goodput, split into lost work, restart, checkpoint and "
    "queue time after a failure.",
    "GPU-hours": "GPUs times hours: a job on 8 GPUs for 2 hours uses 16 GPU-hours.",
    "lost GPU-hours": "GPU-hours of work done since a job's last checkpoint and lost when an "
    "unexpected interruption ended it.",
    "unexpected interruption": "a job attempt that ended by failure (hardware, software or the "
    "job's own), not by a planned drain, a user's cancel or a preemption.",
    "infrastructure": "interruptions caused by the fleet (hardware, system software, network), "
    f"as opposed to the jobs' own failures (failure domain {WORKLOAD_DOMAIN}).",
    WORKLOAD_DOMAIN: "the failure domain of interruptions caused by the job itself (exit codes, "
    "out of memory); their cause class is software.",
    "cause class": "the component class an interruption is attributed to (gpu, gpu_memory, "
    "nvlink, ib_link, psu, host_os, software, ...): the same word in the report, the CLI and "
    "the warehouse's interruptions.cause_class.",
    "MTBF": "mean time between failures, in hours: the hours observed divided by the failures "
    "counted (fleet-wide, per class or per unit).",
    "MTTI": "mean time to interruption of one job, in hours: 1 / the job's interruption rate, "
    "the sum of the failure rates of every part it spans.",
    "ETTR": "effective training time ratio, the name published fleets give a job's goodput: the "
    "share of its wall time spent on training it kept.",
    "failure rate": "failures per 1,000 unit-days: per 1,000 units (GPUs, PSUs, nodes) each "
    "observed for a day; MTBF in hours is 24,000 divided by it.",
    "unit-days": "units times days observed; the exposure a failure rate divides by.",
    "node-hours": "nodes times hours observed.",
    "exposure": "the time each unit was observed in service, summed; what rates divide by.",
    "95% band": "the range that holds the true value with 95% confidence (a confidence "
    f"interval); a projection's band {BAND_COVERS}.",
    "Weibull": "a lifetime model whose shape k says whether failures get rarer with age "
    "(k < 1, infant mortality), stay constant (k = 1) or grow (k > 1, wear-out).",
    "shape": "the Weibull shape parameter k (see Weibull).",
    "AIC": "Akaike's information criterion: of the candidate lifetime models, the one with the "
    "lowest AIC fits best for its number of parameters and is the one used.",
    "Kaplan-Meier": "the survival curve read directly from the data: the share of units still "
    "working after each age, with failures and removals accounted for.",
    "hazard": "the failure rate at a given age.",
    "hazard ratio": "how many times more often units with a trait (hotter, another rack or SKU) "
    "fail than the others, from a Cox model; 1 means no difference. A clear effect needs a "
    "Holm-adjusted p < 0.05 over the traits (a trait with levels, such as the rack, tested as "
    "one) and a passing proportional-hazards test; power and utilisation follow the load a unit "
    "carries and are read as associations, measured without the traits they move with, never "
    "as what raises the hazard. Telemetry traits are measured over the same first days of "
    "every unit's observation.",
    "Cox": "the Cox proportional-hazards model: estimates hazard ratios of traits without "
    "assuming a lifetime model.",
    "adjusted p": "a p value corrected for testing many nodes or traits at once (Holm or "
    "Benjamini-Hochberg), so that chance alone rarely flags one.",
    "Holm": "a correction of p values for many tests at once (see adjusted p).",
    "lemon": "a node that fails significantly more often than the fleet rate predicts for its "
    "node-hours (adjusted p below the level).",
    "Young": "Young's checkpoint interval, √(2 × checkpoint cost × MTTI).",
    "Daly": "Daly's checkpoint interval, a refinement of Young's that also counts restart time; "
    "the interval the projections use.",
    "checkpoint": "a saved copy of the job's state it restarts from after an interruption.",
    "spares": "hot spare nodes that replace a failed node at once, so a hardware failure costs a "
    "restart but not a repair wait.",
    "sensitivity": "how much projected goodput each knob (checkpoint cost, restart time, "
    "spares, a more reliable class) buys when changed alone.",
    "what-if": "a projection with one assumption changed (see sensitivity); the first screen's "
    "recommended actions are the three that buy the most.",
    "scope": "the slice of the fleet a report covers (period, cluster, partition, account), and "
    "for projections which interruptions count (hardware, infrastructure or all).",
    "observation window": "the period every rate's exposure is counted over.",
    "quarantined": "input records that could not be read, kept with the reason instead of being "
    "dropped.",
    "Llama 3": f"Meta's published count of {sum(n for _, n, _ in LLAMA3_TABLE):,} unexpected "
    f"interruptions in a {LLAMA3_DAYS:g}-day run on {LLAMA3_GPUS:,} H100 GPUs, the reference mix "
    f"this fleet is compared with: as shares of the {COMPARED} "
    f"on both sides ({sum(n for _, n, c in LLAMA3_TABLE if c not in NOT_COMPARED):,} of Llama 3's "
    f"{sum(n for _, n, _ in LLAMA3_TABLE):,}).",
    "infant mortality": "failures that get rarer as units age (Weibull k < 1).",
    "wear-out": "failures that get more frequent as units age (Weibull k > 1).",
}


def build(ctx: ReportContext) -> Section:
    s = Section(KEY, TITLE)
    s.reading = "The terms this report uses, in one sentence each."
    s.extra_html = (
        '<dl class="glossary">'
        + "".join(
            f'<dt id="term-{html.escape(term.replace(" ", "-"))}">{html.escape(term)}</dt>'
            f"<dd>{html.escape(text)}</dd>"
            for term, text in sorted(GLOSSARY.items(), key=lambda kv: kv[0].lower())
        )
        + "</dl>"
    )
    return s
