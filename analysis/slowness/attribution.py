"""Who and what made a job run slow: each slow period of a step log (``steps``) attributed to a
GPU or node and a cause (``warehouse.signals.CAUSES``) with the confidence of the evidence, and
the periods the telemetry alone shows for the jobs no step log covers (the formulas are in
docs/statistics.md).

Takes the step-log periods, ``job_attempts`` (the job's nodes in the period), the whole GPU
spans (``signals.gpu_spans``), NVLink error events (``hw_events``), how densely each host's
clock-event reasons were sampled (``reason_spacing``), and ``job_step_times`` (what the logs
cover); returns ``slow_periods`` rows.

A step-log period's evidence, strongest first:

1. a GPU span on one of the job's nodes overlapping the period (``gpu_evidence``): the GPU whose
   spans cover most of the period (clocks before a PCIe link on a tie, then the lower ratio);
   its cause is the span's (thermal or power by its bits, pcie); confidence ``high`` when it
   covers at least ``HIGH_SHARE`` of the period, else ``medium``;
2. NVLink error events (``component_class`` nvlink) on the job's nodes from
   ``nvlink.NVLINK_BEFORE_S`` before the period to its end: cause ``nvlink``, the GPU with most,
   ``medium``;
3. the log's per-rank evidence (``steps``: timers or straggler scores): a rank standing out
   (``RANK_RATIO``) names its node (a straggler report names it; a timer's rank is placed on the
   attempt's nodes in order, ``gpus per node`` ranks each, as Slurm's block distribution does):
   cause ``host`` where that node's clock-event reasons were sampled at least twice per period
   and show no slowdown, else ``unknown``; timers where no rank stands out: ``workload`` (every
   rank computes slower: the job's own work, not one straggler); ``medium``;
4. nothing: ``unknown``, ``low``.

Telemetry alone: a ``clocks`` span of at least ``MIN_EPISODE_S`` on a node while a job ran
there and no step log of the job covers it is a period of that job, ``low`` confidence. A
synchronous job runs at its slowest GPU's speed, so over the overlap ``D`` it loses
``D x (1 - ratio)`` (the SM clock's share of its max; where no clock was sampled,
``ASSUMED_RATIO``: NVML's HW slowdowns cut clocks by a factor of 2 or more). A job holding whole
nodes holds the GPU; one holding part of a node holds it with chance ``gpu_share`` = its GPUs
over those of every partial job on the node in the span (exactly one of them held a busy GPU),
and its extra time is that chance times the loss. Two spans of one job at once cost the larger
loss, not both: a span's time under a larger loss of the same job is left out.
"""

from __future__ import annotations

import polars as pl

from analysis.assumptions import GPUS_PER_NODE
from analysis.slowness.keys import JOB
from analysis.slowness.keys import KEYS
from analysis.slowness.nvlink import nvlink_evidence
from analysis.slowness.signals import MIN_EPISODE_S
from warehouse.schemas import TABLES
from warehouse.schemas import conform
from warehouse.signals import REASON_METRICS

HIGH_SHARE = 0.5  # a GPU signal over this share of a period is strong evidence
RANK_RATIO = 1.1  # a rank whose compute (or 1 / score) is this much above the median stands out
ASSUMED_RATIO = 0.5  # a slow span's clock ratio where no clock was sampled
_FAR = pl.datetime(9999, 1, 1)


def _seconds(a: pl.Expr, b: pl.Expr) -> pl.Expr:
    return (b - a).dt.total_microseconds() / 1e6


def _attempts(attempts: pl.DataFrame) -> pl.DataFrame:
    """The attempts that started, numbered (``_ai``), with their span (``_as``, ``_ae``)."""
    return (
        attempts.filter(pl.col("start_time").is_not_null())
        .select(
            *JOB,
            pl.col("start_time").alias("_as"),
            pl.col("end_time").fill_null(_FAR).alias("_ae"),
            "nodes",
            "n_gpus",
        )
        .with_row_index("_ai")
    )


