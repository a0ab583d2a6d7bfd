"""Helpers shared by the simulator tests (no tests here)."""

from __future__ import annotations

import json
from typing import Any

from runner_queue_fallback.core.clock import Clock, FakeClock
from runner_queue_fallback.fake_github import FakeGitHub, Reply, Timings, Workload

REPO = "/repos/octo-org/octo-repo"
API_VERSION = "2026-03-10"  # what our client (and githubkit) asks for
AUTH = {"Authorization": "Bearer coordinator-token", "X-GitHub-Api-Version": API_VERSION}
GROUP = "nv-cpu-general"
PRIMARY = "linux-amd64-cpu16"
SECONDARY = "linux-amd64-cpu8"


def runner(labels: str = PRIMARY, group: str = GROUP) -> str:
    return json.dumps({"group": group, "labels": labels}, separators=(",", ":"))


def child_inputs(request_id: str = "req-1", labels: str = PRIMARY) -> dict[str, str]:
    return {
        "request-id": request_id,
        "parent-run-id": "4242",
        "parent-run-attempt": "1",
        "source-ref": "refs/heads/feature",
        "source-sha": "0" * 40,
        "runner": runner(labels),
        "workload": "{}",
    }


def make_world(clock: Clock | None = None, **kwargs: Any) -> FakeGitHub:
    kwargs.setdefault("timings", Timings())
    kwargs.setdefault("workload", Workload(duration=60.0))
    world = FakeGitHub(clock or FakeClock(), **kwargs)
    world.add_workflow()
    world.add_ref("heads/feature")
    world.add_pool(GROUP, PRIMARY, runners=1)
    world.add_parent_run(4242)
    return world


def get(world: FakeGitHub, path: str, headers: dict[str, str] | None = None) -> Reply:
    return world.handle("GET", REPO + path, headers or AUTH)


def post(world: FakeGitHub, path: str, payload: Any = None) -> Reply:
    body = b"" if payload is None else json.dumps(payload).encode()
    return world.handle("POST", REPO + path, AUTH, body)


def dispatch(world: FakeGitHub, request_id: str = "req-1", labels: str = PRIMARY) -> int:
    reply = post(
        world,
        "/actions/workflows/runner-worker.yml/dispatches",
        {"ref": "main", "inputs": child_inputs(request_id, labels)},
    )
    assert reply.status == 200, reply.body
    run_id: int = reply.json()["workflow_run_id"]
    return run_id


def job_of(world: FakeGitHub, run_id: int) -> dict[str, Any]:
    jobs = get(world, f"/actions/runs/{run_id}/jobs").json()["jobs"]
    assert len(jobs) == 1, jobs
    job: dict[str, Any] = jobs[0]
    return job


def advance_to(clock: FakeClock, at: float) -> None:
    clock.advance(max(0.0, at - clock.monotonic()))
