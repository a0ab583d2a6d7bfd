"""Cancel and confirm: a child is cancelled and proven over wherever the program stops one.

At the queue deadline (`action/sequence/cancellation.py`: the proof that nothing ran before the
next dispatch), and in every cleanup (`action/cleanup.py`'s `cancel_and_confirm`, after an error,
a signal or in the post step), with `cleanup.CancelRequests` in common: a cancel GitHub refuses
is sent again 5 s later, then forced; the run is read every 5 s up to the last poll of the window;
identity is checked at every read of the proof; a lagging conclusion is waited for; what an
unconfirmed cleanup reports says what failed; a signal's cleanup uses its whole grace and no
more; odd rate-limit headers never stop a cancel. The cleanup's own rules call it as the
coordinator and the post step do, on a client of the fake GitHub (`tests.scenario.Child`); the
others drive `cli.main` (`tests.scenario.Scenario`), a fuzzer's find replayed as its own `Case`.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from runner_queue_fallback.action.cleanup import cancel_and_confirm, cancel_and_confirm_all
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.model import Platform, RunHistory, Timings, Workload
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.github.retry import RESET_MARGIN_SECONDS, Patience
from runner_queue_fallback.tools.simulate.steps import SimulationRun
from tests.invariants import children, dispatch_posts
from tests.outside import Rule, Tamper, child_run_id, json_body, with_json
from tests.scenario import CPU16, FOREVER, Child, Scenario, attempts, minute_queues
from tests.test_execution import lag_conclusion
from tests.test_fuzz_coordinator import Case, PoolPlan, base_inputs, execute
from tests.test_post_step import busy_world
from tests.test_rules import posts, run_reads
from tests.test_sim_support import dispatch

#: The child's run (the parent's run id is shorter), and its cancels.
CHILD_RUN = r"/actions/runs/9\d{9}$"
CANCEL = r"/actions/runs/9\d{9}/(force-)?cancel$"
#: Honoured never (within any window here).
NEVER = 10_000.0
#: GitHub answers 409 to every cancel and force-cancel while the run stays queued.
REFUSED = Fault("status", status=409, method="POST", path=r"/(force-)?cancel$")
#: The first candidate's queue deadline: the first read at 15 s, then 10 minutes.
DEADLINE = 615.0
#: The queued poll that the signal interrupts (the first candidate's queue, 10 minutes).
SIGNAL_AT = 215.0

# -- at the queue deadline: the cancel, sent again, forced, and the proof -----------------------


@pytest.mark.found_by("mutation", issue=35)
def test_a_cancel_refused_at_the_queue_deadline_is_sent_again_then_forced_and_quoted():
    s = Scenario(faults=[REFUSED]).pools(FOREVER, [], [])
    result = s.run(post_step=False)
    assert result.exit_code == 1
    sent = [(e.time, e.path.rsplit("/", 1)[-1]) for e in s.world.ledger if e.method == "POST"]
    assert sent[1:4] == [
        (DEADLINE, "cancel"),
        (DEADLINE + 5.0, "cancel"),
        (DEADLINE + 10.0, "force-cancel"),
    ]
    error = next(line for line in result.log.splitlines() if "was not confirmed within" in line)
    assert "; GitHub refused the cancel: POST " in error
    assert "-> 409: " in error


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


@pytest.mark.found_by("audit", issue=26)
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
    assert s.cancels()[1] == shown, "the proof stops at the read that shows the change"


@pytest.mark.found_by("audit", issue=26)
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


@pytest.mark.found_by("review", issue=15)
def test_lagging_conclusion_during_the_cancellation_proof_falls_back():
    """The cancelled run showed `completed` with a null conclusion for two reads.

    Before: "ended unexpectedly", no fallback. After: read again at the 5-s cadence in the proof
    window; cancelled cleanly, then the next pool.
    """
    w = minute_queues(watched=True).pools(FOREVER, ())
    w.tamper.rules.append(lag_conclusion(2, when="cancelled"))
    result = w.run()
    assert result.exit_code == 0, result.log
    assert "ended unexpectedly" not in result.log
    assert len(dispatch_posts(w.world)) == 2
    assert "waiting for its conclusion" in result.log


# -- the cancellation window: 5 s polls, the last one at 120 s, force-cancel once at 60 s ------


def stuck_cancellation() -> tuple[Scenario, SimulationRun]:
    s = Scenario(timings=Timings(cancel_delay=NEVER, force_cancel_delay=NEVER)).pools(
        FOREVER, [], []
    )
    return s, s.run(post_step=False)


def test_the_cancellation_window_polls_every_5_s_up_to_its_last_poll_at_120_s():
    s, result = stuck_cancellation()
    assert result.exit_code == 1
    [kid] = children(s.world)
    (first_seq, first), (second_seq, _) = posts(s, "/cancel")[:2]
    polls = [t - first for seq, t in run_reads(s, kid.run_id) if first_seq < seq < second_seq]
    assert polls == [5.0 * n for n in range(1, 25)]  # 5, 10, ..., 120
    assert polls[-1] == timing.CANCEL_WINDOW_SECONDS
    assert len(dispatch_posts(s.world)) == 1


def test_an_expired_cancellation_window_is_reported_when_it_closes_with_the_last_observation():
    """Expiry is reported at the window's end (the cleanup's cancel follows at once), by the
    sequence's own error naming what was last seen, and the attempt stays 'cancelling'."""
    s, result = stuck_cancellation()
    (_, first), (_, second) = posts(s, "/cancel")[:2]
    assert second - first == timing.CANCEL_WINDOW_SECONDS
    expired = [line for line in result.log.splitlines() if "was not confirmed within" in line]
    assert expired, result.log
    assert expired[0].startswith("::error title=error%3A Fallback stopped::")
    assert "last observation: run " in expired[0]
    assert "job worker queued" in expired[0]
    assert "Unexpected" not in result.log
    assert [a["outcome"] for a in attempts(result)] == ["cancelling after queue timeout"]


