"""Rules the third review's audit found held by no test (issue 26, item 8), on the fake GitHub.

Identity during the cancellation proof, a parent in a state the spec does not tolerate, the
workflow-definition check by blob SHA, and the retry trade-offs that README's departures 1 and 3
state. Each test drives the real coordinator through `cli.main` (see `tests.test_coordinator`),
except the last, which holds one client call against the same fake.
"""

from __future__ import annotations

import itertools

import pytest

from runner_queue_fallback.core import timing
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.errors import RateLimited
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.model import Timings
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.github.retry import Patience
from runner_queue_fallback.tools.simulate.steps import PARENT_RUN_ID, TOKEN, standard_world
from tests.invariants import children, dispatch_posts
from tests.outside import Tamper, child_run_id, error_reply, json_body, with_json
from tests.test_coordinator import FOREVER, Scenario

#: The identity fields the coordinator checks on the run, each given a value it never dispatched.
CHANGED_RUN_FIELDS = {
    "head_sha": "f" * 40,
    "display_title": "rqf-999-1-1-deadbeef",
    "event": "push",
    "path": ".github/workflows/other.yml",
}


def cancel_sent(world: FakeGitHub) -> bool:
    """Whether the coordinator has asked GitHub to cancel a run (the proof has begun)."""
    return any(e.method == "POST" and e.path.endswith("/cancel") for e in world.ledger)


def cancel_times(s: Scenario) -> list[float]:
    return [e.time for e in s.world.ledger if e.method == "POST" and e.path.endswith("/cancel")]


def proof_reads_with_a_body(s: Scenario, run_id: int) -> list[float]:
    """Reads of the child run after the cancel that carried a body (not a 304)."""
    cancel = min(e.seq for e in s.world.ledger if e.method == "POST" and e.path.endswith("/cancel"))
    return [
        e.time
        for e in s.world.ledger
        if e.method == "GET"
        and e.path.endswith(f"/actions/runs/{run_id}")
        and e.seq > cancel
        and e.status == 200
    ]


# -- identity during the cancellation proof: a change fails at once, it never confirms ---------


@pytest.mark.parametrize(("field", "value"), CHANGED_RUN_FIELDS.items(), ids=CHANGED_RUN_FIELDS)
def test_an_identity_change_during_the_cancellation_proof_fails_as_a_mismatch_not_a_confirmation(
    field: str, value: str
):
    """Spec: the proof tolerates late status updates "without relaxing identity validation".

    The child really is cancelled with no runner, so a proof that skipped the identity check
    would confirm it and dispatch the next pool; the run it reads has another identity instead.
    """

    def changed_once_cancelled(method: str, path: str, reply: Reply, world: FakeGitHub):
        body = json_body(reply)
        if method != "GET" or not path.endswith(f"/actions/runs/{child_run_id(path, world)}"):
            return None
        if not isinstance(body, dict) or not cancel_sent(world):
            return None
        return with_json(reply, {**body, field: value})

    s = Scenario(timings=Timings(cancel_delay=10.0)).pools(FOREVER, [], [])
    Tamper(s.world, [changed_once_cancelled], keep_304=True).install()
    result = s.run(post_step=False)
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 1, "no fallback after a proof of another run"
    [kid] = children(s.world)
    error = result.log.split("::error", 1)[1].splitlines()[0]
    assert f"child run {kid.run_id} is not the run that was dispatched" in error
    assert field in error
    assert "Confirmed: child" not in result.log
    assert (kid.conclusion, kid.allocated_at) == ("cancelled", None), "a clean cancel, truly"
    shown = proof_reads_with_a_body(s, kid.run_id)[0]
    assert cancel_times(s)[1] == shown, "the proof stops at the read that shows the change"


def test_a_second_job_appearing_during_the_cancellation_proof_fails_as_a_mismatch():
    """The child must keep exactly one job named worker while it is proven, not only at startup."""

    def extra_job_once_cancelled(method: str, path: str, reply: Reply, world: FakeGitHub):
        body = json_body(reply)
        if method != "GET" or "/jobs" not in path or child_run_id(path, world) is None:
            return None
        if not isinstance(body, dict) or not body.get("jobs") or not cancel_sent(world):
            return None
        [job] = body["jobs"]
        extra = {**job, "id": job["id"] + 1, "name": "intruder"}
        return with_json(reply, {**body, "total_count": 2, "jobs": [job, extra]})

    s = Scenario(timings=Timings(cancel_delay=10.0)).pools(FOREVER, [], [])
    Tamper(s.world, [extra_job_once_cancelled], keep_304=True).install()
    result = s.run(post_step=False)
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 1
    assert "is not the run that was dispatched: jobs: expected exactly one job" in result.log
    assert "Confirmed: child" not in result.log


# -- the coordinator's own parent check: an unknown state fails at once ------------------------


