"""Issue 19: an older GitHub Enterprise Server (no API version 2026-03-10, dispatch answers 204).

Every test drives the real steps through `cli.main` against the fake GitHub set up as an older
server (`api_versions=OLDER_SERVER`), and judges them by what the fake saw: the requests it got,
the version header each one asked for, the runs it created.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github import DispatchRefused, Timings
from runner_queue_fallback.fake_github.model import fake_token
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import OLDER_SERVER, FakeGitHub
from runner_queue_fallback.tools.simulate.steps import (
    PARENT_RUN_ID,
    SOURCE_REF,
    TOKEN,
    guard_hook,
    run_coordinator,
    standard_world,
)
from tests.invariants import check_invariants, dispatch_posts

NEWER = "2026-03-10"
OLDER = "2022-11-28"
BUSY = (0.0, 10.0**9)
CPU16 = {"group": "nv-cpu-general", "labels": "linux-amd64-cpu16"}
CPU8 = {"group": "nv-cpu-general", "labels": "linux-amd64-cpu8"}


@dataclass(frozen=True)
class Seen:
    """One request as the fake received it."""

    method: str
    path: str
    version: str | None
    status: int
    coordinator: bool  # sent with the coordinator's token (not the guard's, in the child)


def record_versions(world: FakeGitHub) -> list[Seen]:
    """Wrap the fake's one entry point: keep each request's API version header and status."""
    seen: list[Seen] = []
    real = world.handle

    def handle(
        method: str, path_and_query: str, headers: Mapping[str, str], body: bytes = b""
    ) -> Reply:
        lowered = {k.lower(): v for k, v in headers.items()}
        version = lowered.get("x-github-api-version")
        ours = lowered.get("authorization", "").endswith(TOKEN)
        reply = real(method, path_and_query, headers, body)
        seen.append(
            Seen(method, path_and_query.split("?", maxsplit=1)[0], version, reply.status, ours)
        )
        return reply

    world.handle = handle  # type: ignore[method-assign]  # the adapters look it up per request
    return seen


def older_world(
    clock: FakeClock, *, listing_delay: float = 0.0, cpu16_busy: bool = True
) -> tuple[FakeGitHub, str]:
    """An older server with CPU16 (busy, or free) and CPU8 (free) pools and the real guard."""
    world = FakeGitHub(
        clock, api_versions=OLDER_SERVER, timings=Timings(listing_delay=listing_delay)
    )
    world, sha = standard_world(clock, world)
    world.add_pool(CPU16["group"], CPU16["labels"], busy=[BUSY] if cpu16_busy else [])
    world.add_pool(CPU8["group"], CPU8["labels"])
    world.on_worker_start = guard_hook(world, clock, [], main=cli.main)
    return world, sha


def inputs(sha: str, **changes: str) -> dict[str, str]:
    """Two candidates (CPU16 for 1 minute, then CPU8), auto API version unless changed."""
    values = {
        "workflow": "runner-worker.yml",
        "workflow-ref": "main",
        "source-ref": SOURCE_REF,
        "source-sha": sha,
        "runner-type": "cpu",
        "queue-timeout-minutes": "1",
        "execution-timeout-minutes": "15",
        "runners": json.dumps([CPU16, CPU8]),
    }
    values.update(changes)
    return values


def kids(world: FakeGitHub) -> list[int]:
    """The child runs, in dispatch order (the parent is not a child)."""
    return [run_id for run_id in sorted(world.history) if run_id != PARENT_RUN_ID]


# -- auto against an older server ----------------------------------------------------------------


def test_auto_against_an_older_server_falls_back_and_succeeds():
    """auto: the first 400 moves the run to 2022-11-28; one POST per candidate; the job succeeds."""
    clock = FakeClock()
    world, sha = older_world(clock)
    everything = record_versions(world)
    run = run_coordinator(world, clock, inputs(sha), main=cli.main)
    assert run.exit_code == 0, run.log
    check_invariants(world, run, candidates=2)
    seen = [s for s in everything if s.coordinator]  # the main and post steps
    guard = [s for s in everything if not s.coordinator]  # the guard detects on its own
    assert (guard[0].version, guard[0].status) == (NEWER, 400)
    assert all(s.version == OLDER for s in guard[1:])
    assert len(dispatch_posts(world)) == 2  # exactly one dispatch POST per candidate
    posts = [s for s in seen if s.method == "POST" and s.path.endswith("/dispatches")]
    assert [s.status for s in posts] == [204, 204]
    # The first request was refused for its version; nothing after it asked for 2026-03-10.
    assert (seen[0].version, seen[0].status) == (NEWER, 400)
    assert all(s.version == OLDER for s in seen[1:]), [s for s in seen[1:] if s.version != OLDER]
    assert run.log.count("refused API version 2026-03-10") == 1  # logged once
    assert run.state["api-version"] == OLDER
    outcomes = [a["outcome"] for a in json.loads(run.outputs["attempts-json"])]
    assert outcomes == ["cancelled before a runner (queue timeout)", "run success, worker success"]
    assert run.outputs["run-id"] == str(kids(world)[-1])
    assert "GitHub REST API version: 2022-11-28" in run.summary


def test_a_server_that_ignores_the_version_header_is_treated_the_same_way():
    """A 204 dispatch under 2026-03-10 moves the run to 2022-11-28; the child is found by name."""
    clock = FakeClock()
    world, sha = older_world(clock, cpu16_busy=False)
    world.api_versions = frozenset({OLDER, NEWER})
    real = world.handle

    def ignore_the_header(
        method: str, path_and_query: str, headers: Mapping[str, str], body: bytes = b""
    ) -> Reply:
        kept = {k: v for k, v in headers.items() if k.lower() != "x-github-api-version"}
        return real(method, path_and_query, kept, body)  # served as the default, 2022-11-28

    world.handle = ignore_the_header  # type: ignore[method-assign]  # looked up per request
    everything = record_versions(world)
    run = run_coordinator(world, clock, inputs(sha), main=cli.main)
    seen = [s for s in everything if s.coordinator]
    assert run.exit_code == 0, run.log
    assert len(dispatch_posts(world)) == 1
    post = next(i for i, s in enumerate(seen) if s.method == "POST")
    assert seen[post].version == NEWER
    assert all(s.version == OLDER for s in seen[post + 1 :])
    assert "answered a dispatch with 204 No Content" in run.log
    assert run.state["api-version"] == OLDER


def test_a_run_listed_late_inside_the_window_is_found_and_watched():
    """Listed 90 s after dispatch: found by the search at its 5 s cadence, never re-dispatched."""
    clock = FakeClock()
    world, sha = older_world(clock, listing_delay=90.0, cpu16_busy=False)
    seen = record_versions(world)
    run = run_coordinator(world, clock, inputs(sha), main=cli.main)
    assert run.exit_code == 0, run.log
    assert len(dispatch_posts(world)) == 1
    searches = [s for s in seen if s.path.endswith("/workflows/runner-worker.yml/runs")]
    dispatched = world.history[kids(world)[0]].dispatched_at
    found_at = dispatched + world.timings.visibility_delay + 90.0
    assert 15 <= len(searches) <= 20  # at 15 s, then every 5 s until it is listed
    assert f"Found run {kids(world)[0]} named" in run.log
    # Unchanged pages cost nothing: the same URL each time, answered 304.
    assert sum(1 for s in searches if s.status == 304) >= len(searches) - 2
    assert run.outputs["run-id"] == str(kids(world)[0])
    assert found_at <= dispatched + 120


def test_a_run_never_listed_in_the_window_stops_without_a_second_dispatch():
    """Not listed within 2 minutes: the error names the request id; the post step finds it later."""
    clock = FakeClock()
    world, sha = older_world(clock, listing_delay=150.0)
    run = run_coordinator(world, clock, inputs(sha), main=cli.main)
    assert run.exit_code == 1
    assert len(dispatch_posts(world)) == 1  # never a second dispatch, never another pool
    (child,) = kids(world)
    request_id = world.runs[child].inputs["request-id"]
    error = next(line for line in run.log.splitlines() if line.startswith("::error"))
    assert f"no run with run-name {request_id} appeared within 2 minutes" in error
    assert "dispatch" in error
    assert "not dispatched again" in error
    # The post step keeps looking: the run is listed 153 s after dispatch; it is found and cancelled.
    assert f"Found run {child} with run-name {request_id}" in run.post_log, run.post_log
    assert f"cleanup confirmed: child run {child}" in run.post_log
    assert world.runs[child].finished
    assert run.post_exit_code == 0
    check_invariants(world, run, candidates=2)


def test_a_run_that_never_appears_is_named_by_the_post_step():
    """Never listed: the post step searches for 2 minutes and names the run-name to check by hand."""
    clock = FakeClock()
    world, sha = older_world(clock, listing_delay=10.0**6)
    seen = record_versions(world)
    run = run_coordinator(world, clock, inputs(sha), main=cli.main)
    assert run.exit_code == 1
    assert len(dispatch_posts(world)) == 1
    (child,) = kids(world)
    request_id = world.runs[child].inputs["request-id"]
    assert f"No run with run-name {request_id} was found" in run.post_log
    post_start = run.post_log_lines[0][0]
    post_searches = [s for s in seen if s.path.endswith("/runs")][-1]
    assert post_searches.status in {200, 304}
    assert run.post_log_lines[-1][0] - post_start <= 120 + 1e-6
    check_invariants(world, run, candidates=2)


# -- a pinned version and a wrong value ------------------------------------------------------------


def test_api_version_2026_03_10_against_an_older_server_fails_before_dispatch():
    """Pinned 2026-03-10: the first request's 400 ends the run, naming the input; nothing is sent."""
    clock = FakeClock()
    world, sha = older_world(clock)
    run = run_coordinator(world, clock, inputs(sha, **{"api-version": NEWER}), main=cli.main)
    assert run.exit_code == 1
    assert dispatch_posts(world) == []
    error = next(line for line in run.log.splitlines() if line.startswith("::error"))
    assert "input 'api-version'" in error
    assert "2026-03-10" in error
    assert "2022-11-28" in error  # the fix
    assert run.post_exit_code == 0


