"""The sequence's rules at their moments: windows, deadlines, checks, reports (issue 22).

Each test states one rule of the spec (or one of our departures, README) and checks it on what
the fake GitHub saw (the request ledger, the run history) rather than on log wording. They were
written against the survivors of `scripts/mutate`: mutants that changed *when* something happens
and that no other test noticed.
"""

from __future__ import annotations

import io
import re
from datetime import timedelta
from pathlib import Path

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.action import coordinator as coordinator_module
from runner_queue_fallback.action import guard as guard_module
from runner_queue_fallback.action.guard import PARENT, REQUEST, SOURCE, Guard, GuardResult
from runner_queue_fallback.action.sequence import startup as startup_module
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.model import Timings, Workload
from runner_queue_fallback.fake_github.world import OLDER_SERVER
from runner_queue_fallback.github.models import WorkflowRun
from runner_queue_fallback.tools.simulate.steps import PARENT_RUN_ID, SimulationRun, run_coordinator
from tests.github_payloads import workflow_run
from tests.invariants import children, dispatch_posts
from tests.outside import Tamper, lag_rule
from tests.test_coordinator import FOREVER, Scenario, attempts
from tests.test_guard import dispatch_child, guard_environ, make_world, run_guard
from tests.test_post_step import busy_world, post_step
from tests.test_sim_support import dispatch
from tests.test_timeline import bar, bars_in

NEVER = 10_000.0


def run_reads(s: Scenario, run_id: int) -> list[tuple[int, float]]:
    """(ledger seq, time) of every read of the child run itself."""
    return [
        (e.seq, e.time)
        for e in s.world.ledger
        if e.method == "GET" and e.path.endswith(f"/actions/runs/{run_id}")
    ]


def posts(s: Scenario, suffix: str) -> list[tuple[int, float]]:
    return [
        (e.seq, e.time) for e in s.world.ledger if e.method == "POST" and e.path.endswith(suffix)
    ]


# -- identity: checked before anything is accepted, at the first read that shows a wrong field --


def test_a_filled_in_identity_mismatch_fails_at_the_first_read_that_shows_it():
    """The child's head SHA is wrong from its first read (15 s): cancelled then, not minutes later."""
    s = Scenario().pools(FOREVER, [], [])
    original = s.world.dispatch

    def dispatch_then_move(*args, **kwargs):
        s.world.change_workflow("runner-worker.yml", "main")
        return original(*args, **kwargs)

    s.world.dispatch = dispatch_then_move  # type: ignore[method-assign]  # a race injected here
    result = s.run()
    assert result.exit_code == 1
    [kid] = children(s.world)
    first_read = run_reads(s, kid.run_id)[0][1]
    assert first_read == kid.dispatched_at + timing.STARTUP_FIRST_CHECK_SECONDS
    [(_, cancel), *_] = posts(s, "/cancel")
    assert cancel == first_read, "the sequence stops at the read that showed the mismatch"
    assert kid.allocated_at is None


def test_a_result_is_accepted_only_from_a_child_whose_identity_matches():
    """A child that runs at once with a wrong head SHA is refused: the coordinator never succeeds."""
    s = Scenario(workload=Workload(duration=1.0)).pools([], [], [])
    original = s.world.dispatch

    def dispatch_then_move(*args, **kwargs):
        s.world.change_workflow("runner-worker.yml", "main")
        return original(*args, **kwargs)

    s.world.dispatch = dispatch_then_move  # type: ignore[method-assign]  # a race injected here
    result = s.run()
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 1


# -- the startup window: first check at 15 s, then every 5 s, the last one at 120 s ------------


def test_the_startup_window_checks_at_15_s_then_every_5_s_up_to_its_last_check_at_120_s():
    s = Scenario(timings=Timings(visibility_delay=NEVER)).pools([], [], [])
    result = s.run(post_step=False)
    assert result.exit_code == 1
    [kid] = children(s.world)
    [(cancel_seq, _), *_] = posts(s, "/cancel")
    startup = [t - kid.dispatched_at for seq, t in run_reads(s, kid.run_id) if seq < cancel_seq]
    assert startup == [15.0 + 5.0 * n for n in range(22)]  # 15, 20, ..., 120
    assert startup[-1] == timing.STARTUP_WINDOW_SECONDS


def test_job_metadata_pending_until_late_in_the_startup_window_is_waited_for():
    """The worker job is listed only ~110 s after the dispatch: still inside the window."""
    s = Scenario(timings=Timings(jobs_delay=105.0)).pools([], [], [])
    result = s.run()
    assert result.exit_code == 0, result.log
    assert len(dispatch_posts(s.world)) == 1


# -- the queue: polling ends at allocation; the deadline; parent and source checks -------------