def period_hosts(periods: pl.DataFrame, att: pl.DataFrame) -> pl.DataFrame:
    """(period keys, host, attempt number, GPUs per node) of each timed period: the nodes of
    the job's attempts (``_attempts``) that overlap it, the earliest attempt first.

    Periods pair with attempts by time before any node list is touched, and the rows carry the
    attempt's number, not its list: a requeued job has hundreds of attempts of a thousand nodes
    each, and rows carrying lists took a 2,048-node fleet's build past 24 GB."""
    timed = periods.filter(pl.col("start_time").is_not_null() & pl.col("end_time").is_not_null())
    on = (
        timed.select(*KEYS, "start_time", "end_time")
        .join(att.select(*JOB, "_ai", "_as", "_ae"), on=JOB, how="inner")
        .filter((pl.col("_as") < pl.col("end_time")) & (pl.col("_ae") > pl.col("start_time")))
        .join(att.select("_ai", "nodes", "n_gpus"), on="_ai", how="inner")
        .sort([*KEYS, "_as", "_ai"])
    )
    per_node = (pl.col("n_gpus") // pl.col("nodes").list.len().clip(lower_bound=1)).clip(
        lower_bound=1
    )
    return (
        on.with_columns(_per_node=per_node)
        .explode("nodes")
        .rename({"nodes": "host"})
        .filter(pl.col("host").is_not_null())
        .unique([*KEYS, "host"], keep="first", maintain_order=True)
        .select(*KEYS, "host", "_ai", "_per_node")
    )


def gpu_evidence(periods: pl.DataFrame, hosts: pl.DataFrame, spans: pl.DataFrame) -> pl.DataFrame:
    """Per period, the GPU whose spans on the job's nodes cover most of it: ``_g_host``,
    ``_g_gpu``, ``_g_cause``, ``_g_share``, ``_g_ratio``, ``_g_signal``, ``_g_names``,
    ``_g_hosts`` (nodes with any span in it)."""
    win = periods.filter(pl.col("start_time").is_not_null()).select(
        *KEYS, pl.col("start_time").alias("_ps"), pl.col("end_time").alias("_pe")
    )
    cand = (
        hosts.select(*KEYS, "host")
        .join(win, on=KEYS)
        .join(spans, on="host", how="inner")
        .filter((pl.col("start_time") < pl.col("_pe")) & (pl.col("end_time") > pl.col("_ps")))
    )
    over = _seconds(
        pl.max_horizontal("start_time", "_ps"), pl.min_horizontal("end_time", "_pe")
    ).alias("_over")
    per_gpu = (
        cand.with_columns(over)
        .group_by([*KEYS, "host", "gpu", "signal"])
        .agg(
            pl.col("_over").sum(),
            pl.col("reasons").bitwise_or(),
            pl.col("ratio").mean(),
            pl.col("cause").drop_nulls().first(),
            pl.col("reason_names").drop_nulls().first(),
            _len=_seconds(pl.col("_ps").first(), pl.col("_pe").first()),
        )
        .with_columns(
            _share=(pl.col("_over") / pl.col("_len").clip(lower_bound=1.0)).clip(upper_bound=1.0),
            _hosts=pl.col("host").n_unique().over(KEYS),
        )
    )
    best = (
        per_gpu.sort(
            ["_share", pl.col("signal") == "clocks", "ratio"],
            descending=[True, True, False],
            nulls_last=True,
        )
        .group_by(KEYS, maintain_order=True)
        .first()
    )
    return best.select(
        *KEYS,
        _g_host="host",
        _g_gpu=pl.col("gpu").cast(pl.Int32),
        _g_cause="cause",
        _g_share="_share",
        _g_ratio="ratio",
        _g_signal="signal",
        _g_names="reason_names",
        _g_hosts="_hosts",
    )


def rank_node(periods: pl.DataFrame, hosts: pl.DataFrame, att: pl.DataFrame) -> pl.DataFrame:
    """Per period, the node its log's slowest rank ran on (``_r_host``): the straggler report's
    node, else the timer's rank placed on its attempt's nodes in order."""
    first = (
        hosts.group_by(KEYS, maintain_order=True)
        .agg(pl.col("_ai").first(), pl.col("_per_node").first())
        .join(att.select("_ai", _att_nodes="nodes"), on="_ai", how="left")
    )
    placed = periods.select(*KEYS, "slow_rank", "slow_node").join(first, on=KEYS, how="left")
    idx = pl.col("slow_rank") // pl.col("_per_node")
    return placed.select(
        *KEYS,
        _r_host=pl.coalesce(
            "slow_node",
            pl.when(idx < pl.col("_att_nodes").list.len()).then(
                pl.col("_att_nodes").list.get(idx, null_on_oob=True)
            ),
        ),
    )


def reason_spacing(gpu_daily: pl.DataFrame) -> pl.DataFrame:
    """(host, date, spacing_s): per host and day, the shortest typical time between samples of
    any GPU's clock-event reasons (``gpu_daily``: its hours and samples)."""
    rows = gpu_daily.filter(pl.col("metric").is_in(REASON_METRICS) & (pl.col("n") > 0))
    span = _seconds(pl.col("first_hour"), pl.col("last_hour")) + 3600.0
    return rows.group_by("host", "date").agg(spacing_s=(span / pl.col("n")).min())


