"""Exact duplicate records, the one mechanism: a repeat is neither a row nor a quarantine row; it
is counted in the manifest's ``rows_duplicate``, whether the warehouse's record-key dedupe drops
it or the parser drops it itself (``ParseResult.duplicates``)."""

import polars as pl
import pytest

from ingest.base import ParseResult
from ingest.base import drop_repeats
from ingest.base import settle_repeats
from ingest.parsing import checked
from ingest.registry import formats
from ingest.runner import ingest_paths
from warehouse.schemas import quarantine_frame


def test_runner_conservation_counts_parser_duplicates():
    spec = formats()["sacct"]
    rows = pl.DataFrame({"job_id": ["1", "2"]})
    q = quarantine_frame([3], ["x"], ["bad"])
    assert checked(spec, ParseResult({"job_attempts": rows}, q, 5, duplicates=2)).duplicates == 2
    with pytest.raises(
        RuntimeError, match=r"5 records read, 2 rows \+ 1 quarantined \+ 1 duplicates"
    ):
        checked(spec, ParseResult({"job_attempts": rows}, q, 5, duplicates=1))


def test_settle_repeats_duplicates_rows_and_requarantines_rejects():
    lines = pl.DataFrame({"line": [1, 2, 3, 4, 5, 6], "raw": ["a", "b", "a", "c", "b", "a"]})
    kept, repeats = drop_repeats(lines, ["raw"])
    assert kept["line"].to_list() == [1, 2, 4]
    assert repeats.rows() == [(3, 1), (5, 2), (6, 1)]
    # line 1 made two rows (a two-node event), line 2 was rejected, line 4 made nothing
    dups, q = settle_repeats(repeats, pl.Series([1, 1]), quarantine_frame([2], ["b"], ["bad b"]))
    assert dups == 4
    assert q.rows() == [(2, "b", "bad b"), (5, "b", "bad b")]


def test_manifest_conserves_with_parser_and_store_duplicates(wh, tmp_path):
    job = "5|2026-01-01T00:00:00|2026-01-01T01:00:00|COMPLETED\n"
    (tmp_path / "a.txt").write_text("JobID|Start|End|State\n" + job + job)  # the parser drops one
    (tmp_path / "b.txt").write_text(
        "JobID|Start|End|State\n" + job + "not|a|job\n"
    )  # the store drops one
    reports = ingest_paths(wh, [tmp_path], fmt="sacct")
    got = {
        r.path.rsplit("/", 1)[1]: (r.records, r.rows_ok, r.rows_quarantined, r.rows_duplicate)
        for r in reports
    }
    assert got == {"a.txt": (2, 1, 0, 1), "b.txt": (2, 0, 1, 1)}
    m = wh.read("ingest_manifest").sort("path")
    assert m.select("records_read", "rows_ok", "rows_quarantined", "rows_duplicate").rows() == [
        (2, 1, 0, 1),
        (2, 0, 1, 1),
    ]
    assert wh.read("job_attempts").height == 1
