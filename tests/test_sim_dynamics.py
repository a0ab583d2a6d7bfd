"""The fake GitHub moves through time as GitHub does: visibility, queues, allocation, cancel races."""

from __future__ import annotations

import json

import pytest
from githubkit_schemas.v2026_03_10.models import ReposOwnerRepoActionsRunsRunIdJobsGetResponse200

from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github import Timings, WorkerContext, Workload
from tests.test_sim_support import (
    AUTH,
    GROUP,
    PRIMARY,
    SECONDARY,
    advance_to,
    child_inputs,
    dispatch,
    get,
    job_of,
    make_world,
    post,
)


def test_new_run_is_404_then_visible_then_zero_jobs_then_queued():
    clock = FakeClock()
    world = make_world(clock, timings=Timings(visibility_delay=10.0, jobs_delay=20.0))
    world.add_pool(GROUP, SECONDARY, runners=0)
    run_id = dispatch(world, labels=SECONDARY)
    advance_to(clock, 9.0)
    assert get(world, f"/actions/runs/{run_id}").status == 404
    assert get(world, f"/actions/runs/{run_id}/jobs").status == 404
    advance_to(clock, 10.0)
    assert get(world, f"/actions/runs/{run_id}").json()["status"] == "queued"
    assert get(world, f"/actions/runs/{run_id}/jobs").json() == {"total_count": 0, "jobs": []}
    advance_to(clock, 30.0)
    job = job_of(world, run_id)
    assert (job["status"], job["runner_id"], job["labels"]) == ("queued", None, [SECONDARY])
    history = world.history[run_id]
    assert (history.dispatched_at, history.first_visible_at, history.job_queued_at) == (0, 10, 30)


def test_runs_list_filters_and_orders_newest_first():
    clock = FakeClock()
    world = make_world(clock)
    first = dispatch(world, "a")
    advance_to(clock, 60.0)
    second = dispatch(world, "b")
    advance_to(clock, 70.0)
    listing = get(world, "/actions/workflows/runner-worker.yml/runs?event=workflow_dispatch").json()
    assert [r["id"] for r in listing["workflow_runs"]] == [second, first]
    since = get(world, "/actions/workflows/runner-worker.yml/runs?created=>=2026-11-02T09:00:30Z")
    assert [r["display_title"] for r in since.json()["workflow_runs"]] == ["b"]
    none = get(world, "/actions/workflows/runner-worker.yml/runs?event=push").json()
    assert none["total_count"] == 0


def test_allocation_follows_capacity_and_fifo():
    """Two runners, three jobs: the third waits for the first to finish."""
    clock = FakeClock()
    world = make_world(clock, workload=Workload(duration=100.0))
    world.add_pool(GROUP, SECONDARY, runners=2)
    runs = [dispatch(world, f"r{i}", SECONDARY) for i in range(3)]
    advance_to(clock, 50.0)
    assert [job_of(world, r)["status"] for r in runs] == ["in_progress", "in_progress", "queued"]
    advance_to(clock, 200.0)
    history = [world.history[r] for r in runs]
    assert [h.allocated_at for h in history] == [5.0, 5.0, history[0].completed_at]
    assert history[2].runner == "linux-amd64-cpu8-003"


def test_allocation_waits_out_the_busy_schedule():
    clock = FakeClock()
    world = make_world(clock)
    world.add_pool(GROUP, SECONDARY, runners=1, busy=[(0.0, 300.0)])
    run_id = dispatch(world, labels=SECONDARY)
    advance_to(clock, 299.0)
    assert job_of(world, run_id)["status"] == "queued"
    advance_to(clock, 400.0)
    assert world.history[run_id].allocated_at == 300.0


def test_zero_runners_never_allocate():
    clock = FakeClock()
    world = make_world(clock)
    world.add_pool(GROUP, SECONDARY, runners=0)
    run_id = dispatch(world, labels=SECONDARY)
    advance_to(clock, 86_000.0)
    assert world.history[run_id].allocated_at is None


