"""The post step (`cleanup`, `action/post_step.py`) and the runs it finds, against the fake GitHub.

The post step reads the state the main step saved: the child's run id, its request id, the
dispatch time, the copies; it lists the workflow's runs by run-name when the main step could not
know its child (a lost reply, a signal during the dispatch, a run found by run-name), cancels and
confirms every run it finds, and says what it did. Cancelling and confirming one run, the
rules every cleanup shares, are in `tests/test_cancel_and_confirm.py`.
"""

from __future__ import annotations

import contextlib
import io
from datetime import timedelta
from pathlib import Path

import pytest

from runner_queue_fallback.action.post_step import (
    clean_up,
    confirmed_over_by_main_step,
    runs_left_by_main_step,
)
from runner_queue_fallback.cli import main
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.actions_io import Reporter
from runner_queue_fallback.core.clock import Clock, FakeClock
from runner_queue_fallback.core.errors import SequenceError
from runner_queue_fallback.core.hand_off import HandOff
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.model import Timings
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.github.client import GitHubClient
from tests.invariants import children
from tests.outside import JOBS_PATH, Tamper, json_body, with_json
from tests.scenario import POST_TOKEN, Child, minute_queues
from tests.test_coordinator import Scenario
from tests.test_sim_support import GROUP, dispatch, make_world

#: The workflow's runs, listed by the run-name search.
LISTING = r"/workflows/[^/]+/runs$"
#: A child run's cancels (the parent's run id is shorter).
CANCEL = r"/actions/runs/9\d{9}/(force-)?cancel$"
#: Honoured never (within any window here).
NEVER = 10_000.0


def post_step(
    world: FakeGitHub,
    clock: FakeClock,
    state: dict[str, str],
    tmp_path: Path,
    extra: dict[str, str] | None = None,
) -> tuple[int, str]:
    environ = {
        **(extra or {}),
        "INPUT_TOKEN": POST_TOKEN,
        "INPUT_WORKFLOW": "runner-worker.yml",
        "GITHUB_REPOSITORY": world.repository,
        "GITHUB_RUN_ID": "4242",
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_API_URL": world.api_url,
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        **{f"STATE_{k}": v for k, v in state.items()},
    }
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["cleanup"], environ, clock=clock, session=world.session())
    return code, out.getvalue()


def busy_world(clock: FakeClock, **timings: float) -> FakeGitHub:
    world = make_world(clock, timings=Timings(**timings))
    world.add_pool(GROUP, "linux-amd64-cpu8", runners=0)  # never serves: the child stays queued
    return world


def test_post_step_cancels_and_confirms_the_saved_child(tmp_path: Path):
    clock = FakeClock()
    world = busy_world(clock)
    run_id = dispatch(world, "rqf-1", labels="linux-amd64-cpu8")
    clock.advance(30)
    state = {
        "request-id": "rqf-1",
        "child-run-id": str(run_id),
        "child-request-id": "rqf-1",
        "child-run-url": f"https://github.test/runs/{run_id}",
    }
    code, log = post_step(world, clock, state, tmp_path)
    assert code == 0
    assert f"cleanup confirmed: child run {run_id}" in log
    job = world.runs[run_id].job
    assert job is not None
    job_url = f"https://github.test/octo-org/octo-repo/actions/runs/{run_id}/job/{job.id}"
    assert f"cleanup confirmed: child run {run_id}" in log
    assert f" \u2014 View worker job logs here: {job_url}" in log, "the job, not the run"
    assert f"View worker job logs here: `{job_url}`" in (tmp_path / "summary.md").read_text()
    assert world.history[run_id].conclusion == "cancelled"


