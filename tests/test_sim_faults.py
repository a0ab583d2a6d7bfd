"""Injected faults: each kind, windows and counts, seeded chance, lost dispatch replies, latency."""

from __future__ import annotations

import pytest
import requests

from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github import FAULT_KINDS, Fault, FaultPlan, Timings
from tests.test_sim_support import AUTH, REPO, advance_to, child_inputs, get, make_world

API = "https://api.github.test"
RUN = "/actions/runs/4242"


def world_with(*faults: Fault, seed: int = 0, clock: FakeClock | None = None):
    return make_world(clock, faults=FaultPlan(faults, seed))


@pytest.mark.parametrize(
    ("fault", "status", "check"),
    [
        pytest.param(Fault("status", status=500), 500, "Internal Server Error", id="500"),
        pytest.param(Fault("status", status=503), 503, "Service Unavailable", id="503"),
        pytest.param(Fault("status", status=408), 408, "Request Timeout", id="408"),
        pytest.param(Fault("unauthorized"), 401, "Bad credentials", id="401"),
        pytest.param(Fault("forbidden"), 403, "Resource not accessible by integration", id="403"),
    ],
)
def test_error_statuses(fault, status, check):
    world = world_with(fault)
    reply = get(world, RUN)
    assert reply.status == status
    assert reply.json()["message"] == check
    assert reply.json()["status"] == str(status)
    assert world.ledger[-1].fault == fault.kind


def test_502_is_an_html_gateway_page():
    reply = get(world_with(Fault("status", status=502)), RUN)
    assert (reply.status, reply.headers["Content-Type"]) == (502, "text/html")


def test_malformed_json_is_a_200_with_a_broken_body():
    reply = get(world_with(Fault("malformed")), RUN)
    assert reply.status == 200
    with pytest.raises(ValueError, match="Unterminated string"):
        reply.json()


@pytest.mark.parametrize(
    ("kind", "exception"),
    [
        ("timeout", requests.exceptions.ReadTimeout),
        ("connection", requests.exceptions.ConnectionError),
    ],
)
def test_no_reply_faults_raise_in_the_requests_adapter(kind, exception):
    world = world_with(Fault(kind, count=1))
    session = world.session()
    with pytest.raises(exception):
        session.get(f"{API}{REPO}{RUN}", headers=AUTH, timeout=10)
    assert session.get(f"{API}{REPO}{RUN}", headers=AUTH, timeout=10).status_code == 200
    assert [(e.status, e.fault, e.counted) for e in world.ledger] == [
        (None, kind, False),
        (200, None, True),
    ]


def test_primary_rate_limit_fault_has_zero_remaining_and_a_reset():
    clock = FakeClock()
    world = world_with(Fault("primary_rate_limit", retry_after=37), clock=clock)
    reply = get(world, RUN)
    assert reply.status == 403
    assert reply.headers["X-RateLimit-Remaining"] == "0"
    assert int(reply.headers["X-RateLimit-Reset"]) == int(clock.now().timestamp()) + 37
    assert "Retry-After" not in reply.headers


@pytest.mark.parametrize("status", [403, 429])
def test_secondary_rate_limit_has_retry_after_and_its_message(status):
    reply = get(world_with(Fault("secondary_rate_limit", status=status, retry_after=61)), RUN)
    assert reply.status == status
    assert reply.headers["Retry-After"] == "61"
    assert reply.headers["X-RateLimit-Remaining"] != "0"
    assert "secondary rate limit" in reply.json()["message"]


def test_window_count_and_method_path_matching():
    clock = FakeClock()
    fault = Fault("status", method="GET", path=r"/jobs$", start=10.0, end=20.0, count=2, status=503)
    world = world_with(fault, clock=clock)
    statuses = []
    for at in (5.0, 10.0, 11.0, 12.0, 19.0):
        advance_to(clock, at)
        statuses.append(get(world, f"{RUN}/jobs").status)
        statuses.append(get(world, RUN).status)
    assert statuses == [200, 200, 503, 200, 503, 200, 200, 200, 200, 200]


def test_random_faults_are_replayable_with_a_seed():
    def pattern(seed: int) -> list[int]:
        world = world_with(Fault("status", status=500, probability=0.3), seed=seed)
        return [get(world, RUN).status for _ in range(40)]

    assert pattern(7) == pattern(7)
    assert pattern(7) != pattern(8)
    assert 0 < pattern(7).count(500) < 40


@pytest.mark.parametrize("lost_as", [None, 502])
def test_lost_dispatch_reply_still_creates_the_run(lost_as):
    clock = FakeClock()
    world = world_with(
        Fault("lost_reply", method="POST", path="/dispatches$", status=lost_as), clock=clock
    )
    session = world.session()
    url = f"{API}{REPO}/actions/workflows/runner-worker.yml/dispatches"
    body = {"ref": "main", "inputs": child_inputs("req-lost")}
    if lost_as is None:
        with pytest.raises(requests.exceptions.ReadTimeout):
            session.post(url, json=body, headers=AUTH, timeout=10)
    else:
        assert session.post(url, json=body, headers=AUTH, timeout=10).status_code == 502
    advance_to(clock, 10.0)
    listing = get(world, "/actions/workflows/runner-worker.yml/runs?event=workflow_dispatch").json()
    assert [r["display_title"] for r in listing["workflow_runs"]] == ["req-lost"]
    assert world.ledger[0].counted


def test_latency_makes_the_reply_arrive_later():
    clock = FakeClock()
    world = make_world(clock, timings=Timings(latency=7.5))
    get(world, RUN)
    assert clock.monotonic() == 7.5
    assert world.ledger[-1].time == 0.0  # served on arrival, answered later
    assert clock.sleeps == []  # the world's own passage of time, not a client sleep


def test_every_fault_kind_is_documented():
    assert set(FAULT_KINDS) == {
        "status",
        "timeout",
        "connection",
        "malformed",
        "unauthorized",
        "forbidden",
        "primary_rate_limit",
        "secondary_rate_limit",
        "lost_reply",
    }