def test_an_expired_cancellation_window_names_the_last_request_error():
    """Every proof read fails (502): the expiry says so instead of inventing an observation."""
    s = Scenario(timings=Timings(cancel_delay=NEVER, force_cancel_delay=NEVER)).pools(
        FOREVER, [], []
    )
    s.world.inject(Fault("status", status=502, path=r"/actions/runs/\d+$", start=616.0))
    result = s.run(post_step=False)
    expired = [line for line in result.log.splitlines() if "was not confirmed within" in line]
    assert expired, result.log
    assert "last request error: " in expired[0]
    assert "502" in expired[0]
    assert "Unexpected" not in result.log


def test_an_expired_cancellation_window_names_a_failed_force_cancel():
    """The cancel is ignored and the force-cancel fails: the expiry names the force-cancel."""
    s = Scenario(timings=Timings(cancel_delay=NEVER, force_cancel_delay=NEVER)).pools(
        FOREVER, [], []
    )
    s.world.inject(Fault("status", status=500, path=r"/force-cancel$", count=10))
    result = s.run(post_step=False)
    expired = [line for line in result.log.splitlines() if "was not confirmed within" in line]
    assert expired, result.log
    assert "last request error: " in expired[0]
    assert "force-cancel" in expired[0].split("last request error: ", 1)[1]


def test_a_child_ending_other_than_cancelled_during_the_proof_stops_at_the_read_that_shows_it():
    """Completed but not cancelled (here: reported as failure) is no proof: stop there, no fallback,
    rather than poll out the rest of the window."""

    def failure_not_cancelled(method: str, path: str, reply: Reply, world: FakeGitHub):
        body = json_body(reply)
        if method != "GET" or child_run_id(path, world) is None or not isinstance(body, dict):
            return None
        if body.get("conclusion") != "cancelled":
            return None
        return with_json(reply, {**body, "conclusion": "failure"})

    s = Scenario(timings=Timings(cancel_delay=10.0)).pools(FOREVER, [], [])
    Tamper(s.world, [failure_not_cancelled], keep_304=True).install()
    result = s.run(post_step=False)
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 1
    [kid] = children(s.world)
    [(cancel_seq, cancel), *_] = posts(s, "/cancel")
    reads = [t for seq, t in run_reads(s, kid.run_id) if seq > cancel_seq]
    assert kid.completed_at is not None
    assert reads[-1] - kid.completed_at <= timing.CANCEL_POLL_SECONDS
    assert reads[-1] < cancel + timing.CANCEL_WINDOW_SECONDS / 2
    assert "failure" in result.log.split("::error", 1)[1].splitlines()[0]


