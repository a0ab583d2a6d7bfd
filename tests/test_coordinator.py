"""The fallback sequence against the stateful fake GitHub: outcome, outputs, ledger and timing."""

from __future__ import annotations

import json

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.core import timing
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.model import Timings, Workload
from runner_queue_fallback.tools.simulate.steps import (
    PARENT_RUN_ID,
    SOURCE_REF,
    run_coordinator,
)
from tests.invariants import children, dispatch_posts
from tests.scenario import CPU, FOREVER, Scenario, attempts, minute_queues
from tests.test_fuzz_coordinator import Case, PoolPlan, base_inputs, execute

#: The scenario builder lived here: the test files that import it from here still may.
__all__ = ["CPU", "FOREVER", "Scenario", "attempts"]


def test_primary_success():
    """A free primary pool: one dispatch, success, outputs name it."""
    s = Scenario().pools([], FOREVER, FOREVER)
    result = s.run()
    assert result.exit_code == 0
    assert result.outputs["attempts"] == "1"
    assert json.loads(result.outputs["runner"]) == {
        "group": "nv-cpu-general",
        "labels": "linux-amd64-cpu16",
    }
    assert dispatch_posts(s.world) == [0.0]
    assert s.cancels() == []
    assert "View worker job logs here" in result.summary
    assert "/job/" in result.summary
    assert "#artifacts" in result.summary
    assert result.post_exit_code == 0


def test_fallback_after_one_queue_timeout_cancels_on_the_deadline():
    """CPU16 is full: cancel at its 10-minute deadline, confirm, then CPU8 gets a runner."""
    s = Scenario().pools(FOREVER, [], FOREVER)
    result = s.run()
    assert result.exit_code == 0
    history = children(s.world)
    first_queued = history[0].job_queued_at
    deadline = 15.0 + 600.0  # the queue clock starts at the first check, 15 s after dispatch
    assert first_queued <= 15.0
    [cancel] = s.cancels()
    assert deadline <= cancel <= deadline + 5, "the cancel is sent within 5 s of the deadline"
    second_dispatch = dispatch_posts(s.world)[1]
    assert history[0].completed_at is not None
    assert history[0].completed_at <= second_dispatch
    assert [a["outcome"] for a in attempts(result)] == [
        "cancelled before a runner (queue timeout)",
        "run success, worker success",
    ]
    assert attempts(result)[0]["queued-seconds"] == 600.0
    assert json.loads(result.outputs["runner"])["labels"] == "linux-amd64-cpu8"


def test_all_queues_exhausted_fails_after_every_deadline():
    s = Scenario().pools(FOREVER, FOREVER, FOREVER)
    result = s.run()
    assert result.exit_code == 1
    assert "all 3 queue(s) exhausted" in result.log
    assert len(dispatch_posts(s.world)) == 3
    assert all(h.allocated_at is None and h.conclusion == "cancelled" for h in children(s.world))
    cancels = s.cancels()
    dispatches = dispatch_posts(s.world)
    for dispatched, cancel in zip(dispatches, cancels, strict=True):
        assert dispatched + 615 <= cancel <= dispatched + 620


def test_product_failure_is_not_retried():
    """A failing workload fails the coordinator; no other pool is tried."""
    s = Scenario(workload=Workload(outcome="failure", duration=120)).pools([], [], [])
    result = s.run()
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 1
    assert "did not succeed" in result.log
    assert "View worker job logs here" in result.log


def test_queue_start_race_during_cancellation_stops_without_fallback():
    """A runner frees up inside the cancel delay: explicit race error, never a second dispatch."""
    s = Scenario(timings=Timings(cancel_delay=30.0)).pools([(0.0, 617.0)], [], [])
    result = s.run()
    assert result.exit_code == 1
    assert "race" in result.log
    assert len(dispatch_posts(s.world)) == 1
    assert children(s.world)[0].allocated_at is not None


def test_cancellation_window_expired_stops_without_dispatch():
    """The cancel never lands within 2 minutes: report the last observation, dispatch nothing more."""
    s = Scenario(timings=Timings(cancel_delay=10_000.0, force_cancel_delay=10_000.0)).pools(
        FOREVER, [], []
    )
    result = s.run(post_step=False)
    assert result.exit_code == 1
    assert "not confirmed within 2 minutes" in result.log
    assert "last observation" in result.log
    assert len(dispatch_posts(s.world)) == 1


