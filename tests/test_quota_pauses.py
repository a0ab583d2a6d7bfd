"""Issue 27: every waiting phase waits out a spent quota the same way while a child exists or may.

The quota is the fake GitHub's shared hourly quota, spent by "other workflows" at a chosen moment
(its window starts with the first counted request, at virtual time 0, so it resets at 3,600 s).
Each test runs the real coordinator and its post step through `cli.main` on a fake clock, and
judges it by what the fake GitHub saw.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping

import pytest

from runner_queue_fallback.action.sequence import job_time
from runner_queue_fallback.action.sequence.facts import JobEnd
from runner_queue_fallback.action.sequence.state import SequenceState
from runner_queue_fallback.core import timing
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.model import Timings, Workload
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.tools.simulate.steps import PARENT_RUN_ID, SimulationRun
from tests.invariants import children, dispatch_posts
from tests.test_coordinator import FOREVER, Scenario
from tests.test_fuzz_coordinator import Case, PoolPlan, base_inputs, execute
from tests.test_quota import RESET, coordinator_requests, refused, spend_all_at

#: Dispatched at 0 s, first read at 15 s: the quota stops the startup window with this much left.
WINDOW_LEFT = timing.STARTUP_WINDOW_SECONDS - timing.STARTUP_FIRST_CHECK_SECONDS
#: The fake's reset as the client waits for it: the reset's whole second, plus 1 s.
RESUMED = RESET + 1.0
FIRST_CHILD = 9000000001
#: The child's own job timeout (the fake's `timeout-minutes` of the worker) out of the way.
LONG_JOBS = Timings(timeout_minutes=180.0)


def spend_before(s: Scenario, wanted: Callable[[str, str, float], bool]) -> None:
    """Other workflows spend the whole quota just before the first request `wanted` picks.

    `wanted(method, path, now)`; the fake's one entry point is wrapped (looked up per request).
    """
    real = s.world.handle
    spent: list[float] = []

    def handle(
        method: str, path_and_query: str, headers: Mapping[str, str], body: bytes = b""
    ) -> Reply:
        path = path_and_query.split("?", maxsplit=1)[0]
        if not spent and wanted(method.upper(), path, s.clock.monotonic()):
            spent.append(s.clock.monotonic())
            s.world.spend_quota(s.world.quota)
        return real(method, path_and_query, headers, body)

    s.world.handle = handle  # type: ignore[method-assign]  # the adapters look it up per request


def sent_while_spent(s: Scenario) -> list[float]:
    """Times of the coordinator's requests after the first refusal and before the reset."""
    first = min(e.time for e in refused(s))
    return [e.time for e in coordinator_requests(s, first + 1e-6, RESET)]


def attempts(result: SimulationRun) -> list[dict[str, object]]:
    return json.loads(result.outputs["attempts-json"])  # type: ignore[no-any-return]  # a list


def logged_at(result: SimulationRun, text: str) -> float:
    """When the first log line holding `text` was written (virtual seconds)."""
    return next(time for time, line in result.log_lines if text in line)


# -- the startup window -------------------------------------------------------------------------


def test_quota_spent_in_the_startup_window_then_the_child_starts_it_is_followed_to_its_result():
    """Before: the window closed on the quota, the run failed and its cleanup cancelled the
    worker that started meanwhile. Now: the window pauses; at the reset a runner is seen, the
    child was allocated (no cancel, no race) and is followed to its success."""
    s = Scenario().pools([(0.0, 100.0)], [], [])
    spend_all_at(s, 5.0)
    result = s.run()
    assert result.exit_code == 0, result.log
    assert s.cancels() == []
    [kid] = children(s.world)
    assert (kid.allocated_at, kid.conclusion) == (100.0, "success")
    assert len(dispatch_posts(s.world)) == 1
    assert "did not show its identity" not in result.log
    assert "race" not in result.log
    # The reset time is logged, and nothing that can only be refused is sent before it.
    assert "The API quota is spent until its reset at 10:00:00Z: the startup window" in result.log
    assert len(refused(s)) == 1
    assert sent_while_spent(s) == []
    assert min(e.time for e in coordinator_requests(s, RESET)) == RESUMED