def test_force_cancel_is_sent_once_at_half_the_cancellation_window():
    """Once, even while it does not take either. (A second test of this, on the catalogue's
    `unheeded-cancel` world, was merged here: that a force-cancel which takes is then proven
    and the next pool served, tests/test_simulate.py holds by that scenario's expectations.)"""
    s, result = stuck_cancellation()
    [(_, first), *_] = posts(s, "/cancel")
    forced = [t for _, t in posts(s, "/force-cancel")]
    assert forced == [first + timing.CANCEL_WINDOW_SECONDS / 2]
    assert result.log.count("still not cancelled: sending force-cancel") == 1  # and it says so


def test_no_force_cancel_when_the_cancel_lands_in_the_first_half_of_the_window():
    s = Scenario(timings=Timings(cancel_delay=50.0)).pools(FOREVER, [], [])
    result = s.run()
    assert result.exit_code == 0
    assert posts(s, "/force-cancel") == []


def test_a_confirmation_whose_reply_arrives_after_the_window_authorises_no_fallback():
    """Truth: the child ends inside the window; the read that would show it replies after it."""
    s = Scenario(timings=Timings(latency=2.0, cancel_delay=110.0, force_cancel_delay=NEVER))
    s.pools(FOREVER, [], [])
    result = s.run(post_step=False)
    kid = children(s.world)[0]
    [(_, cancel), *_] = posts(s, "/cancel")
    assert kid.completed_at is not None
    assert kid.completed_at < cancel + timing.CANCEL_WINDOW_SECONDS
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 1, "no fallback on a reply from after the window"


# -- what an unconfirmed cleanup reports --------------------------------------------------------


@pytest.mark.found_by("mutation", issue=35)
def test_an_unconfirmed_cleanup_of_a_run_that_had_a_job_does_not_say_github_made_none():
    """The cancel is never honoured; the run's queued job was read: no 'never created' report."""
    child = Child(cancel_delay=NEVER, force_cancel_delay=NEVER)
    said = child.clean_up()
    assert not child.confirmed
    assert "never created its job" not in said
    assert any(line.startswith("Cleanup check: run ") for line in child.lines)


@pytest.mark.found_by("mutation", issue=35)
@pytest.mark.parametrize(
    ("fault", "said"),
    [
        (Fault("forbidden", method="POST", path=CANCEL), "cancel failed: POST "),
        (Fault("status", status=502, method="GET", path=CHILD_RUN), "last read failed: GET "),
    ],
    ids=["cancel-forbidden", "reads-failing"],
)
def test_an_unconfirmed_cleanup_says_what_failed(fault: Fault, said: str):
    child = Child(fault, cancel_delay=NEVER, force_cancel_delay=NEVER)
    text = child.clean_up()
    assert not child.confirmed
    assert said in text
    assert "; ;" not in text, "no empty part (the run had its job: nothing on GitHub's side)"


@pytest.mark.found_by("mutation", issue=35)
def test_a_cleanup_whose_reads_are_refused_ends_unconfirmed_at_once():
    child = Child(Fault("forbidden", method="GET", path=CHILD_RUN))
    text = child.clean_up()
    assert not child.confirmed
    assert "read refused: GET " in text
    assert child.clock.monotonic() == 30.0