@pytest.mark.parametrize("value", ["2024-01-01", "AUTO", "2026-03-10x", "latest"])
def test_a_wrong_api_version_is_an_input_error_with_no_request(value: str):
    """A value outside auto, 2026-03-10 and 2022-11-28: exit 2, one error naming it, no request."""
    clock = FakeClock()
    world, sha = older_world(clock)
    run = run_coordinator(
        world, clock, inputs(sha, **{"api-version": value}), post_step=False, main=cli.main
    )
    assert run.exit_code == 2
    assert world.ledger == []
    assert "input 'api-version' is not one of the allowed values" in run.log
    assert "auto, 2026-03-10, 2022-11-28" in run.log


# -- the guard on an older server ------------------------------------------------------------------


def _guard(world: FakeGitHub, clock: FakeClock, run_id: int, **changes: str) -> tuple[int, str]:
    environ = {
        "GITHUB_RUN_ID": str(run_id),
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_REPOSITORY": world.repository,
        "GITHUB_API_URL": world.api_url,
        "INPUT_TOKEN": fake_token("guard_token"),
    }
    for name in ("request-id", "parent-run-id", "parent-run-attempt", "source-ref", "source-sha"):
        environ[f"INPUT_{name.upper()}"] = world.runs[run_id].inputs[name]
    environ.update({f"INPUT_{k.upper()}": v for k, v in changes.items()})
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["guard"], environ, clock=clock, session=world.session())
    return code, out.getvalue()