def test_the_execution_timeout_after_a_startup_pause_counts_from_githubs_allocation_time():
    """The worker started an hour before the coordinator could see it, and runs for 90 minutes:
    its 30-minute execution timeout has passed at the first read after the reset. It is cancelled
    then (a reason the specification gives), not 30 minutes later."""
    s = Scenario(timings=LONG_JOBS, workload=Workload(duration=5400.0))
    s.pools([(0.0, 100.0)], [], [])
    s.inputs["execution-timeout-minutes"] = "30"
    spend_all_at(s, 5.0)
    result = s.run()
    assert result.exit_code == 1
    assert "did not finish within execution-timeout-minutes (30)" in result.log
    [cancel] = s.cancels()
    assert RESUMED <= cancel <= RESUMED + 5
    [kid] = children(s.world)
    assert kid.conclusion == "cancelled"


def test_quota_spent_in_the_startup_window_with_the_child_still_queued_past_its_deadline():
    """The job was queued before the pause: its queue clock starts at its `created_at`, so the
    10-minute deadline has passed at the reset: a fresh read, then cancel and prove, then the
    next pool."""
    s = Scenario().pools(FOREVER, [], FOREVER)
    spend_all_at(s, 5.0)
    result = s.run()
    assert result.exit_code == 0, result.log
    assert "ago (its created_at)" in result.log
    first, second = children(s.world)
    [cancel] = s.cancels()
    assert RESUMED <= cancel <= RESUMED + 5
    # The fresh read before the cancel: the child's run and jobs read after the reset.
    reads = [
        e.path
        for e in coordinator_requests(s, RESET, cancel + 1e-6)
        if e.method == "GET" and f"/actions/runs/{first.run_id}" in e.path
    ]
    assert len(reads) == 4, "the startup read after the reset (run, jobs), then the fresh read"
    assert first.conclusion == "cancelled"
    assert first.allocated_at is None
    assert second.conclusion == "success"
    queued = attempts(result)[0]["queued-seconds"]
    assert isinstance(queued, float)
    # Counted from the job's `created_at` (2 s after the run's 3 s visibility, GitHub's whole
    # second plus 1): not from the first read, which came an hour later.
    assert RESUMED - 7 <= queued <= RESUMED - 4
    assert sent_while_spent(s) == []


def test_quota_spent_in_the_startup_window_with_a_queue_deadline_still_ahead_waits_in_the_queue():
    """A 60-minute deadline counted from the job's `created_at` (5 s) is still ahead at the reset
    (3,601 s): the queue phase goes on, and the cancel lands on that deadline, not an hour on."""
    s = Scenario().pools(FOREVER, [], FOREVER)
    s.inputs["queue-timeout-minutes"] = "60"
    spend_all_at(s, 5.0)
    result = s.run()
    assert result.exit_code == 0, result.log
    assert "Waiting round 1" in result.log
    first = children(s.world)[0]
    deadline = first.job_queued_at + 60 * 60
    cancel = s.cancels()[0]
    assert deadline <= cancel <= deadline + 5


def test_quota_spent_in_the_startup_window_with_the_child_finishing_during_the_wait():
    """The worker ran and succeeded during the pause: identity first, then judged as a result."""
    s = Scenario().pools([], [], [])
    spend_all_at(s, 5.0)
    result = s.run()
    assert result.exit_code == 0, result.log
    assert s.cancels() == []
    [kid] = children(s.world)
    assert kid.completed_at is not None
    assert kid.completed_at < RESET
    assert result.outputs["run-id"] == str(kid.run_id)


def test_a_child_that_failed_during_a_startup_pause_is_a_result_not_a_fallback():
    s = Scenario(workload=Workload(outcome="failure")).pools([], [], [])
    spend_all_at(s, 5.0)
    result = s.run()
    assert result.exit_code == 1
    assert "the worker did not succeed" in result.log
    assert len(dispatch_posts(s.world)) == 1