def _seen_clean(periods: pl.DataFrame, rank: pl.DataFrame, spacing: pl.DataFrame) -> pl.DataFrame:
    """Per period, whether its rank's node had its reasons sampled at least twice in it."""
    per = (
        periods.select(*KEYS, "start_time", "end_time")
        .join(rank, on=KEYS)
        .filter(pl.col("_r_host").is_not_null() & pl.col("start_time").is_not_null())
        .with_columns(
            date=pl.col("start_time").dt.date(),
            _len=_seconds(pl.col("start_time"), pl.col("end_time")),
        )
        .join(spacing, left_on=["_r_host", "date"], right_on=["host", "date"], how="inner")
    )
    return per.select(*KEYS, _r_seen=pl.col("spacing_s") <= pl.col("_len") / 2)


def attributed(
    periods: pl.DataFrame,
    attempts: pl.DataFrame,
    spans: pl.DataFrame,
    events: pl.DataFrame,
    spacing: pl.DataFrame,
) -> pl.DataFrame:
    """``periods`` (step-log ``slow_periods`` rows) with source, cause, culprit_host,
    culprit_gpu, evidence, confidence, signal_share and gpu_share (module docstring)."""
    att = _attempts(attempts)
    hosts = period_hosts(periods, att)
    rank = rank_node(periods, hosts, att)
    out = (
        periods.join(gpu_evidence(periods, hosts, spans), on=KEYS, how="left")
        .join(nvlink_evidence(periods, hosts, events), on=KEYS, how="left")
        .join(rank, on=KEYS, how="left")
        .join(_seen_clean(periods, rank, spacing), on=KEYS, how="left")
    )
    g = pl.col("_g_host").is_not_null()
    nv = pl.col("_n_host").is_not_null()
    standout = pl.col("_r_host").is_not_null() & (pl.col("rank_ratio").fill_null(0.0) >= RANK_RATIO)
    even = (pl.col("rank_evidence") == "timers") & (pl.col("rank_ratio") < RANK_RATIO)
    pct = lambda c: (pl.col(c) * 100).round(0).cast(pl.Int64).cast(pl.Utf8) + "%"  # noqa: E731
    gpu_text = pl.format(
        "{} on {} GPU {} for {} of the period{}",
        pl.when(pl.col("_g_signal") == "clocks")
        .then(pl.col("_g_names"))
        .otherwise(
            pl.format("PCIe link {} below its max", pl.col("_g_signal").str.strip_prefix("pcie_"))
        ),
        "_g_host",
        "_g_gpu",
        pct("_g_share"),
        pl.when(pl.col("_g_ratio").is_not_null())
        .then(
            pl.format(
                ", {} at {} of its max",
                pl.when(pl.col("_g_signal") == "clocks")
                .then(pl.lit("SM clock"))
                .otherwise(pl.lit("link")),
                pct("_g_ratio"),
            )
        )
        .otherwise(pl.lit("")),
    )
    others = (
        pl.when(pl.col("_g_hosts") > 1)
        .then(pl.format(" ({} nodes showed a signal)", "_g_hosts"))
        .otherwise(pl.lit(""))
    )
    rank_text = pl.format(
        "rank {} slowest ({}, x{} the median) on {}",
        "slow_rank",
        "rank_evidence",
        pl.col("rank_ratio").round(2),
        "_r_host",
    )
    out = out.with_columns(
        source=pl.lit("step_log"),
        cause=pl.when(g)
        .then(pl.col("_g_cause").fill_null("unknown"))
        .when(nv)
        .then(pl.lit("nvlink"))
        .when(standout)
        .then(
            pl.when(pl.col("_r_seen").fill_null(False))
            .then(pl.lit("host"))
            .otherwise(pl.lit("unknown"))
        )
        .when(even)
        .then(pl.lit("workload"))
        .otherwise(pl.lit("unknown")),
        culprit_host=pl.when(g)
        .then("_g_host")
        .when(nv)
        .then("_n_host")
        .when(standout)
        .then("_r_host"),
        culprit_gpu=pl.when(g).then("_g_gpu").when(nv).then("_n_gpu"),
        evidence=pl.when(g)
        .then(gpu_text + others)
        .when(nv)
        .then(pl.format("{} NVLink error event(s) on {} GPU {}", "_n_events", "_n_host", "_n_gpu"))
        .when(standout & pl.col("_r_seen").fill_null(False))
        .then(rank_text + pl.lit("; its GPUs' clock-event reasons show no slowdown"))
        .when(standout)
        .then(rank_text + pl.lit("; no GPU telemetry dense enough to say why"))
        .when(even)
        .then(
            pl.format(
                "no rank stands out (slowest x{} the median): the job's own work",
                pl.col("rank_ratio").round(2),
            )
        )
        .otherwise(pl.lit("no GPU signal, NVLink error or per-rank evidence on the job's nodes")),
        confidence=pl.when(g & (pl.col("_g_share") >= HIGH_SHARE))
        .then(pl.lit("high"))
        .when(g | nv | standout | even)
        .then(pl.lit("medium"))
        .otherwise(pl.lit("low")),
        signal_share=pl.when(g).then("_g_share"),
        gpu_share=pl.lit(1.0),
    )
    return out.drop([c for c in out.columns if c.startswith("_")])


