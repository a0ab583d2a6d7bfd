"""Issue 26: the real child among copies, in the coordinator and the post step.

Anyone who may dispatch the child can copy a live child's inputs within seconds: the copy bears
the same request id as its run-name. The real child is the first run created bearing it. Where
the program finds its child by run-name it considers every such run: in the paths that only
cancel (a lost dispatch reply, a signal during the dispatch, the post step) it cancels, confirms
and names each; on an older server, where it follows the child, it follows the earliest and names
the others. Every test drives `cli.main` against the fake GitHub; a copy is a second dispatch the
fake receives a few seconds after the real one (`dispatch_at`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

from runner_queue_fallback import cli
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github import DispatchRefused, Timings
from runner_queue_fallback.fake_github.model import FakeRun, Workload
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.simulate.steps import PARENT_RUN_ID, SimulationRun, run_coordinator
from tests.invariants import dispatch_posts
from tests.test_cleanup import busy_world, post_step
from tests.test_coordinator import FOREVER, Scenario
from tests.test_older_server import inputs as older_inputs
from tests.test_older_server import older_world
from tests.test_rules import LOST
from tests.test_sim_support import child_inputs
from tests.test_sim_support import dispatch as dispatch_child


def copy_every_dispatch(world: FakeGitHub, *, after: float, hide_real_for: float = 0.0) -> None:
    """Each dispatch is copied `after` seconds later by someone else (same inputs, same run-name).

    `hide_real_for`: the real run is shown (and listed) that much later than usual: a listing
    that lags, so that the copy is listed first.
    """
    real = world.dispatch

    def dispatch(file: str, ref: str, inputs: Mapping[str, object]) -> FakeRun | DispatchRefused:
        run = real(file, ref, inputs)
        if not isinstance(run, DispatchRefused):
            world.dispatch_at(world.now() + after, file, ref, inputs)
            run.visible_at += hide_real_for
        return run

    world.dispatch = dispatch  # type: ignore[method-assign]  # the fake calls it per request


def real_and_copy(world: FakeGitHub) -> tuple[FakeRun, FakeRun]:
    """The real child (dispatched by the coordinator) and its copy: same run-name, later."""
    kids = sorted(
        (run for run in world.runs.values() if run.id != PARENT_RUN_ID and run.history),
        key=lambda run: (run.created_at, run.id),
    )
    real, copy = kids
    assert real.display_title == copy.display_title
    assert copy.created_at > real.created_at
    return real, copy


def named_over(run: SimulationRun, run_id: int) -> bool:
    """Run `run_id` is named as confirmed over by the main step or the post step."""
    text = run.log + run.post_log
    return (
        f"cleanup confirmed: child run {run_id}" in text
        or f"Child run {run_id} is already completed" in run.post_log
    )


def coordinate(s: Scenario, interrupt_at: float | None = None) -> SimulationRun:
    """The real coordinator and post step (no invariant check: a copy is a second live run)."""
    return run_coordinator(s.world, s.clock, s.inputs, main=cli.main, interrupt_at=interrupt_at)


# -- a lost dispatch reply ---------------------------------------------------------------------


def test_after_a_lost_reply_every_run_bearing_the_request_id_is_cancelled_confirmed_and_named():
    """A copy dispatched 3 s after the real child: both cancelled and confirmed, both named.

    Before: the newest run listed was adopted, and only it was cancelled.
    """
    s = Scenario(faults=[LOST]).pools([], [], [])
    copy_every_dispatch(s.world, after=3.0)
    result = coordinate(s)
    real, copy = real_and_copy(s.world)
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 1
    for run in (real, copy):
        assert run.history is not None
        assert run.history.conclusion == "cancelled", run.id
        assert f"cleanup confirmed: child run {run.id}" in result.log
    error = next(line for line in result.log.splitlines() if line.startswith("::error"))
    assert f"runs {real.id}, {copy.id} bear run-name {real.display_title}" in error
    assert f"run {real.id} was created first" in error
    assert "::warning title=Run-name not unique::" in result.log
    assert result.state["child-run-id"] == str(real.id)
    assert result.state["child-copies"] == str(copy.id)
    same_name = (
        f"**Cleanup of a run with the same run-name:** cleanup confirmed: child run {copy.id}"
    )
    assert same_name in result.summary


def test_after_a_lost_reply_a_real_child_listed_late_is_still_cancelled():
    """The copy is listed first, the real child 20 s later: the listing goes on within the
    startup window, so both are cancelled (the real one as soon as it is listed)."""
    s = Scenario(faults=[LOST], workload=Workload(duration=600.0)).pools([], [], [])
    copy_every_dispatch(s.world, after=3.0, hide_real_for=20.0)
    result = coordinate(s)
    real, copy = real_and_copy(s.world)
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 1
    for run in (real, copy):
        assert run.history is not None
        assert run.history.conclusion == "cancelled", run.id
        assert f"cleanup confirmed: child run {run.id}" in result.log
    cancels = [e.time for e in s.world.ledger if e.path.endswith(f"/runs/{real.id}/cancel")]
    assert cancels[0] <= real.visible_at + timing.STARTUP_POLL_SECONDS, "cancelled once listed"
    assert result.state["child-run-id"] == str(real.id), "the run created first is the child"


# -- a signal during the dispatch POST ----------------------------------------------------------


def test_a_signal_during_the_dispatch_cancels_confirms_and_names_every_run_bearing_its_id():
    """SIGTERM while the POST is in flight; a copy 1 s after the real child: both are cancelled
    in the grace, and confirmed by the main step or the post step."""
    s = Scenario(timings=Timings(latency=1.0)).pools(FOREVER, [], [])
    copy_every_dispatch(s.world, after=1.0)
    result = coordinate(s, interrupt_at=4.3)
    real, copy = real_and_copy(s.world)
    [posted] = dispatch_posts(s.world)
    delivered = posted + 1.0  # the signal is handled once the POST's reply (1 s latency) is in
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 1
    for run in (real, copy):
        assert run.history is not None
        assert run.history.conclusion == "cancelled", run.id
        assert named_over(result, run.id), run.id
        cancels = [e.time for e in s.world.ledger if e.path.endswith(f"/runs/{run.id}/cancel")]
        assert cancels[0] <= delivered + timing.SIGNAL_CLEANUP_BUDGET_SECONDS, "in the grace"
    assert f"runs {real.id}, {copy.id} bear run-name" in result.log
    assert result.state["child-found-by-name"] == real.display_title


# -- an older server: the child is followed -----------------------------------------------------


def test_on_an_older_server_the_earliest_run_is_followed_to_its_result_and_the_copy_named():
    """The copy is listed first (the real child 17 s late): the listing again at the next poll
    finds the real child before any runner was seen, and it replaces the copy.

    Before: the copy was followed, timed out in the queue (the real child held the runner) and
    a second pool was dispatched while the real child ran unobserved.
    """
    clock = FakeClock()
    world, sha = older_world(clock, cpu16_busy=False)
    world.on_worker_start = None
    copy_every_dispatch(world, after=3.0, hide_real_for=14.0)
    result = run_coordinator(world, clock, older_inputs(sha), main=cli.main)
    real, copy = real_and_copy(world)
    assert result.exit_code == 0, result.log
    assert len(dispatch_posts(world)) == 1, "never a second dispatch"
    assert result.outputs["run-id"] == str(real.id)
    assert real.history is not None
    assert real.history.conclusion == "success"
    assert f"Found run {copy.id} named" in result.log, "the copy was listed first"
    warning = f"run {real.id} with run-name {real.display_title}, listed late, was created before"
    assert warning in result.log
    assert f"run {copy.id} was dispatched by someone else" in result.log
    assert result.state["child-run-id"] == str(real.id)
    assert real.job is not None
    assert result.state["child-job-url"].endswith(f"/job/{real.job.id}")


def test_on_an_older_server_an_earlier_run_found_after_a_runner_was_seen_ends_the_sequence():
    """The copy already had a runner when the real child was listed: an error naming both, and
    both are cancelled and confirmed."""
    clock = FakeClock()
    world, sha = older_world(clock, cpu16_busy=False)
    world.on_worker_start = None
    world.pools[next(iter(world.pools))].runners = 2  # the copy gets a runner of its own
    copy_every_dispatch(world, after=3.0, hide_real_for=14.0)
    result = run_coordinator(world, clock, older_inputs(sha), main=cli.main)
    real, copy = real_and_copy(world)
    assert result.exit_code == 1
    assert len(dispatch_posts(world)) == 1
    error = next(line for line in result.log.splitlines() if line.startswith("::error"))
    assert f"run {real.id} with run-name {real.display_title} was created before run {copy.id}" in (
        error
    )
    assert "which already had a runner" in error
    for run in (real, copy):
        assert (run.status, run.conclusion) == ("completed", "cancelled"), run.id
        assert f"cleanup confirmed: child run {run.id}" in result.log


def test_on_an_older_server_a_copy_adopted_first_is_checked_as_at_startup_and_fails_at_once():
    """The copy, listed first, runs another commit: the startup window's first read fails the
    sequence; the post step lists again and cancels the real child too."""
    clock = FakeClock()
    world, sha = older_world(clock)  # CPU16 busy: both stay queued
    world.on_worker_start = None
    world.change_workflow("runner-worker.yml", "main", at=2.0)  # the copy runs a newer commit
    copy_every_dispatch(world, after=3.0, hide_real_for=14.0)
    result = run_coordinator(world, clock, older_inputs(sha), main=cli.main)
    real, copy = real_and_copy(world)
    assert copy.head_sha != real.head_sha
    assert result.exit_code == 1
    assert len(dispatch_posts(world)) == 1
    error = next(line for line in result.log.splitlines() if line.startswith("::error"))
    assert f"child run {copy.id} is not the run that was dispatched: head_sha" in error
    first_read = min(e.time for e in world.ledger if e.path.endswith(f"/runs/{copy.id}"))
    assert copy.history is not None
    assert copy.history.cancel_requested_at == first_read, "fails at the first read"
    for run in (real, copy):
        assert run.history is not None
        assert run.history.conclusion == "cancelled", run.id
        assert named_over(result, run.id), run.id
    assert result.post_exit_code == 0


def test_on_an_older_server_the_real_child_is_found_beyond_the_first_page():
    """100 newer runs of the workflow between the real child and its copy: the search reads every
    page, so the copy on page 1 does not hide the real child on page 2.

    Before: the search stopped at the first page holding a match, the copy.
    """
    clock = FakeClock()
    world, sha = older_world(clock, cpu16_busy=False)
    world.on_worker_start = None
    real_dispatch = world.dispatch

    def crowded(file: str, ref: str, inputs: Mapping[str, object]) -> FakeRun | DispatchRefused:
        run = real_dispatch(file, ref, inputs)
        if not isinstance(run, DispatchRefused):
            for n in range(100):
                other = child_inputs(f"rqf-other-{n}", "no-such-pool")
                world.dispatch_at(world.now() + 1.0, file, ref, other)
            world.dispatch_at(world.now() + 2.0, file, ref, inputs)
        return run

    world.dispatch = crowded  # type: ignore[method-assign]  # the fake calls it per request
    result = run_coordinator(world, clock, older_inputs(sha), main=cli.main)
    assert result.exit_code == 0, result.log
    kids = [r for r in world.runs.values() if r.display_title.startswith("rqf-9")]
    real, copy = sorted(kids, key=lambda r: (r.created_at, r.id))
    assert result.outputs["run-id"] == str(real.id)
    assert f"Found run {real.id} named" in result.log
    assert f"run(s) {copy.id} were dispatched by someone else" in result.log
    assert len(dispatch_posts(world)) == 1


# -- the post step ------------------------------------------------------------------------------


def _state_of_a_dispatch_in_flight(clock: FakeClock, request_id: str) -> dict[str, str]:
    """What the main step saved before a dispatch whose run it never learned."""
    dispatched = clock.now() - timedelta(seconds=1)
    return {"request-id": request_id, "dispatched-at": dispatched.isoformat()}


def test_the_post_step_cancels_confirms_and_names_every_run_bearing_the_request_id(
    tmp_path: Path,
):
    """The main step died during its dispatch; a copy was dispatched 3 s later: the post step
    cancels and confirms both. Before: only the earliest was cancelled."""
    clock = FakeClock()
    world = busy_world(clock)
    state = _state_of_a_dispatch_in_flight(clock, "rqf-9-1-1-0123abcd")
    real = dispatch_child(world, "rqf-9-1-1-0123abcd", labels="linux-amd64-cpu8")
    clock.advance(3)
    copy = dispatch_child(world, "rqf-9-1-1-0123abcd", labels="linux-amd64-cpu8")
    clock.advance(10)
    code, log = post_step(world, clock, state, tmp_path)
    assert code == 0, log
    for run_id in (real, copy):
        assert world.history[run_id].conclusion == "cancelled", run_id
        assert f"cleanup confirmed: child run {run_id}" in log
    assert f"2 runs bear run-name rqf-9-1-1-0123abcd: {real}, {copy}" in log


def test_the_post_step_lists_again_for_a_child_the_main_step_found_by_run_name(tmp_path: Path):
    """The main step found its child by run-name (it is saved so): the post step lists again and
    cancels a copy too. Before: only the saved run id was cancelled."""
    clock = FakeClock()
    world = busy_world(clock)
    request_id = "rqf-9-1-1-4567cdef"
    state = _state_of_a_dispatch_in_flight(clock, request_id)
    real = dispatch_child(world, request_id, labels="linux-amd64-cpu8")
    clock.advance(3)
    copy = dispatch_child(world, request_id, labels="linux-amd64-cpu8")
    clock.advance(10)
    state |= {
        "child-run-id": str(real),
        "child-request-id": request_id,
        "child-found-by-name": request_id,
    }
    code, log = post_step(world, clock, state, tmp_path)
    assert code == 0, log
    for run_id in (real, copy):
        assert world.history[run_id].conclusion == "cancelled", run_id
        assert f"cleanup confirmed: child run {run_id}" in log
    summary = (tmp_path / "summary.md").read_text()
    assert summary.count("**Post-step cleanup:**") == 2


def test_the_post_step_leaves_a_child_known_from_its_dispatch_reply_to_its_run_id(
    tmp_path: Path,
):
    """A run id from the dispatch reply is the child: no listing by run-name."""
    clock = FakeClock()
    world = busy_world(clock)
    request_id = "rqf-9-1-1-89abcdef"
    state = _state_of_a_dispatch_in_flight(clock, request_id)
    real = dispatch_child(world, request_id, labels="linux-amd64-cpu8")
    clock.advance(10)
    state |= {"child-run-id": str(real), "child-request-id": request_id}
    code, log = post_step(world, clock, state, tmp_path)
    assert code == 0, log
    assert not any(e.path.endswith("/runner-worker.yml/runs") for e in world.ledger)
    assert f"cleanup confirmed: child run {real}" in log