def test_child_never_visible_fails_after_the_startup_window():
    """The run answers 404 throughout startup: report it, clean up, no other dispatch."""
    s = Scenario(timings=Timings(visibility_delay=10_000.0)).pools([], [], [])
    result = s.run(post_step=False)
    assert result.exit_code == 1
    assert "2-minute startup window" in result.log
    assert len(dispatch_posts(s.world)) == 1


def test_identity_mismatch_fails_at_once():
    """The child shows another run-name (a different workflow name): the run is refused and cancelled."""
    s = Scenario().pools(FOREVER, [], [])
    s.world.path_with_ref = False
    s.inputs["workflow"] = "runner-worker.yml"
    # The workflow ref moves between our read of it and the dispatch: the child's head SHA differs.
    original = s.world.dispatch

    def dispatch_then_move(*args, **kwargs):
        s.world.change_workflow("runner-worker.yml", "main")
        return original(*args, **kwargs)

    s.world.dispatch = dispatch_then_move  # type: ignore[method-assign]  # a race injected for this test
    result = s.run()
    assert result.exit_code == 1
    assert "is not the run that was dispatched" in result.log
    assert "head_sha" in result.log
    assert len(dispatch_posts(s.world)) == 1


def test_source_moved_while_queued_stops_and_cleans_up():
    """While queued the source ref is read every 15 minutes: the move is seen at the next check."""
    s = Scenario().pools(FOREVER, [], [])
    s.inputs["queue-timeout-minutes"] = "30"
    s.world.move_ref(SOURCE_REF.removeprefix("refs/"), at=200.0)
    result = s.run()
    assert result.exit_code == 1
    assert "source ref refs/pull/123/merge moved" in result.log
    assert len(dispatch_posts(s.world)) == 1
    assert "cleanup confirmed" in result.log
    [cancel] = s.cancels()
    assert cancel <= timing.QUEUE_CHECKS_SECONDS + timing.QUEUE_POLL_FAR_SECONDS


def test_source_moved_near_the_deadline_stops_the_fallback_at_the_preflight():
    """A move the sparse checks miss is still caught before the next dispatch."""
    s = Scenario().pools(FOREVER, [], [])
    s.world.move_ref(SOURCE_REF.removeprefix("refs/"), at=200.0)
    result = s.run()
    assert result.exit_code == 1
    assert "source ref refs/pull/123/merge moved" in result.log
    assert len(dispatch_posts(s.world)) == 1
    assert children(s.world)[0].conclusion == "cancelled"


@pytest.mark.parametrize(("policy", "fails"), [("current", True), ("pinned-after-start", False)])
def test_source_moved_while_executing(policy: str, fails: bool):
    """current stops an executing worker; pinned-after-start lets it finish its SHA."""
    s = Scenario(workload=Workload(duration=600)).pools([], [], [])
    s.inputs["source-policy"] = policy
    s.world.move_ref(SOURCE_REF.removeprefix("refs/"), at=200.0)
    result = s.run()
    assert (result.exit_code == 1) is fails
    if fails:
        assert "moved" in result.log
        assert children(s.world)[0].conclusion == "cancelled"


def test_workflow_definition_changed_between_dispatches():
    s = Scenario().pools(FOREVER, [], [])
    s.world.change_workflow("runner-worker.yml", "main", at=300.0)
    result = s.run()
    assert result.exit_code == 1
    assert "workflow definition .github/workflows/runner-worker.yml" in result.log
    assert len(dispatch_posts(s.world)) == 1


def test_ambiguous_dispatch_is_recovered_by_run_name_and_never_repeated():
    """The dispatch reply is lost after the run was created: find it by run-name, cancel, stop."""
    lost = Fault(kind="lost_reply", method="POST", path=r"/dispatches$", count=1, status=502)
    s = Scenario(faults=[lost]).pools(FOREVER, [], [])
    result = s.run()
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 1
    assert "was found and is cancelled" in result.log
    [kid] = children(s.world)
    assert kid.conclusion == "cancelled"
    assert kid.allocated_at is None


def test_execution_timeout_cancels_and_fails():
    s = Scenario(workload=Workload(duration=3600)).pools([], [], [])
    s.inputs["execution-timeout-minutes"] = "5"
    result = s.run()
    assert result.exit_code == 1
    assert "execution-timeout-minutes (5)" in result.log
    [kid] = children(s.world)
    assert kid.conclusion == "cancelled"
    assert kid.completed_at is not None
    assert kid.allocated_at is not None
    assert kid.completed_at - kid.allocated_at <= 5 * 60 + 30


