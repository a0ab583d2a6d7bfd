"""Where GitHub is less kind than a naive fake: API versions, odd job shapes, pending runs."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
import requests
from githubkit_schemas.v2026_03_10.models import (
    BasicError,
    Job,
    ReposOwnerRepoActionsRunsRunIdJobsGetResponse200,
    WorkflowRun,
)

from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github import ParentSpec, Scenario, Timings, Workload
from tests.test_sim_support import (
    AUTH,
    GROUP,
    REPO,
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

    from runner_queue_fallback.fake_github import FakeGitHub, Reply

DISPATCH = "/actions/workflows/runner-worker.yml/dispatches"


def strict(model: type[BaseModel], body: bytes) -> Any:
    return model.model_validate_json(body, strict=True, extra="forbid")


def send(world: FakeGitHub, headers: dict[str, str], payload: dict[str, Any]) -> Reply:
    return world.handle("POST", REPO + DISPATCH, headers, json.dumps(payload).encode())


# ------------------------------------------------------------------------------ API version


def test_without_the_version_header_dispatch_answers_204_with_no_body():
    """GitHub serves 2022-11-28 to a request without `X-GitHub-Api-Version`: 204, no run ID."""
    clock = FakeClock()
    world = make_world(clock)
    bare = {"Authorization": AUTH["Authorization"]}
    reply = send(world, bare, {"ref": "main", "inputs": child_inputs("old-1")})
    assert (reply.status, reply.body) == (204, b"")
    assert reply.headers["X-GitHub-Api-Version-Selected"] == "2022-11-28"
    assert "Content-Type" not in reply.headers
    advance_to(clock, 10.0)  # the run was created all the same
    assert [r.display_title for r in world.runs.values() if r.history] == ["old-1"]
    run = world.handle("GET", f"{REPO}/actions/runs/4242", bare)
    assert run.status == 200
    assert run.headers["X-GitHub-Api-Version-Selected"] == "2022-11-28"


def test_2022_11_28_gives_run_details_only_when_asked():
    world = make_world()
    old = AUTH | {"X-GitHub-Api-Version": "2022-11-28"}
    assert send(world, old, {"ref": "main", "inputs": child_inputs("a")}).status == 204
    asked = send(
        world, old, {"ref": "main", "inputs": child_inputs("b"), "return_run_details": True}
    )
    assert asked.status == 200
    assert world.runs[asked.json()["workflow_run_id"]].display_title == "b"


def test_2026_03_10_dispatch_answers_200_with_run_details():
    world = make_world()
    reply = send(world, AUTH, {"ref": "main", "inputs": child_inputs()})
    assert reply.status == 200
    assert reply.headers["X-GitHub-Api-Version-Selected"] == "2026-03-10"
    assert set(reply.json()) == {"workflow_run_id", "run_url", "html_url"}


@pytest.mark.parametrize("version", ["1999-01-01", "", "2026-03-11"])
def test_an_unsupported_version_answers_400_and_does_nothing(version):
    world = make_world()
    headers = AUTH | {"X-GitHub-Api-Version": version}
    reply = send(world, headers, {"ref": "main", "inputs": child_inputs()})
    assert reply.status == 400
    assert "is not a supported version" in strict(BasicError, reply.body).message
    assert "X-GitHub-Api-Version-Selected" not in reply.headers
    assert [r for r in world.runs.values() if r.history] == []
    run = world.handle("GET", f"{REPO}/actions/runs/4242", headers)
    assert run.status == 400
    assert world.ledger[-1].status == 400


# ------------------------------------------------------------- a job that never got a runner


def zero_world(clock: FakeClock, *, zero: bool) -> FakeGitHub:
    world = make_world(clock, timings=Timings(cancel_delay=4.0), unassigned_runner_as_zero=zero)
    world.add_pool(GROUP, SECONDARY, runners=0)
    return world


def jobs_of(world: FakeGitHub, run_id: int) -> list[dict[str, Any]]:
    reply = get(world, f"/actions/runs/{run_id}/jobs")
    strict(ReposOwnerRepoActionsRunsRunIdJobsGetResponse200, reply.body)
    jobs: list[dict[str, Any]] = reply.json()["jobs"]
    for job in jobs:
        strict(Job, json.dumps(job).encode())
    return jobs


def test_a_job_cancelled_before_it_got_a_runner_can_show_runner_zero():
    """GitHub has answered `runner_id: 0`, `runner_name: ""`, `steps: []` for such a job."""
    clock = FakeClock()
    world = zero_world(clock, zero=True)
    idle = dispatch(world, "idle", SECONDARY)
    busy = dispatch(world, "busy")
    advance_to(clock, 20.0)
    queued = jobs_of(world, idle)[0]
    assert (queued["status"], queued["runner_id"], queued["runner_name"]) == ("queued", None, None)
    for run_id in (idle, busy):
        assert post(world, f"/actions/runs/{run_id}/cancel").status == 202
    advance_to(clock, 30.0)
    job = jobs_of(world, idle)[0]
    assert (job["status"], job["conclusion"]) == ("completed", "cancelled")
    assert (job["runner_id"], job["runner_name"], job["steps"]) == (0, "", [])
    served = jobs_of(world, busy)[0]  # a job that had a runner keeps it
    assert served["runner_id"] > 0
    assert served["runner_name"] == "linux-amd64-cpu16-001"
    assert served["steps"] != []


def test_a_run_cancelled_before_its_job_was_listed_also_shows_runner_zero():
    clock = FakeClock()
    world = zero_world(clock, zero=True)
    run_id = dispatch(world, "early", SECONDARY)
    advance_to(clock, 3.0)  # visible, job not listed yet
    assert jobs_of(world, run_id) == []
    assert post(world, f"/actions/runs/{run_id}/cancel").status == 202
    advance_to(clock, 10.0)
    job = jobs_of(world, run_id)[0]
    assert (job["conclusion"], job["runner_id"], job["runner_name"]) == ("cancelled", 0, "")


def test_by_default_an_unassigned_cancelled_job_shows_nulls():
    clock = FakeClock()
    world = zero_world(clock, zero=False)
    idle = dispatch(world, "idle", SECONDARY)
    advance_to(clock, 20.0)
    post(world, f"/actions/runs/{idle}/cancel")
    advance_to(clock, 30.0)
    job = jobs_of(world, idle)[0]
    assert (job["conclusion"], job["runner_id"], job["runner_name"]) == ("cancelled", None, None)


# ---------------------------------------------------------------------- requested, pending


def run_and_jobs(world: FakeGitHub, run_id: int) -> tuple[str, int]:
    reply = get(world, f"/actions/runs/{run_id}")
    status: str = strict(WorkflowRun, reply.body).status
    return status, len(jobs_of(world, run_id))


def test_pending_delay_shows_a_pending_run_with_no_job_before_queued():
    clock = FakeClock()
    timings = Timings(visibility_delay=3.0, pending_delay=30.0, jobs_delay=2.0)
    world = make_world(clock, timings=timings)
    world.add_pool(GROUP, SECONDARY, runners=0)
    run_id = dispatch(world, "p", SECONDARY)
    seen = []
    for at in (3.0, 20.0, 32.9, 33.0, 35.0):
        advance_to(clock, at)
        seen.append((at, *run_and_jobs(world, run_id)))
    assert seen == [
        (3.0, "pending", 0),
        (20.0, "pending", 0),
        (32.9, "pending", 0),
        (33.0, "queued", 0),
        (35.0, "queued", 1),  # the job is listed jobs_delay after the run is queued
    ]
    assert world.history[run_id].job_queued_at == 35.0
    assert world.runs[run_id].updated_at == 33.0


def test_requested_then_pending_then_queued():
    clock = FakeClock()
    timings = Timings(visibility_delay=3.0, requested_delay=5.0, pending_delay=10.0)
    world = make_world(clock, timings=timings)
    run_id = dispatch(world)
    statuses = []
    for at in (3.0, 8.0, 18.0, 20.0):
        advance_to(clock, at)
        statuses.append(run_and_jobs(world, run_id))
    assert statuses == [("requested", 0), ("pending", 0), ("queued", 0), ("in_progress", 1)]


def test_a_run_cancelled_while_pending_completes_cancelled_and_stays_so():
    clock = FakeClock()
    world = make_world(clock, timings=Timings(pending_delay=60.0, cancel_delay=3.0))
    run_id = dispatch(world)
    advance_to(clock, 10.0)
    assert run_and_jobs(world, run_id) == ("pending", 0)
    assert post(world, f"/actions/runs/{run_id}/cancel").status == 202
    advance_to(clock, 120.0)  # past the end of the pending delay: it does not come back
    run = get(world, f"/actions/runs/{run_id}").json()
    assert (run["status"], run["conclusion"]) == ("completed", "cancelled")
    assert world.history[run_id].allocated_at is None


def test_scenario_timings_and_a_pending_parent_validate():
    scenario = Scenario.from_mapping(
        {
            "timings": {"pending_delay": 12},
            "unassigned_runner_as_zero": True,
            "parent": {"status": "pending"},
        }
    )
    assert scenario.timings.pending_delay == 12.0
    world = scenario.build(FakeClock())
    assert world.unassigned_runner_as_zero is True
    parent = strict(WorkflowRun, get(world, "/actions/runs/4242").body)
    assert parent.status == "pending"
    queued = Scenario(parent=ParentSpec(status="queued")).build(FakeClock())
    assert strict(WorkflowRun, get(queued, "/actions/runs/4242").body).status == "queued"


# -------------------------------------------------------------------------- module split


def test_the_split_keeps_every_import_path():
    from runner_queue_fallback.fake_github import WorkerContext as Exported  # noqa: PLC0415
    from runner_queue_fallback.fake_github.actions import (  # noqa: PLC0415
        CHILD_INPUTS,
        ActionsModel,
        DispatchRefused,
        WorkerContext,
        WorkerHook,
    )
    from runner_queue_fallback.fake_github.hooks import HookRunner  # noqa: PLC0415
    from runner_queue_fallback.fake_github.repo import RepoContent  # noqa: PLC0415

    assert WorkerContext is Exported
    assert issubclass(ActionsModel, RepoContent)
    assert issubclass(ActionsModel, HookRunner)
    assert len(CHILD_INPUTS) == 7
    assert DispatchRefused(422, "x").status == 422
    assert WorkerHook is not None


def test_repository_content_works_on_its_own():
    from runner_queue_fallback.fake_github.repo import RepoContent  # noqa: PLC0415

    repo = RepoContent("trunk")
    blob = repo.add_workflow("w.yml", "trunk")
    commit = repo.refs["heads/trunk"]
    tag = repo.add_annotated_tag("v1")
    assert repo.resolve("v1") == ("tags/v1", commit)
    assert repo.peel(tag) == commit
    assert repo.commits[commit][".github/workflows/w.yml"].sha == blob
    repo.change_workflow("w.yml", "trunk")
    assert repo.refs["heads/trunk"] != commit
    with pytest.raises(ValueError, match="no timeline"):
        repo.move_ref("heads/trunk", at=5.0)


def test_the_moved_repository_methods_still_schedule_on_the_model():
    clock = FakeClock()
    world = make_world(clock)
    old = world.refs["heads/feature"]
    new = world.move_ref("heads/feature", at=50.0)
    advance_to(clock, 49.0)
    assert world.refs["heads/feature"] == old
    advance_to(clock, 50.0)
    assert world.refs["heads/feature"] == new


# ------------------------------------------------------------------------------------ waste


def test_each_reply_is_serialised_once_and_user_and_repo_are_built_once(monkeypatch):
    world = make_world(workload=Workload(duration=60.0))
    calls: list[int] = []
    real_dumps = json.dumps

    def counting(obj: Any, **kwargs: Any) -> str:
        calls.append(1)
        return real_dumps(obj, **kwargs)

    monkeypatch.setattr(json, "dumps", counting)  # the module world.py serialises with
    first = get(world, "/actions/runs/4242")
    assert (first.status, len(calls)) == (200, 1)
    again = get(world, "/actions/runs/4242", AUTH | {"If-None-Match": first.headers["ETag"]})
    assert (again.status, len(calls)) == (304, 2)
    monkeypatch.undo()

    render = world.render
    shared = render.run(world.runs[4242])
    assert shared["actor"] is shared["triggering_actor"] is render.run(world.runs[4242])["actor"]
    assert shared["repository"] is shared["head_repository"]
    copy = render.repo()  # the public builders hand out copies: the shared ones stay intact
    copy["owner"]["login"] = "mallory"
    assert render.run(world.runs[4242])["repository"]["owner"]["login"] == "octo-org"


def test_loopback_answers_a_versionless_dispatch_with_a_bare_204():
    world = make_world()
    bare = {"Authorization": AUTH["Authorization"]}
    with world.serve() as url, requests.Session() as http:
        reply = http.post(
            f"{url}{REPO}{DISPATCH}",
            json={"ref": "main", "inputs": child_inputs()},
            headers=bare,
            timeout=10,
        )
        assert (reply.status_code, reply.content) == (204, b"")
        assert "Content-Length" not in reply.headers
        again = http.get(f"{url}{REPO}/actions/runs/4242", headers=bare, timeout=10)
        assert again.json()["id"] == 4242  # the kept-alive connection still reads right


def test_the_compare_endpoint_reads_names_as_git_does_and_says_how_head_stands():
    """`GET .../compare/{base}...{head}` (issue 44): identical, ahead, behind, diverged from the
    commits' parents; a bare name is a tag before a branch (git's order), a full ref is exact;
    a name that resolves to nothing is 404."""
    clock = FakeClock()
    world = make_world(clock)
    old = world.refs["heads/main"]
    tag = world.add_ref("tags/main")  # a commit on top of main's, under a tag named main
    world.change_workflow("runner-worker.yml", "main")
    new = world.refs["heads/main"]

    def compare(basehead: str) -> tuple[int, Any]:
        reply = get(world, f"/compare/{basehead}")
        return reply.status, json.loads(reply.body)

    status, body = compare(f"{old}...refs/heads/main")
    assert (status, body["status"], body["ahead_by"], body["behind_by"]) == (200, "ahead", 1, 0)
    assert [c["sha"] for c in body["commits"]] == [new]
    assert [c["sha"] for c in body["commits"][0]["parents"]] == [old]
    assert [(f["filename"], f["status"]) for f in body["files"]] == [
        (".github/workflows/runner-worker.yml", "modified")
    ]
    assert compare(f"{new}...refs/heads/main")[1]["status"] == "identical"
    assert compare(f"{tag}...refs/heads/main")[1]["status"] == "diverged"
    assert compare(f"{new}...{old}")[1]["status"] == "behind"
    assert [c["sha"] for c in compare(f"{old}...main")[1]["commits"]] == [tag]  # not `new`
    _, bare = compare(f"{new}...main")  # the tag `main`, not the branch
    assert (bare["status"], bare["merge_base_commit"]["sha"]) == ("diverged", old)
    assert compare(f"{old}...refs/heads/nowhere")[0] == 404
    assert compare(f"{old}..refs/heads/main")[0] == 404
