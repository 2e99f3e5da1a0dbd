"""GPU slowness signals: NVML's clock-event reason bits decoded once, the spans a GPU ran slow
(clocks, PCIe link) from scrapes, nvidia-smi logs and TSDB rollups, and each slow period's
culprit and cause, or a period the telemetry alone shows."""

import json
from datetime import datetime
from datetime import timedelta

import duckdb
import polars as pl
import pytest

from analysis.slowness import attribution
from analysis.slowness.signals import gpu_spans
from analysis.slowness.signals import merged
from analysis.telemetry.rollups import refresh_gpu_hourly
from analysis.telemetry.signals import SPANS_SQL
from ingest.base import ParseContext
from ingest.formats.nvidia_smi import parse as parse_smi
from ingest.runner import ingest_paths
from ingest.training_logs import slurm_output_job
from tests.conftest import FIXTURES
from tests.conftest import table
from warehouse import signals
from warehouse.schemas import TABLES

DAY = datetime(2026, 1, 5)
H100 = (
    FIXTURES
    / "nvidia-smi"
    / "nvidia_gpu_exporter__h100-80gb-hbm3_590.48.01_query_gpu_all_fields.csv"
)


def test_reason_bits_are_nvmls():
    """nvml.h's nvmlClocksEventReasons (NVIDIA/go-nvml gen/nvml/nvml.h @2f9e261)."""
    assert signals.BIT == {
        "gpu_idle": 0x1,
        "applications_clocks_setting": 0x2,
        "sw_power_cap": 0x4,
        "hw_slowdown": 0x8,
        "sync_boost": 0x10,
        "sw_thermal_slowdown": 0x20,
        "hw_thermal_slowdown": 0x40,
        "hw_power_brake_slowdown": 0x80,
        "display_clock_setting": 0x100,
    }
    assert signals.SLOW_MASK == 0x8 | 0x20 | 0x40 | 0x80
    assert signals.reason_names(0x48) == ("hw_slowdown", "hw_thermal_slowdown")
    # a sub-reason decides over the HW slowdown NVML sets with it; alone it is power draw
    assert [signals.cause(m) for m in (0x48, 0x88, 0x8, 0x20, 0x4, 0x1, 0x10)] == [
        "thermal", "power", "power", "thermal", "power", None, None,
    ]  # fmt: skip
    masks = pl.DataFrame({"m": [0x48, 0x88, 0x8, 0x1, 0]})
    assert masks.select(signals.cause_expr(pl.col("m"))).to_series().to_list() == [
        "thermal", "power", "power", None, None,
    ]  # fmt: skip
    assert masks.select(signals.names_expr(pl.col("m"))).to_series().to_list() == [
        "hw_slowdown,hw_thermal_slowdown",
        "hw_slowdown,hw_power_brake_slowdown",
        "hw_slowdown",
        "gpu_idle",
        "",
    ]


def test_a_real_nvidia_smi_capture_keeps_the_reasons_as_bits():
    """The H100 capture (driver 590.48.01, idle): the mask 0x1 and the one-bit fields as 1 / 0,
    the supported mask apart (it is not a reason in force)."""
    rows = parse_smi(H100.read_bytes(), ParseContext(time=DAY)).tables["gpu_samples"]
    value = dict(rows.select("metric", "value").rows())
    assert value["clocks_event_reasons.active"] == 1.0
    assert value["clocks_event_reasons.supported"] == 0x1FF
    assert value["clocks_event_reasons.gpu_idle"] == 1.0
    assert value["clocks_event_reasons.hw_slowdown"] == 0.0
    assert (value["clocks.current.sm"], value["clocks.max.sm"]) == (345.0, 1980.0)
    assert (value["pcie.link.width.current"], value["pcie.link.width.max"]) == (16.0, 16.0)
    assert "clocks_event_reasons.supported" not in signals.REASON_METRICS
    assert {"clocks_event_reasons.active", "clocks_event_reasons.hw_slowdown"} <= set(
        signals.REASON_METRICS
    )