def test_the_queue_wait_ends_at_the_first_poll_that_sees_a_runner():
    """Allocated at 100 s, done at ~310 s: judged at the next 60 s execution poll, not 4 min later."""
    s = Scenario(workload=Workload(duration=200.0)).pools([(0.0, 100.0)], [], [])
    result = s.run(post_step=False)
    assert result.exit_code == 0, result.log
    [kid] = children(s.world)
    assert kid.allocated_at is not None
    assert kid.completed_at is not None
    last_read = run_reads(s, kid.run_id)[-1][1]
    assert last_read <= kid.completed_at + timing.EXECUTION_POLL_SECONDS


def parent_reads(s: Scenario) -> list[float]:
    return [
        e.time
        for e in s.world.ledger
        if e.method == "GET" and e.path.endswith(f"/actions/runs/{PARENT_RUN_ID}")
    ]


def test_the_poll_that_first_sees_a_runner_checks_the_parent_and_source_at_once():
    """Something moved: the checks kept for every 15 minutes of a still queue are due now."""
    s = Scenario(workload=Workload(duration=200.0)).pools([(0.0, 100.0)], [], [])
    result = s.run(post_step=False)
    assert result.exit_code == 0, result.log
    [kid] = children(s.world)
    assert kid.allocated_at is not None
    seen = next(t for _, t in run_reads(s, kid.run_id) if t >= kid.allocated_at)
    assert seen < timing.QUEUE_CHECKS_SECONDS, "the scenario sees the runner before 15 min"
    assert seen in parent_reads(s)
    assert seen in [e.time for e in s.world.ledger if "/git/ref/" in e.path]


def test_a_poll_landing_exactly_15_minutes_after_the_last_check_checks_again():
    """20.25 min of queue: polls land at 255, 495, 735 and 900 s; the one at 900 s is due."""
    s = Scenario().pools(FOREVER, [], [])
    s.inputs["queue-timeout-minutes"] = "20.25"
    result = s.run(post_step=False)
    assert result.exit_code == 0, result.log
    [first, *_] = children(s.world)
    polls = [t for _, t in run_reads(s, first.run_id)]
    assert timing.QUEUE_CHECKS_SECONDS in polls
    assert timing.QUEUE_CHECKS_SECONDS in parent_reads(s)


def test_while_queued_the_parent_is_read_every_15_minutes():
    s = Scenario().pools(FOREVER, [], [])
    s.inputs["queue-timeout-minutes"] = "60"
    s.world.finish_parent(PARENT_RUN_ID, "cancelled", at=200.0)
    result = s.run()
    assert result.exit_code == 1
    [(_, cancel), *_] = posts(s, "/cancel")
    assert cancel >= timing.QUEUE_CHECKS_SECONDS
    assert cancel <= timing.QUEUE_CHECKS_SECONDS + timing.QUEUE_POLL_FAR_SECONDS
    assert children(s.world)[0].conclusion == "cancelled"


def test_the_parent_is_checked_again_before_the_second_dispatch():
    """The parent ends during the cancellation window: no second child is dispatched."""
    s = Scenario().pools(FOREVER, [], [])
    s.world.finish_parent(PARENT_RUN_ID, "cancelled", at=617.0)
    result = s.run()
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 1
    assert children(s.world)[0].conclusion == "cancelled"
    [(_, cancel), *_] = posts(s, "/cancel")
    reads = [
        e.time
        for e in s.world.ledger
        if e.method == "GET" and e.path.endswith(f"/actions/runs/{PARENT_RUN_ID}")
    ]
    assert reads[-1] > cancel, "the parent was read again after the first child was cancelled"


def test_while_executing_the_parent_is_checked_at_every_poll():
    s = Scenario(workload=Workload(duration=1200.0)).pools([], [], [])
    s.world.finish_parent(PARENT_RUN_ID, "cancelled", at=300.0)
    result = s.run()
    assert result.exit_code == 1
    [(_, cancel), *_] = posts(s, "/cancel")
    assert 300.0 <= cancel <= 300.0 + timing.EXECUTION_POLL_SECONDS
    assert children(s.world)[0].conclusion == "cancelled"


# -- execution: the timeout to the second, from the allocation ---------------------------------


def test_the_execution_timeout_fires_at_its_deadline_to_the_second():
    s = Scenario(workload=Workload(duration=3600)).pools([], [], [])
    s.inputs["execution-timeout-minutes"] = "5"
    result = s.run()
    assert result.exit_code == 1
    [kid] = children(s.world)
    [(_, cancel), *_] = posts(s, "/cancel")
    assert kid.allocated_at is not None
    # GitHub's started_at has whole seconds: the deadline may fall up to a second later
    assert 300.0 <= cancel - kid.allocated_at <= 301.0
    assert [a["outcome"] for a in attempts(result)] == ["execution timeout"]


def test_the_execution_timeout_counts_from_the_allocation_not_from_the_poll_that_saw_it():
    """Allocated at 100 s, seen at the 255 s poll: the 5-minute timeout still ends at ~400 s."""
    s = Scenario(workload=Workload(duration=3600)).pools([(0.0, 100.0)], [], [])
    s.inputs["execution-timeout-minutes"] = "5"
    result = s.run()
    assert result.exit_code == 1
    [kid] = children(s.world)
    [(_, cancel), *_] = posts(s, "/cancel")
    assert kid.allocated_at is not None
    assert 300.0 <= cancel - kid.allocated_at <= 301.0


