"""Property-based fuzzing of the sacct text parser: arbitrary bytes, mutated real dumps and
odd field lists never raise, and every record is a row or a quarantine row."""

import polars as pl
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ingest.base import ParseContext
from ingest.formats.sacct import parse
from ingest.formats.sacct.layout import XDMOD_FIELDS
from tests.conftest import SLURM

REAL = [
    (SLURM / "xdmod__accounting-logs.log").read_bytes(),
    (SLURM / "xdmod__non-ended-job-state.log").read_bytes(),
    (SLURM / "sacct_parsable2_with_header_examples.txt").read_bytes(),
]
LINES = [ln for data in REAL for ln in data.decode().splitlines()]


def _check(data: bytes, **ctx):
    res = parse(data, ParseContext(**ctx))
    ok = res.tables.get("job_attempts", pl.DataFrame())
    assert res.records == ok.height + res.quarantine.height + res.duplicates
    assert res.quarantine["error"].null_count() == 0


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=500))
def test_arbitrary_bytes(data):
    _check(data)


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(REAL), st.integers(0, 1400), st.integers(1, 40), st.binary(max_size=20))
def test_mutated_real_dumps(real, pos, cut, insert):
    pos = min(pos, len(real) - 1)
    _check(real[:pos] + insert + real[pos + cut :], tz="America/Chicago")


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from(LINES), max_size=10), st.sampled_from(["|", "||", "\t", "\u2016"]))
def test_shuffled_real_lines_and_delimiters(lines, delim):
    _check("\n".join(ln.replace("|", delim) for ln in lines).encode(), delimiter=delim)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(XDMOD_FIELDS + ["", "alloccpus", "bogus"]), min_size=1, max_size=8),
    st.lists(
        st.lists(st.text(alphabet="0123456789_.[]-:,|abcTUNknow ", max_size=12), max_size=8),
        max_size=5,
    ),
)
def test_caller_field_lists_with_random_values(fields, rows):
    data = "\n".join("|".join(r) for r in rows).encode()
    _check(data, fields=tuple(fields))