def _scrape(path, minutes: int, state, metrics=("reasons", "clock", "width")) -> None:
    """A dcgm-exporter scrape file of one host's GPUs every minute from DAY for ``minutes``:
    ``state(i, gpu) -> (reasons, clock MHz, link width)``."""
    names = {
        "reasons": "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        "clock": "DCGM_FI_DEV_SM_CLOCK",
        "width": "DCGM_FI_DEV_PCIE_LINK_WIDTH",
    }
    lines = []
    for i in range(minutes):
        ms = int((DAY + timedelta(minutes=i) - datetime(1970, 1, 1)).total_seconds() * 1000)
        for g in range(3):
            values = dict(zip(("reasons", "clock", "width"), state(i, g), strict=True))
            for k in metrics:
                labels = f'gpu="{g}",UUID="GPU-{g}",Hostname="node1"'
                # the clock's line 7 ms after the reasons', as an exporter writes them
                lines.append(f"{names[k]}{{{labels}}} {values[k]} {ms + 7 * (k == 'clock')}")
    path.write_text("\n".join(lines) + "\n")


def _state(i: int, g: int):
    if g == 1 and 480 <= i < 540:  # 08:00-09:00 HW thermal, clock halved
        return 0x48, 990, 16
    if g == 0 and 600 <= i < 720:  # 10:00-12:00 link at x8, clock at power cap but not slow
        return 0x4, 1900, 8
    if g == 2 and 300 <= i < 330:  # 05:00-05:30 power cap holding the clock at 70%
        return 0x4, 1386, 16
    if g == 2 and 900 <= i < 960:  # 15:00-16:00 throttled while idle
        return 0x49, 345, 16
    return (0x1 if g == 2 else 0), 1980, 16


def test_spans_from_scrapes_name_the_gpu_signal_and_edges(wh, tmp_path):
    _scrape(tmp_path / "node1.prom", 24 * 60, _state)
    ingest_paths(wh, [tmp_path / "node1.prom"], jobs=1)
    refresh_gpu_hourly(wh)
    spans = gpu_spans(wh).sort("gpu", "start_time")
    got = spans.select(
        "gpu",
        "signal",
        "start_time",
        "end_time",
        "reasons",
        "busy",
        "cause",
        pl.col("ratio").round(3),
    ).rows()
    half = timedelta(seconds=30)
    assert got == [
        (0, "pcie_width", DAY + timedelta(hours=10) - half, DAY + timedelta(hours=12) - half,
         None, None, "pcie", 0.5),
        (1, "clocks", DAY + timedelta(hours=8) - half, DAY + timedelta(hours=9) - half,
         0x48, True, "thermal", 0.5),
        (2, "clocks", DAY + timedelta(hours=5) - half, DAY + timedelta(hours=5.5) - half,
         0x4, True, "power", 0.7),
        (2, "clocks", DAY + timedelta(hours=15) - half, DAY + timedelta(hours=16) - half,
         0x48, False, "thermal", 0.174),
    ]  # fmt: skip
    # the power cap of GPU 0 at 96% of the clock is a power-limited GPU at work, not slowness
    assert spans.filter(pl.col("gpu") == 0)["signal"].to_list() == ["pcie_width"]


def test_a_span_across_midnight_is_one_span(wh, tmp_path):
    def state(i, g):
        return (
            (0x88 if g == 0 and i >= 23 * 60 else 0),
            1000 if g == 0 and i >= 23 * 60 else 1980,
            16,
        )

    _scrape(tmp_path / "node1.prom", 25 * 60, state)
    ingest_paths(wh, [tmp_path / "node1.prom"], jobs=1)
    refresh_gpu_hourly(wh)
    assert wh.read("gpu_signal_spans").height == 2  # one per day
    [span] = gpu_spans(wh).rows(named=True)
    assert span["start_time"] == DAY + timedelta(hours=23) - timedelta(seconds=30)
    assert span["duration_s"] == pytest.approx(2 * 3600, abs=1)
    assert (span["cause"], span["reason_names"]) == ("power", "hw_slowdown,hw_power_brake_slowdown")