# -- what is reported: attempt outcomes, the race paragraph, waiting rounds -------------------


def race() -> tuple[Scenario, SimulationRun]:
    s = Scenario(timings=Timings(cancel_delay=30.0)).pools([(0.0, 617.0)], [], [])
    return s, s.run()


def test_a_runner_acquired_after_the_cancel_request_is_reported_as_the_race():
    s, result = race()
    assert result.exit_code == 1
    [kid] = children(s.world)
    assert kid.allocated_at is not None
    assert kid.cancel_requested_at is not None
    assert kid.allocated_at > kid.cancel_requested_at
    assert [a["outcome"] for a in attempts(result)] == [
        "runner acquired during cancellation (race)"
    ]
    # the race paragraph itself, not only the error message that also names the race
    assert "**The child acquired a runner while it was being cancelled.**" in result.summary
    # the timeline shows the runner's arrival at the end of the cancel and proof (a milestone:
    # the coordinator stopped there, so there is no execution to draw)
    arrival = bar(result.summary, 1, "runner acquired")
    assert bar(result.summary, 1, "cancel and proof")[1] == arrival[0] == arrival[1]


def test_the_summary_has_no_race_paragraph_without_a_race():
    s = Scenario().pools(FOREVER, [], [])
    result = s.run()
    assert result.exit_code == 0
    assert "**The child acquired a runner while it was being cancelled.**" not in result.summary


def test_a_runner_seen_at_the_fresh_read_on_the_deadline_is_no_race_and_never_cancelled():
    """Allocated a moment before the deadline: the fresh read sees it; the child is kept."""
    s = Scenario(workload=Workload(duration=60.0)).pools([(0.0, 612.0)], [], [])
    result = s.run()
    assert result.exit_code == 0, result.log
    assert posts(s, "/cancel") == []
    assert [a["outcome"] for a in attempts(result)] == ["run success, worker success"]


def test_attempt_outcomes_name_the_phase_each_attempt_ended_in():
    s = Scenario(workload=Workload(duration=3600)).pools(FOREVER, [], [])
    s.inputs["execution-timeout-minutes"] = "5"
    result = s.run()
    assert [a["outcome"] for a in attempts(result)] == [
        "cancelled before a runner (queue timeout)",
        "execution timeout",
    ]


def test_waiting_rounds_are_numbered_from_1_for_each_candidate():
    s = Scenario().pools(FOREVER, FOREVER, FOREVER)
    result = s.run()
    assert result.exit_code == 1
    numbers = [int(n) for n in re.findall(r"[Rr]ound (\d+)", result.log)]
    runs: list[list[int]] = []
    for n in numbers:
        if n == 1:
            runs.append([])
        runs[-1].append(n)
    assert len(runs) == 3
    assert all(r == list(range(1, len(r) + 1)) for r in runs)
    assert all(len(r) > 1 for r in runs)


# -- the guard and the post step ----------------------------------------------------------------


def test_the_guard_reports_how_long_its_checks_took(tmp_path: Path):
    clock = FakeClock()
    world = make_world(clock, parent_after=20.0)
    run_id = dispatch_child(world)
    clock.advance(7.0)  # the guard starts a while after the dispatch: only its own time counts
    result = run_guard(world, clock, guard_environ(world, run_id))
    assert result.passed
    assert result.seconds == 15.0


def test_the_post_step_searches_for_a_lost_dispatch_from_5_minutes_before_it(tmp_path: Path):
    """The runner's clock runs 4 minutes ahead of GitHub's: the child is still found."""
    clock = FakeClock()
    world = busy_world(clock)
    dispatched_at = (clock.now() + timedelta(minutes=4)).isoformat()
    run_id = dispatch(world, "rqf-skewed", labels="linux-amd64-cpu8")
    clock.advance(30)
    state = {"request-id": "rqf-skewed", "dispatched-at": dispatched_at}
    code, log = post_step(world, clock, state, tmp_path)
    assert code == 0
    assert f"Found run {run_id}" in log
    assert world.history[run_id].conclusion == "cancelled"