@pytest.mark.found_by("mutation", issue=35)
def test_a_zombies_report_ends_with_githubs_refusal_and_nothing_after_it():
    """Cancel and force-cancel refused, nothing else failed: the report has no empty part."""
    child = Child(platform=Platform(zombies=(1,)))
    text = child.clean_up()
    assert "GitHub never created its job" in text
    assert not text.rstrip().endswith(";"), text
    assert "; ;" not in text


@pytest.mark.found_by("mutation", issue=35)
def test_a_cancel_refused_then_failing_when_sent_again_is_reported():
    """The zombie's cancel is refused (409); sent again 5 s later it fails (403): said."""
    failing = Fault("forbidden", method="POST", path=CANCEL, start=31.0)
    child = Child(platform=Platform(zombies=(1,)))
    child.world.faults.add(failing)
    text = child.clean_up()
    assert "cancel failed: POST " in text


@pytest.mark.found_by("mutation", issue=35)
def test_a_quota_spent_until_after_the_window_ends_the_cleanup_at_once_saying_so():
    """Other workflows spend the quota: its reset is beyond the window, so the cleanup stops."""
    child = Child(cancel_delay=NEVER, force_cancel_delay=NEVER)
    child.world.spend_quota(child.world.quota)
    text = child.clean_up()
    assert not child.confirmed
    assert "the API quota is spent until its reset at " in text
    assert child.clock.monotonic() == 30.0, "no poll is waited for"


def quota_spent_by_the_first_read(limit: float) -> Child:
    """A cleanup at 30 s whose cancel and first read (3 requests) spend the last of the quota
    (its window began at the dispatch, 0 s: the client may send again at 3,601 s), with the
    reset budget that puts its limit (30 s + window + budget) at `limit`. The cancel takes 20 s;
    the client waits out the quota as the coordinator's cleanup does (a child exists)."""
    child = Child(cancel_delay=20.0)
    child.client.patience = Patience.CHILD_EXISTS
    child.world.spend_quota(child.world.quota - child.world._quota_used() - 3)
    child.said = child.clean_up(reset_budget=limit - 30.0 - timing.CANCEL_WINDOW_SECONDS)
    return child


@pytest.mark.found_by("mutation", issue=35)
def test_a_reset_exactly_at_the_cleanups_limit_is_waited_for():
    """Limit 3,601 s, the reset then: the cleanup waits for it and confirms the run at the
    read after it; a limit a second earlier ends the cleanup at once, saying why."""
    resumed = timing.QUOTA_WINDOW_SECONDS + RESET_MARGIN_SECONDS
    child = quota_spent_by_the_first_read(resumed)
    assert child.confirmed
    assert child.reads() == [30.0, resumed]
    early = quota_spent_by_the_first_read(resumed - 1.0)
    assert not early.confirmed
    assert early.reads() == [30.0]
    assert early.clock.monotonic() == 30.0


@pytest.mark.found_by("mutation", issue=35)
def test_a_cleanup_ended_by_the_spent_quota_says_so_with_no_empty_part():
    """Nothing else to report: the reason is the quota, not `...; . Check run ...`."""
    early = quota_spent_by_the_first_read(timing.QUOTA_WINDOW_SECONDS + RESET_MARGIN_SECONDS - 1)
    reset = early.client.reset_time()
    assert f"; the API quota is spent until its reset at {reset}. Check run" in early.said
    assert "; ." not in early.said


# -- its window ---------------------------------------------------------------------------------


def test_cancel_and_confirm_polls_every_five_seconds_within_two_minutes():
    clock = FakeClock()
    world = busy_world(clock, cancel_delay=12.0)
    run_id = dispatch(world, "rqf-4", labels="linux-amd64-cpu8")
    clock.advance(30)
    client = GitHubClient(world.session(), world.api_url, world.repository, "t", clock)
    start = clock.monotonic()
    result = cancel_and_confirm(client, clock, run_id)
    assert result.confirmed
    assert clock.sleeps == [5.0, 5.0, 5.0]
    assert clock.monotonic() - start == 15.0