def test_a_child_cancelled_by_someone_else_during_a_startup_pause_never_authorises_a_fallback():
    """Found cancelled without this coordinator's cancel-and-prove: a result, and no other pool."""
    s = Scenario().pools(FOREVER, [], [])
    spend_all_at(s, 5.0)

    def someone_cancels() -> None:  # another user of the repository, not the coordinator
        s.world.request_cancel(FIRST_CHILD, client=7)

    s.world._at(600.0, someone_cancels)
    result = s.run()
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 1
    assert "the worker did not succeed" in result.log
    [kid] = children(s.world)
    assert kid.conclusion == "cancelled"


def test_a_wrong_identity_seen_after_a_startup_pause_still_fails_at_once():
    """Identity is checked as at startup: the child runs another commit, so the run stops."""
    s = Scenario().pools(FOREVER, [], [])
    spend_all_at(s, 5.0)
    real = s.world.dispatch

    def dispatch_then_move(*args, **kwargs):  # the workflow ref moves under the dispatch
        s.world.change_workflow("runner-worker.yml", "main")
        return real(*args, **kwargs)

    s.world.dispatch = dispatch_then_move  # type: ignore[method-assign]  # a race injected here
    result = s.run()
    assert result.exit_code == 1
    assert "is not the run that was dispatched" in result.log
    assert "head_sha" in result.log
    [cancel] = s.cancels()  # the cleanup, at once
    assert RESUMED <= cancel <= RESUMED + 1


@pytest.mark.parametrize(
    ("visible_after_reset", "found"), [(50.0, True), (WINDOW_LEFT + 30.0, False)]
)
def test_a_child_not_yet_visible_at_the_reset_gets_what_was_left_of_its_startup_window(
    visible_after_reset: float, found: bool
):
    """The quota stopped the window at its first read, with 105 s left; after the reset it
    goes on for those 105 s: a run visible 50 s after the reset is watched, one visible later
    is not (the window closes 105 s after the reset, as it would have without the pause)."""
    timings = Timings(visibility_delay=RESET + visible_after_reset)
    s = Scenario(timings=timings).pools([], [], [])
    spend_all_at(s, 5.0)
    result = s.run(post_step=False)
    if found:
        assert result.exit_code == 0, result.log
        return
    assert result.exit_code == 1
    assert "did not show its identity and worker job within" in result.log
    [closed] = s.cancels()  # the cleanup, as the window closes
    assert RESUMED + WINDOW_LEFT - timing.STARTUP_POLL_SECONDS <= closed <= RESUMED + WINDOW_LEFT


@pytest.mark.found_by("fuzz")
@pytest.mark.parametrize("guard", [True, False])
def test_quota_spent_before_the_first_identity_read_cancels_no_started_workload(guard):
    """Other workflows spent the quota 14 s after the dispatch, before the child's first read.

    Before (issue 27): the startup window closed on the refused reads ("did not show its
    identity and worker job within the 2-minute startup window; ... the API quota is spent
    until its reset"), the coordinator failed, and its cleanup waited for the reset and
    cancelled the worker, which had run for an hour: invariant 11, found by the fuzzers'
    quota-in-every-phase draws. Fix: the window pauses for the reset and a fresh read decides.
    """
    case = Case(
        inputs=base_inputs({"queue-timeout-minutes": "2", "execution-timeout-minutes": "120"}),
        pools=(PoolPlan("nv-cpu-general", "linux-amd64-cpu16"),),
        timings=Timings(timeout_minutes=180.0),
        workload=Workload(outcome="success", duration=5400.0),
        quota_phase="startup",
        quota_phase_delay=14.0,
        guard=guard,
    )
    outcome = execute(case)
    [kid] = children(outcome.world)
    assert kid.workload_started_at is not None
    assert kid.conclusion == "success"
    assert kid.cancel_requests == []
    assert outcome.run.exit_code == 0, outcome.run.log