def test_executing_rounds_are_numbered_from_1_and_say_how_long_since_their_dispatch():
    """Second candidate, dispatched at 620 s: its rounds count from 1 and from its own dispatch
    (and the first child, dispatched at virtual second 0, counts from 0 too)."""
    s = Scenario(workload=Workload(duration=200.0)).pools(FOREVER, [], [])
    result = s.run(post_step=False)
    assert result.exit_code == 0, result.log
    rounds = re.findall(
        r"Executing round (\d+), candidate (\d)/3 .*?; (\d+)s since dispatch", result.log
    )
    assert [(n, c) for n, c, _ in rounds[:3]] == [("1", "2"), ("2", "2"), ("3", "2")]
    second = dispatch_posts(s.world)[1]
    first_poll = min(t for _, t in run_reads(s, children(s.world)[1].run_id))
    assert int(rounds[0][2]) == round(first_poll - second)
    assert int(rounds[1][2]) - int(rounds[0][2]) == timing.EXECUTION_POLL_SECONDS
    s = Scenario(workload=Workload(duration=200.0)).pools([], [], [])
    first_child = s.run(post_step=False)
    since = re.findall(r"Executing round 1, .*?; (\d+)s since dispatch", first_child.log)
    assert since == [str(round(timing.STARTUP_FIRST_CHECK_SECONDS))]


# -- every ending reports what it did: cleanup, traceback, timeline, plan, API version --------


def test_after_a_sigterm_the_main_step_itself_cancels_the_child_within_the_budget():
    """Not left to the post step: the signal's own cleanup sends the cancel inside the grace."""
    s = Scenario(timings=Timings(cancel_delay=3.0)).pools(FOREVER, [], [])
    result = s.run(interrupt_at=215.0, post_step=False)
    assert result.exit_code == 1
    [(_, cancel), *_] = posts(s, "/cancel")
    assert 215.0 <= cancel <= 215.0 + timing.SIGNAL_CLEANUP_BUDGET_SECONDS


def test_a_cleanup_that_itself_fails_names_the_child_it_left_unconfirmed(monkeypatch):
    """Any exception in the cleanup: the result still says which child may be running."""

    def broken(*_args, **_kwargs):
        raise RuntimeError("cleanup exploded")

    monkeypatch.setattr(coordinator_module, "cancel_and_confirm_all", broken)
    s = Scenario().pools(FOREVER, [], [])
    s.world.finish_parent(PARENT_RUN_ID, "cancelled", at=100.0)
    s.inputs["queue-timeout-minutes"] = "60"
    result = run_coordinator(s.world, s.clock, s.inputs, main=cli.main, post_step=False)
    [kid] = children(s.world)
    assert result.exit_code == 1
    assert "The cleanup failed: RuntimeError: cleanup exploded" in result.log
    cleanup = next(line for line in result.summary.splitlines() if line.startswith("**Cleanup:**"))
    assert str(kid.run_id) in cleanup
    assert "NOT confirmed" in cleanup
    assert result.state["child-run-id"] == str(kid.run_id), "the post step can still find it"


def test_an_unexpected_exception_leaves_its_traceback_in_the_log(monkeypatch):
    def broken(*_args, **_kwargs):
        raise RuntimeError("startup exploded")

    monkeypatch.setattr(startup_module, "wait_for_startup", broken)
    s = Scenario().pools([], [], [])
    result = run_coordinator(s.world, s.clock, s.inputs, main=cli.main, post_step=False)
    assert result.exit_code == 1
    assert "Traceback (most recent call last):" in result.log
    assert "RuntimeError: startup exploded" in result.log
    assert [a["outcome"] for a in attempts(result)] != []


def test_a_fallen_back_attempt_ends_in_the_timeline_when_its_proof_ended():
    """Attempt 1: queue wait 15-615 s, cancel and proof 615-620 s, then attempt 2 starts."""
    s = Scenario().pools(FOREVER, [], FOREVER)
    result = s.run()
    assert result.exit_code == 0
    second = dispatch_posts(s.world)[1]
    assert bar(result.summary, 1, "cancel and proof") == (615, round(second))


def test_a_queue_wait_ended_by_an_error_reports_how_long_it_waited():
    """The parent is cancelled while queued: the wait is reported up to the error, not as '-'."""
    s = Scenario().pools(FOREVER, [], [])
    s.inputs["queue-timeout-minutes"] = "60"
    s.world.finish_parent(PARENT_RUN_ID, "cancelled", at=200.0)
    result = s.run()
    assert result.exit_code == 1
    [entry] = attempts(result)
    [(_, cancel), *_] = posts(s, "/cancel")
    queued = timing.STARTUP_FIRST_CHECK_SECONDS
    assert entry["queued-seconds"] == cancel - queued
    assert f"| {cancel - queued:.0f} s |" in result.summary


def test_the_summary_lists_every_candidate_of_the_plan_and_the_ones_not_tried():
    s = Scenario().pools([], [], [])
    result = s.run()
    assert result.exit_code == 0
    rows = [
        line for line in result.summary.splitlines() if line.startswith("| ") and "min |" in line
    ]
    assert len(rows) == 3
    assert [row.endswith("| not tried |") for row in rows] == [False, True, True]


def test_the_summary_names_the_rest_api_version_the_run_used():
    s = Scenario().pools([], [], [])
    s.world.api_versions = OLDER_SERVER
    result = s.run()
    assert result.exit_code == 0, result.log
    assert "GitHub REST API version: 2022-11-28" in result.summary


