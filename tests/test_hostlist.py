"""Hostlist expressions: the reference expander, and the vectorized column path agreeing with it."""

import polars as pl
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ingest.hostlist import HostlistError
from ingest.hostlist import compress
from ingest.hostlist import expand
from ingest.hostlist import expand_column


@pytest.mark.parametrize(
    "expr, hosts",
    [
        ("gpu[001-004,010]", ["gpu001", "gpu002", "gpu003", "gpu004", "gpu010"]),
        ("d09n04s[01-02]", ["d09n04s01", "d09n04s02"]),
        ("a[1-2]b[3-4]", ["a1b3", "a1b4", "a2b3", "a2b4"]),
        ("gpu[8-10]", ["gpu8", "gpu9", "gpu10"]),
        ("n1,n[3-4]-ib", ["n1", "n3-ib", "n4-ib"]),
        ("None assigned", []),
        ("", []),
    ],
)
def test_expand(expr, hosts):
    assert expand(expr) == hosts


@pytest.mark.parametrize(
    "expr", ["gpu[1-", "gpu]1", "gpu[x-3]", "gpu[9-3]", "gpu[1-2],,gpu[[3]]", "gpu[[3]]", "a,,b"]
)
def test_malformed(expr):
    with pytest.raises(HostlistError):
        expand(expr)


names = st.builds(
    lambda p, nums, w: [f"{p}{n:0{w}d}" for n in sorted(set(nums))],
    st.sampled_from(["gpu", "d09n04s", "node-", "x"]),
    st.lists(st.integers(0, 300), min_size=1, max_size=12),
    st.integers(1, 4),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(names, min_size=1, max_size=3))
def test_compress_round_trips_and_column_path_agrees(groups):
    hosts = [h for g in groups for h in g]
    expr = compress(hosts)
    assert sorted(expand(expr)) == sorted(set(hosts))
    col, err = expand_column(pl.Series([expr, None, expr + ",a[1-2]b[3]", "bad[1-"]))
    assert col[0].to_list() == expand(expr)
    assert col[1].to_list() == [] and err[1] is None
    assert col[2].to_list() == expand(expr) + ["a1b3", "a2b3"]
    assert col[3].to_list() == [] and "unbalanced" in err[3]


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet="ab01-9[],", max_size=20))
def test_column_path_matches_reference_on_arbitrary_text(text):
    try:
        want, want_err = expand(text), None
    except HostlistError:
        want, want_err = [], "error"
    col, err = expand_column(pl.Series([text]))
    assert col[0].to_list() == want
    assert (err[0] is None) == (want_err is None)


def test_hosts_are_counted_before_they_are_made():
    with pytest.raises(
        HostlistError, match="names 10,000,000 hosts, more than the limit of 100,000"
    ):
        expand("n[0-99999]x[0-99]")
    assert len(expand("n[1-5]", limit=5)) == 5
    with pytest.raises(HostlistError, match="names 6 hosts"):
        expand("n[1-5],m", limit=5)


def test_column_rows_over_their_node_count_or_the_limit_get_errors_and_no_hosts():
    col, err = expand_column(
        pl.Series(["n[1-4]", "n[1-4]", "n[0-999999]", "n[1-4]", "m[1-2]"]),
        pl.Series([4, 2, None, 0, None]),
    )
    assert col.to_list() == [
        ["n1", "n2", "n3", "n4"],
        [],
        [],
        ["n1", "n2", "n3", "n4"],
        ["m1", "m2"],
    ]
    assert err[0] is None and err[1] == "hostlist n[1-4] names 4 hosts but the record has NNodes 2"
    assert "names 1,000,000 hosts" in err[2] and err[3] is None and err[4] is None
