"""Trends, losses and the report's first screen over two weeks of a small fleet with known
figures: week 1 (Mon 2026-01-05) holds jobs A and B, week 2 (Mon 2026-01-12) jobs C and D."""

from datetime import datetime

import polars as pl
import pytest

T = datetime


def attempts() -> pl.DataFrame:
    rows = [  # job, partition, account, n_gpus, start, end
        ("A", "p1", "acct1", 8, T(2026, 1, 5), T(2026, 1, 6)),
        ("B", None, "acct1", 8, T(2026, 1, 7), T(2026, 1, 8)),
        ("C", "p1", "acct2", 16, T(2026, 1, 12), T(2026, 1, 13)),
        ("D", "p2", "acct2", 16, T(2026, 1, 14), T(2026, 1, 14, 12)),
    ]
    df = pl.DataFrame(
        rows,
        schema=["job_id", "partition", "account", "n_gpus", "start_time", "end_time"],
        orient="row",
    )
    return df.with_columns(
        cluster=pl.lit("c1"), scheduler=pl.lit("slurm"), attempt=pl.lit(1, pl.Int32)
    )


def interruptions() -> pl.DataFrame:
    rows = [  # job, end, class, domain, host, lost, planned
        ("A", T(2026, 1, 6), "gpu", "infrastructure", "n1", 16.0, False),
        ("B", T(2026, 1, 8), "software", "workload", "n2", 8.0, False),
        ("C", T(2026, 1, 13), "gpu", "infrastructure", "n1", 32.0, False),
        ("D", T(2026, 1, 14, 12), "host_os", "infrastructure", "n3", 0.0, True),  # a planned drain
    ]
    df = pl.DataFrame(
        rows,
        schema=[
            "job_id",
            "end_time",
            "cause_class",
            "failure_domain",
            "cause_host",
            "lost_gpu_hours",
            "planned",
        ],
        orient="row",
    )
    return df.with_columns(
        cluster=pl.lit("c1"), scheduler=pl.lit("slurm"), attempt=pl.lit(1, pl.Int32)
    )


def goodput_jobs() -> pl.DataFrame:
    rows = [  # job, n_gpus, wall, productive, final_end
        ("A", 8, 24.0, 22.0, T(2026, 1, 6)),
        ("B", 8, 24.0, 23.0, T(2026, 1, 8)),
        ("C", 16, 24.0, 20.0, T(2026, 1, 13)),
        ("D", 16, 12.0, 12.0, T(2026, 1, 14, 12)),
    ]
    df = pl.DataFrame(
        rows,
        schema=["job_id", "n_gpus", "wall_hours", "productive_hours", "final_end"],
        orient="row",
    )
    return df.with_columns(
        (pl.col("productive_hours") / pl.col("wall_hours")).alias("goodput"),
        cluster=pl.lit("c1"), scheduler=pl.lit("slurm"), slow_hours=pl.lit(0.0),
    )  # fmt: skip


WEEK1_GOODPUT = (8 * 22 + 8 * 23) / (8 * 24 + 8 * 24)
WEEK2_GOODPUT = (16 * 20 + 16 * 12) / (16 * 24 + 16 * 12)


# ----------------------------------------------------------------------------- trend and losses
def test_whole_span_as_one_period_is_the_headline():
    from analysis.headline import fleet_headline
    from analysis.trend import data_window
    from analysis.trend import window_figures

    start, end = data_window(attempts())
    f = window_figures(attempts(), interruptions(), goodput_jobs(), start, end)
    head = fleet_headline(attempts(), interruptions(), goodput_jobs())
    for key in ("gpu_hours", "lost_gpu_hours", "unexpected", "goodput_gpu_hours", "mtti_all_hours"):
        assert f[key] == pytest.approx(head[key]), key
    assert f["gpu_hours"] == pytest.approx(8 * 24 * 2 + 16 * 24 + 16 * 12)