def test_the_parent_check_before_the_first_dispatch_is_logged():
    s = Scenario().pools([], [], [])
    result = s.run()
    logged = result.log.index(f"Parent run {PARENT_RUN_ID} attempt 1 is active")
    assert logged < result.log.index("dispatched to")


def test_a_server_that_keeps_refusing_before_dispatch_ends_with_no_child():
    """Quota refused with a reset already past, read after read: bounded, and nothing dispatched."""
    s = Scenario().pools([], [], [])
    s.world.inject(
        Fault(
            "primary_rate_limit",
            path=rf"/actions/runs/{PARENT_RUN_ID}$",
            retry_after=0,
            count=10_000,
        )
    )
    result = s.run()
    assert result.exit_code == 1
    assert dispatch_posts(s.world) == []
    assert "Before dispatching candidate 1: GET" in result.log
    assert len(s.world.ledger) < 100


# -- execution: booked from GitHub's allocation time --------------------------------------------


def test_the_observed_queue_wait_and_the_execution_start_at_githubs_allocation_time():
    """A runner frees at 100 s; the poll that sees it comes later, the books say 100 s (+1 s:
    GitHub writes whole seconds and the later end is taken)."""
    s = Scenario(workload=Workload(duration=300.0)).pools([(0.0, 100.0)], [], [])
    result = s.run()
    assert result.exit_code == 0
    [kid] = children(s.world)
    assert kid.allocated_at == 100.0
    queued = timing.STARTUP_FIRST_CHECK_SECONDS
    [entry] = attempts(result)
    assert kid.allocated_at - queued <= entry["queued-seconds"] <= kid.allocated_at - queued + 1
    assert bar(result.summary, 1, "queue wait") == (round(queued), 101)
    assert bar(result.summary, 1, "execution")[0] == 101


def test_an_execution_stopped_by_the_parent_ends_as_the_cancelled_child_the_cleanup_proved():
    """Its runner was allocated; the cleanup then proved the child cancelled: it says so."""
    s = Scenario(workload=Workload(duration=1200.0)).pools([], [], [])
    s.world.finish_parent(PARENT_RUN_ID, "cancelled", at=300.0)
    result = s.run()
    assert result.exit_code == 1
    assert [a["outcome"] for a in attempts(result)] == ["run cancelled, worker cancelled"]


def test_a_queued_child_the_signal_cancels_is_listed_cancelled_not_queued():
    """SIGTERM while queued, the cancel confirmed in the main step: outputs and summary agree."""
    s = Scenario().pools(FOREVER, [], [])
    result = s.run(interrupt_at=135.0, post_step=False)
    assert "cleanup confirmed" in result.log
    assert [a["outcome"] for a in attempts(result)] == ["run cancelled, worker cancelled"]
    assert "| queued |" not in result.summary


def test_a_child_ending_runnerless_before_the_deadline_read_shows_no_execution():
    """Someone else cancels the queued child at 610 s: the deadline's read finds it over. It
    waited the whole queue deadline and never ran: no execution bar in the timeline."""
    s = Scenario().pools(FOREVER, [], [])

    def someone_cancels() -> None:
        s.world.request_cancel(children(s.world)[0].run_id)

    s.world._at(610.0, someone_cancels)
    result = s.run()
    assert result.exit_code == 1
    [entry] = attempts(result)
    assert entry["queued-seconds"] == 600.0
    assert not [task for task in bars_in(result.summary) if task[1].startswith("execution")]
    assert entry["outcome"] == "run cancelled, worker cancelled"
    assert "Unexpected" not in result.log


# -- the guard: fails closed, says what it saw ---------------------------------------------------

GUARD_PARENT = 4242


def guard_log(world, clock, environ) -> tuple[GuardResult, str]:
    log = io.StringIO()
    return run_guard(world, clock, environ, log), log.getvalue()


def test_the_guard_refuses_a_request_id_naming_another_parent_run():
    """The run-name matches the request id, but the id was made for another parent run."""
    clock = FakeClock()
    world = make_world(clock)
    other = "rqf-999-1-1-abcd0123"
    run_id = dispatch_child(world, request_id=other)
    result, _ = guard_log(world, clock, guard_environ(world, run_id, **{"INPUT_REQUEST-ID": other}))
    assert not result.passed
    assert result.refusal is not None
    assert result.refusal.check == REQUEST
    assert "names parent run 999 attempt 1" in result.refusal.observed


def test_a_check_raising_anything_unexpected_refuses_the_workload(monkeypatch):
    def broken(_self):
        raise RuntimeError("source check exploded")

    monkeypatch.setattr(Guard, "_check_source", broken)
    clock = FakeClock()
    world = make_world(clock)
    run_id = dispatch_child(world)
    result, _ = guard_log(world, clock, guard_environ(world, run_id))
    assert not result.passed
    assert result.refusal is not None
    assert result.refusal.check == SOURCE
    assert result.refusal.observed == "unexpected RuntimeError: source check exploded"