def test_nvidia_smi_one_bit_fields_of_the_old_names_make_spans(wh, tmp_path):
    header = (
        "timestamp, index, uuid, clocks.current.sm [MHz], clocks.max.sm [MHz], "
        "clocks_throttle_reasons.hw_slowdown, clocks_throttle_reasons.sw_thermal_slowdown\n"
    )
    rows = []
    for i in range(120):
        t = DAY + timedelta(minutes=i)
        hot = 30 <= i < 90
        rows.append(
            f"{t:%Y/%m/%d %H:%M:%S}.000, 0, GPU-0, {1500 if hot else 1980} MHz, 1980 MHz, "
            f"Not Active, {'Active' if hot else 'Not Active'}"
        )
    (tmp_path / "node2-nvidia-smi.csv").write_text(header + "\n".join(rows) + "\n")
    ingest_paths(wh, [tmp_path / "node2-nvidia-smi.csv"], ctx=ParseContext(host="node2"), jobs=1)
    refresh_gpu_hourly(wh)
    [span] = gpu_spans(wh).rows(named=True)
    assert (span["host"], span["reasons"], span["cause"]) == ("node2", 0x20, "thermal")
    assert span["duration_s"] == pytest.approx(3600, abs=1)
    assert span["ratio"] == pytest.approx(1500 / 1980)


def _spans_sql(day: pl.DataFrame, rolled: pl.DataFrame) -> pl.DataFrame:
    con = duckdb.connect()
    con.register("day", day)
    con.register("rolled", rolled)
    return con.sql(SPANS_SQL).pl()


def test_tsdb_rollups_of_steady_hours_and_the_raw_changes_make_one_span():
    """A pull stores a steady hour as its rollup (min = max) and a changed hour's samples
    around each change: the throttle from 10:20 through 12:00 is one span, its clock from the
    rollups' means."""
    key = {"cluster": "c", "host": "n1", "gpu": 0, "uuid": "U0", "pci_bus": None, "model": None}
    hour = DAY + timedelta(hours=10)
    samples = [  # the changed hour 10:00: the sample before the change, then every 15 s
        {**key, "time": hour + timedelta(minutes=19, seconds=45), "value": 0.0},
        *(
            {**key, "time": hour + timedelta(minutes=20, seconds=15 * k), "value": 72.0}
            for k in range(20)
        ),
    ]
    day = pl.DataFrame(samples).with_columns(
        metric=pl.lit("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"), source_file=pl.lit("pull")
    )
    rollup = {**key, "mig_instance": None, "n": 240}
    reasons, clock = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_DEV_SM_CLOCK"
    later = hour + timedelta(hours=1)
    rolled = pl.DataFrame(
        [
            {**rollup, "hour": hour, "metric": reasons,
             "mean": 48.0, "min": 0.0, "max": 72.0, "last": 72.0},
            {**rollup, "hour": later, "metric": reasons,
             "mean": 72.0, "min": 72.0, "max": 72.0, "last": 72.0},
            {**rollup, "hour": hour, "metric": clock,
             "mean": 1320.0, "min": 990.0, "max": 1980.0, "last": 990.0},
            {**rollup, "hour": later, "metric": clock,
             "mean": 990.0, "min": 990.0, "max": 990.0, "last": 990.0},
        ]
    )  # fmt: skip
    [span] = _spans_sql(day, rolled).rows(named=True)
    assert span["start_time"].utcoffset() == timedelta(0)  # stored as every time is: UTC
    span = {k: v.replace(tzinfo=None) if isinstance(v, datetime) else v for k, v in span.items()}
    # half-way from the sample before to the first slow one; the last holds until the hour
    raw = 40 * 60 + 7.5
    assert span["start_time"] == hour + timedelta(hours=1) - timedelta(seconds=raw)
    assert span["end_time"] == hour + timedelta(hours=2)
    assert span["reasons"] == 72 and span["samples"] == 20 + 240
    # the reference is the highest the host ran (1980); the rollup's mean stands for the clock
    assert span["ratio"] == pytest.approx((1320 / 1980 * raw + 0.5 * 3600) / (raw + 3600))


