"""Every body the fake serves validates strictly against GitHub's official 2026-03-10 models."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from githubkit_schemas.v2026_03_10.models import (
    BasicError,
    ContentFile,
    EmptyObject,
    GitRef,
    GitTag,
    Job,
    ReposOwnerRepoActionsRunsRunIdAttemptsAttemptNumberJobsGetResponse200,
    ReposOwnerRepoActionsRunsRunIdJobsGetResponse200,
    ReposOwnerRepoActionsWorkflowsWorkflowIdRunsGetResponse200,
    WorkflowDispatchResponse,
    WorkflowRun,
)

from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github import Timings, Workload
from tests.test_sim_support import (
    PRIMARY,
    SECONDARY,
    advance_to,
    child_inputs,
    dispatch,
    get,
    make_world,
    post,
)

if TYPE_CHECKING:
    from pydantic import BaseModel


def strict(model: type[BaseModel], body: bytes) -> Any:
    return model.model_validate_json(body, strict=True, extra="forbid")


def check_run_and_jobs(world, run_id: int) -> tuple[Any, Any]:
    run = get(world, f"/actions/runs/{run_id}")
    assert run.status == 200
    strict(WorkflowRun, run.body)
    jobs = get(world, f"/actions/runs/{run_id}/jobs")
    strict(ReposOwnerRepoActionsRunsRunIdJobsGetResponse200, jobs.body)
    attempt = get(world, f"/actions/runs/{run_id}/attempts/1")
    strict(WorkflowRun, attempt.body)
    attempt_jobs = get(world, f"/actions/runs/{run_id}/attempts/1/jobs")
    strict(ReposOwnerRepoActionsRunsRunIdAttemptsAttemptNumberJobsGetResponse200, attempt_jobs.body)
    for job in jobs.json()["jobs"]:
        strict(Job, json.dumps(job).encode())
    return run.json(), jobs.json()


def test_every_phase_of_a_child_run_validates():
    """404, zero jobs, queued, allocated, running with steps, success: all official shapes."""
    clock = FakeClock()
    world = make_world(clock)
    reply = post(
        world,
        "/actions/workflows/runner-worker.yml/dispatches",
        {"ref": "main", "inputs": child_inputs()},
    )
    strict(WorkflowDispatchResponse, reply.body)
    run_id = reply.json()["workflow_run_id"]
    missing = get(world, f"/actions/runs/{run_id}")
    assert missing.status == 404
    strict(BasicError, missing.body)
    seen = []
    for at in (3.0, 5.0, 6.0, 11.0, 13.0, 80.0):
        advance_to(clock, at)
        run, jobs = check_run_and_jobs(world, run_id)
        job = jobs["jobs"][0] if jobs["jobs"] else None
        seen.append((run["status"], job and job["status"], job and len(job["steps"])))
    assert seen == [
        ("queued", None, None),
        ("in_progress", "in_progress", 0),  # allocated at once: the pool is free
        ("in_progress", "in_progress", 0),
        ("in_progress", "in_progress", 2),  # set up + guard
        ("in_progress", "in_progress", 3),  # workload running
        ("completed", "completed", 3),
    ]


@pytest.mark.parametrize("outcome", ["success", "failure"])
def test_completed_runs_validate(outcome):
    clock = FakeClock()
    world = make_world(clock, workload=Workload(outcome=outcome, duration=30.0))
    run_id = dispatch(world)
    advance_to(clock, 100.0)
    run, jobs = check_run_and_jobs(world, run_id)
    assert (run["conclusion"], jobs["jobs"][0]["conclusion"]) == (outcome, outcome)


def test_cancelled_without_and_with_runner_validate():
    clock = FakeClock()
    world = make_world(clock, timings=Timings(cancel_delay=4.0))
    world.add_pool("nv-cpu-general", SECONDARY, runners=0)
    idle = dispatch(world, "idle", SECONDARY)
    busy = dispatch(world, "busy", PRIMARY)
    advance_to(clock, 20.0)
    assert post(world, f"/actions/runs/{idle}/cancel").status == 202
    assert post(world, f"/actions/runs/{busy}/force-cancel").status == 202
    strict(EmptyObject, post(world, f"/actions/runs/{idle}/cancel").body)
    advance_to(clock, 30.0)
    _, idle_jobs = check_run_and_jobs(world, idle)
    _, busy_jobs = check_run_and_jobs(world, busy)
    assert idle_jobs["jobs"][0]["runner_id"] is None
    assert idle_jobs["jobs"][0]["steps"] == []
    assert busy_jobs["jobs"][0]["runner_name"] is not None
    assert busy_jobs["jobs"][0]["conclusion"] == "cancelled"
    conflict = post(world, f"/actions/runs/{idle}/cancel")
    assert conflict.status == 409
    strict(BasicError, conflict.body)


def test_parent_runs_lists_refs_contents_and_errors_validate():
    clock = FakeClock()
    world = make_world(clock, path_with_ref=True)
    dispatch(world)
    advance_to(clock, 10.0)
    strict(WorkflowRun, get(world, "/actions/runs/4242").body)
    world.rerun_parent(4242)
    strict(WorkflowRun, get(world, "/actions/runs/4242/attempts/1").body)
    rerun = strict(WorkflowRun, get(world, "/actions/runs/4242/attempts/2").body)
    assert rerun.previous_attempt_url.endswith("/attempts/1")
    runs = get(world, "/actions/workflows/runner-worker.yml/runs?event=workflow_dispatch")
    listing = strict(ReposOwnerRepoActionsWorkflowsWorkflowIdRunsGetResponse200, runs.body)
    assert listing.workflow_runs[0].path == ".github/workflows/runner-worker.yml@main"
    strict(GitRef, get(world, "/git/ref/heads/feature").body)
    strict(ContentFile, get(world, "/contents/.github/workflows/runner-worker.yml?ref=main").body)
    for path in ("/git/ref/heads/nope", "/actions/runs/1", "/nope", "/contents/x.yml"):
        reply = get(world, path)
        assert reply.status == 404
        assert strict(BasicError, reply.body).status == "404"


def test_annotated_tags_validate_and_point_through_a_tag_object():
    """An annotated tag's ref names a tag object; GET git/tags/{sha} gives the commit."""
    world = make_world(FakeClock())
    commit = world.refs["heads/main"]
    tag_sha = world.add_annotated_tag("v1", commit)
    ref = strict(GitRef, get(world, "/git/ref/tags/v1").body)
    assert (ref.object_.type, ref.object_.sha) == ("tag", tag_sha)
    tag = strict(GitTag, get(world, f"/git/tags/{tag_sha}").body)
    assert (tag.object_.type, tag.object_.sha) == ("commit", commit)
    assert get(world, f"/git/tags/{'0' * 40}").status == 404