@pytest.mark.parametrize("state", ["waiting", "action_required", "stale"])
def test_a_parent_in_a_state_outside_the_grace_fails_at_the_first_read_with_no_dispatch(
    state: str,
):
    """Spec: queued, requested, pending and 404 get the 2-minute grace; "terminal or unknown
    states fail immediately". `waiting` (an environment's approval) is not active either."""
    s = Scenario().pools([], [], [])
    s.world.runs[PARENT_RUN_ID].status = state
    result = s.run()
    assert result.exit_code == 1
    assert dispatch_posts(s.world) == []
    assert parent_reads(s) == [0.0], "one read, no polling through the grace"
    assert f"parent run {PARENT_RUN_ID}: expected an active run, observed status {state!r}" in (
        result.log
    )


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


def parent_reads(s: Scenario) -> list[float]:
    return [
        e.time
        for e in s.world.ledger
        if e.method == "GET" and e.path.endswith(f"/actions/runs/{PARENT_RUN_ID}")
    ]


# -- the workflow definition is compared by the child file's blob SHA --------------------------


def test_an_unrelated_commit_on_workflow_ref_does_not_fail_the_sequence():
    """README (Preflight): the check compares the child file's blob SHA, not workflow-ref's commit.
    Another file changes on main between the dispatches: the fallback goes ahead, and its child
    runs at the new commit."""
    s = Scenario().pools(FOREVER, [], [])
    s.world.add_workflow("unrelated.yml", "main", name="Unrelated")
    first_commit = s.world.refs["heads/main"]
    s.world.change_workflow("unrelated.yml", "main", at=300.0)
    result = s.run()
    assert result.exit_code == 0, result.log
    first, second = children(s.world)
    assert s.world.refs["heads/main"] != first_commit
    heads = [s.world.runs[kid.run_id].head_sha for kid in (first, second)]
    assert heads == [first_commit, s.world.refs["heads/main"]]


# -- departure 3: before any dispatch, a secondary limit without retry-after gets one retry ----


def test_before_any_dispatch_a_secondary_limit_without_retry_after_gets_one_retry_not_two():
    """Back-off from a minute: the first retry waits 60 s, the second would wait 120 s, over the
    spec's one-minute cap, so the error is reported instead (README, departure 3)."""

    def secondary_without_retry_after(method: str, path: str, reply: Reply, world: FakeGitHub):
        if method != "GET" or "/git/ref/" not in path:
            return None
        headers = {"x-ratelimit-remaining": "500", "x-ratelimit-limit": "1000"}
        return error_reply(403, "You have exceeded a secondary rate limit.", headers)

    s = Scenario().pools([], [], [])
    Tamper(s.world, [secondary_without_retry_after]).install()
    result = s.run()
    assert result.exit_code == 1
    assert dispatch_posts(s.world) == []
    reads = [e.time for e in s.world.ledger if "/git/ref/" in e.path]
    assert [t - reads[0] for t in reads] == [0.0, timing.SECONDARY_BACKOFF_FIRST_SECONDS]
    assert "secondary" in result.log.split("::error", 1)[1].splitlines()[0]


# -- departure 1: once a child exists, one request waits out up to 5 resets ------------------


def test_once_a_child_exists_one_read_waits_out_four_resets_then_reports_the_fifth_refusal():
    """README, departure 1 (and what `plan` says it leaves out): a read refused for a spent quota
    after every reset waits 4 resets, one after each refusal, and reports the fifth refusal."""
    hour = int(timing.QUOTA_WINDOW_SECONDS)
    refusals = timing.PATIENT_RATE_LIMIT_WAITS + 1
    spent = Fault(
        "primary_rate_limit",
        method="GET",
        path=r"/actions/runs/9\d+$",
        start=200.0,
        count=refusals,
        retry_after=hour,
    )
    s = Scenario(faults=[spent]).pools(FOREVER, [], [])
    result = s.run(post_step=False)
    assert result.exit_code == 1
    refused = [e.time for e in s.world.ledger if e.fault == "primary_rate_limit"]
    assert len(refused) == refusals
    gaps = [later - earlier for earlier, later in itertools.pairwise(refused)]
    assert gaps == [hour + 1.0] * 4, "the 4 resets the README and plan state"
    assert "API rate limit" in result.log.split("::error", 1)[1].splitlines()[0]
    assert len(dispatch_posts(s.world)) == 1


def test_a_read_sent_when_the_last_reply_said_the_quota_is_spent_waits_that_reset_first():
    """The fifth reset of departure 1: the reply before said 0 left, so the read waits for that
    reset before it is sent, then up to 4 more after refusals, then reports the error."""
    clock = FakeClock()
    world, _ = standard_world(clock)
    world.spend_quota(world.quota - 1)
    client = GitHubClient(world.session(), world.api_url, world.repository, TOKEN, clock)
    client.patience = Patience.CHILD_EXISTS
    client.get_run(PARENT_RUN_ID)  # served: the last request of the hour, "0 left"
    assert client.quota_reset_in() is not None
    hour = int(timing.QUOTA_WINDOW_SECONDS)
    world.inject(Fault("primary_rate_limit", count=5, retry_after=hour))
    with pytest.raises(RateLimited):
        client.get_run(PARENT_RUN_ID)
    assert len(clock.sleeps) == 1 + 4
    assert all(hour <= wait <= timing.RESET_WAIT_MAX_SECONDS for wait in clock.sleeps)