def test_weekly_trend_figures_and_changes():
    from analysis.changes import rate_ratio
    from analysis.trend import trend_frame

    df = trend_frame(attempts(), interruptions(), goodput_jobs(), "week")
    assert df["period_start"].to_list() == [T(2026, 1, 5), T(2026, 1, 12)]
    w1, w2 = df.rows(named=True)
    assert w1["goodput"] == pytest.approx(WEEK1_GOODPUT) and w2["goodput"] == pytest.approx(
        WEEK2_GOODPUT
    )
    assert (w1["lost_gpu_hours"], w2["lost_gpu_hours"]) == (24.0, 32.0)
    assert (w1["interruptions"], w1["infrastructure"], w1["workload"]) == (2, 1, 1)
    assert w2["interruptions"] == 1  # the planned drain of D does not count
    # a period's own hours (clipped to the data's window), not the span its jobs ran in: the
    # whole week 01-05 .. 01-12, 168 h, 2 interruptions (B and C ran only 3 days of it)
    assert w1["mtbf_hours"] == pytest.approx(168 / 2)
    assert w2["mtbf_hours"] == pytest.approx(60.0)  # 01-12 .. 01-14 12:00, 1 interruption
    assert w1["goodput_change"] is None
    assert w2["goodput_change"] == pytest.approx(WEEK2_GOODPUT - WEEK1_GOODPUT)
    # week 2's data ends 01-14 12:00: 60 of its 168 h, compared per hour and labelled partial
    assert (w1["partial"], w2["partial"]) == (False, True) and w2["hours"] == pytest.approx(60)
    assert (w1["lost_share"], w2["lost_share"]) == (24 / 384, 32 / 576)
    assert w2["interruption_rate_ratio"] == pytest.approx((1 / 60) / (2 / 168))
    assert w2["interruption_rate_p"] == pytest.approx(rate_ratio(1, w2["hours"], 2, 168.0).p)
    assert w2["hours"] == pytest.approx(60.0, abs=1e-6)  # the week, cut where the data ends


def test_monthly_trend_is_one_row_with_the_whole_figures():
    from analysis.trend import trend_frame

    df = trend_frame(attempts(), interruptions(), goodput_jobs(), "month")
    assert df.height == 1 and df["lost_gpu_hours"][0] == 56.0 and df["interruptions"][0] == 3


def test_losses_by_cause_partition_and_node():
    from analysis.trend import losses_frame

    by_cause = losses_frame(attempts(), interruptions(), "cause")
    assert by_cause.select("cause", "interruptions", "lost_gpu_hours").rows() == [
        ("gpu", 2, 48.0),
        ("software", 1, 8.0),  # B's own failure: class software, as stored and in SQL
    ]
    assert by_cause["share"].to_list() == pytest.approx([48 / 56, 8 / 56])
    span = (T(2026, 1, 14, 12) - T(2026, 1, 5)).total_seconds() / 3600
    assert by_cause["mtbf_hours"].to_list() == pytest.approx([span / 2, span / 1], rel=1e-6)
    by_part = losses_frame(attempts(), interruptions(), "partition")
    assert by_part.select("partition", "lost_gpu_hours").rows() == [("p1", 48.0), ("(none)", 8.0)]
    by_node = losses_frame(attempts(), interruptions(), "node")
    assert by_node.select("node", "interruptions").rows() == [("n1", 2), ("n2", 1)]


def test_weekly_losses_share_within_each_week():
    from analysis.trend import losses_frame

    df = losses_frame(attempts(), interruptions(), "account", "week")
    assert df.select("period_start", "account", "lost_gpu_hours", "share").rows() == [
        (T(2026, 1, 5), "acct1", 24.0, 1.0),
        (T(2026, 1, 12), "acct2", 32.0, 1.0),
    ]
    assert df["mtbf_hours"].to_list() == pytest.approx([168 / 2, 60.0], rel=1e-6)


