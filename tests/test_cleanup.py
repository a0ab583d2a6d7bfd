"""Cancel-and-confirm and the post step, against the fake GitHub."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from runner_queue_fallback.action.cleanup import cancel_and_confirm
from runner_queue_fallback.cli import main
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github.model import Timings, fake_token
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.github.client import GitHubClient
from tests.outside import JOBS_PATH, Tamper, json_body, with_json
from tests.test_sim_support import GROUP, dispatch, make_world

#: The post step's token, in GitHub's 2026 format (520 characters with `.`, `_`, `-`).
POST_TOKEN = fake_token("post_token")


def post_step(
    world: FakeGitHub, clock: FakeClock, state: dict[str, str], tmp_path: Path
) -> tuple[int, str]:
    environ = {
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
