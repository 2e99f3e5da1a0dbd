"""Asset checks for the warehouse invariants (DESIGN.md): conservation, schema, no duplicate
keys, quarantine ratio, fits converged, goodput within [0, 1].

Each check is a plain function over the warehouse returning (passed, metadata), wrapped as a
Dagster check, so tests can call either. Blocking checks stop downstream assets in the run.
"""


import dagster as dg
import duckdb
import pyarrow.parquet as pq

from analysis.headline import selected_rates
from analysis.observation import source_spans, spans_disagree
from ingest.registry import formats
from pipelines.resources import GoodputConfig
from warehouse.schemas import TABLES
from warehouse.store import Warehouse


def _raw_counts(wh: Warehouse, table: str) -> dict[str, int]:
    """Rows per source_file in a table's Parquet, before any view-level dedupe."""
    files = wh.files(table)
    if not files or "source_file" not in TABLES[table].columns:
        return {}
    with wh.connect() as con:
        rows = con.execute("SELECT source_file, count(*) FROM read_parquet($files, hive_partitioning=true) GROUP BY 1",
                           {"files": files}).fetchall()
    return dict(rows)


def conservation(wh: Warehouse) -> tuple[bool, dict]:
    """Every ingested file: records read = rows in its primary table + rows quarantined + rows
    already stored (an earlier file or line held the same record), and
    the rows the manifest claims are really in the table."""
    manifest = wh.read("ingest_manifest")
    quarantined = wh.query("SELECT sha256, count(*) n FROM quarantine GROUP BY 1") if manifest.height else None
    q_by_sha = dict(quarantined.rows()) if quarantined is not None else {}
    counts = {t: _raw_counts(wh, t) for t in {spec.primary for spec in formats().values()}}
    bad = []
    for m in manifest.iter_rows(named=True):
        spec = formats().get(m["format"])
        in_table = counts[spec.primary].get(m["path"], 0) if spec else 0
        in_quarantine = q_by_sha.get(m["sha256"], 0)
        if m["records_read"] != m["rows_ok"] + m["rows_quarantined"] + (m["rows_duplicate"] or 0) or in_table < m["rows_ok"] or in_quarantine != m["rows_quarantined"]:
            bad.append(f"{m['path']}: read {m['records_read']}, table {in_table}, quarantine {in_quarantine}")
    return not bad, {"files": manifest.height, "violations": len(bad), "first": "; ".join(bad[:5])}


def schema(wh: Warehouse) -> tuple[bool, dict]:
    """Every Parquet file holds only declared columns, with types DuckDB can cast to the
    declared ones."""
    bad = []
    for name, spec in TABLES.items():
        files = wh.files(name)
        for f in files:
            cols = set(pq.read_schema(f, filesystem=wh.fs).names)
            extra = cols - set(spec.columns)
            if extra:
                bad.append(f"{f[len(wh.parquet) + 1 :]}: undeclared {sorted(extra)}")
        if files:
            try:
                with wh.connect() as con:
                    con.execute(f"SELECT * FROM ({wh.view_sql(name)}) LIMIT 1").fetchall()
            except duckdb.Error as exc:
                bad.append(f"{name}: {str(exc).splitlines()[0]}")
    return not bad, {"violations": len(bad), "first": "; ".join(bad[:5]), "tables": len(TABLES)}


def duplicate_keys(wh: Warehouse) -> tuple[bool, dict]:
    dups = {}
    for name, spec in TABLES.items():
        if not spec.key or not wh.files(name):
            continue
        keys = ", ".join(f'"{k}"' for k in spec.key)
        with wh.connect() as con:
            n = con.execute(f"SELECT count(*) FROM (SELECT {keys} FROM ({wh.view_sql(name)}) GROUP BY ALL HAVING count(*) > 1)").fetchone()[0]
        if n:
            dups[name] = n
    return not dups, {"tables_with_duplicates": dg.MetadataValue.json(dups)}


def quarantine_ratio(wh: Warehouse, limit: float) -> tuple[bool, dict]:
    m = wh.read("ingest_manifest")
    read = int(m["records_read"].sum()) if m.height else 0
    bad = int(m["rows_quarantined"].sum()) if m.height else 0
    ratio = bad / read if read else 0.0
    return ratio <= limit, {"records_read": read, "quarantined": bad, "ratio": ratio, "limit": limit}