# -- attribution ------------------------------------------------------------------------------


def _attempts(*rows) -> pl.DataFrame:
    """job_attempts rows: (job_id, start hour, end hour, nodes, n_gpus)."""
    return table(
        "job_attempts",
        cluster="c",
        scheduler="slurm",
        job_id=[r[0] for r in rows],
        attempt=1,
        start_time=[DAY + timedelta(hours=r[1]) for r in rows],
        end_time=[DAY + timedelta(hours=r[2]) for r in rows],
        nodes=[r[3] for r in rows],
        n_gpus=[r[4] for r in rows],
    )


def _spans(*rows) -> pl.DataFrame:
    """Whole spans: (host, gpu, signal, start hour, end hour, reasons, ratio, busy)."""
    day = table(
        "gpu_signal_spans",
        cluster="c",
        host=[r[0] for r in rows],
        gpu=[r[1] for r in rows],
        uuid=None,
        signal=[r[2] for r in rows],
        start_time=[DAY + timedelta(hours=r[3]) for r in rows],
        end_time=[DAY + timedelta(hours=r[4]) for r in rows],
        reasons=[r[5] for r in rows],
        ratio=[r[6] for r in rows],
        busy=[r[7] for r in rows],
        samples=10,
        spacing_s=60.0,
    )
    return merged(day)


def _periods(*rows, **columns) -> pl.DataFrame:
    """Step-log slow_periods rows: (job_id, period, start hour, end hour)."""
    return table(
        "slow_periods",
        cluster="c",
        job_id=[r[0] for r in rows],
        period=[r[1] for r in rows],
        start_time=[DAY + timedelta(hours=r[2]) for r in rows],
        end_time=[DAY + timedelta(hours=r[3]) for r in rows],
        n_gpus=16,
        **columns,
    )


NO_EVENTS = TABLES["hw_events"].empty()
NO_SPACING = pl.DataFrame(schema={"host": pl.Utf8, "date": pl.Date, "spacing_s": pl.Float64})


def test_a_log_period_is_put_on_the_gpu_whose_signal_covers_it():
    att = _attempts(("9", 0, 20, ["n1", "n2"], 16))
    spans = _spans(
        ("n2", 5, "clocks", 1.9, 4.1, 0x48, 0.5, True),  # covers the period
        ("n1", 3, "pcie_width", 2.0, 2.5, None, 0.5, None),  # a quarter of it
        ("n9", 0, "clocks", 2.0, 4.0, 0x88, 0.5, True),  # not the job's node
    )
    out = attribution.attributed(_periods(("9", 1, 2, 4)), att, spans, NO_EVENTS, NO_SPACING)
    row = out.row(0, named=True)
    assert (row["cause"], row["culprit_host"], row["culprit_gpu"], row["confidence"]) == (
        "thermal", "n2", 5, "high",
    )  # fmt: skip
    assert row["signal_share"] == 1.0 and row["source"] == "step_log"
    assert row["evidence"] == (
        "hw_slowdown,hw_thermal_slowdown on n2 GPU 5 for 100% of the period, SM clock at 50% "
        "of its max (2 nodes showed a signal)"
    )
    alone = attribution.attributed(
        _periods(("9", 1, 2, 4)), att, spans.filter(pl.col("host") == "n1"), NO_EVENTS, NO_SPACING
    ).row(0, named=True)
    assert (alone["cause"], alone["culprit_gpu"], alone["confidence"]) == ("pcie", 3, "medium")
    assert alone["signal_share"] == 0.25