def _dispatch(world: FakeGitHub, sha: str) -> int:
    run = world.dispatch(
        "runner-worker.yml",
        "main",
        {
            "request-id": f"rqf-{PARENT_RUN_ID}-1-1-abcd0123",
            "parent-run-id": str(PARENT_RUN_ID),
            "parent-run-attempt": "1",
            "source-ref": SOURCE_REF,
            "source-sha": sha,
            "runner": json.dumps(CPU8),
            "workload": "{}",
        },
    )
    assert not isinstance(run, DispatchRefused), run
    return run.id


def test_the_guard_passes_on_an_older_server():
    """auto in the guard: its first request's 400 moves it to 2022-11-28; every check holds."""
    clock = FakeClock()
    world, sha = older_world(clock)
    world.on_worker_start = None
    run_id = _dispatch(world, sha)
    clock.sleep(5)
    seen = record_versions(world)
    code, out = _guard(world, clock, run_id)
    assert code == 0, out
    assert "Guard passed: the workload may start" in out
    assert "refused API version 2026-03-10" in out
    assert (seen[0].version, seen[0].status) == (NEWER, 400)
    assert all(s.version == OLDER and s.status == 200 for s in seen[1:])


def test_the_guard_refuses_a_moved_source_on_an_older_server():
    """The checks are the same on 2022-11-28: a moved source ref is refused."""
    clock = FakeClock()
    world, sha = older_world(clock)
    world.on_worker_start = None
    run_id = _dispatch(world, sha)
    clock.sleep(5)
    world.move_ref(SOURCE_REF.removeprefix("refs/"))
    code, out = _guard(world, clock, run_id)
    assert code == 1
    assert "title=Guard refused the workload::source ref: expected" in out


def test_the_guard_pinned_to_2026_03_10_refuses_on_an_older_server_naming_the_input():
    """A pinned version the server lacks blocks the workload, and says which input to change."""
    clock = FakeClock()
    world, sha = older_world(clock)
    world.on_worker_start = None
    run_id = _dispatch(world, sha)
    clock.sleep(5)
    code, out = _guard(world, clock, run_id, **{"api-version": NEWER})
    assert code == 1
    assert "Guard passed" not in out
    assert "input 'api-version'" in out