CPU16 = {"group": "nv-cpu-general", "labels": "linux-amd64-cpu16"}


def _runners(*entries: dict[str, object]) -> str:
    return json.dumps(list(entries))


#: Quota spent by others during the startup window, every rate-limit header reading "nan".
UNREADABLE_QUOTA_CASES = [
    pytest.param(
        Case(
            inputs=base_inputs(
                {
                    "workflow-ref": "refs/heads/main",
                    "queue-timeout-minutes": "1",
                    "execution-timeout-minutes": "120",
                    "runners": _runners(
                        {**CPU16, "queue-timeout-minutes": 1},
                        *(
                            {**CPU16, "labels": f"linux-amd64-cpu{n}", "queue-timeout-minutes": 1}
                            for n in (8, 32, 4)
                        ),
                        {**CPU16, "labels": "linux-amd64-cpu64"},
                    ),
                }
            ),
            pools=(PoolPlan("nv-cpu-general", "linux-amd64-cpu16"),),
            timings=Timings(timeout_minutes=180.0),
            workload=Workload(outcome="success", duration=5400.0),
            guard=False,
            odd_header="nan",
            quota_spent_at=0.7,
            quota_phase="startup",
        ),
        id="workload-of-90-minutes",
    ),
    pytest.param(
        Case(
            inputs=base_inputs(
                {
                    "workflow-ref": "refs/heads/main",
                    "queue-timeout-minutes": "1",
                    "execution-timeout-minutes": "1",
                    "runners": _runners(
                        {**CPU16, "queue-timeout-minutes": 1}, {**CPU16, "queue-timeout-minutes": 2}
                    ),
                }
            ),
            pools=(PoolPlan("nv-cpu-general", "linux-amd64-cpu16"),),
            workload=Workload(outcome="success", duration=30.0),
            faults=(
                Fault(kind="timeout", start=0.0, end=30.0, count=1, retry_after=0),
                Fault(kind="status", start=0.0, end=30.0, count=1, status=500, retry_after=0),
                Fault(
                    kind="status",
                    path=r"/actions/runs/\d+$",
                    start=15.2,
                    count=2,
                    status=500,
                    retry_after=0,
                ),
            ),
            guard=False,
            odd_header="nan",
            quota_spent_at=15.2,
        ),
        id="run-reads-failing-at-the-reset",
    ),
]


@pytest.mark.found_by("fuzz")
@pytest.mark.parametrize("case", UNREADABLE_QUOTA_CASES)
def test_a_primary_limit_with_unreadable_headers_pauses_the_startup_window_for_the_known_reset(
    case: Case,
):
    """Others spent the quota during the startup window; every rate-limit header read "nan".

    Before: the 403s said "API rate limit exceeded" but not `remaining: 0`, so the client kept
    the stale count from `GET /rate_limit` and never used the reset it knew: the window did not
    pause, closed on refused reads, and the cleanup's back-off (60 s doubling, 3780 s in all,
    exactly its window and reset budget) cancelled a worker that had started in the hour
    (invariant 11), or ended with three reads of the child at one instant (the retry bound).
    Fix: a primary refusal means no quota is left, whatever its headers say.
    """
    outcome = execute(case)
    run = outcome.run
    paused = [line for line in run.log.splitlines() if "the startup window of child" in line]
    assert any("pauses for" in line for line in paused), run.log
    [kid] = children(outcome.world)
    assert kid.conclusion == "success"
    assert kid.cancel_requests == []
    assert run.exit_code == 0, run.log


# -- a lost dispatch reply, and an older server's run looked for by name ---------------------------