def test_without_a_gpu_signal_nvlink_errors_then_the_logs_ranks_decide():
    att = _attempts(("9", 0, 20, ["n1", "n2"], 16))
    none = _spans()
    events = table(
        "hw_events",
        time=[DAY + timedelta(hours=1.95), DAY + timedelta(hours=3), DAY + timedelta(hours=5)],
        host=["n1", "n1", "n2"],
        gpu=[4, 4, 1],
        component_class="nvlink",
    )
    [nv] = attribution.attributed(_periods(("9", 1, 2, 4)), att, none, events, NO_SPACING).rows(
        named=True
    )
    assert (nv["cause"], nv["culprit_host"], nv["culprit_gpu"]) == ("nvlink", "n1", 4)
    assert nv["evidence"] == "2 NVLink error event(s) on n1 GPU 4"
    ranks = _periods(
        ("9", 1, 2, 4), ("9", 2, 6, 8), ("9", 3, 10, 12),
        slow_rank=[11, 11, 3], rank_ratio=[1.6, 1.6, 1.02], rank_evidence="timers",
    )  # fmt: skip
    spacing = pl.DataFrame({"host": ["n2"], "date": [DAY.date()], "spacing_s": [60.0]})
    out = attribution.attributed(ranks, att, none, NO_EVENTS, spacing.clear()).sort("period")
    # rank 11 of 8 GPUs per node: the second node; no telemetry says why
    assert out.select("cause", "culprit_host", "confidence").rows() == [
        ("unknown", "n2", "medium"), ("unknown", "n2", "medium"), ("workload", None, "medium"),
    ]  # fmt: skip
    seen = attribution.attributed(ranks, att, none, NO_EVENTS, spacing).sort("period")
    assert seen["cause"].to_list() == ["host", "host", "workload"]
    assert seen["evidence"][0] == (
        "rank 11 slowest (timers, x1.6 the median) on n2; its GPUs' clock-event reasons show no "
        "slowdown"
    )
    bare = attribution.attributed(_periods(("9", 1, 2, 4)), att, none, NO_EVENTS, NO_SPACING)
    assert bare.select("cause", "culprit_host", "confidence").row(0) == ("unknown", None, "low")


def _logged(*jobs) -> pl.DataFrame:
    return table(
        "job_step_times",
        cluster="c",
        job_id=[j[0] for j in jobs],
        first_time=[DAY + timedelta(hours=j[1]) for j in jobs],
        last_time=[DAY + timedelta(hours=j[2]) for j in jobs],
    )


def test_telemetry_alone_costs_a_job_the_throttled_gpus_loss():
    att = _attempts(
        ("10", 0, 10, ["n1", "n2"], 16),  # whole nodes: holds the GPU
        ("20", 0, 10, ["n3"], 2),  # two partial jobs on n3, then one
        ("21", 0, 3, ["n3"], 6),
        ("30", 0, 10, ["n4"], 8),  # logged over the span: its log decides
    )
    spans = _spans(
        ("n2", 1, "clocks", 2, 4, 0x48, 0.5, True),
        ("n3", 0, "clocks", 2, 6, 0x88, 0.6, True),
        ("n4", 0, "clocks", 2, 4, 0x48, 0.5, True),
        ("n1", 0, "clocks", 6, 8, 0x48, 0.5, False),  # idle: nothing slowed
        ("n1", 2, "clocks", 8, 8.1, 0x48, 0.5, True),  # 6 minutes: too short
    )
    out = attribution.telemetry_periods(spans, att, _logged(("30", 0, 9)), gpus_per_node=8)
    out = out.sort("job_id")
    assert out["job_id"].to_list() == ["10", "20", "21"]
    whole = out.row(0, named=True)
    assert (whole["cause"], whole["culprit_host"], whole["culprit_gpu"]) == ("thermal", "n2", 1)
    assert whole["extra_hours"] == pytest.approx(2 * 0.5)
    assert whole["slow_gpu_hours"] == pytest.approx(16.0)
    assert whole["slowdown"] == pytest.approx(2.0) and whole["confidence"] == "low"
    # 2..3 h: GPU shares 2/8 and 6/8; 3..6 h: job 20 alone
    assert out["gpu_share"].to_list()[1:] == pytest.approx([(0.25 + 3) / 4, 0.75])
    assert out["extra_hours"].to_list()[1:] == pytest.approx([0.4 * (0.25 + 3), 0.4 * 0.75])
    assert out["evidence"][2] == (
        "hw_slowdown,hw_power_brake_slowdown on n3 GPU 0, SM clock at 60% of its max; the job "
        "held the GPU with chance 0.75; no step log"
    )


