"""What GitHub really does (issue 28), each a world setting of the fake, and what the program does.

Each behaviour has its source in reference/github-api.md section 12:

- re-queue after assignment ("If the runner doesn't pick up the assigned job within 60 seconds,
  the job is re-queued", GitHub's docs), shown or not shown on the job;
- runs that never get a job, whose cancel and force-cancel answer 409 "Cannot cancel a workflow
  run that has not been queued yet." (actions/runner#3872);
- a 202 cancel that leaves a queued run queued until a force-cancel (gjsify/gjsify#1548).

The world tests read the fake through its REST API; the coordinator's are driven through
`cli.main` on the catalogue's scenarios (or variants of them), with the invariants checked.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.action.cleanup import cancel_and_confirm, cancel_and_confirm_all
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.errors import CancelRefused
from runner_queue_fallback.fake_github import FakeGitHub, Platform, PoolSpec
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.github.models import CancelOutcome
from runner_queue_fallback.tools.simulate.scenarios import CatalogueEntry
from runner_queue_fallback.tools.simulate.steps import TOKEN
from tests.scenario import CATALOGUE
from tests.scenario import simulated as _simulated
from tests.test_sim_support import (
    GROUP,
    PRIMARY,
    advance_to,
    dispatch,
    get,
    job_of,
    make_world,
    post,
)

if TYPE_CHECKING:
    import requests

#: Makes a client on a fake world, as the coordinator builds it.
ClientOf = Callable[[FakeGitHub, FakeClock], GitHubClient]
NOT_QUEUED = "Cannot cancel a workflow run that has not been queued yet."


def _world(platform: Platform, **kwargs: object) -> tuple[FakeGitHub, FakeClock]:
    clock = FakeClock()
    return make_world(clock, platform=platform, **kwargs), clock


def _posts(world: FakeGitHub, run_id: int) -> list[tuple[float, str, int | None]]:
    """(time, cancel or force-cancel, status) of every cancel request for `run_id`."""
    return [
        (e.time, e.path.rsplit("/", 1)[-1], e.status)
        for e in world.ledger
        if e.method == "POST" and f"/actions/runs/{run_id}/" in e.path
    ]


def _variant(name: str, pools: tuple[PoolSpec, ...]) -> CatalogueEntry:
    """A catalogue scenario with other pools."""
    entry = CATALOGUE[name]
    return entry.model_copy(update={"world": dataclasses.replace(entry.world, pools=pools)})


def _inputs(entry: CatalogueEntry, **inputs: str) -> CatalogueEntry:
    (spec,) = entry.coordinators
    changed = spec.model_copy(update={"inputs": {**spec.inputs, **inputs}})
    return entry.model_copy(update={"coordinators": (changed,)})


@pytest.fixture
def client_of() -> Iterator[ClientOf]:
    """A client on a fake world, as the coordinator builds it."""
    sessions: list[requests.Session] = []

    def make(world: FakeGitHub, clock: FakeClock) -> GitHubClient:
        session = world.session()
        sessions.append(session)
        return GitHubClient(session, world.api_url, world.repository, TOKEN, clock)

    yield make
    for session in sessions:
        session.close()


# -- the world: re-queue after assignment --------------------------------------------------------


def test_invisible_requeue_keeps_the_job_queued_about_60_s_longer():
    """The first runner assigned never picks the job up; nothing shows; at +60 s a runner takes it."""
    world, clock = _world(Platform(requeue="invisible"))
    run_id = dispatch(world)  # the job is listed at 5 s and assigned at once
    for at in (10.0, 40.0, 64.0):
        advance_to(clock, at)
        job = job_of(world, run_id)
        assert (job["status"], job["runner_name"], job["steps"]) == ("queued", None, [])
    advance_to(clock, 66.0)
    job = job_of(world, run_id)
    assert job["status"] == "in_progress"
    assert job["runner_name"] == f"{PRIMARY}-002"  # the runner that did pick it up
    history = world.history[run_id]
    assert history.requeued_at == [65.0]
    assert history.allocated_at == 65.0  # the unseen assignment left no allocation


def test_visible_requeue_shows_the_runner_with_no_step_then_clears_it():
    """The runner shows on the queued job (no step), then clears; the job waits for another."""
    world, clock = _world(Platform(requeue="visible"))
    world.pools[(GROUP, (PRIMARY,))].busy = ((60.0, 300.0),)
    run_id = dispatch(world)
    advance_to(clock, 10.0)
    job = job_of(world, run_id)
    assert (job["status"], job["runner_name"], job["steps"]) == ("queued", f"{PRIMARY}-001", [])
    advance_to(clock, 70.0)
    job = job_of(world, run_id)
    assert (job["status"], job["runner_name"], job["runner_id"]) == ("queued", None, None)
    history = world.history[run_id]
    assert history.requeued_at == [65.0]
    assert history.allocated_at == 5.0  # the runner a reply showed counts, at its assignment
    advance_to(clock, 320.0)
    assert job_of(world, run_id)["runner_name"] == f"{PRIMARY}-002"
    assert world.history[run_id].allocated_at == 5.0  # the first allocation seen stays


def test_a_shown_runner_no_reply_delivered_leaves_no_allocation_in_history():
    """The truth the invariants hold the coordinator to is what GitHub showed, not what it hid."""
    world, clock = _world(Platform(requeue="visible"))
    world.pools[(GROUP, (PRIMARY,))].busy = ((60.0, 300.0),)
    run_id = dispatch(world)
    advance_to(clock, 100.0)  # the runner came and went unread
    assert job_of(world, run_id)["runner_name"] is None
    assert world.history[run_id].allocated_at is None


# -- the world: runs that never get a job; a cancel that does not take --------------------------


def test_a_zombie_run_stays_queued_with_no_job_and_refuses_cancel_and_force_cancel():
    world, clock = _world(Platform(zombies=(1,)))
    run_id = dispatch(world)
    advance_to(clock, 600.0)
    assert get(world, f"/actions/runs/{run_id}").json()["status"] == "queued"
    assert get(world, f"/actions/runs/{run_id}/jobs").json() == {"total_count": 0, "jobs": []}
    for how in ("cancel", "force-cancel"):
        reply = post(world, f"/actions/runs/{run_id}/{how}")
        assert reply.status == 409
        assert reply.json()["message"] == NOT_QUEUED
    second = dispatch(world, "req-2")  # only the first child is a zombie here
    advance_to(clock, 620.0)
    assert get(world, f"/actions/runs/{second}/jobs").json()["total_count"] == 1


def test_an_unheeded_cancel_leaves_a_queued_run_queued_until_a_force_cancel():
    world, clock = _world(Platform(unheeded_cancel=True))
    world.pools[(GROUP, (PRIMARY,))].runners = 0
    run_id = dispatch(world)
    advance_to(clock, 30.0)
    assert post(world, f"/actions/runs/{run_id}/cancel").status == 202
    advance_to(clock, 30.0 + 20 * 60)
    assert get(world, f"/actions/runs/{run_id}").json()["status"] == "queued"
    assert post(world, f"/actions/runs/{run_id}/force-cancel").status == 202
    advance_to(clock, clock.monotonic() + 2)
    run = get(world, f"/actions/runs/{run_id}").json()
    assert (run["status"], run["conclusion"]) == ("completed", "cancelled")


# -- the client: a 409 is "already completed" only when a fresh read says so ---------------------


def test_a_409_to_a_cancel_is_already_completed_only_when_a_fresh_read_shows_it(
    client_of: ClientOf,
):
    world, clock = _world(Platform(zombies=(1,)))
    zombie, done = dispatch(world), dispatch(world, "req-2")
    advance_to(clock, 30.0)
    world.request_cancel(done)
    advance_to(clock, 40.0)
    client = client_of(world, clock)
    assert client.cancel_run(done) is CancelOutcome.ALREADY_COMPLETED
    for cancel in (client.cancel_run, client.force_cancel_run):
        with pytest.raises(CancelRefused) as info:
            cancel(zombie)
        assert NOT_QUEUED in str(info.value)
        assert f"a fresh read shows run {zombie} queued, not completed" in str(info.value)


# -- every cleanup: retried, then force-cancelled; unconfirmed with its run id ------------------


def test_cleanup_of_a_run_without_a_job_retries_force_cancels_and_reports_it_unconfirmed(
    client_of: ClientOf,
):
    """Cancel refused (409, still queued): again 5 s later, then a force-cancel; never confirmed."""
    world, clock = _world(Platform(zombies=(1,)))
    run_id = dispatch(world)
    advance_to(clock, 130.0)
    lines: list[str] = []
    result = cancel_and_confirm(client_of(world, clock), clock, run_id, log=lines.append)
    assert not result.confirmed
    assert _posts(world, run_id) == [
        (130.0, "cancel", 409),
        (135.0, "cancel", 409),
        (140.0, "force-cancel", 409),
    ]
    text = result.describe()
    assert text.startswith(f"cleanup NOT confirmed for child run {run_id}:")
    assert f"GitHub never created its job: run {run_id} stayed queued with no job" in text
    assert NOT_QUEUED in text
    assert clock.monotonic() <= 130.0 + timing.CANCEL_WINDOW_SECONDS
    assert any(line.startswith(f"Force-cancel of run {run_id} refused:") for line in lines)


def test_cleanup_of_several_runs_reports_each_zombie_by_its_run_id(client_of: ClientOf):
    world, clock = _world(Platform(zombies=(1, 2)))
    runs = [dispatch(world), dispatch(world, "req-2")]
    advance_to(clock, 130.0)
    results = cancel_and_confirm_all(client_of(world, clock), clock, runs)
    assert [(r.run_id, r.confirmed) for r in results] == [(runs[0], False), (runs[1], False)]
    assert all("GitHub never created its job" in r.describe() for r in results)


def test_a_409_for_a_run_that_completes_within_the_window_is_confirmed_by_a_read(
    client_of: ClientOf,
):
    """A refused cancel is not the end: the run that completes meanwhile is confirmed as usual."""
    world, clock = _world(Platform(zombies=(1,)))
    run_id = dispatch(world)
    advance_to(clock, 130.0)
    world.runs[run_id].zombie = False  # GitHub gets the run going again: it can now be cancelled
    world.runs[run_id].status = "completed"
    world.runs[run_id].conclusion = "cancelled"
    result = cancel_and_confirm(client_of(world, clock), clock, run_id)
    assert _posts(world, run_id) == [(130.0, "cancel", 409)]
    assert result.confirmed


# -- the coordinator ---------------------------------------------------------------------------


def test_a_visible_requeue_is_explained_and_never_falls_back():
    """Runner seen, then gone: the log and the summary say so; one child, followed to its end."""
    sim = _simulated(CATALOGUE["requeue-visible"])
    (run,) = sim.runs
    (kid,) = sim.children(run)
    assert run.exit_code == 0
    assert kid.requeued_at == [65.0]
    said = (
        f"Worker job of child {kid.run_id} was assigned to runner {PRIMARY}-001 and re-queued by "
        "GitHub (the runner did not pick it up; no step had started). A runner was seen, so "
        "candidate 1 can no longer fall back"
    )
    assert said in run.log
    assert (
        f"**Re-queued by GitHub:** the worker job of child {kid.run_id} was assigned to runner "
        f"{PRIMARY}-001 and re-queued by GitHub"
    ) in run.summary
    assert "could no longer fall back" in run.summary


def test_a_requeue_does_not_restart_the_execution_timeout():
    """Counted from the first allocation seen (5 s): cancelled at about 5 + 180 s, not later."""
    pools = (
        PoolSpec(group=GROUP, labels=PRIMARY, busy=((60.0, 3000.0),)),
        PoolSpec(group=GROUP, labels="linux-amd64-cpu8"),
    )
    entry = _inputs(
        _variant("requeue-visible", pools),
        **{"execution-timeout-minutes": "3"},
    )
    sim = _simulated(entry)
    (run,) = sim.runs
    (kid,) = sim.children(run)
    assert run.exit_code == 1
    assert "did not finish within execution-timeout-minutes (3)" in run.log
    assert kid.allocated_at == 5.0
    cancels = [t for t, how, _ in _posts(sim.world, kid.run_id) if how == "cancel"]
    assert 5.0 + 180 <= cancels[0] <= 5.0 + 180 + timing.EXECUTION_POLL_SECONDS


def test_an_invisible_requeue_only_makes_the_wait_a_minute_longer():
    sim = _simulated(CATALOGUE["requeue-invisible"])
    (run,) = sim.runs
    (attempt,) = json.loads(run.outputs["attempts-json"])
    assert run.exit_code == 0
    assert attempt["queued-seconds"] >= 45  # first seen queued at 15 s, taken at 65 s
    assert "re-queued" not in run.log  # nothing to see, nothing said


def test_a_run_that_never_gets_its_job_ends_the_sequence_and_is_reported_unconfirmed():
    """No fallback; every cleanup (main and post step) names the run and says GitHub made no job."""
    sim = _simulated(CATALOGUE["zombie-run"])
    (run,) = sim.runs
    (kid,) = sim.children(run)
    assert (run.exit_code, run.outputs["attempts"], run.post_exit_code) == (1, "1", 1)
    assert "GitHub never created its worker job" in run.log
    for text in (run.log, run.post_log, run.summary):
        assert f"cleanup NOT confirmed for child run {kid.run_id}" in text
        assert "GitHub never created its job" in text
    assert "already-completed" not in run.log + run.post_log
    # The main step's cleanup, then the post step's: each cancel refused is sent again, then forced.
    assert [how for _, how, _ in _posts(sim.world, kid.run_id)] == 2 * [
        "cancel",
        "cancel",
        "force-cancel",
    ]


@pytest.mark.parametrize("name", ["requeue-visible", "zombie-run", "unheeded-cancel"])
def test_simulate_does_not_predict_a_world_with_githubs_own_behaviours(name: str, capsys):
    """Flags that would need a new expectation are refused: the story rests on GitHub's quirks."""
    code = cli.main(["simulate", name, "--workload-outcome", "failure"], {})
    out = capsys.readouterr().out
    assert code == 2
    assert "cannot be stated in advance" in out
    assert "re-queues jobs, never gives a run its job, or ignores a cancel" in out