def fits_converged(wh: Warehouse) -> tuple[bool, dict]:
    """Every selected model converged, and every class with lifetimes has a selected model."""
    rates = wh.read("failure_rates")
    lt = wh.read("component_lifetimes")
    classes = set(lt.filter(lt["event"])["component_class"].unique()) if lt.height else set()
    sel = selected_rates(rates)
    missing = sorted(classes - set(sel["component_class"].to_list())) if sel.height else sorted(classes)
    unconverged = sorted(sel.filter(~sel["converged"])["component_class"].unique().to_list()) if sel.height else []
    return not missing and not unconverged, {"classes": len(classes), "missing": ", ".join(missing), "unconverged": ", ".join(unconverged)}


def goodput_bounds(wh: Warehouse) -> tuple[bool, dict]:
    with wh.connect() as con:
        jobs = con.execute(f"SELECT count(*) FROM ({wh.view_sql('goodput_jobs')}) WHERE goodput < 0 OR goodput > 1 OR goodput IS NULL").fetchone()[0]
        proj = con.execute(
            f"SELECT count(*) FROM ({wh.view_sql('goodput_projections')}) WHERE goodput < 0 OR goodput > 1 OR "
            "goodput_ci_low > goodput + 1e-9 OR goodput_ci_high < goodput - 1e-9 OR goodput_ci_low < 0 OR goodput_ci_high > 1"
        ).fetchone()[0]
    return jobs == 0 and proj == 0, {"jobs_out_of_bounds": jobs, "projections_out_of_bounds": proj}


def spans_agree(wh: Warehouse) -> tuple[bool, dict]:
    """Every dated source's robust span agrees with the others' (no source starting or ending
    a week, and a quarter of the window, apart from all the rest)."""
    spans = source_spans(wh)
    bad = spans_disagree(spans)
    return not bad, {"sources": spans.height, "disagree": "; ".join(bad), "outlying_times": int(spans["outliers"].sum())}


def _check(passed_meta, severity=dg.AssetCheckSeverity.ERROR) -> dg.AssetCheckResult:
    passed, meta = passed_meta
    return dg.AssetCheckResult(passed=passed, metadata=meta, severity=severity)


@dg.asset_check(asset="ingested_sources", blocking=True, description="Records read = rows written + rows quarantined, per ingested file.")
def conservation_check(goodput: GoodputConfig) -> dg.AssetCheckResult:
    return _check(conservation(goodput.warehouse()))


@dg.asset_check(asset="ingested_sources", blocking=True, description="Parquet files hold exactly the declared columns and types.")
def schema_check(goodput: GoodputConfig) -> dg.AssetCheckResult:
    return _check(schema(goodput.warehouse()))


@dg.asset_check(asset="ingested_sources", description="Share of quarantined records stays under the configured threshold.")
def quarantine_ratio_check(goodput: GoodputConfig) -> dg.AssetCheckResult:
    return _check(quarantine_ratio(goodput.warehouse(), goodput.max_quarantine_ratio), dg.AssetCheckSeverity.WARN)


@dg.asset_check(asset="warehouse_catalog", description="No table has two rows with the same key.")
def duplicate_keys_check(goodput: GoodputConfig) -> dg.AssetCheckResult:
    return _check(duplicate_keys(goodput.warehouse()))


@dg.asset_check(asset="failure_rates", blocking=True, description="Every class with failures has a converged, AIC-selected model.")
def fits_converged_check(goodput: GoodputConfig) -> dg.AssetCheckResult:
    return _check(fits_converged(goodput.analysis_warehouse()))


@dg.asset_check(asset="goodput_projections", description="Measured and projected goodput lie in [0, 1] with CI bounds around the estimate.")
def goodput_bounds_check(goodput: GoodputConfig) -> dg.AssetCheckResult:
    return _check(goodput_bounds(goodput.analysis_warehouse()))


@dg.asset_check(asset="component_lifetimes", description="The sources' time spans agree (e.g. telemetry does not end a month after everything else).")
def source_spans_check(goodput: GoodputConfig) -> dg.AssetCheckResult:
    return _check(spans_agree(goodput.analysis_warehouse()), dg.AssetCheckSeverity.WARN)


ALL_CHECKS = [source_spans_check, conservation_check, schema_check, quarantine_ratio_check, duplicate_keys_check, fits_converged_check, goodput_bounds_check]