def test_unknown_grouping_or_period_is_a_value_error():
    from analysis.trend import losses_frame
    from analysis.trend import trend_frame

    with pytest.raises(ValueError, match="--by must be one of cause, domain, cluster"):
        losses_frame(attempts(), interruptions(), "rack")
    with pytest.raises(ValueError, match="period must be one of week, month"):
        trend_frame(attempts(), interruptions(), goodput_jobs(), "day")


# ----------------------------------------------------------------------------- first screen
def _projections() -> pl.DataFrame:
    from warehouse.schemas import conform

    return conform("goodput_projections", pl.DataFrame(
        {
            "scenario": ["scale_sweep"], "knob": ["n_gpus"], "method": ["analytic"],
            "n_gpus": [16384], "goodput": [0.5], "goodput_ci_low": [0.4], "goodput_ci_high": [0.6],
            "mtti_hours": [0.25], "scope": ["infrastructure"],
        }
    ))  # fmt: skip


def _summary(tmp_path, window, cost=0.0):
    from dashboards.section import ReportContext
    from dashboards.sections import summary
    from warehouse.schemas import TABLES
    from warehouse.schemas import conform
    from warehouse.store import Warehouse

    wh = Warehouse(tmp_path / "home")
    if window is not None:
        row = {
            "source": "window",
            "observed_from": window[0],
            "observed_to": window[1],
            "method": "explicit",
        }
        df = pl.DataFrame([row]).with_columns(
            pl.col("observed_from", "observed_to").dt.replace_time_zone("UTC")
        )
        wh.replace_table(
            "observation_window",
            TABLES["observation_window"]
            .empty()
            .vstack(
                df.select(
                    pl.col(c).cast(t) if c in df.columns else pl.lit(None, t).alias(c)
                    for c, t in TABLES["observation_window"].empty().schema.items()
                )
            ),
        )
    t = {
        "job_attempts": attempts(), "interruptions": interruptions(),
        "goodput_jobs": goodput_jobs(), "goodput_projections": _projections(),
    }  # fmt: skip
    t = {name: conform(name, df) for name, df in t.items()}  # as the warehouse stores them
    ctx = ReportContext(wh=wh, t=t, target_gpus=16384, scope="whole fleet", gpu_hour_cost=cost)
    return summary.build(ctx)


def _changes(now, before):
    from analysis.trend import window_changes

    return window_changes(attempts(), interruptions(), goodput_jobs(), now, before)


def test_first_screen_compares_with_the_previous_period_of_equal_length(tmp_path):
    s = _summary(tmp_path, (T(2026, 1, 12), T(2026, 1, 19)), cost=2.0)
    html = s.extra_html
    assert s.reading.startswith(
        "From 2026-01-12 to 2026-01-19 (7 days, whole fleet) jobs used 576 GPU-hours"
    )
    assert f"{100 * WEEK2_GOODPUT:.1f}%" in s.reading  # 88.9%
    assert "1 unexpected interruptions (one every 60.0 h) cost 32 GPU-hours ($64)" in s.reading
    # each change with its test: two job chains a week cannot tell -4.9 points from noise
    c = _changes((T(2026, 1, 12), T(2026, 1, 19)), (T(2026, 1, 5), T(2026, 1, 12)))
    assert not (c.goodput.real or c.lost_share.real or c.interruptions.real)
    assert c.goodput.estimate == pytest.approx(WEEK2_GOODPUT - WEEK1_GOODPUT)
    assert c.goodput.words() == "no change beyond noise (95% CI -89.2 to +79.5 points)"
    assert f"the last 7 days: 88.9% against 93.8% the previous 7 days: {c.goodput.words()}" in html
    lost = (
        "the last 7 days: 5.6% of its GPU-hours lost against 6.2% the previous 7 days: "
        + c.lost_share.words()
    )
    assert f"5.6% of 576 GPU-hours; {lost}" in html  # 32 of 576 against 24 of 384
    assert "$64" in html and f"at $2.00 per GPU-hour; {lost}" in html
    assert (
        "the last 7 days: 1 (0.4 a day) against 2 (0.286 a day) the previous 7 days: "
        + c.interruptions.words()
    ) in html
    assert "vs the previous" not in html and "+33%" not in html  # no untested change
    assert "<td>gpu</td><td>32</td><td>100.0%</td><td>1</td><td>60.0 h</td><td>$64</td>" in html
    assert "50.0%" in html and "95% band 40.0%–60.0%; MTTI 15 min" in html
    # the typical job: C and D both ran on 16 GPUs
    assert "ran on 16 GPUs on average" in html and "interrupted every 15 min" in html