def test_quota_spent_during_the_lost_reply_search_pauses_it_and_the_run_is_found_at_the_reset():
    """Before: the search went on sending refused listings and ended "no run appeared", leaving
    the run behind. Now: the search pauses, finds the run after the reset and cancels it (the
    spec's rule for a lost reply), and nothing is dispatched again."""
    lost = Fault(kind="lost_reply", method="POST", path=r"/dispatches$", count=1, status=502)
    s = Scenario(faults=[lost]).pools(FOREVER, [], [])
    spend_all_at(s, 2.0)
    result = s.run()
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 1
    assert "the search for run-name" in result.log
    assert "was found and is cancelled" in result.log
    [kid] = children(s.world)
    assert kid.conclusion == "cancelled"
    assert kid.completed_at is not None
    assert len(refused(s)) == 1
    assert sent_while_spent(s) == []


def test_quota_spent_while_an_older_servers_run_is_looked_for_by_name_pauses_the_search():
    """API version 2022-11-28 (a dispatch answers 204): the run is found after the reset."""
    s = Scenario().pools([], [], [])
    s.inputs["api-version"] = "2022-11-28"
    spend_all_at(s, 5.0)
    result = s.run()
    assert result.exit_code == 0, result.log
    assert "the search for run-name" in result.log
    assert s.cancels() == []
    assert sent_while_spent(s) == []


# -- execution and the parent check ---------------------------------------------------------------


def test_quota_spent_during_execution_the_child_is_read_after_the_reset_and_judged():
    """A 15-minute worker; the quota is spent 5 minutes in and resets 45 minutes later: the
    first read after the reset finds it succeeded (its execution timeout of 60 minutes, counted
    from GitHub's allocation time, was never reached)."""
    s = Scenario(timings=LONG_JOBS, workload=Workload(duration=900.0)).pools([], [], [])
    s.inputs["execution-timeout-minutes"] = "60"
    spend_all_at(s, 300.0)
    result = s.run()
    assert result.exit_code == 0, result.log
    assert s.cancels() == []
    assert sent_while_spent(s) == []
    assert len(refused(s)) == 1


def test_quota_spent_during_the_parent_check_the_child_is_read_again_before_any_decision():
    """The execution poll read the child running, then the parent check met the spent quota.
    Before: after the reset the hour-old read said "running", past the execution timeout, so a
    worker that had already succeeded was cancelled and the run failed. Now the child is read
    again after the reset, and its success stands."""
    s = Scenario(workload=Workload(duration=600.0)).pools([], [], [])
    parent = f"/actions/runs/{PARENT_RUN_ID}"
    spend_before(s, lambda _method, path, now: now > 300 and path.endswith(parent))
    result = s.run()
    assert result.exit_code == 0, result.log
    assert "did not finish within execution-timeout-minutes" not in result.log
    assert s.cancels() == []
    assert f"Reading child {FIRST_CHILD} again after the quota's reset" in result.log
    [kid] = children(s.world)
    assert kid.conclusion == "success"


def test_quota_spent_while_a_lagging_report_settles_waits_for_the_reset_and_reads_again():
    """The job ended just before the execution deadline and the run's report lags: the settling
    reads meet the spent quota. They pause (the worker may still be running) instead of closing
    the window on a child whose result was never read; the success is read after the reset."""
    s = Scenario(timings=Timings(run_completion_lag=60.0), workload=Workload(duration=880.0))
    s.pools([], [], [])
    spend_all_at(s, 925.0)
    result = s.run()
    assert result.exit_code == 0, result.log
    assert f"the wait for child {FIRST_CHILD}'s result pauses" in result.log
    assert s.cancels() == []
    assert sent_while_spent(s) == []