def test_two_gpus_slow_at_once_cost_a_job_the_larger_loss():
    att = _attempts(("10", 0, 10, ["n1", "n2"], 16))
    spans = _spans(
        ("n1", 1, "clocks", 2, 4, 0x48, 0.5, True),
        ("n2", 3, "clocks", 3, 5, 0x20, 0.8, True),
    )
    out = attribution.telemetry_periods(spans, att, _logged(), gpus_per_node=8).sort("start_time")
    # 3..4 h is under the larger loss of n1's GPU: the second span counts from 4 h
    assert out["extra_hours"].to_list() == pytest.approx([2 * 0.5, 1 * 0.2])


def test_telemetry_periods_are_numbered_after_the_jobs_log_periods():
    found = _periods(("10", 1, 0, 1), ("10", 2, 2, 3))
    extra = attribution.telemetry_periods(
        _spans(
            ("n1", 1, "clocks", 5, 6, 0x48, 0.5, True), ("n1", 1, "clocks", 1, 1.5, 0x48, 0.5, True)
        ),
        _attempts(("10", 0, 10, ["n1"], 8), ("11", 0, 10, ["n1"], 8)),
        _logged(("10", 0, 4)),
    )
    out = attribution.with_telemetry(found, extra).sort("job_id", "period")
    assert out.select("job_id", "period", "source").rows() == [
        ("10", 1, None), ("10", 2, None), ("10", 3, "telemetry"),
        ("11", 1, "telemetry"), ("11", 2, "telemetry"),
    ]  # fmt: skip


def test_an_archived_slurm_output_names_its_job():
    """``train-1001.out.gz``: the name Slurm wrote, with the archive's suffix."""
    assert slurm_output_job("logs/train-1001.out.gz") == "1001"
    assert slurm_output_job("slurm-4242_3.log.zst") == "4242_3"