@pytest.mark.found_by("mutation", issue=35)
def test_a_cleanup_reads_every_5_s_up_to_the_last_poll_of_its_window():
    child = Child(cancel_delay=NEVER, force_cancel_delay=NEVER)
    child.clean_up()
    window = timing.CANCEL_WINDOW_SECONDS
    assert child.reads()[-1] == 30.0 + window
    assert child.clock.monotonic() == 30.0 + window


@pytest.mark.found_by("mutation", issue=35)
def test_quota_waited_before_the_cleanup_does_not_lengthen_its_window():
    """A reset budget extends the window only by what the cleanup itself waits for."""
    child = Child(cancel_delay=NEVER, force_cancel_delay=NEVER)
    child.client.stats.quota_waited = 600.0  # waited earlier in the sequence
    child.clean_up(reset_budget=60.0)
    assert child.clock.monotonic() == 30.0 + timing.CANCEL_WINDOW_SECONDS


@pytest.mark.found_by("mutation", issue=35)
def test_a_refused_cancel_accepted_when_sent_again_is_not_force_cancelled():
    """GitHub refuses the first cancel (409, still queued), then accepts it 5 s later: no
    force-cancel follows while the cancel takes its time."""
    child = Child(platform=Platform(zombies=(1,)), cancel_delay=20.0)

    def revive() -> None:
        child.world.runs[child.run_id].zombie = False

    child.world._at(32.0, revive)
    child.clean_up()
    assert child.cancels() == [(30.0, "cancel"), (35.0, "cancel")]
    assert child.confirmed


# -- several runs share one window --------------------------------------------------------------


@pytest.mark.found_by("mutation", issue=35)
def test_each_further_run_is_sent_its_cancel_and_a_failure_is_said():
    child = Child()
    other = dispatch(child.world, "rqf-2", labels="linux-amd64-cpu8")
    child.clock.advance(10)  # visible
    child.world.faults.add(Fault("forbidden", method="POST", path=rf"/runs/{other}/cancel$"))
    cancel_and_confirm_all(child.client, child.clock, [child.run_id, other], log=child.lines.append)
    assert any(line.startswith(f"Cancel of run {other} failed: POST ") for line in child.lines)
    assert f"Cancel requested for run {other}: accepted" not in child.lines
    third = dispatch(child.world, "rqf-3", labels="linux-amd64-cpu8")
    child.clock.advance(10)  # visible
    cancel_and_confirm_all(child.client, child.clock, [child.run_id, third], log=child.lines.append)
    assert f"Cancel requested for run {third}: accepted" in child.lines


@pytest.mark.found_by("mutation", issue=35)
def test_a_later_run_gets_only_what_is_left_of_the_shared_window_however_little():
    """Every reply takes 0.75 s: the first run's cleanup (its cancel never honoured) ends half a
    second before the shared 10 s window does. The second run's cancel goes out in that half
    second; its read, which could only start after the window's end, is never sent."""
    child = Child(cancel_delay=NEVER, force_cancel_delay=NEVER, latency=0.75)
    other = dispatch(child.world, "rqf-2", labels="linux-amd64-cpu8")
    child.clock.advance(10)  # visible
    start = child.clock.monotonic()
    end = start + 10.0
    _, second = cancel_and_confirm_all(
        child.client, child.clock, [child.run_id, other], window=10.0, log=child.lines.append
    )
    sent = [(e.time, e.method, e.path) for e in child.world.ledger if e.time >= start]
    assert max(time for time, _, _ in sent) == end - 0.5, "nothing starts after the window"
    assert [t for t, method, path in sent if method == "GET" and f"/runs/{other}" in path] == []
    assert "last seen: never observed" in second.describe()


# -- a signal's cleanup: its whole remaining grace, and nothing past it -------------------------