def test_first_screen_without_an_earlier_period_or_cost_says_so(tmp_path):
    s = _summary(tmp_path, None)  # no stored window: the job attempts' span, nothing before it
    assert s.extra_html.count("no earlier period in the data") == 3
    assert "$" not in s.extra_html and "tile-cost" not in s.extra_html  # no price, no money
    assert "no price: --gpu-hour-cost, or gpu_hour_cost in HOME/goodput.toml" in s.extra_html
    assert (
        "<td>gpu</td><td>48</td>" in s.extra_html and "<td>software</td><td>8</td>" in s.extra_html
    )


def test_first_screen_without_an_earlier_period_compares_the_last_two_whole_weeks(tmp_path):
    s = _summary(tmp_path, (T(2026, 1, 5), T(2026, 1, 19)), cost=1.0)  # nothing before 01-05
    html = s.extra_html
    assert "no earlier period" not in html and "the previous" not in html
    c = _changes((T(2026, 1, 12), T(2026, 1, 19)), (T(2026, 1, 5), T(2026, 1, 12)))
    assert f"week of 2026-01-12: 88.9% against 93.8% the week before: {c.goodput.words()}" in html
    lost = (
        "week of 2026-01-12: 5.6% of its GPU-hours lost against 6.2% the week before: "
        + c.lost_share.words()
    )
    assert f"5.8% of 960 GPU-hours; {lost}" in html and f"per GPU-hour; {lost}" in html
    assert (
        "week of 2026-01-12: 1 (0.4 a day) against 2 (0.286 a day) the week before: "
        + c.interruptions.words()
    ) in html


def test_a_partial_week_compares_per_hour(tmp_path):
    """The data's last week holds 60 of its 168 hours: its one interruption is a higher rate
    than the whole week before's two, and the test says so per hour, not per week."""
    from analysis.changes import rate_ratio

    c = _changes((T(2026, 1, 12), T(2026, 1, 14, 12)), (T(2026, 1, 5), T(2026, 1, 12)))
    assert c.interruptions.estimate == pytest.approx((1 / 60) / (2 / 168))  # +40%, not -50%
    assert c.interruptions == rate_ratio(1, 60.0, 2, 168.0)
    assert c.mtbf.estimate == pytest.approx(1 / c.interruptions.estimate)