def test_cancel_of_a_queued_job_ends_without_runner():
    clock = FakeClock()
    world = make_world(clock, timings=Timings(cancel_delay=3.0))
    world.add_pool(GROUP, SECONDARY, runners=0)
    run_id = dispatch(world, labels=SECONDARY)
    advance_to(clock, 60.0)
    assert post(world, f"/actions/runs/{run_id}/cancel").status == 202
    advance_to(clock, 62.0)
    assert get(world, f"/actions/runs/{run_id}").json()["status"] == "queued"
    advance_to(clock, 63.0)
    run = get(world, f"/actions/runs/{run_id}").json()
    job = job_of(world, run_id)
    assert (run["status"], run["conclusion"]) == ("completed", "cancelled")
    assert (job["status"], job["conclusion"], job["runner_id"], job["steps"]) == (
        "completed",
        "cancelled",
        None,
        [],
    )
    history = world.history[run_id]
    assert (history.cancel_requested_at, history.completed_at, history.runner) == (60.0, 63.0, None)


def test_a_runner_freed_inside_the_cancel_delay_grabs_the_job():
    """The queue/start race: cancelled, but with a runner and steps as evidence."""
    clock = FakeClock()
    world = make_world(clock, timings=Timings(cancel_delay=20.0, start_delay=5.0))
    world.add_pool(GROUP, SECONDARY, runners=1, busy=[(0.0, 70.0)])
    run_id = dispatch(world, labels=SECONDARY)
    advance_to(clock, 60.0)
    assert post(world, f"/actions/runs/{run_id}/cancel").status == 202
    advance_to(clock, 100.0)
    job = job_of(world, run_id)
    assert job["conclusion"] == "cancelled"
    assert job["runner_name"] == "linux-amd64-cpu8-001"
    assert [(s["name"], s["conclusion"]) for s in job["steps"]] == [
        ("Set up job", "success"),
        ("Guard", "success"),
        ("Workload", "cancelled"),  # the race can interrupt a just-started job
    ]
    history = world.history[run_id]
    assert (history.allocated_at, history.started_at, history.completed_at) == (70.0, 75.0, 80.0)
    assert history.workload_started_at == 77.0
    ReposOwnerRepoActionsRunsRunIdJobsGetResponse200.model_validate_json(
        get(world, f"/actions/runs/{run_id}/jobs").body, strict=True, extra="forbid"
    )


def test_cancel_of_a_completed_run_is_409():
    clock = FakeClock()
    world = make_world(clock)
    run_id = dispatch(world)
    advance_to(clock, 500.0)
    reply = post(world, f"/actions/runs/{run_id}/cancel")
    assert reply.status == 409
    assert reply.json()["message"] == "Cannot cancel a workflow run that is completed."
    assert post(world, "/actions/runs/123/cancel").status == 404


def test_timeout_minutes_ends_the_job_timed_out():
    clock = FakeClock()
    world = make_world(clock, timings=Timings(timeout_minutes=1), workload=Workload(duration=600))
    run_id = dispatch(world)
    advance_to(clock, 1000.0)
    history = world.history[run_id]
    assert (history.conclusion, history.completed_at) == ("timed_out", 65.0)
    assert job_of(world, run_id)["conclusion"] == "timed_out"


def test_per_pool_workload_overrides_the_default():
    clock = FakeClock()
    world = make_world(clock)
    world.add_pool(GROUP, SECONDARY, workload=Workload(outcome="failure", duration=10.0))
    run_id = dispatch(world, labels=SECONDARY)
    advance_to(clock, 100.0)
    assert world.history[run_id].conclusion == "failure"