def test_quota_spent_at_the_fresh_read_before_a_cancel_waits_for_the_reset_and_reads_again():
    """The poll on the deadline saw the job queued; the fresh read meets the spent quota. It is
    sent again at the reset, in a new window, and the cancel and its proof follow it."""
    s = Scenario().pools(FOREVER, [], FOREVER)
    run = f"/actions/runs/{FIRST_CHILD}"
    deadline = timing.STARTUP_FIRST_CHECK_SECONDS + 600.0
    reads: list[float] = []

    def second_read_on_the_deadline(method: str, path: str, now: float) -> bool:
        if method == "GET" and path.endswith(run) and now >= deadline:
            reads.append(now)
        return len(reads) == 2

    spend_before(s, second_read_on_the_deadline)
    result = s.run()
    assert result.exit_code == 0, result.log
    assert "the fresh read of child" in result.log
    [cancel] = s.cancels()
    assert RESUMED <= cancel <= RESUMED + 1
    first, second = children(s.world)
    assert (first.conclusion, second.conclusion) == ("cancelled", "success")


# -- the cancellation proof does not pause ----------------------------------------------------------


def test_quota_spent_inside_the_cancellation_proof_ends_it_unconfirmed_with_no_fallback():
    """The proof keeps its 2-minute window: it fails then (not after the reset), no other pool
    is tried, and the cleanup confirms the cancel after the reset."""
    s = Scenario(timings=Timings(cancel_delay=20.0)).pools(FOREVER, [], [])
    spend_all_at(s, 617.0)
    result = s.run()
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 1
    assert "was not confirmed within 2 minutes" in result.log
    assert "pauses for" not in result.log, "the proof does not pause"
    proof, cleanup = s.cancels()
    window_end = proof + timing.CANCEL_WINDOW_SECONDS
    assert coordinator_requests(s, window_end, RESET) == [], "nothing sent after the window"
    assert RESUMED <= cleanup <= RESUMED + 1  # the cleanup's cancel, at the reset
    [kid] = children(s.world)
    assert kid.conclusion == "cancelled"
    assert f"cleanup confirmed: child run {kid.run_id}" in result.log


# -- a quota wait that would outlast the job ----------------------------------------------------------