def test_fail_slow_episodes_are_a_class_of_their_own_in_failure_rates():
    """Six episodes of at least 10 minutes (a GPU's busy and idle spans of one throttle are one;
    a 6-minute span is none) over 4 GPUs sampled 10 days each: 6 / 40 GPU-days, exact CI; the
    one still going at its GPU's last sample is censored; the selected fit never reaches a
    projection's rates."""
    from analysis.headline import selected_rates
    from analysis.lifetime_models.exponential import poisson_rate_ci
    from analysis.slowness.rates import episodes
    from analysis.slowness.rates import fail_slow_rates
    from warehouse.schemas import FAIL_SLOW

    spans = _spans(
        ("n1", 0, "clocks", 1, 2, 0x48, 0.5, True),
        ("n1", 0, "clocks", 2, 3, 0x48, 0.5, False),  # the same throttle, the job gone
        ("n1", 1, "clocks", 5, 5.1, 0x48, 0.5, True),  # 6 minutes
        ("n2", 0, "pcie_width", 10, 14, None, 0.5, None),
        ("n2", 1, "clocks", 30, 31, 0x20, 0.8, True),
        ("n2", 1, "clocks", 50, 50.5, 0x20, 0.8, True),
        ("n2", 2, "clocks", 70, 75, 0x88, 0.4, True),
        ("n2", 3, "clocks", 236, 240, 0x88, 0.4, True),  # to its GPU's last sample
    )
    assert episodes(spans).height == 6
    daily = table(
        "gpu_daily",
        cluster="c",
        host=["n1"] * 20 + ["n2"] * 20,
        gpu=[g for g in (0, 1) for _ in range(10)] + [g for g in (2, 3) for _ in range(10)],
        uuid=None,
        metric="DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        n=1440,
        first_hour=[DAY + timedelta(days=d) for _ in range(4) for d in range(10)],
        last_hour=[DAY + timedelta(days=d, hours=23) for _ in range(4) for d in range(10)],
    )
    rows = fail_slow_rates(spans, daily)
    assert set(rows["component_class"]) == {FAIL_SLOW}
    best = rows.filter("selected").row(0, named=True)
    rate, lo, hi = poisson_rate_ci(6, 4 * 240)
    assert (best["n_units"], best["n_events"], best["exposure_hours"]) == (4, 6, 960.0)
    assert best["rate_per_1k_unit_days"] == pytest.approx(float(rate) * 24_000)
    assert (best["rate_ci_low"], best["rate_ci_high"]) == pytest.approx(
        (float(lo) * 24_000, float(hi) * 24_000)
    )
    assert best["shape"] is None and '"of": "duration_hours"' in best["params"]
    # the exponential duration law: 16.5 hours over the 5 episodes that ended
    expo = rows.filter(pl.col("model") == "exponential")["params"][0]
    assert json.loads(expo)["scale_hours"]["value"] == pytest.approx(16.5 / 5, rel=1e-6)
    assert rows["aic_weight"].sum() == pytest.approx(1.0)
    fail_stop = table(
        "failure_rates", component_class="gpu", stratum="all", window="all", selected=True
    )
    both = pl.concat([fail_stop, rows])
    assert selected_rates(both)["component_class"].to_list() == ["gpu"]
    # a fleet whose reasons were never sampled has no fail-slow row (not a row of nulls)
    assert fail_slow_rates(spans, daily.clear()).height == 0


def test_report_section_tells_where_the_slow_time_went_and_maps_the_worst_jobs_ranks():
    from dashboards.section import ReportContext
    from dashboards.sections import slowness

    periods = table(
        "slow_periods",
        cluster="c",
        job_id=["9", "9", "7"],
        period=[1, 2, 1],
        start_time=[DAY, DAY + timedelta(hours=5), DAY],
        end_time=[DAY + timedelta(hours=1), DAY + timedelta(hours=6), DAY + timedelta(hours=2)],
        slowdown=[2.0, 1.25, 1.5],
        n_gpus=[16, 16, 8],
        slow_gpu_hours=[8.0, 3.2, 2.0],
        source=["step_log", "step_log", "telemetry"],
        cause=["thermal", "pcie", "power"],
        culprit_host=["n2", "n1", "n5"],
        confidence=["high", "medium", "low"],
    )
    jobs = table(
        "goodput_jobs", cluster="c", scheduler="slurm", job_id=["9", "7"], n_gpus=[16, 8],
        wall_hours=[10.0, 5.0], productive_hours=[9.0, 4.75], slow_hours=[0.7, 0.25],
    )  # fmt: skip
    timers = table(
        "step_timers",
        cluster="c",
        job_id="9",
        timer="forward-compute",
        iteration=[i for i in (100, 200) for _ in range(4)],
        rank=[0, 1, 2, 3] * 2,
        value_ms=[10.0, 10.0, 10.0, 10.0, 10.0, 20.0, 10.0, 10.0],
    )
    t = {
        "slow_periods": periods,
        "goodput_jobs": jobs,
        "step_timers": timers,
        "gpu_signal_spans": TABLES["gpu_signal_spans"].empty(),
        "job_attempts": TABLES["job_attempts"].empty(),
    }
    s = slowness.build(ReportContext(None, t, 16384))
    assert s.reading.startswith(
        "Jobs lost 13.2 GPU-hours running slower than their healthy speed (6.6% of their "
        "GPU-hours), in 3 slow period(s): 2 from the jobs' own step logs, 1 from the GPU "
        "telemetry alone"
    )
    assert "By cause (GPU-hours): thermal 8, pcie 3.2, power 2." in s.reading
    assert "Measured goodput counts 13.2 of these GPU-hours as running slow" in s.reading
    assert slowness.by_cause(periods)["cause"].to_list() == ["thermal", "power", "pcie"]
    assert slowness.by_node(periods)["host"].to_list() == ["n2", "n1", "n5"]
    cells, what = slowness.rank_map(ReportContext(None, t, 16384), {"job_id": "9"})
    assert what.startswith("rank x logged iteration")
    slow = cells.filter(pl.col("value") > 1)
    assert slow.select("row", "step", "value").rows() == [("rank 1", 200, 2.0)]
    assert "<td>9</td><td>16</td><td>11.2</td><td>2</td><td>x2.00</td><td>pcie, thermal</td>" in (
        s.extra_html
    )
    empty = {k: v.clear() for k, v in t.items()}
    assert slowness.build(ReportContext(None, empty, 16384)).note.startswith("no data yet")