def test_completion_lags_show_run_and_job_disagreeing():
    clock = FakeClock()
    world = make_world(
        clock, timings=Timings(run_completion_lag=10.0), workload=Workload(duration=30)
    )
    run_id = dispatch(world)
    advance_to(clock, 45.0)  # really done at 42
    assert job_of(world, run_id)["status"] == "completed"
    assert get(world, f"/actions/runs/{run_id}").json()["status"] == "in_progress"
    advance_to(clock, 52.0)
    assert get(world, f"/actions/runs/{run_id}").json()["status"] == "completed"
    world2 = make_world(clock, timings=Timings(job_completion_lag=10.0))
    run2 = dispatch(world2)
    advance_to(clock, clock.monotonic() + 10.0)
    assert world2.request_cancel(run2) == 202
    advance_to(clock, clock.monotonic() + 5.0)
    assert get(world2, f"/actions/runs/{run2}").json()["conclusion"] == "cancelled"
    assert job_of(world2, run2)["status"] != "completed"


def test_etag_gives_304_until_the_run_changes():
    clock = FakeClock()
    world = make_world(clock)
    world.add_pool(GROUP, SECONDARY, runners=1, busy=[(0.0, 100.0)])
    run_id = dispatch(world, labels=SECONDARY)
    advance_to(clock, 10.0)
    first = get(world, f"/actions/runs/{run_id}")
    etag = first.headers["ETag"]
    advance_to(clock, 50.0)
    conditional = AUTH | {"If-None-Match": etag}
    again = get(world, f"/actions/runs/{run_id}", conditional)
    assert (again.status, again.body, again.headers["ETag"]) == (304, b"", etag)
    assert world.ledger[-1].counted is False
    advance_to(clock, 101.0)
    changed = get(world, f"/actions/runs/{run_id}", conditional)
    assert changed.status == 200
    assert changed.headers["ETag"] != etag
    assert changed.json()["updated_at"] != first.json()["updated_at"]
    assert changed.json()["updated_at"] == "2026-11-02T09:01:40Z"


def test_quota_exhaustion_answers_primary_rate_limit():
    clock = FakeClock()
    world = make_world(clock, quota=3)
    for _ in range(3):
        assert get(world, "/actions/runs/4242").status == 200
    limited = get(world, "/actions/runs/4242")
    assert limited.status == 403
    assert limited.headers["X-RateLimit-Remaining"] == "0"
    assert limited.headers["X-RateLimit-Limit"] == "3"
    reset = int(limited.headers["X-RateLimit-Reset"])
    assert reset == int(clock.now().timestamp()) + 3600
    assert "rate limit exceeded" in limited.json()["message"]
    other_client = world.handle(
        "GET", "/repos/octo-org/octo-repo/actions/runs/4242", {"Authorization": "token other"}
    )
    assert other_client.status == 403  # one quota per repository, shared by all tokens
    advance_to(clock, 3600.0)
    assert get(world, "/actions/runs/4242").status == 200
    assert [e.client for e in world.ledger] == [0, 0, 0, 0, 1, 0]
    assert world.counted_requests() == 4


def test_every_reply_carries_rate_limit_headers_and_request_id():
    world = make_world()
    reply = get(world, "/actions/runs/4242")
    assert reply.headers["X-RateLimit-Remaining"] == "999"
    assert reply.headers["X-RateLimit-Used"] == "1"
    assert reply.headers["X-RateLimit-Resource"] == "core"
    assert reply.headers["X-GitHub-Request-Id"] == world.ledger[-1].request_id
    assert world.handle("GET", "/repos/octo-org/octo-repo/actions/runs/4242", {}).status == 401


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"ref": "nope", "inputs": child_inputs()}, 422, "No ref found for: nope"),
        ({"ref": "main", "inputs": {"x": "1"}}, 422, 'Unexpected inputs provided: ["x"]'),
        (
            {"ref": "main", "inputs": {"request-id": "r"}},
            422,
            "Required input 'parent-run-id' not provided",
        ),
    ],
)
def test_dispatch_refusals(body, status, message):
    world = make_world()
    reply = post(world, "/actions/workflows/runner-worker.yml/dispatches", body)
    assert (reply.status, reply.json()["message"]) == (status, message)
    assert world.runs.keys() == {4242}