def test_parent_cancelled_by_signal_cleans_up_within_the_grace():
    """SIGTERM while queued: the child is cancelled in the main step, confirmed by the post step."""
    s = Scenario(timings=Timings(cancel_delay=3.0)).pools(FOREVER, [], [])
    result = s.run(interrupt_at=215.0)  # delivered as the 215 s poll wakes up
    assert result.exit_code == 1
    assert "SIGTERM" in result.log
    cancel = s.cancels()[0]
    assert 215.0 <= cancel <= 215.0 + 6.0, "within the runner's 7.5 s grace"
    assert children(s.world)[0].conclusion == "cancelled"
    assert result.post_exit_code == 0


def test_a_signal_interrupts_the_sleep_it_lands_in_at_its_own_second():
    """SIGTERM at 135 s, inside the 200 s poll sleep begun at 15 s: that sleep ends at 135 s and
    the cancel is sent then, as Python's signal handler cuts a real `time.sleep` short."""
    s = Scenario(timings=Timings(cancel_delay=3.0)).pools(FOREVER, [], [])
    result = s.run(interrupt_at=135.0)
    assert "SIGTERM" in result.log
    assert 135.0 <= s.cancels()[0] < 135.0 + 1.0, "at the signal, not at the next poll (215 s)"
    assert 200.0 not in s.clock.sleeps
    assert 135.0 - 15.0 in s.clock.sleeps, "the poll's sleep, cut at the signal's second"


def test_post_step_confirms_what_the_signal_grace_could_not():
    """The cancel takes 20 s, longer than the signal grace: the post step confirms it from state."""
    s = Scenario(timings=Timings(cancel_delay=20.0)).pools(FOREVER, [], [])
    result = s.run(interrupt_at=135.0)
    [kid] = children(s.world)
    assert result.state["child-run-id"] == str(kid.run_id)
    assert f"NOT confirmed for child run {kid.run_id}" in result.log
    assert f"cleanup confirmed: child run {kid.run_id}" in result.post_log
    assert result.post_exit_code == 0
    assert kid.conclusion == "cancelled"


def test_parent_cancelled_while_queued_is_seen_by_the_poll():
    s = Scenario().pools(FOREVER, [], [])
    s.world.finish_parent(PARENT_RUN_ID, "cancelled", at=130.0)
    result = s.run()
    assert result.exit_code == 1
    assert "parent run" in result.log
    assert children(s.world)[0].conclusion == "cancelled"


def test_extended_gpu_policy_seven_candidates_with_final_rewait():
    """Six 15-minute queues then a fresh 60-minute request to RTX PRO 6000, which finally serves."""
    s = Scenario()
    s.inputs["runner-type"] = "gpu"
    s.inputs["queue-policy"] = "extended"
    labels = [
        f"linux-amd64-gpu-{m}-latest-1"
        for m in ("rtxpro6000", "h100", "h200", "a100", "l40g", "l4")
    ]
    groups = [
        "nv-gpu-rtxpro6000",
        "nv-gpu-h100",
        "nv-gpu-h200",
        "nv-gpu-a100",
        "nv-gpu-l40g",
        "nv-gpu-general",
    ]
    start_of_last = 6 * (15 + 15 * 60 + 10)  # roughly when the 7th dispatch happens
    for group, label in zip(groups, labels, strict=True):
        busy = [(0.0, start_of_last + 1800.0)] if label.endswith("rtxpro6000-latest-1") else FOREVER
        s.world.add_pool(group, label, runners=1, busy=busy)
    result = s.run()
    assert result.exit_code == 0, result.log
    runs = attempts(result)
    assert len(runs) == 7
    assert [a["queue-timeout-minutes"] for a in runs] == [15] * 6 + [60]
    assert runs[6]["labels"] == runs[0]["labels"] == "linux-amd64-gpu-rtxpro6000-latest-1"
    for kid in children(s.world)[:6]:
        assert kid.conclusion == "cancelled"
        assert kid.allocated_at is None


def test_queue_deadline_precision_with_odd_deadlines():
    """A 1.5-minute deadline is not a multiple of the 60 s poll: a poll still lands on it."""
    s = Scenario().pools(FOREVER, [], [])
    s.inputs["queue-timeout-minutes"] = "1.5"
    s.run()
    [cancel] = s.cancels()
    assert 15 + 90 <= cancel <= 15 + 90 + 5