@pytest.mark.found_by("mutation", issue=35)
def test_a_signals_cleanup_polls_for_all_of_its_remaining_grace():
    """SIGTERM at 215 s; the cancel takes 4 s: the poll 5 s later, the last one the 6 s budget
    holds, confirms the child in the main step (the post step is not needed)."""
    s = Scenario(timings=Timings(cancel_delay=4.0)).pools(FOREVER, [], [])
    result = s.run(interrupt_at=SIGNAL_AT, post_step=False)
    [kid] = children(s.world)
    assert result.exit_code == 1
    [(_, cancel)] = posts(s, "/cancel")
    assert cancel == SIGNAL_AT
    reads = [t for _, t in run_reads(s, kid.run_id) if t >= SIGNAL_AT]
    assert reads == [SIGNAL_AT, SIGNAL_AT + timing.CANCEL_POLL_SECONDS]
    assert f"cleanup confirmed: child run {kid.run_id}" in result.log


@pytest.mark.found_by("mutation", issue=35)
def test_a_quota_reset_waited_for_in_a_signals_cleanup_does_not_extend_its_grace():
    """The child's read at the signal is refused for a spent quota that resets a second later:
    the cleanup waits for the reset and reads again, and sends nothing past its 6 s budget (a
    cleanup after an error may extend its window by the reset it waited for; a signal's may not).
    """
    spent = Fault(
        "primary_rate_limit", method="GET", path=CHILD_RUN, start=SIGNAL_AT, count=1, retry_after=1
    )
    s = Scenario(timings=Timings(cancel_delay=3.0), faults=[spent]).pools(FOREVER, [], [])
    result = s.run(interrupt_at=SIGNAL_AT, post_step=False)
    [kid] = children(s.world)
    assert result.exit_code == 1
    refused = [e.time for e in s.world.ledger if e.fault == "primary_rate_limit"]
    assert refused == [SIGNAL_AT]
    reads = [t for _, t in run_reads(s, kid.run_id) if t > SIGNAL_AT]
    assert reads, "read again after the reset"
    assert max(s.requests_after(SIGNAL_AT)) <= SIGNAL_AT + timing.SIGNAL_CLEANUP_BUDGET_SECONDS


@pytest.mark.found_by("fuzz")
def test_a_cancel_refused_while_its_fresh_read_fails_is_not_read_again_at_once():
    """SIGTERM after the child finished: the cancel got 409, and the fresh read of the run
    behind it failed (500, then 500 at its retry, the next retry past the signal's budget).

    Before: the confirmation read the same run at that instant, 0 s after the failure the retry
    policy had just declined to retry, and the post step read it a third time: a retry beyond
    the spec's two. Fix: the failed fresh read is that poll's read; the next one is a poll later.
    """
    case = Case(
        inputs=base_inputs({"queue-timeout-minutes": "2", "execution-timeout-minutes": "10"}),
        pools=(PoolPlan("nv-cpu-general", "linux-amd64-cpu16"),),
        workload=Workload(outcome="success", duration=30.0),
        faults=(Fault(kind="status", path=r"/actions/runs/\d+$", start=75.0, count=3, status=500),),
        interrupt_at=75.0,
        guard=False,
    )
    outcome = execute(case)
    [kid] = children(outcome.world)
    run_path = f"/actions/runs/{kid.run_id}"
    conflict = next(e.time for e in outcome.world.ledger if e.status == 409)
    reads = [
        e.time
        for e in outcome.world.ledger
        if e.method == "GET" and e.path.endswith(run_path) and e.time >= conflict
    ]
    # The fresh read and its retry (main step), then the post step's read and its retry.
    assert reads == [75.0, 80.0, 80.0, 85.0], reads
    assert "cleanup NOT confirmed" in outcome.run.log
    assert f"Child run {kid.run_id} is already completed" in outcome.run.post_log


# -- odd rate-limit headers cannot stop a cancel ------------------------------------------------


#: An `x-ratelimit-reset` of 17 digits: a year no date can hold.
HUGE_RESET = "12345678901234567"