def test_the_guard_logs_each_check_that_holds_with_what_it_saw():
    clock = FakeClock()
    world = make_world(clock)
    run_id = dispatch_child(world)
    result, log = guard_log(world, clock, guard_environ(world, run_id))
    assert result.passed
    for check in result.checks:
        assert f"Guard: {check.name} holds ({check.observed})" in log


def test_the_guard_says_it_waits_for_its_own_run_to_become_visible():
    clock = FakeClock()
    world = make_world(clock, visibility=7.0)
    run_id = dispatch_child(world)
    result, log = guard_log(world, clock, guard_environ(world, run_id))
    assert result.passed
    assert f"Own run {run_id} not visible yet (HTTP 404)" in log


def test_the_guard_expects_a_parent_of_the_named_coordinator_workflow():
    clock = FakeClock()
    world = make_world(clock)
    run_id = dispatch_child(world)
    environ = guard_environ(world, run_id, **{"INPUT_COORDINATOR-WORKFLOW": "release.yml"})
    result, _ = guard_log(world, clock, environ)
    assert result.refusal is not None
    assert result.refusal.check == PARENT
    assert result.refusal.expected.endswith(
        "a run of .github/workflows/release.yml in octo-org/octo-repo, started before this child "
        "was created"
    )


def test_a_finished_parent_is_refused_showing_only_what_was_observed():
    clock = FakeClock()
    world = make_world(clock)
    world.finish_parent(GUARD_PARENT, "cancelled")
    run_id = dispatch_child(world)
    result, _ = guard_log(world, clock, guard_environ(world, run_id))
    assert result.refusal is not None
    assert result.refusal.observed == "status 'completed' conclusion 'cancelled'"


@pytest.mark.found_by("review", issue=15)
def test_a_child_created_before_its_parent_attempt_started_is_refused_with_both_times():
    """The parent was re-run after this child was dispatched: it cannot be this attempt's child.

    Before (issue 15): the parent was in progress at that attempt when the guard ran, so it
    passed (the review's test of this, through the CLI, merged here)."""
    clock = FakeClock()
    world = make_world(clock)
    request = f"rqf-{GUARD_PARENT}-2-1-abcd0123"
    run_id = dispatch_child(world, request_id=request)
    clock.sleep(10.0)
    world.rerun_parent(GUARD_PARENT)
    environ = guard_environ(
        world, run_id, **{"INPUT_REQUEST-ID": request, "INPUT_PARENT-RUN-ATTEMPT": "2"}
    )
    result, _ = guard_log(world, clock, environ)
    assert result.refusal is not None
    assert result.refusal.check == PARENT
    assert result.refusal.observed.endswith(
        "attempt started 2026-11-02T09:00:10+00:00, this child created 2026-11-02T09:00:00+00:00"
    )


def test_a_conclusion_still_missing_at_the_execution_deadline_gets_one_settling_window():
    """The job ends just before the deadline, the run's report lags and then shows no conclusion:
    one 2-minute window of reads every 5 s, then the verdict: no success, checked by hand."""
    s = Scenario(timings=Timings(run_completion_lag=60.0), workload=Workload(duration=880.0))
    s.pools([], [], [])
    Tamper(s.world, [lag_rule(10_000)], keep_304=True).install()
    result = s.run(post_step=False)
    assert result.exit_code == 1
    [kid] = children(s.world)
    assert kid.allocated_at is not None
    deadline = kid.allocated_at + 15 * 60 + 1  # the Scenario's 15 min, from GitHub's whole second
    reads = [t for _, t in run_reads(s, kid.run_id)]
    assert reads[-1] == deadline + timing.CANCEL_WINDOW_SECONDS  # its last read on its last second
    assert "its conclusion was not reported within 2 minutes" in result.log
    assert "Completion check failed" not in result.log, "no read was tried past the window"


def test_a_failing_read_while_the_reports_settle_is_logged_and_the_settling_goes_on():
    s = Scenario(timings=Timings(run_completion_lag=60.0), workload=Workload(duration=880.0))
    s.pools([], [], [])
    s.world.inject(Fault("status", status=502, path=r"/actions/runs/9\d{9}$", start=910.0, count=3))
    result = s.run(post_step=False)
    assert "Completion check failed: GET " in result.log
    assert result.exit_code == 0, result.log


@pytest.mark.parametrize(
    ("path", "file"),
    [
        (".github/workflows/ci.yml", "ci.yml"),
        ("octo-org/octo-repo/.github/workflows/ci.yml", "ci.yml"),  # another form GitHub shows
        ("Octo-Org/OCTO-repo/.github/workflows/ci.yml@main", "ci.yml"),  # names compare by case
        ("other-org/any-repo/.github/workflows/ci.yml@main", ""),  # another repository's file
        ("x/octo-org/octo-repo/.github/workflows/ci.yml", ""),
        ("octo-org/octo-repo.github/workflows/ci.yml", ""),  # not a .github directory
        (".github/workflows/nested/ci.yml", ""),  # not a workflow file of the repository
        ("ci.yml", ""),
    ],
)
def test_the_parent_workflow_file_is_read_only_from_a_path_in_github_workflows(path, file):
    """`coordinator-workflow` names a file of this repository: anything else matches nothing."""
    run = WorkflowRun.model_validate(workflow_run(path=path))
    assert guard_module._workflow_file(run, "octo-org/octo-repo") == file


