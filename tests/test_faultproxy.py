"""The fault-injecting proxy the live-source tests use does what each fault says: a test of the
test server itself, so a live-source test that passes is not passing because a fault was never
injected."""

import time

import pytest
import requests

from tests.servers.faultproxy import Cut
from tests.servers.faultproxy import Drip
from tests.servers.faultproxy import FaultProxy
from tests.servers.faultproxy import Listener
from tests.servers.faultproxy import Reset
from tests.servers.faultproxy import Rewrite
from tests.servers.faultproxy import Status
from tests.servers.faultproxy import random_faults


@pytest.fixture
def upstream():
    with Listener() as listener:
        yield listener


def test_unfaulted_request_reaches_upstream_with_its_body(upstream):
    with FaultProxy(upstream.url) as proxy:
        r = requests.post(f"{proxy.url}/api/v1/query?x=1", data=b"q=up", timeout=5)
    assert (r.status_code, r.content) == (200, b"{}")
    assert [(s.method, s.path, s.body) for s in upstream.requests] == [
        ("POST", "/api/v1/query?x=1", b"q=up")
    ]
    assert proxy.faults == []


def test_status_answers_without_asking_upstream(upstream):
    def rule(_):
        return Status(429, {"Retry-After": "75"}, b"slow down")

    with FaultProxy(upstream.url, rule) as proxy:
        r = requests.get(f"{proxy.url}/x", timeout=5)
    assert (r.status_code, r.headers["Retry-After"], r.content) == (429, "75", b"slow down")
    assert upstream.requests == []


def test_rewrite_replaces_the_body(upstream):
    def rule(_):
        return Rewrite(lambda body: body.replace(b"{}", b'{"warnings": ["partial"]}'))

    with FaultProxy(upstream.url, rule) as proxy:
        r = requests.get(f"{proxy.url}/x", timeout=5)
    assert r.json() == {"warnings": ["partial"]}


@pytest.mark.parametrize("fault", [Cut(1), Reset(1)])
def test_cut_and_reset_deliver_part_of_the_body(upstream, fault):
    with (
        FaultProxy(upstream.url, lambda _: fault) as proxy,
        pytest.raises(requests.exceptions.ChunkedEncodingError),
    ):
        _ = requests.get(f"{proxy.url}/x", timeout=5).content


def test_drip_holds_the_answer_past_a_read_timeout(upstream):
    with FaultProxy(upstream.url, lambda _: Drip(0.5)) as proxy:
        t0 = time.monotonic()
        r = requests.get(f"{proxy.url}/x", timeout=5)
        assert r.content == b"{}"
        assert time.monotonic() - t0 >= 0.9  # two bytes, half a second each


def test_random_faults_are_seeded_and_near_their_rate():
    def draws(seed):
        rule = random_faults(0.05, [Status(503)], seed)
        return [rule(None) is not None for _ in range(4000)]

    assert draws(1) == draws(1)
    assert 0.04 < sum(draws(1)) / 4000 < 0.06
