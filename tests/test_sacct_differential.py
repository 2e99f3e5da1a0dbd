"""sacct text and sacct --json of the same jobs give the same job_attempts: every column both
carry (benchmarks/validate_differential_sacct.py ``FORMAT_OWN`` names the others), on a small
simulated fleet whose GPUs Slurm lists twice (typed and untyped); the benchmark runs larger ones."""

import polars as pl

from benchmarks.validate_differential_sacct import FORMAT_OWN
from benchmarks.validate_differential_sacct import _fleet
from benchmarks.validate_differential_sacct import differences


def test_text_and_json_of_a_simulated_fleet_give_the_same_attempts(tmp_path):
    n, diffs, _ = _fleet(8, 5, 10.0, tmp_path)
    assert n > 30 and diffs == []


def test_differences_names_each_column_and_attempt_that_disagrees():
    row = {"cluster": "c", "scheduler": "slurm", "job_id": "1", "attempt": 1, "n_gpus": 8,
           "elapsed_s": 3600.0, "source": "sacct", "raw_state": "CANCELLED by 1"}  # fmt: skip
    text = pl.DataFrame([row, {**row, "job_id": "2"}])
    json = pl.DataFrame([{**row, "n_gpus": 16, "elapsed_s": 3600.0 * (1 + 1e-12),
                          "source": "sacct-json", "raw_state": "CANCELLED"}])  # fmt: skip
    assert "raw_state" in FORMAT_OWN
    assert differences(text, json) == [
        "1 attempt(s) only in the text: ('c', 'slurm', '2', 1)",
        "n_gpus: 1 attempt(s) differ, e.g. ('c', 'slurm', '1', 1, 8, 16)",
    ]