def telemetry_periods(
    spans: pl.DataFrame,
    attempts: pl.DataFrame,
    logged: pl.DataFrame,
    gpus_per_node: int = GPUS_PER_NODE,
) -> pl.DataFrame:
    """``slow_periods`` rows (without ``period``) of the jobs slowed while no step log of theirs
    covers the time: busy ``clocks`` spans of at least ``MIN_EPISODE_S`` on their nodes
    (module docstring). ``logged``: ``job_step_times`` (what each job's log covers)."""
    slow = spans.filter(
        (pl.col("signal") == "clocks")
        & pl.col("busy").fill_null(True)
        & (pl.col("duration_s") >= MIN_EPISODE_S)
    ).with_row_index("_span")
    att = attempts.filter(pl.col("start_time").is_not_null()).select(
        *JOB,
        pl.col("start_time").alias("_as"),
        pl.col("end_time").alias("_ae_raw"),
        pl.col("end_time").fill_null(_FAR).alias("_ae"),
        pl.col("nodes").alias("_nodes"),
        pl.col("n_gpus").fill_null(0).alias("_g"),
    )
    whole = pl.col("_g") >= pl.col("_nodes").list.len() * gpus_per_node
    on = (
        # one row per attempt and node without the attempt's node list: a requeued job of a
        # thousand nodes and hundreds of attempts otherwise repeats its list a million times
        att.with_columns(_whole=whole, host=pl.col("_nodes"))
        .drop("_nodes")
        .explode("host")
        .join(slow, on="host", how="inner")
        .filter((pl.col("_as") < pl.col("end_time")) & (pl.col("_ae") > pl.col("start_time")))
        .with_columns(
            _s=pl.max_horizontal("start_time", "_as"), _e=pl.min_horizontal("end_time", "_ae")
        )
    )
    covered = (
        logged.select(*JOB, "first_time", "last_time")
        .join(on.select(*JOB, "_span", "_s", "_e"), on=JOB)
        .filter((pl.col("first_time") <= pl.col("_e")) & (pl.col("last_time") >= pl.col("_s")))
    )
    # each span cut where a job on its node starts or ends: a partial job's share is its GPUs
    # over those of the partial jobs running in the piece
    cuts = (
        on.select("_span", "start_time", "end_time", t=pl.concat_list("_s", "_e"))
        .explode("t")
        .unique(["_span", "t"])
        .sort("_span", "t")
        .with_columns(_hi=pl.col("t").shift(-1).over("_span"))
        .filter(pl.col("_hi").is_not_null())
        .select("_span", _lo="t", _hi="_hi")
    )
    pieces = cuts.join(on, on="_span").filter(
        (pl.col("_s") <= pl.col("_lo")) & (pl.col("_e") >= pl.col("_hi"))
    )
    partial = pl.when(pl.col("_whole")).then(0).otherwise(pl.col("_g")).sum().over("_span", "_lo")
    pieces = pieces.with_columns(
        # jobs on the node that hold none of its GPUs by count (0 or unknown) share none
        _share=pl.when(pl.col("_whole"))
        .then(1.0)
        .when(partial > 0)
        .then(pl.col("_g") / partial)
        .otherwise(0.0),
        _len=_seconds(pl.col("_lo"), pl.col("_hi")),
    )
    per_job = (
        pieces.join(covered.select(*JOB, "_span").unique(), on=[*JOB, "_span"], how="anti")
        .group_by([*JOB, "_span"], maintain_order=True)
        .agg(
            pl.exclude("_lo", "_hi", "_share", "_len", "_s", "_e").first(),
            _s=pl.col("_lo").min(),
            _e=pl.col("_hi").max(),
            _d=pl.col("_len").sum(),
            gpu_share=(pl.col("_len") * pl.col("_share")).sum() / pl.col("_len").sum(),
        )
        .filter(pl.col("_d") > 0)
        .with_columns(_r=pl.col("ratio").fill_nan(None).fill_null(ASSUMED_RATIO).clip(0.0, 1.0))
    )
    per_job = per_job.with_columns(_rate=(1 - pl.col("_r")) * pl.col("gpu_share")).with_row_index(
        "_row"
    )
    per_job = per_job.with_columns(_d=pl.col("_d") - _under_larger(per_job))
    ratio_text = (
        pl.when(pl.col("ratio").is_not_null())
        .then(
            pl.format("SM clock at {}% of its max", (pl.col("ratio") * 100).round(0).cast(pl.Int64))
        )
        .otherwise(pl.lit(f"no clock sampled: {ASSUMED_RATIO:g} of max assumed"))
    )
    share_text = (
        pl.when(pl.col("gpu_share") < 1)
        .then(pl.format("; the job held the GPU with chance {}", pl.col("gpu_share").round(2)))
        .otherwise(pl.lit(""))
    )
    return (
        per_job.filter(pl.col("_d") > 0)
        .select(
            *JOB,
            start_time="_s",
            end_time="_e",
            slowdown=1 / pl.col("_r").clip(lower_bound=0.01),
            duration_hours=pl.col("_d") / 3600,
            extra_hours=pl.col("_d") * pl.col("_rate") / 3600,
            n_gpus=pl.col("_g").cast(pl.Int32),
            kind=pl.when(
                pl.col("_ae_raw").is_not_null() & (pl.col("end_time") >= pl.col("_ae_raw"))
            )
            .then(pl.lit("persistent"))
            .otherwise(pl.lit("transient")),
            source=pl.lit("telemetry"),
            cause=pl.col("cause").fill_null("unknown"),
            culprit_host="host",
            culprit_gpu=pl.col("gpu").cast(pl.Int32),
            evidence=pl.format(
                "{} on {} GPU {}, {}{}; no step log",
                "reason_names",
                "host",
                "gpu",
                ratio_text,
                share_text,
            ),
            confidence=pl.lit("low"),
            signal_share=pl.lit(1.0),
            gpu_share="gpu_share",
        )
        .with_columns(slow_gpu_hours=pl.col("extra_hours") * pl.col("n_gpus"))
    )


