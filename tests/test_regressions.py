"""Named regression scenarios: one for every bug the fuzz tests found, replayed exactly.

Each scenario is a `Case` of tests/test_fuzz_coordinator.py run through the same harness and the
same checks (every invariant of DESIGN.md and every spec bound), plus the assertion that pins
the bug. The docstring says what went wrong before the fix.
"""

from __future__ import annotations

import json

import pytest

from runner_queue_fallback.core.inputs import InputErrors, read_coordinator_inputs
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.model import Timings, Workload
from tests.invariants import children, dispatch_posts
from tests.test_fuzz_coordinator import Case, PoolPlan, base_inputs, execute
from tests.test_fuzz_inputs import PROFILES, VALID, InputSet, run_cli

FULL = ((0.0, 10.0**9),)
CPU16 = {"group": "nv-cpu-general", "labels": "linux-amd64-cpu16"}


def test_signal_during_the_cleanup_of_an_error_still_publishes_the_result():
    """SIGTERM arrived while the coordinator cleaned up after an error (the source moved).

    Before: `Interrupted` escaped `Coordinator.run` from inside the error's cleanup, so the
    coordinate step ended with a traceback, no outputs, no summary and no error annotation.
    Fix: the cleanup restarts within the signal grace and the result is published.
    """
    case = Case(
        inputs=base_inputs({"queue-timeout-minutes": "20"}),
        pools=(PoolPlan("nv-cpu-general", "linux-amd64-cpu16", busy=FULL),),
        timings=Timings(cancel_delay=30.0),
        move_source_at=100.0,  # seen by the first source check 15 minutes on (at 1002 s)
        interrupt_at=1010.0,
        guard=False,
    )
    outcome = execute(case)
    run = outcome.run
    assert outcome.observed.interrupted_at is not None
    assert run.exit_code == 1
    assert "moved" in run.log
    assert "SIGTERM: the workflow run is being cancelled during the cleanup" in run.log
    assert run.outputs["attempts"] == "1"
    assert "::error" in run.log
    [kid] = children(outcome.world)
    assert kid.conclusion == "cancelled"


def test_worker_done_at_the_execution_deadline_with_a_lagging_job_report_is_not_a_timeout():
    """The workload ended before the execution deadline, but the job's report lagged 10 s.

    Before: the poll on the deadline saw the run completed/success and the job still
    in progress, declared "did not finish within execution-timeout-minutes; it is cancelled",
    and failed, although nothing was cancelled and the worker had succeeded in time.
    Fix: when the run or the job already says completed at the deadline, the coordinator
    lets the other report settle (5 s polls, one cancellation window) before judging.
    """
    case = Case(
        inputs=base_inputs({"queue-timeout-minutes": "1", "execution-timeout-minutes": "2"}),
        pools=(PoolPlan("nv-cpu-general", "linux-amd64-cpu16"),),
        timings=Timings(visibility_delay=0.0, job_completion_lag=10.0, latency=0.25),
        # 110 s of workload after the guard: done just inside the 2 minutes counted from the
        # runner's allocation (the job's started_at), with the job's report 10 s behind.
        workload=Workload(outcome="success", duration=110.0),
    )
    outcome = execute(case)
    run = outcome.run
    assert run.exit_code == 0, run.log
    assert "waiting for the lagging report" in run.log
    assert "did not finish within execution-timeout-minutes" not in run.log
    [kid] = children(outcome.world)
    assert kid.conclusion == "success"
    assert len(dispatch_posts(outcome.world)) == 1


def test_signal_while_the_dispatch_is_in_flight_finds_and_cancels_the_child():
    """SIGTERM arrived while the dispatch POST was in flight (1 s of latency on every reply).

    Before: the POST had created the run, but the coordinator never learned its id: no cleanup,
    no state for the post step ("No child run was dispatched"), and the child was left queued
    without a word. Fix: the signal handler looks for the run by its unique run-name within the
    signal grace, cancels it, and hands its id to the post step; if the run cannot be found it
    says so by run-name.
    """
    case = Case(
        inputs=base_inputs({"queue-timeout-minutes": "1.5", "execution-timeout-minutes": "1"}),
        timings=Timings(latency=1.0),
        interrupt_at=4.3,
        guard=False,
    )
    outcome = execute(case)
    run = outcome.run
    assert outcome.observed.interrupted_at is not None
    [kid] = children(outcome.world)
    assert run.state["child-run-id"] == str(kid.run_id)
    # The post step lists by run-name again first: by then the main step's cancel has landed.
    assert (
        f"cleanup confirmed: child run {kid.run_id}" in run.log + run.post_log
        or f"Child run {kid.run_id} is already completed" in run.post_log
    )
    assert kid.conclusion == "cancelled"


# -- input crashes found by tests/test_fuzz_inputs.py --------------------------------------
# json.loads raised RecursionError/ValueError (not JSONDecodeError) on deep nesting and 4300+
# digit numbers, and str.isdigit() accepted digits int() refuses: a traceback instead of an
# input error. Fixed in inputs.py/overrides.py (parse_json, _whole).

DEEP = "[" * 100_000 + "]" * 100_000
HUGE = "1" * 5000
INPUT_CRASHES = [
    pytest.param("runners", DEEP, id="runners-nested-100000-deep"),
    pytest.param(
        "runners",
        f'[{{"group": "nv-cpu-general", "labels": "linux-amd64-cpu16", '
        f'"queue-timeout-minutes": {HUGE}}}]',
        id="runners-deadline-with-5000-digits",
    ),
    pytest.param("workload", DEEP, id="workload-nested-100000-deep"),
    pytest.param("workload", f'{{"shard": {HUGE}}}', id="workload-number-with-5000-digits"),
    pytest.param("execution-timeout-minutes", "\u00b2", id="execution-timeout-superscript-two"),
    pytest.param("execution-timeout-minutes", HUGE, id="execution-timeout-5000-digits"),
]


@pytest.mark.parametrize(("name", "value"), INPUT_CRASHES)
def test_known_input_crash_becomes_an_input_error(name: str, value: str):
    """Before: a traceback from the coordinate step. Expected: exit 2 naming the input."""
    values = InputSet({**VALID, "runner-type": "cpu", name: value}, frozenset({name}), via_cli=True)
    with pytest.raises(InputErrors) as caught:
        read_coordinator_inputs(values.environ(), PROFILES)
    assert [error.name for error in caught.value.errors] == [name]
    run = run_cli(values)
    assert run.code == 2
    assert run.sent == []


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