def test_dispatch_needs_a_workflow_dispatch_trigger():
    world = make_world()
    world.add_workflow("push-only.yml", dispatchable=False)
    reply = post(world, "/actions/workflows/push-only.yml/dispatches", {"ref": "main"})
    assert reply.json()["message"] == "Workflow does not have 'workflow_dispatch' trigger"


def test_run_identity_fields():
    clock = FakeClock()
    world = make_world(clock)
    run_id = dispatch(world, "req-77")
    advance_to(clock, 5.0)
    run = get(world, f"/actions/runs/{run_id}").json()
    assert run["display_title"] == "req-77"
    assert run["path"] == ".github/workflows/runner-worker.yml"
    assert (run["event"], run["run_attempt"]) == ("workflow_dispatch", 1)
    assert run["head_sha"] == world.refs["heads/main"]


def test_parent_cancel_and_rerun_at_chosen_times():
    clock = FakeClock()
    world = make_world(clock)
    world.add_parent_run(5000, visible_after=30.0)
    world.rerun_parent(4242, at=100.0)
    world.finish_parent(5000, "cancelled", at=50.0)
    assert get(world, "/actions/runs/5000").status == 404
    advance_to(clock, 30.0)
    assert get(world, "/actions/runs/5000").json()["status"] == "in_progress"
    advance_to(clock, 50.0)
    assert get(world, "/actions/runs/5000").json()["conclusion"] == "cancelled"
    advance_to(clock, 100.0)
    parent = get(world, "/actions/runs/4242").json()
    assert (parent["run_attempt"], parent["status"]) == (2, "in_progress")
    assert get(world, "/actions/runs/4242/attempts/1").json()["run_attempt"] == 1
    assert get(world, "/actions/runs/4242/attempts/3").status == 404


def test_source_ref_moves_at_a_chosen_time():
    clock = FakeClock()
    world = make_world(clock)
    before = get(world, "/git/ref/heads/feature").json()["object"]["sha"]
    new = world.move_ref("heads/feature", "f" * 40, at=120.0)
    advance_to(clock, 119.0)
    assert get(world, "/git/ref/heads/feature").json()["object"]["sha"] == before
    advance_to(clock, 120.0)
    assert get(world, "/git/ref/heads/feature").json()["object"]["sha"] == new == "f" * 40
    world.add_ref("pull/12/merge")
    assert get(world, "/git/ref/pull/12/merge").status == 200
    assert get(world, "/git/ref/heads/feat").status == 404  # exact match only


def test_workflow_change_gives_new_blob_and_commit():
    clock = FakeClock()
    world = make_world(clock)
    path = "/contents/.github/workflows/runner-worker.yml"
    old_commit = world.refs["heads/main"]
    old_blob = get(world, f"{path}?ref=main").json()["sha"]
    world.change_workflow(at=60.0)
    advance_to(clock, 60.0)
    assert get(world, f"{path}?ref=main").json()["sha"] != old_blob
    assert world.refs["heads/main"] != old_commit
    assert get(world, f"{path}?ref={old_commit}").json()["sha"] == old_blob
    run_id = dispatch(world)
    assert world.runs[run_id].head_sha == world.refs["heads/main"]