def test_trend_section_reads_the_latest_week_against_the_one_before():
    from analysis.trend import data_window
    from dashboards import charts
    from dashboards.section import ReportContext
    from dashboards.section import cell_html
    from dashboards.sections import trend

    t = {
        "job_attempts": attempts(),
        "interruptions": interruptions(),
        "goodput_jobs": goodput_jobs(),
    }
    s = trend.build(ReportContext(wh=None, t=t, target_gpus=1))
    end = data_window(attempts())[1]  # the last end, 01-14 12:00, inside the data
    c = _changes((T(2026, 1, 12), end), (T(2026, 1, 5), T(2026, 1, 12)))
    assert s.reading == (
        "2 week(s); the latest (from 2026-01-12, 60 h of data, partial) had measured goodput "
        "88.9%, 32 lost GPU-hours and 1 unexpected interruptions (MTBF 60.0 h); against the week "
        f"before, per hour: goodput {c.goodput.words()}, lost share {c.lost_share.words()}, "
        f"interruptions {c.interruptions.words()}. Best week 2026-01-05 (93.8%), "
        "worst 2026-01-12 (88.9%)."
    )
    spec = charts.class_colors(charts.configure(s.chart).to_dict())
    bars = spec["vconcat"][1]["encoding"]["color"]["scale"]
    assert dict(zip(bars["domain"], bars["range"], strict=True)) == {
        "gpu": charts.CLASS_COLORS["gpu"], "software": charts.CLASS_COLORS["software"]}  # fmt: skip
    assert (
        f"<td>{cell_html('2026-01-12')}</td><td>60.0 (partial)</td><td>576</td><td>88.9%</td>"
        f"<td>{cell_html(c.goodput.words())}</td><td>32</td><td>5.6%</td>" in s.extra_html
    )  # a word a line may break inside ("-89.2") kept whole
    empty = trend.build(
        ReportContext(wh=None, t={k: v.clear() for k, v in t.items()}, target_gpus=1)
    )
    assert empty.chart is None and empty.note


# ----------------------------------------------------------------------------- the CLI
@pytest.fixture
def home(tmp_path):
    from warehouse.schemas import conform
    from warehouse.store import Warehouse

    wh = Warehouse(tmp_path / "home")
    with wh.batch("trend-test") as b:
        b.add(
            {
                "job_attempts": conform(
                    "job_attempts", attempts().with_columns(pl.col("attempt").cast(pl.Int32))
                )
            }
        )
    wh.replace_table("interruptions", conform("interruptions", interruptions()))
    wh.replace_table("goodput_jobs", conform("goodput_jobs", goodput_jobs()))
    return str(wh.home)


def test_cli_losses_by_partition_as_table_csv_and_json(home, capsys):
    import json

    from pipelines.cli import main

    assert main(["--home", home, "losses", "--by", "partition"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["partition", "lost", "GPU-hours", "share", "interruptions", "MTBF"]
    # MTBF as a mean time for people: 228 h of jobs / 2 = 114 h = 4.75 days
    assert lines[1].split() == ["p1", "48", "85.7%", "2", "4.8", "days"]
    assert lines[2].split() == ["(none)", "8", "14.3%", "1", "9.5", "days"]
    assert (
        main(["--home", home, "losses", "--by", "cause", "--period", "week", "--format", "csv"])
        == 0
    )
    csv = capsys.readouterr().out.splitlines()
    assert csv[0] == "period_start,cause,interruptions,lost_gpu_hours,share,mtbf_hours"
    assert csv[1].startswith("2026-01-05T00:00:00,gpu,1,16.0,0.666")
    assert main(["--home", home, "losses", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["by"] == "cause" and [r["cause"] for r in obj["rows"]] == ["gpu", "software"]


def test_cli_trend_weekly_and_monthly(home, capsys):
    import json

    from pipelines.cli import main

    assert main(["--home", home, "trend"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:5] == ["2026-01-05", "168", "384", "93.8%", "24"]
    assert lines[2].split()[:9] == [
        "2026-01-12", "60.0", "(partial)", "576", "88.9%", "no", "change", "beyond", "noise"
    ]  # fmt: skip
    assert lines[-1].startswith("change: against the week before, per hour of data")
    assert main(["--home", home, "trend", "--period", "month", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["period"] == "month" and len(obj["rows"]) == 1
    assert obj["rows"][0]["lost_gpu_hours"] == 56.0 and obj["rows"][0]["interruptions"] == 3


def test_cli_losses_bad_choice_is_one_line(home, capsys):
    from pipelines.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["--home", home, "losses", "--by", "rack"])
    assert exc.value.code == 2
    assert "invalid choice: 'rack'" in capsys.readouterr().err