def test_queued_polls_are_one_to_four_minutes_apart_and_land_on_the_deadline():
    """A departure from "once per minute": 4 minutes far from the deadline, 1 to 4 near it."""
    s = Scenario().pools(FOREVER, FOREVER, FOREVER)
    s.run()
    queue_waits = [w for w in s.clock.sleeps if w not in (5.0, 15.0)]
    assert queue_waits
    assert max(queue_waits) <= timing.QUEUE_POLL_FAR_SECONDS
    # every wait but the one that lands on the deadline is at least a minute
    assert sorted(queue_waits)[len(s.cancels()) :][0] >= timing.QUEUE_POLL_NEAR_SECONDS


def test_conditional_requests_keep_queued_polls_nearly_free():
    """While queued nothing changes: polls are answered 304 and do not count against the limit."""
    s = Scenario().pools(FOREVER, [], [])
    s.run()
    queued_window = [e for e in s.world.ledger if 60 <= e.time <= 600 and e.method == "GET"]
    assert queued_window
    assert sum(e.counted for e in queued_window) == 0


def test_bad_input_makes_no_request(capsys):
    s = Scenario().pools([], [], [])
    s.inputs["runner-type"] = "tpu"
    result = run_coordinator(s.world, s.clock, s.inputs, main=cli.main, post_step=False)
    assert result.exit_code == 2
    assert "input 'runner-type'" in result.log
    assert s.world.ledger == []


def test_a_nearly_spent_quota_delays_the_dispatch_with_a_warning():
    """Admission: below the reserve the dispatch waits for the reset, with a warning annotation."""
    s = Scenario().pools([], [], [])
    s.world.spend_quota(s.world.quota - 20)
    result = s.run()
    assert "::warning title=Waiting for API quota::" in result.log
    assert dispatch_posts(s.world)[0] >= timing.QUOTA_WINDOW_SECONDS


def test_a_parent_that_stops_showing_in_progress_ends_the_sequence():
    """The grace is never renewed: after confirmation only an in-progress parent is accepted."""
    s = Scenario().pools(FOREVER, [], [])

    def requeue() -> None:
        s.world.runs[PARENT_RUN_ID].status = "queued"

    s.world._at(200.0, requeue)
    result = s.run()
    assert result.exit_code == 1
    assert f"parent run {PARENT_RUN_ID}: expected attempt 1 still active" in result.log
    assert len(dispatch_posts(s.world)) == 1


def test_a_refused_read_during_cancellation_fails_at_once():
    """Authentication and permission failures are never retried, not even inside a window."""
    refused = Fault(
        kind="forbidden", method="GET", path=r"/actions/runs/\d+$", start=616.0, count=1
    )
    s = Scenario(faults=[refused]).pools(FOREVER, [], [])
    result = s.run()
    assert result.exit_code == 1
    assert "403" in result.log
    assert "Cancellation check failed" not in result.log
    assert len(dispatch_posts(s.world)) == 1
    assert children(s.world)[0].conclusion == "cancelled"


def test_an_annotated_tag_as_workflow_ref_and_source_ref():
    """A protected annotated tag is peeled to its commit: the child's head SHA is that commit."""
    s = Scenario().pools([], [], [])
    s.world.add_annotated_tag("v1")
    s.world.add_annotated_tag("release-7", s.sha)
    s.inputs["workflow-ref"] = "v1"
    s.inputs["source-ref"] = "refs/tags/release-7"
    result = s.run()
    assert result.exit_code == 0, result.log
    assert any(
        e.path.endswith("/git/tags/" + sha) for e in s.world.ledger for sha in s.world.tag_objects
    )
    assert children(s.world)[0].workload_started_at is not None


# -- every error goes through the cleanup, and the result is published --------------------------


@pytest.mark.found_by("review", issue=15)
def test_unexpected_exception_still_cleans_up_and_publishes(monkeypatch: pytest.MonkeyPatch):
    """Any exception, not only the project's own, goes through cleanup and publishing."""
    from runner_queue_fallback.action.sequence import queue  # noqa: PLC0415  # the phase to break

    def broken(*_args: object, **_kwargs: object) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(queue, "wait_in_queue", broken)
    w = minute_queues(watched=True).pools(FOREVER, ())
    result = w.run(bug=True)
    assert result.exit_code == 1
    [kid] = children(w.world)
    assert kid.conclusion == "cancelled"
    assert result.log.count("::error") == 1
    assert "unexpected ZeroDivisionError in the fallback sequence: a bug" in result.log
    assert result.outputs["run-id"] == str(kid.run_id)
    assert "Unexpected error" in result.log


FULL = ((0.0, 10.0**9),)


@pytest.mark.found_by("fuzz")
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