def _under_larger(on: pl.DataFrame) -> pl.Series:
    """Per row, its seconds that a larger loss of the same job (``_rate``) overlaps."""
    pairs = on.select(*JOB, "_row", "_s", "_e", "_rate").join(
        on.select(*JOB, o_row="_row", o_s="_s", o_e="_e", o_rate="_rate"), on=JOB
    )
    larger = (pl.col("o_rate") > pl.col("_rate")) | (
        (pl.col("o_rate") == pl.col("_rate")) & (pl.col("o_row") < pl.col("_row"))
    )
    lap = _seconds(pl.max_horizontal("_s", "o_s"), pl.min_horizontal("_e", "o_e")).clip(
        lower_bound=0
    )
    under = (
        pairs.filter(larger & (pl.col("_row") != pl.col("o_row")))
        .group_by("_row")
        .agg(_under=lap.sum())
    )
    return (
        on.select("_row", "_d")
        .join(under, on="_row", how="left")
        .select(pl.col("_under").fill_null(0.0).clip(upper_bound=pl.col("_d")))
        .to_series()
    )


def with_telemetry(found: pl.DataFrame, extra: pl.DataFrame) -> pl.DataFrame:
    """``slow_periods``: the attributed step-log periods, then the telemetry ones numbered after
    their job's."""
    last = found.group_by(JOB).agg(_last=pl.col("period").max())
    extra = (
        extra.sort([*JOB, "start_time"])
        .join(last, on=JOB, how="left")
        .with_columns(
            period=(pl.col("_last").fill_null(0) + pl.int_range(1, pl.len() + 1).over(JOB)).cast(
                pl.Int32
            )
        )
        .drop("_last")
    )
    cols = list(TABLES["slow_periods"].columns)
    both = pl.concat(
        [
            found.select([c for c in cols if c in found.columns]),
            extra.select([c for c in cols if c in extra.columns]),
        ],
        how="diagonal_relaxed",
    )
    return conform("slow_periods", both)
