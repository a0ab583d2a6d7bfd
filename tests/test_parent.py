"""The coordinator's parent check (`action/parent.py`): its own run must be active, at its attempt.

Before the first dispatch a parent queued, requested, pending or not yet visible gets a 2-minute
grace; a state outside the grace (`waiting`, `action_required`, `stale`, ...) fails at the read
that shows it, with no dispatch; a re-run of the parent (a new attempt) stops the sequence. Every
test drives `cli.main` against the fake GitHub (`tests.scenario`).
"""

from __future__ import annotations

import pytest

from runner_queue_fallback.tools.simulate.steps import PARENT_RUN_ID
from tests.invariants import children, dispatch_posts
from tests.scenario import FOREVER, Scenario, minute_queues


def parent_reads(s: Scenario) -> list[float]:
    return [
        e.time
        for e in s.world.ledger
        if e.method == "GET" and e.path.endswith(f"/actions/runs/{PARENT_RUN_ID}")
    ]


@pytest.mark.found_by("audit", issue=26)
@pytest.mark.found_by("review", issue=26)
@pytest.mark.parametrize("state", ["waiting", "action_required", "stale"])
def test_a_parent_in_a_state_outside_the_grace_fails_at_the_first_read_with_no_dispatch(
    state: str,
):
    """Spec: queued, requested, pending and 404 get the 2-minute grace; "terminal or unknown
    states fail immediately". `waiting` (an environment's approval) is not active either.

    Nothing is waited for, not even a poll (the review's test of the shared parent check,
    merged here: it asserted the same of `waiting`)."""
    s = Scenario().pools([], [], [])
    s.world.runs[PARENT_RUN_ID].status = state
    result = s.run()
    assert result.exit_code == 1
    assert dispatch_posts(s.world) == []
    assert parent_reads(s) == [0.0], "one read, no polling through the grace"
    assert f"parent run {PARENT_RUN_ID}: expected an active run, observed status {state!r}" in (
        result.log
    )
    assert s.clock.sleeps == []


@pytest.mark.found_by("audit", issue=26)
def test_a_parent_that_turns_waiting_inside_the_grace_fails_at_the_read_that_shows_it():
    """Queued (tolerated) for 20 s, then `waiting`: the grace ends there, not at 2 minutes."""
    s = Scenario().pools([], [], [])
    parent = s.world.runs[PARENT_RUN_ID]
    parent.status = "queued"

    def wait_for_approval() -> None:
        parent.status = "waiting"

    s.world._at(20.0, wait_for_approval)  # the fake's own timeline
    result = s.run()
    assert result.exit_code == 1
    assert dispatch_posts(s.world) == []
    assert parent_reads(s) == [0.0, 5.0, 10.0, 15.0, 20.0]
    assert "observed status 'waiting'" in result.log


@pytest.mark.found_by("review", issue=15)
def test_parent_rerun_stops_the_coordinator():
    """The parent re-run (a new attempt) while the child is queued: the sequence stops."""
    w = minute_queues(watched=True).pools(FOREVER, ())
    w.world.rerun_parent(PARENT_RUN_ID, at=40.0)
    result = w.run()
    assert result.exit_code == 1
    assert "attempt" in result.log
    assert len(dispatch_posts(w.world)) == 1
    assert children(w.world)[0].conclusion == "cancelled"