def test_the_dispatch_time_is_saved_for_the_post_step():
    """The post step searches for a lost dispatch from this time (minus 5 minutes)."""
    s = Scenario(workload=Workload(duration=30.0)).pools([], [], [])
    result = s.run()
    assert result.exit_code == 0
    dispatched = (s.clock.now() - timedelta(seconds=s.clock.monotonic())).isoformat()
    assert result.state["dispatched-at"] == dispatched  # the first dispatch, at virtual second 0


def test_the_api_version_of_the_dispatch_is_saved_for_the_post_step():
    """The post step speaks the version the main step used (no detection of its own)."""
    for versions, used in ((None, "2026-03-10"), (OLDER_SERVER, "2022-11-28")):
        s = Scenario().pools([], [], [])
        if versions is not None:
            s.world.api_versions = versions
        result = s.run()
        assert result.exit_code == 0, result.log
        assert result.state["api-version"] == used


def test_a_lost_dispatch_reply_warns_and_stays_on_the_books_until_its_run_is_found():
    """The reply is lost and the run never shows up: the attempt says so, with a warning."""
    lost = Fault(kind="lost_reply", method="POST", path=r"/dispatches$", count=1, status=502)
    s = Scenario(timings=Timings(visibility_delay=NEVER), faults=[lost]).pools([], [], [])
    result = s.run()
    assert result.exit_code == 1
    assert "::warning title=Ambiguous dispatch::" in result.log
    assert [a["outcome"] for a in attempts(result)] == ["dispatch reply lost"]
    assert len(dispatch_posts(s.world)) == 1


def test_a_child_stopped_before_its_first_look_ends_as_dispatched():
    """SIGTERM 2 s after the dispatch, before the child was first read: 'dispatched' it is."""
    s = Scenario(timings=Timings(visibility_delay=3.0)).pools(FOREVER, [], [])
    result = s.run(interrupt_at=2.0)
    assert result.exit_code == 1
    assert [a["outcome"] for a in attempts(result)] == ["dispatched"]


# -- a lost dispatch reply: looked up by run-name, within its windows ---------------------------

LOST = Fault(kind="lost_reply", method="POST", path=r"/dispatches$", count=1, status=502)
UNLISTED = Timings(listing_delay=NEVER, visibility_delay=NEVER)


def searches(s: Scenario) -> list[float]:
    """When the coordinator listed the workflow's runs (the run-name search)."""
    return [
        e.time
        for e in s.world.ledger
        if e.method == "GET" and e.path.split("?")[0].endswith("/runs")
    ]


def test_a_lost_dispatch_is_looked_up_every_5_s_up_to_the_startup_windows_last_second():
    s = Scenario(timings=UNLISTED, faults=[LOST]).pools(FOREVER, [], [])
    result = s.run(post_step=False)
    assert result.exit_code == 1
    [dispatched] = dispatch_posts(s.world)
    looks = [t - dispatched for t in searches(s)]
    assert looks == [5.0 * n for n in range(1, 25)]  # 5, 10, ..., 120
    assert "appeared within 2 minutes" in result.log
    assert s.clock.monotonic() - dispatched == timing.STARTUP_WINDOW_SECONDS, "reported at its end"
    assert "Looking for run-name" not in result.log, "no look was attempted past the window"


def test_a_search_that_fails_is_no_run_found():
    """Every run-name search answers 502: the lost dispatch is reported as not found."""
    failing = Fault("status", status=502, path=r"/workflows/[^/]+/runs$", count=10_000)
    s = Scenario(faults=[LOST, failing]).pools(FOREVER, [], [])
    result = s.run(post_step=False)
    assert result.exit_code == 1
    assert "was found and is cancelled" not in result.log
    assert "appeared within 2 minutes" in result.log
    assert re.search(r"Looking for run-name rqf-[\w-]+: GET ", result.log)


def test_after_a_sigterm_during_a_lost_dispatch_the_search_uses_the_whole_signal_grace():
    """Delivered at 5 s, 6 s of budget: looks at 5, 8 and 9.5 s (half of what is left each time,
    while a second or more is left), then a warning that names the run-name to cancel."""
    s = Scenario(timings=UNLISTED, faults=[LOST]).pools(FOREVER, [], [])
    result = s.run(interrupt_at=3.0, post_step=False)
    assert result.exit_code == 1
    looks = searches(s)
    budget = timing.SIGNAL_CLEANUP_BUDGET_SECONDS
    assert looks == [looks[0], looks[0] + budget / 2, looks[0] + budget * 3 / 4]
    assert "::warning title=Child run not found::" in result.log


