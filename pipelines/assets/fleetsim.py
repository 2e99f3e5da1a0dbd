"""The fleet simulator as a Dagster asset: every scenario in HOME/scenarios/*.yaml run into the
``fleetsim_results`` table (analysis/fleetsim; docs/fleetsim.md). Not part of the build job
(a scenario can take minutes): its own job ``fleetsim``, or materialize it from the UI.

A scenario that fails to validate or resolve is left out with its one-line reason in the
materialization's metadata (``errors``) and the analysis status; the others are stored. No
scenario file: the table is written empty and the step recorded as skipped.
"""

import dagster as dg
import polars as pl

from analysis.fleetsim.run import resolve
from analysis.fleetsim.scenario import ScenarioError
from analysis.fleetsim.scenario import load
from analysis.fleetsim.sweep import result_rows
from analysis.fleetsim.sweep import study
from analysis.status import MissingInputs
from pipelines.assets.factory import OWNERS
from pipelines.assets.factory import guarded
from pipelines.assets.factory import skipped_meta
from pipelines.resources import Settings
from warehouse.schemas import TABLES

SCENARIOS_DIR = "scenarios"


def run_scenarios(wh, log=None) -> tuple[pl.DataFrame, list[str]]:
    """(``fleetsim_results`` rows of every good scenario in HOME/scenarios, the bad ones'
    one-line errors). The scenario column is the file's stem."""
    paths = sorted((wh.home / SCENARIOS_DIR).glob("*.yaml"))
    if not paths:
        raise MissingInputs(f"fleetsim_results: no scenario in {wh.home / SCENARIOS_DIR}/*.yaml")
    frames, errors = [], []
    for p in paths:
        try:
            spec = load(p)
            res = study(spec, resolve(spec, wh))
        except ScenarioError as exc:
            errors.append(str(exc))
            continue
        frames.append(result_rows(p.stem, res))
        if log is not None:
            log.info(f"fleetsim: {p.name}: {res['baseline'].replications} replications")
    df = pl.concat(frames) if frames else TABLES["fleetsim_results"].empty()
    wh.replace_table("fleetsim_results", df)
    return df, errors


@dg.asset(group_name="analysis", deps=["failure_rates", "repair_fits"], kinds={"python", "parquet"},
          owners=OWNERS,
          description="Fleet operations what-if: each scenario of HOME/scenarios/*.yaml simulated "
                      "(spares, triage, repair line, retirement, maintenance) with CIs, sweeps and "
                      "the spare-sizing curve.")  # fmt: skip
def fleetsim_results(context: dg.AssetExecutionContext, settings: Settings) -> dg.MaterializeResult:
    wh = settings.analysis_warehouse()
    out = guarded(wh, "fleetsim_results", ("fleetsim_results",),
                   lambda: run_scenarios(wh, context.log), rows=lambda r: r[0].height)  # fmt: skip
    if out is None:
        return dg.MaterializeResult(metadata=skipped_meta(wh, "fleetsim_results"))
    df, errors = out
    for e in errors:
        context.log.error(e)
    return dg.MaterializeResult(metadata={
        "dagster/row_count": df.height,
        "scenarios": df["scenario"].n_unique() if df.height else 0,
        "errors": dg.MetadataValue.json(errors),
    })  # fmt: skip


fleetsim_job = dg.define_asset_job(
    "fleetsim",
    selection=dg.AssetSelection.assets(fleetsim_results),
    description="Run the fleet-simulator scenarios of HOME/scenarios.",
)
JOBS = [fleetsim_job]  # this domain's own job: its assets are not in `build`