def test_the_rank_map_of_a_big_job_shows_its_slowest_ranks_only():
    """A 512-rank job's map keeps the ``ROWS`` ranks that peak highest (the report's size
    must not grow with the job) and says so; rank 7, twice as slow once, is among them."""
    ranks = 512
    timers = table(
        "step_timers", cluster="c", job_id="9", timer="forward-compute",
        iteration=[i for i in (100, 200) for _ in range(ranks)],
        rank=list(range(ranks)) * 2,
        value_ms=[10.0 + (r % 50) / 100 + (10.0 if (i, r) == (200, 7) else 0) for i in (100, 200)
                  for r in range(ranks)],
    )  # fmt: skip
    from dashboards.section import ReportContext
    from dashboards.sections import slowness

    t = {"step_timers": timers}
    cells, what = slowness.rank_map(ReportContext(None, t, 16384), {"job_id": "9"})
    assert what.endswith(f"the {slowness.ROWS} slowest of 512 rows")
    peak = (
        timers.with_columns(v=pl.col("value_ms") / pl.col("value_ms").median().over("iteration"))
        .group_by("rank").agg(pl.col("v").max())
        .sort("v", pl.format("rank {}", pl.col("rank")), descending=[True, False])
    )  # fmt: skip
    want = {f"rank {r}" for r in peak.head(slowness.ROWS)["rank"]}
    assert set(cells["row"]) == want and "rank 7" in want


def test_a_job_holding_no_gpus_of_a_throttled_node_loses_nothing_and_no_value_is_nan():
    # a CPU-only job on a GPU node (0 GPUs of its 8) shared no GPU: 0 / 0 made its share NaN,
    # and a span whose clock ratio is NaN (a blank scrape) made the loss NaN, which failed the
    # build where goodput_jobs turns the lost hours into microseconds
    att = _attempts(("40", 0, 10, ["n5"], 0), ("41", 0, 10, ["n6"], 4))
    spans = _spans(
        ("n5", 0, "clocks", 2, 4, 0x48, 0.5, True),
        ("n6", 0, "clocks", 2, 4, 0x48, float("nan"), True),
    )
    out = attribution.telemetry_periods(spans, att, _logged(), gpus_per_node=8).sort("job_id")
    assert not out.select(pl.col(pl.Float64).is_nan().any()).row(0).count(True)
    extra = dict(zip(out["job_id"], out["extra_hours"], strict=True))
    assert extra.get("40", 0.0) == 0.0 and extra["41"] > 0