def _no_jobs(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
    """A server that lists no job for any run."""
    del method, world
    if not JOBS_PATH.search(path) or not isinstance(json_body(reply), dict):
        return None
    return with_json(reply, {"total_count": 0, "jobs": []})


def test_post_step_links_the_run_only_as_the_labelled_fallback(tmp_path: Path):
    """No job link is known (none listed, none saved): the run's, labelled as the fallback."""
    clock = FakeClock()
    world = busy_world(clock)
    Tamper(world, [_no_jobs]).install()
    run_id = dispatch(world, "rqf-1", labels="linux-amd64-cpu8")
    clock.advance(30)
    state = {"request-id": "rqf-1", "child-run-id": str(run_id), "child-request-id": "rqf-1"}
    code, log = post_step(world, clock, state, tmp_path)
    assert code == 0
    run_url = f"https://github.test/octo-org/octo-repo/actions/runs/{run_id}"
    label = "View worker job logs here (run link: the job link is not available)"
    assert f"cleanup confirmed: child run {run_id}" in log
    assert f" \u2014 {label}: {run_url}" in log


def test_post_step_links_the_job_the_main_step_saved(tmp_path: Path):
    """The job is not listed to the post step, but the main step saved its link."""
    clock = FakeClock()
    world = busy_world(clock)
    Tamper(world, [_no_jobs]).install()
    run_id = dispatch(world, "rqf-1", labels="linux-amd64-cpu8")
    clock.advance(30)
    saved = f"https://github.test/octo-org/octo-repo/actions/runs/{run_id}/job/7"
    state = {
        "request-id": "rqf-1",
        "child-run-id": str(run_id),
        "child-request-id": "rqf-1",
        "child-job-url": saved,
    }
    code, log = post_step(world, clock, state, tmp_path)
    assert code == 0
    assert f" \u2014 View worker job logs here: {saved}" in log
    assert POST_TOKEN not in log.replace(f"::add-mask::{POST_TOKEN}", "")


def test_post_step_finds_a_child_whose_dispatch_reply_was_never_read(tmp_path: Path):
    """Only the request id was saved (the main step died during the dispatch): look it up by run-name."""
    clock = FakeClock()
    world = busy_world(clock)
    run_id = dispatch(world, "rqf-lost", labels="linux-amd64-cpu8")
    clock.advance(30)
    code, log = post_step(world, clock, {"request-id": "rqf-lost"}, tmp_path)
    assert code == 0
    assert f"Found run {run_id} with run-name rqf-lost" in log
    assert world.history[run_id].conclusion == "cancelled"


def test_post_step_with_nothing_dispatched_sends_no_request(tmp_path: Path):
    clock = FakeClock()
    world = busy_world(clock)
    code, log = post_step(world, clock, {}, tmp_path)
    assert code == 0
    assert "nothing to clean up" in log
    assert world.ledger == []


def _seen_over(request_id: str = "rqf-1", run_id: str = "17", **more: str) -> dict[str, str]:
    """What the main step saved of a child it saw end."""
    return {
        "request-id": request_id,
        "child-run-id": run_id,
        "child-request-id": request_id,
        "child-over": run_id,
        **more,
    }


def test_a_child_the_main_step_saw_end_is_left_alone_without_a_request(tmp_path: Path):
    clock = FakeClock()
    world = busy_world(clock)
    code, log = post_step(world, clock, _seen_over(), tmp_path)
    assert code == 0
    assert "The main step confirmed child run 17 over: nothing to clean up" in log
    assert world.ledger == []
    assert "::add-mask::" not in log, "no request, no token needed"


@pytest.mark.parametrize(
    "state",
    [
        _seen_over(**{"child-over": "18"}),  # another run ended
        _seen_over(**{"child-run-id": ""}),  # no run id known
        _seen_over(**{"child-over": "", "child-run-id": ""}),
        _seen_over(**{"child-request-id": "rqf-0"}),  # a later dispatch was in flight
        _seen_over(**{"child-found-by-name": "rqf-1"}),  # found by run-name: list for others
    ],
    ids=["other-run", "no-run-id", "nothing-over", "later-dispatch", "found-by-name"],
)
def test_the_post_step_looks_unless_the_last_dispatchs_own_run_was_seen_over(
    state: dict[str, str],
):
    assert not confirmed_over_by_main_step(HandOff.from_saved(state))


def test_the_post_step_trusts_the_main_steps_word_that_its_child_is_over():
    assert confirmed_over_by_main_step(HandOff.from_saved(_seen_over()))
    assert confirmed_over_by_main_step(HandOff.from_saved(_seen_over(" rqf-1", "17 ")))


def test_post_step_leaves_a_completed_child_alone(tmp_path: Path):
    clock = FakeClock()
    world = make_world(clock)
    run_id = dispatch(world, "rqf-2")
    clock.advance(600)  # the workload ran and finished
    code, log = post_step(
        world,
        clock,
        {"request-id": "rqf-2", "child-run-id": str(run_id), "child-request-id": "rqf-2"},
        tmp_path,
    )
    assert code == 0
    assert "already completed" in log
    assert not any(e.method == "POST" and e.path.endswith("/cancel") for e in world.ledger)


def test_unconfirmed_cleanup_names_the_run_and_fails_the_post_step(tmp_path: Path):
    clock = FakeClock()
    world = busy_world(clock, cancel_delay=10_000.0, force_cancel_delay=10_000.0)
    run_id = dispatch(world, "rqf-3", labels="linux-amd64-cpu8")
    clock.advance(30)
    code, log = post_step(
        world,
        clock,
        {"request-id": "rqf-3", "child-run-id": str(run_id), "child-request-id": "rqf-3"},
        tmp_path,
    )
    assert code == 1
    assert f"cleanup NOT confirmed for child run {run_id}" in log
    assert f"Check run {run_id}" in (tmp_path / "summary.md").read_text()


def test_the_post_step_reads_nothing_when_the_main_step_saw_its_child_end():
    """A worker that succeeded was confirmed over by the main step: the post step sends nothing."""
    with_post, without_post = Scenario().pools([]), Scenario().pools([])
    result = with_post.run()
    without_post.run(post_step=False)
    assert result.exit_code == 0, result.log
    assert "confirmed child run" in result.post_log
    assert len(with_post.world.ledger) == len(without_post.world.ledger)


def _post_step_failing_with(error: Exception, state: dict[str, str]) -> tuple[bool, str]:
    """The post step whose client cannot be built: `error` is raised where requests begin."""

    def connect(_version: str) -> tuple[GitHubClient, Clock]:
        raise error

    out = io.StringIO()
    over = clean_up(
        HandOff.from_saved(state), Reporter(out), token="tok", workflow="w.yml", connect=connect
    )
    return over, out.getvalue()


@pytest.mark.parametrize(
    ("state", "named"),
    [
        ({"request-id": "rqf-1", "child-run-id": "17", "child-request-id": "rqf-1"}, "17"),
        ({"request-id": "rqf-1"}, "rqf-1"),
    ],
    ids=["run-id", "request-id-only"],
)
def test_an_unexpected_error_in_the_post_step_fails_it_and_names_the_child(
    state: dict[str, str], named: str
):
    over, log = _post_step_failing_with(RuntimeError("boom"), state)
    assert not over
    assert f"child {named} may still be running: check it and cancel it by hand" in log
    assert log.startswith("::add-mask::tok\n"), "the token is masked before any request"


def test_a_known_error_in_the_post_step_is_raised_as_it_is():
    with pytest.raises(SequenceError, match="known"):
        _post_step_failing_with(SequenceError("known"), {"request-id": "r"})


def test_a_child_the_post_step_cannot_read_is_cancelled_anyway(tmp_path: Path):
    child = Child(Fault("forbidden", method="GET", path=r"/actions/runs/9\d{9}$"))
    state = {"request-id": "rqf-1", "child-run-id": str(child.run_id), "child-request-id": "rqf-1"}
    code, log = post_step(child.world, child.clock, state, tmp_path)
    assert code == 1
    assert f"Could not read child run {child.run_id}: GET " in log
    assert "trying to cancel it anyway" in log
    assert f"Cancel requested for child run {child.run_id}" in log


def test_a_child_read_only_by_its_confirmation_is_linked_by_its_job(tmp_path: Path):
    """The post step's first read of the child fails; the confirmation's reads see its job."""
    child = Child()
    run = rf"/actions/runs/{child.run_id}$"
    child.world.faults.add(Fault("forbidden", method="GET", path=run, count=1))
    state = {"request-id": "rqf-1", "child-run-id": str(child.run_id), "child-request-id": "rqf-1"}
    code, log = post_step(child.world, child.clock, state, tmp_path)
    assert code == 0, log
    assert f"Could not read child run {child.run_id}: GET " in log
    job = child.world.runs[child.run_id].job
    assert job is not None
    job_url = (
        f"{child.world.server_url}/octo-org/octo-repo/actions/runs/{child.run_id}/job/{job.id}"
    )
    assert f" \u2014 View worker job logs here: {job_url}" in log


def test_a_child_never_read_is_linked_by_the_run_link_the_main_step_saved(tmp_path: Path):
    child = Child(Fault("forbidden", method="GET", path=r"/actions/runs/9\d{9}$"))
    saved = f"https://github.test/octo-org/octo-repo/actions/runs/{child.run_id}"
    state = {
        "request-id": "rqf-1",
        "child-run-id": str(child.run_id),
        "child-request-id": "rqf-1",
        "child-run-url": saved,
    }
    code, log = post_step(child.world, child.clock, state, tmp_path)
    assert code == 1
    label = "View worker job logs here (run link: the job link is not available)"
    assert f" \u2014 {label}: {saved}" in log


def _jobs_without_links(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
    """A server that lists jobs with an empty `html_url`."""
    del method, world
    body = json_body(reply)
    if not JOBS_PATH.search(path) or not isinstance(body, dict):
        return None
    jobs = [{**job, "html_url": ""} for job in body.get("jobs", [])]
    return with_json(reply, {**body, "jobs": jobs})


def test_a_job_listed_without_its_link_is_linked_under_its_run(tmp_path: Path):
    """As the main step links it: the run's link, `/job/`, the job's id."""
    child = Child()
    Tamper(child.world, [_jobs_without_links]).install()
    state = {"request-id": "rqf-1", "child-run-id": str(child.run_id), "child-request-id": "rqf-1"}
    code, log = post_step(child.world, child.clock, state, tmp_path)
    assert code == 0, log
    job = child.world.runs[child.run_id].job
    assert job is not None
    job_url = f"https://github.test/octo-org/octo-repo/actions/runs/{child.run_id}/job/{job.id}"
    assert f" \u2014 View worker job logs here: {job_url}" in log


def test_a_running_child_is_not_said_to_be_completed(tmp_path: Path):
    child = Child()
    state = {"request-id": "rqf-1", "child-run-id": str(child.run_id), "child-request-id": "rqf-1"}
    code, log = post_step(child.world, child.clock, state, tmp_path)
    assert code == 0
    assert f"cleanup confirmed: child run {child.run_id}" in log
    assert "already completed" not in log


# -- where the post step looks, and for how long ------------------------------------------------


def left_runs(child: Child, state: dict[str, str], **kwargs: float) -> list[int]:
    saved = HandOff.from_saved(state)
    return runs_left_by_main_step(
        child.client, child.clock, saved, "runner-worker.yml", child.lines.append, **kwargs
    ).run_ids


@pytest.mark.found_by("mutation", issue=35)
def test_the_post_step_reads_a_saved_run_id_with_surrounding_space():
    child = Child()
    assert left_runs(child, {"child-run-id": f" {child.run_id}\n"}) == [child.run_id]


@pytest.mark.found_by("mutation", issue=35)
def test_the_post_steps_single_find_is_not_called_several_runs():
    child = Child()
    assert left_runs(child, {"request-id": "rqf-1"}) == [child.run_id]
    assert not [line for line in child.lines if "runs bear run-name" in line]


@pytest.mark.found_by("mutation", issue=35)
def test_an_earlier_candidates_child_is_not_the_post_steps_child_of_a_later_dispatch():
    """The saved run id is candidate 1's; candidate 2's dispatch was in flight: its run is the
    one looked after."""
    child = Child()
    later = dispatch(child.world, "rqf-2", labels="linux-amd64-cpu8")
    state = {"child-run-id": str(child.run_id), "child-request-id": "rqf-1", "request-id": "rqf-2"}
    assert left_runs(child, state) == [later]


@pytest.mark.found_by("mutation", issue=35)
def test_the_post_step_says_from_when_it_looked_for_an_unlisted_dispatch():
    """With its dispatch time, from 5 minutes before it; without, from 6 hours before now."""
    child = Child()
    dispatched = child.clock.now()
    left_runs(child, {"request-id": "rqf-none", "dispatched-at": dispatched.isoformat()})
    since = (dispatched - timedelta(minutes=5)).isoformat()
    assert (
        f"No run with run-name rqf-none was found since {since}: if one appears" in child.lines[-1]
    )
    child.lines.clear()
    now = child.clock.now()
    left_runs(child, {"request-id": "rqf-none"})
    since = (now - timedelta(hours=6)).isoformat()
    assert (
        f"No run with run-name rqf-none was found since {since}: if one appears" in child.lines[-1]
    )


def listings_during(child: Child, state: dict[str, str], **kwargs: float) -> list[float]:
    """When (from its start) the post step's search listed the workflow's runs."""
    before, start = len(child.world.ledger), child.clock.monotonic()
    left_runs(child, state, **kwargs)
    new = child.world.ledger[before:]
    return sorted({e.time - start for e in new if e.path.endswith("/runs")})


@pytest.mark.found_by("mutation", issue=35)
def test_the_post_steps_search_lists_every_5_s_up_to_the_end_of_its_window_or_its_deadline():
    child = Child()
    nothing = {"request-id": "rqf-none"}
    assert listings_during(child, nothing) == [5.0 * n for n in range(25)]  # 0, 5, ..., 120
    deadline = child.clock.monotonic() + 30.0
    assert listings_during(child, nothing, deadline=deadline) == [5.0 * n for n in range(7)]


@pytest.mark.found_by("mutation", issue=35)
def test_the_post_step_keeps_the_child_the_main_step_found_by_run_name_when_listing_fails():
    """Its listing refused, the post step still looks after the child and its saved copy."""
    child = Child(Fault("forbidden", method="GET", path=LISTING))
    copy = dispatch(child.world, "rqf-1", labels="linux-amd64-cpu8")
    state = {
        "request-id": "rqf-1",
        "child-request-id": "rqf-1",
        "child-found-by-name": "rqf-1",
        "child-run-id": str(child.run_id),
        "child-copies": str(copy),
    }
    assert left_runs(child, state) == [child.run_id, copy]


@pytest.mark.found_by("mutation", issue=35)
def test_once_a_run_is_found_the_post_step_lists_until_two_minutes_after_the_dispatch():
    """A listing that lags may hide a run only that long: the post step, 10 s after the
    dispatch, lists every 5 s up to then (110 s on), and no longer."""
    child = Child()
    dispatched = child.clock.now() - timedelta(seconds=10)
    state = {"request-id": "rqf-1", "dispatched-at": dispatched.isoformat()}
    settled = timing.STARTUP_WINDOW_SECONDS - 10.0
    assert listings_during(child, state) == [5.0 * n for n in range(int(settled / 5) + 1)]


@pytest.mark.found_by("mutation", issue=35)
@pytest.mark.parametrize(
    "fault",
    [
        Fault("forbidden", method="GET", path=LISTING),
        Fault("status", status=404, method="GET", path=LISTING, count=1),
    ],
    ids=["refused", "failed-once"],
)
def test_a_post_step_listing_that_fails_is_said(fault: Fault):
    child = Child(fault)
    left_runs(child, {"request-id": "rqf-1"})
    assert any(line.startswith("Could not look for run-name rqf-1: GET ") for line in child.lines)


@pytest.mark.found_by("mutation", issue=35)
def test_the_post_step_sends_nothing_past_its_4_minutes_even_after_a_quota_wait(tmp_path: Path):
    """GitHub ends a post step 5 minutes after a cancellation; a minute is kept for the rest. The
    child's first read waits 201 s for a quota reset; the cancel is never honoured: the cleanup
    reads every 5 s and stops at its last poll inside the 4 minutes."""
    child = Child(cancel_delay=NEVER, force_cancel_delay=NEVER)
    spent = Fault(
        "primary_rate_limit", method="GET", path=rf"/runs/{child.run_id}$", count=1, retry_after=200
    )
    child.world.faults.add(spent)
    state = {"request-id": "rqf-1", "child-run-id": str(child.run_id), "child-request-id": "rqf-1"}
    code, log = post_step(child.world, child.clock, state, tmp_path)
    assert code == 1
    assert "cleanup NOT confirmed" in log
    sent = [e.time - 30.0 for e in child.world.ledger if e.time >= 30.0]
    limit = 300.0 - 60.0  # GitHub's 5 minutes, written out: the constants must not define them
    assert max(sent) == limit - 4.0  # 201 s, then every 5 s: 236 s is the last poll that fits
    assert child.clock.monotonic() - 30.0 <= limit


@pytest.mark.found_by("mutation", issue=35)
def test_a_found_run_whose_cancel_failed_and_that_completed_is_left_as_completed(tmp_path: Path):
    """The post step finds the lost dispatch's run already over; its cancel fails (403): the run
    is not counted as one this step cancelled, so it is reported as already completed."""
    clock = FakeClock()
    world = make_world(clock)
    run_id = dispatch(world, "rqf-1")
    clock.advance(200)  # its 60 s workload is over
    world.faults.add(Fault("forbidden", method="POST", path=CANCEL))
    code, log = post_step(world, clock, {"request-id": "rqf-1"}, tmp_path)
    assert code == 0
    assert f"Cancel of run {run_id} failed: POST " in log
    assert f"Child run {run_id} is already completed: nothing to clean up" in log


@pytest.mark.found_by("review", issue=15)
def test_post_step_after_a_refused_dispatch_has_nothing_to_clean_up():
    """A dispatch refused with 422 creates no run.

    Before: the post step searched by run-name and said "no run with run-name ... was found: if
    one appears, cancel it by hand". After: it knows nothing was created.
    """

    w = minute_queues(watched=True).pools((), ())
    w.world.inject(Fault(kind="status", status=422, method="POST", path=r"/dispatches$"))
    result = w.run()
    assert result.exit_code == 1
    assert children(w.world) == []
    assert "cancel it by hand" not in result.post_log
    assert "no run was created" in result.post_log
    assert "nothing to clean up" in result.post_log
    assert result.post_exit_code == 0


# -- every run bearing the request id: copies by someone else -----------------------------------


def _state_of_a_dispatch_in_flight(clock: FakeClock, request_id: str) -> dict[str, str]:
    """What the main step saved before a dispatch whose run it never learned."""
    dispatched = clock.now() - timedelta(seconds=1)
    return {"request-id": request_id, "dispatched-at": dispatched.isoformat()}


@pytest.mark.found_by("review", issue=26)
def test_the_post_step_cancels_confirms_and_names_every_run_bearing_the_request_id(
    tmp_path: Path,
):
    """The main step died during its dispatch; a copy was dispatched 3 s later: the post step
    cancels and confirms both. Before: only the earliest was cancelled."""
    clock = FakeClock()
    world = busy_world(clock)
    state = _state_of_a_dispatch_in_flight(clock, "rqf-9-1-1-0123abcd")
    real = dispatch(world, "rqf-9-1-1-0123abcd", labels="linux-amd64-cpu8")
    clock.advance(3)
    copy = dispatch(world, "rqf-9-1-1-0123abcd", labels="linux-amd64-cpu8")
    clock.advance(10)
    code, log = post_step(world, clock, state, tmp_path)
    assert code == 0, log
    for run_id in (real, copy):
        assert world.history[run_id].conclusion == "cancelled", run_id
        assert f"cleanup confirmed: child run {run_id}" in log
    assert f"2 runs bear run-name rqf-9-1-1-0123abcd: {real}, {copy}" in log


@pytest.mark.found_by("review", issue=26)
def test_the_post_step_lists_again_for_a_child_the_main_step_found_by_run_name(tmp_path: Path):
    """The main step found its child by run-name (it is saved so): the post step lists again and
    cancels a copy too. Before: only the saved run id was cancelled."""
    clock = FakeClock()
    world = busy_world(clock)
    request_id = "rqf-9-1-1-4567cdef"
    state = _state_of_a_dispatch_in_flight(clock, request_id)
    real = dispatch(world, request_id, labels="linux-amd64-cpu8")
    clock.advance(3)
    copy = dispatch(world, request_id, labels="linux-amd64-cpu8")
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


@pytest.mark.found_by("review", issue=26)
def test_the_post_step_leaves_a_child_known_from_its_dispatch_reply_to_its_run_id(
    tmp_path: Path,
):
    """A run id from the dispatch reply is the child: no listing by run-name."""
    clock = FakeClock()
    world = busy_world(clock)
    request_id = "rqf-9-1-1-89abcdef"
    state = _state_of_a_dispatch_in_flight(clock, request_id)
    real = dispatch(world, request_id, labels="linux-amd64-cpu8")
    clock.advance(10)
    state |= {"child-run-id": str(real), "child-request-id": request_id}
    code, log = post_step(world, clock, state, tmp_path)
    assert code == 0, log
    assert not any(e.path.endswith("/runner-worker.yml/runs") for e in world.ledger)
    assert f"cleanup confirmed: child run {real}" in log