def test_worker_hook_sees_guard_environment_and_can_veto():
    clock = FakeClock()
    seen: list[WorkerContext] = []

    def guard(context: WorkerContext) -> bool:
        seen.append(context)
        reply = world.handle(
            "GET",
            "/repos/octo-org/octo-repo/actions/runs/4242",
            {"Authorization": f"Bearer {context.environ['INPUT_TOKEN']}"},
        )
        clock.sleep(5.0)  # the guard may poll on the same clock
        return bool(reply.json()["run_attempt"] == 2)  # a stale parent attempt: veto

    world = make_world(clock, on_worker_start=guard)
    run_id = dispatch(world)
    advance_to(clock, 500.0)
    (context,) = seen
    assert context.run_id == run_id
    assert context.environ["GITHUB_RUN_ID"] == str(run_id)
    assert context.environ["GITHUB_RUN_ATTEMPT"] == "1"
    assert context.environ["INPUT_PARENT-RUN-ID"] == "4242"
    assert context.environ["INPUT_SOURCE-REF"] == "refs/heads/feature"
    assert context.environ["GITHUB_API_URL"] == "https://api.github.test"
    assert json.loads(context.inputs["runner"])["labels"] == PRIMARY
    history = world.history[run_id]
    assert (history.guard_passed, history.workload_started_at, history.conclusion) == (
        False,
        None,
        "failure",
    )
    job = job_of(world, run_id)
    assert [(s["name"], s["conclusion"]) for s in job["steps"]] == [
        ("Set up job", "success"),
        ("Guard", "failure"),
        ("Workload", "skipped"),
    ]
    assert world.hook_errors == []
    (guard_request,) = [e for e in world.ledger if e.client == 1]  # the guard's token
    assert guard_request.time == history.started_at == 10.0  # it ran when its step started
    assert history.completed_at == 15.0  # after the guard's own 5 s of polling


def test_worker_hook_that_passes_lets_the_workload_run_and_a_crash_fails_it():
    clock = FakeClock()
    world = make_world(clock, on_worker_start=lambda _ctx: True)
    run_id = dispatch(world)
    advance_to(clock, 500.0)
    history = world.history[run_id]
    assert (history.started_at, history.workload_started_at, history.completed_at) == (10, 10, 70)
    assert history.conclusion == "success"

    def crash(_ctx: WorkerContext) -> bool:
        raise RuntimeError("guard crashed")

    broken = make_world(clock, on_worker_start=crash)
    run2 = dispatch(broken)
    advance_to(clock, 1000.0)
    assert broken.history[run2].conclusion == "failure"
    assert [str(e) for e in broken.hook_errors] == ["guard crashed"]


def test_each_accepted_cancel_is_kept_with_its_sender_and_the_world_as_it_stood():
    # what tells a started workload cancelled by its own coordinator, and why (invariant 11)
    clock = FakeClock()
    world = make_world(clock, workload=Workload(duration=600.0))
    inputs = child_inputs() | {"source-sha": world.refs["heads/feature"]}
    path = "/actions/workflows/runner-worker.yml/dispatches"
    early = post(world, path, {"ref": "main", "inputs": inputs | {"request-id": "req-0"}})
    first = early.json()["workflow_run_id"]
    advance_to(clock, 4.0)  # visible at 3 s, its job listed at 5 s
    assert post(world, f"/actions/runs/{first}/cancel").status == 202
    [queued] = world.history[first].cancel_requests
    assert queued.client == world.client_number("coordinator-token")
    assert (queued.allocated, queued.workload_started) == (False, False)
    assert (queued.parent_active, queued.source_moved) == (True, False)
    run_id = post(world, path, {"ref": "main", "inputs": inputs}).json()["workflow_run_id"]
    advance_to(clock, 30.0)  # its job listed at 9 s, the runner free at 7 s: the workload runs
    world.move_ref("heads/feature")
    world.finish_parent(4242, "cancelled")
    assert post(world, f"/actions/runs/{run_id}/force-cancel").status == 202
    [started] = world.history[run_id].cancel_requests
    assert started.at == 30.0
    assert started.force
    assert (started.allocated, started.workload_started) == (True, True)
    assert (started.parent_active, started.source_moved) == (False, True)
    advance_to(clock, 40.0)
    assert post(world, f"/actions/runs/{run_id}/cancel").status == 409
    assert len(world.history[run_id].cancel_requests) == 1, "a refused cancel is not kept"