def huge_reset(*, spent_after_dispatch: bool) -> Rule:
    """Every reply says the quota resets in a year no date holds (`GET /rate_limit` too); once a
    child exists, with `spent_after_dispatch`, every reply also says that none is left."""

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        del method
        spent = spent_after_dispatch and bool(world.history)
        headers = {
            key: HUGE_RESET
            if key.lower() == "x-ratelimit-reset"
            else "0"
            if spent and key.lower() == "x-ratelimit-remaining"
            else value
            for key, value in reply.headers.items()
        }
        body = json_body(reply)
        if path == "/rate_limit" and isinstance(body, dict):
            for resource in [body.get("rate"), *(body.get("resources") or {}).values()]:
                if isinstance(resource, dict):
                    resource["reset"] = int(HUGE_RESET)
                    resource["remaining"] = 0 if spent else resource.get("remaining")
            reply = with_json(reply, body)
        return replace(reply, headers=headers)

    return rule


def run_with_huge_reset(
    *, spent: bool, interrupt_at: float | None = None, cancel_delay: float = 0.0
) -> tuple[SimulationRun, RunHistory, list[float]]:
    """One candidate whose child stays queued; every reply carries the 17-digit reset."""
    s = minute_queues(CPU16, timings=Timings(cancel_delay=cancel_delay)).pools(FOREVER)
    s.tamper.rules.append(huge_reset(spent_after_dispatch=spent))
    result = s.run(interrupt_at=interrupt_at, invariants=False)
    assert s.tamper.fired
    cancels = s.cancels()
    [kid] = children(s.world)
    return result, kid, cancels


@pytest.mark.found_by("review", issue=26)
@pytest.mark.parametrize("spent", [False, True], ids=["quota-left", "quota-spent"])
def test_a_17_digit_reset_on_every_reply_does_not_stop_the_main_steps_cancel(spent: bool):
    """The queue deadline passes with a 17-digit `x-ratelimit-reset` on every reply.

    Before (quota spent): `reset_time()` raised ValueError ("year ... is out of range") before the
    cancel was sent; the child stayed queued. After: the reset is absent, the cancel is sent and
    confirmed.
    """
    result, kid, cancels = run_with_huge_reset(spent=spent)
    assert cancels, result.log
    assert kid.conclusion == "cancelled"
    assert "Traceback" not in result.log
    assert f"Cancellation check: run {kid.run_id} completed/cancelled" in result.log
    assert "exhausted" in result.log
    assert result.exit_code == 1  # the one queue was exhausted: a clean failure
    assert result.post_exit_code == 0


@pytest.mark.found_by("review", issue=26)
@pytest.mark.parametrize("spent", [False, True], ids=["quota-left", "quota-spent"])
def test_a_17_digit_reset_on_every_reply_does_not_stop_the_signal_cleanup(spent: bool):
    """SIGTERM while the child is queued: the main step cancels and confirms within the grace.

    Before (quota spent): the cleanup raised in `reset_time()` and sent no cancel.
    """
    result, kid, cancels = run_with_huge_reset(spent=spent, interrupt_at=30.0)
    assert cancels, result.log
    assert kid.conclusion == "cancelled"
    assert "Traceback" not in result.log + result.post_log
    assert f"cleanup confirmed: child run {kid.run_id}" in result.log
    assert result.post_exit_code == 0


@pytest.mark.found_by("review", issue=26)
@pytest.mark.parametrize("spent", [False, True], ids=["quota-left", "quota-spent"])
def test_a_17_digit_reset_on_every_reply_does_not_stop_the_post_steps_cancel(spent: bool):
    """The cancel takes longer than the signal grace: the post step cancels and confirms.

    Before (quota spent): neither step sent a cancel (both raised in `reset_time()`). After: the
    post step sends its cancel and confirms the child over.
    """
    result, kid, cancels = run_with_huge_reset(spent=spent, interrupt_at=30.0, cancel_delay=20.0)
    assert f"NOT confirmed for child run {kid.run_id}" in result.log
    assert f"Cancel requested for child run {kid.run_id}" in result.post_log
    assert len(cancels) == 2, cancels  # the main step's, and the post step's own
    assert "Traceback" not in result.log + result.post_log
    assert f"cleanup confirmed: child run {kid.run_id}" in result.post_log
    assert result.post_exit_code == 0
    assert kid.conclusion == "cancelled"