# -- the parent's grace in the coordinator; what an unconfirmed cleanup last saw ---------------


def test_the_coordinator_waits_out_a_parent_not_yet_visible_within_its_2_minute_grace():
    s = Scenario().pools([], [], [])
    s.world.runs[PARENT_RUN_ID].visible_at = 20.0
    result = s.run()
    assert result.exit_code == 0, result.log
    assert dispatch_posts(s.world)[0] == 20.0
    assert f"Parent run {PARENT_RUN_ID} not active yet (NotFound" in result.log


def test_a_parent_still_queued_after_the_grace_fails_naming_its_last_status():
    s = Scenario().pools([], [], [])
    s.world.runs[PARENT_RUN_ID].status = "queued"
    result = s.run()
    assert result.exit_code == 1
    assert dispatch_posts(s.world) == []
    assert "did not show as active within 2 minutes; last observed: status 'queued'" in result.log
    assert s.clock.monotonic() <= timing.PARENT_GRACE_SECONDS


def test_an_unconfirmed_cleanup_names_what_it_last_saw():
    """The execution timeout's cancel is never honoured: the cleanup says what it last read."""
    s = Scenario(
        timings=Timings(cancel_delay=NEVER, force_cancel_delay=NEVER),
        workload=Workload(duration=3600),
    ).pools([], [], [])
    s.inputs["execution-timeout-minutes"] = "5"
    result = s.run(post_step=False)
    assert result.exit_code == 1
    assert "the window closed; last seen: run " in result.log


def test_a_cleanup_that_never_read_the_child_says_so():
    """After the execution timeout every read of the child fails: 'never observed', no guess."""
    s = Scenario(
        timings=Timings(cancel_delay=NEVER, force_cancel_delay=NEVER),
        workload=Workload(duration=3600),
    ).pools([], [], [])
    s.inputs["execution-timeout-minutes"] = "5"
    s.world.inject(
        Fault("status", status=502, path=r"/actions/runs/9\d{9}", start=302.0, count=10_000)
    )
    result = s.run(post_step=False)
    assert result.exit_code == 1
    assert "the window closed; last seen: never observed" in result.log


def test_a_sigterm_during_an_errors_cleanup_restarts_it_within_the_grace_and_reports_it():
    """The execution timeout's cleanup is polling when the runner sends SIGTERM: the cleanup
    starts again inside the signal's budget, and its result (here: not confirmed) is reported."""
    s = Scenario(timings=Timings(cancel_delay=30.0), workload=Workload(duration=3600)).pools(
        [], [], []
    )
    s.inputs["execution-timeout-minutes"] = "5"
    result = s.run(interrupt_at=315.0, post_step=False)
    assert result.exit_code == 1
    assert "during the cleanup; cleaning up within the grace" in result.log
    [*_, (_, again)] = posts(s, "/cancel")
    assert 315.0 <= again <= 315.0 + timing.SIGNAL_CLEANUP_BUDGET_SECONDS
    assert "**Cleanup:** cleanup NOT confirmed for child run" in result.summary


def test_a_cleanup_confirmed_by_the_main_step_leaves_the_post_step_nothing_to_do():
    """Execution timeout, cancel honoured: the main step confirms it, says so, and the post step
    reads nothing."""
    s = Scenario(timings=Timings(cancel_delay=3.0), workload=Workload(duration=3600)).pools(
        [], [], []
    )
    s.inputs["execution-timeout-minutes"] = "5"
    result = s.run()
    [kid] = children(s.world)
    assert result.exit_code == 1
    assert f"cleanup confirmed: child run {kid.run_id}" in result.log
    assert result.state["child-over"] == str(kid.run_id)
    assert "nothing to clean up" in result.post_log
    over = max(t for _, t in run_reads(s, kid.run_id))
    assert all(e.time <= over for e in s.world.ledger), "the post step sent nothing"


def test_an_error_in_a_later_attempt_leaves_the_earlier_attempts_timeline_as_it_was():
    """Attempt 1 fell back at 620 s; attempt 2 ends in an error much later: attempt 1's bars
    still end at 620 s."""
    s = Scenario(workload=Workload(duration=3600)).pools(FOREVER, [], [])
    s.world.finish_parent(PARENT_RUN_ID, "cancelled", at=800.0)
    result = s.run()
    assert result.exit_code == 1
    second = dispatch_posts(s.world)[1]
    assert bar(result.summary, 1, "cancel and proof") == (615, round(second))


def test_the_verdict_is_preceded_by_the_final_reading_of_run_and_worker_job():
    s = Scenario(workload=Workload(duration=30.0)).pools([], [], [])
    result = s.run()
    [kid] = children(s.world)
    final = f"Polling finished: child {kid.run_id} run {kid.run_id} completed/success; job worker"
    assert final in result.log
    assert result.log.index(final) < result.log.index("The worker succeeded.")