def end_job_after(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """The coordinator's job ends `seconds` after its step starts (its timeout, read as set)."""

    def read_job_end(seq: SequenceState, started: float) -> JobEnd:
        return JobEnd(started + seconds, "timeout-minutes 30 of job `check`")

    monkeypatch.setattr(job_time, "read_job_end", read_job_end)


def test_a_quota_wait_that_would_reach_the_jobs_end_is_warned_of_naming_the_child(monkeypatch):
    """The job ends at 30 minutes; the reset is an hour away: before the wait, a warning names
    the child, its run link and the job's timeout (the runner will cancel the job meanwhile)."""
    end_job_after(monkeypatch, 1800.0)
    s = Scenario().pools([(0.0, 100.0)], [], [])
    spend_all_at(s, 5.0)
    result = s.run(post_step=False)
    assert logged_at(result, "Job ends during a quota wait") == timing.STARTUP_FIRST_CHECK_SECONDS
    warning = next(line for _, line in result.log_lines if "Job ends during a quota wait" in line)
    assert f"child run {FIRST_CHILD} (https://github.test/" in warning
    assert "timeout-minutes 30 of job `check`" in warning
    assert result.log.count("Job ends during a quota wait") == 1


def test_a_quota_wait_that_ends_before_the_job_does_is_not_warned_of(monkeypatch):
    end_job_after(monkeypatch, 2 * 3600.0)
    s = Scenario().pools([(0.0, 100.0)], [], [])
    spend_all_at(s, 5.0)
    result = s.run()
    assert result.exit_code == 0, result.log
    assert "Job ends during a quota wait" not in result.log


def test_the_clients_own_quota_wait_during_execution_is_warned_of_too(monkeypatch):
    """A wait the client takes inside a poll (no window of its own) goes through the same check."""
    end_job_after(monkeypatch, 1800.0)
    s = Scenario(timings=LONG_JOBS, workload=Workload(duration=900.0)).pools([], [], [])
    s.inputs["execution-timeout-minutes"] = "60"
    spend_all_at(s, 300.0)
    result = s.run(post_step=False)
    assert "::warning title=Job ends during a quota wait::" in result.log
    assert f"child run {FIRST_CHILD}" in result.log


@pytest.mark.found_by("mutation", issue=35)
def test_a_quota_wait_that_outlasts_the_jobs_end_by_minutes_is_warned_of(monkeypatch):
    """The job ends at 3,400 s; the quota is spent at 300 s and resets at 3,600 s: the wait
    begun then outlasts the job by about 4 minutes, and is warned of."""
    end_job_after(monkeypatch, 3400.0)
    s = Scenario().pools(FOREVER, [], [])
    spend_all_at(s, 300.0)
    result = s.run(post_step=False)
    assert "::warning title=Job ends during a quota wait::" in result.log


#: The quota spent at 5 s, the startup window's read at 15 s pauses for the reset: until 3,601 s.
PAUSED_AT = timing.STARTUP_FIRST_CHECK_SECONDS


def job_ending_at(
    monkeypatch: pytest.MonkeyPatch, end: float, interrupt_at: float | None = None
) -> SimulationRun:
    """The job ends `end` s after the step starts; the quota is spent at 5 s with the child
    queued (its runner comes at 100 s), so the startup window waits from 15 s to the reset."""
    end_job_after(monkeypatch, end)
    s = Scenario(timings=Timings(cancel_delay=3.0)).pools([(0.0, 100.0)], [], [])
    spend_all_at(s, 5.0)
    return s.run(post_step=False, interrupt_at=interrupt_at)


def job_end_warnings(result: SimulationRun) -> list[tuple[float, str]]:
    return [(t, line) for t, line in result.log_lines if "Job ends during a quota wait" in line]


@pytest.mark.found_by("mutation", issue=35)
def test_a_quota_wait_that_ends_exactly_at_the_jobs_end_is_warned_of(monkeypatch):
    """The wait taken at 15 s ends at 3,601 s: a job ending then is warned of (it ends during
    the wait, not after it), a job ending a second later is not."""
    [(_, warning)] = job_end_warnings(job_ending_at(monkeypatch, RESUMED))
    wait = f"{RESUMED - PAUSED_AT:.0f}s"
    assert f"({wait} from now), but this job reaches its end" in warning
    assert f"in {wait}: the runner will cancel the job during the wait" in warning
    assert job_end_warnings(job_ending_at(monkeypatch, RESUMED + 1.0)) == []


@pytest.mark.found_by("mutation", issue=35)
def test_a_second_wait_for_a_reset_already_warned_of_is_not_warned_of_again(monkeypatch):
    """The job ends at 3,597 s, during the wait for the reset warned of at 15 s: the runner's
    SIGTERM then starts the cleanup, whose cancel waits the last 4 s for the same reset. One
    warning, the first: the second wait is only logged."""
    end = RESUMED - 4.0
    result = job_ending_at(monkeypatch, end, interrupt_at=end)
    assert [t for t, _ in job_end_warnings(result)] == [PAUSED_AT]
    [waited_at] = [
        t
        for t, line in result.log_lines
        if "waiting for its reset at 10:00:00Z (4s) before POST " in line
    ]
    assert waited_at == end, "the cleanup's cancel waited for the same reset"


@pytest.mark.found_by("mutation", issue=35)
def test_a_quota_wait_with_a_lost_dispatch_in_flight_names_the_run_name_to_look_for(monkeypatch):
    """The dispatch reply is lost and the quota is spent at 2 s, the job ends at 30 minutes:
    the warning before the wait names the run-name, since no run id is known."""
    end_job_after(monkeypatch, 1800.0)
    lost = Fault(kind="lost_reply", method="POST", path=r"/dispatches$", count=1, status=502)
    s = Scenario(faults=[lost]).pools(FOREVER, [], [])
    spend_all_at(s, 2.0)
    result = s.run(post_step=False)
    [warning] = [line for line in result.log.splitlines() if "Job ends during a quota wait" in line]
    request_id = re.search(r"rqf-[\w-]+", warning)
    assert request_id is not None, warning
    assert f"the child dispatched as {request_id[0]} (its reply was lost: look for run-name" in (
        warning
    )
