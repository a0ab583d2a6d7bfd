"""The child's startup guard against the stateful fake GitHub, on a FakeClock (no real sleep).

Unit tests drive `Guard` directly; CLI tests go through `cli.main(["guard"], ...)`; the end-to-end
tests let the real coordinator dispatch and the simulated worker run the real guard (the sim's
`on_worker_start` hook) before its workload.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping
from pathlib import Path

import pytest
import requests
import responses

from runner_queue_fallback import cli
from runner_queue_fallback.action.guard import (
    ATTEMPT,
    CHECKS,
    IDENTITY,
    ORIGINAL,
    PARENT,
    SOURCE,
    Guard,
    GuardResult,
)
from runner_queue_fallback.core.actions_io import Reporter
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.errors import GuardRefused
from runner_queue_fallback.core.inputs import env_name, read_guard_inputs, read_run_context
from runner_queue_fallback.fake_github import (
    DispatchRefused,
    FakeGitHub,
    Fault,
    Timings,
    WorkerContext,
    Workload,
)
from runner_queue_fallback.fake_github.model import WORKER_TOKEN, fake_token
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.tools.simulate.capture import capture_stdout
from runner_queue_fallback.tools.simulate.steps import PARENT_RUN_ID, standard_world
from runner_queue_fallback.tools.simulate.steps import SOURCE_REF as SIM_SOURCE_REF
from tests.outside import Tamper, json_body, watch_stdout, with_json

PARENT_ID = 4242
SOURCE_REF = "refs/heads/feature"
GROUP = "nv-cpu-general"
LABEL = "linux-amd64-cpu16"
TOKEN = fake_token("guardSecretToken42")
REQUEST_ID = "rqf-4242-1-1-abcd0123"
COORDINATOR_WORKFLOW = "runner-check.yml"  # the fake parent run's workflow


# -- a small world ------------------------------------------------------------------------


def make_world(
    clock: FakeClock, *, visibility: float = 0.0, parent_after: float = 0.0, listing: float = 0.0
) -> FakeGitHub:
    """A repository with the child workflow, a source branch and an active parent run."""
    world = FakeGitHub(clock, timings=Timings(visibility_delay=visibility, listing_delay=listing))
    world.add_workflow()
    world.add_ref("heads/feature")
    if not math.isinf(parent_after):
        world.add_parent_run(PARENT_ID, visible_after=parent_after)
    return world


def dispatch_child(world: FakeGitHub, request_id: str = REQUEST_ID) -> int:
    """Dispatch the child as the coordinator would (no pool: its job just waits)."""
    run = world.dispatch(
        "runner-worker.yml",
        "main",
        {
            "request-id": request_id,
            "parent-run-id": str(PARENT_ID),
            "parent-run-attempt": "1",
            "source-ref": SOURCE_REF,
            "source-sha": world.refs["heads/feature"],
            "runner": json.dumps({"group": GROUP, "labels": LABEL}),
            "workload": "{}",
        },
    )
    assert not isinstance(run, DispatchRefused), run
    return run.id


def guard_environ(world: FakeGitHub, run_id: int, **overrides: str) -> dict[str, str]:
    """What the guard step sees: the runner's GITHUB_* variables and its INPUT_* values."""
    environ = {
        "GITHUB_RUN_ID": str(run_id),
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_REPOSITORY": world.repository,
        "GITHUB_API_URL": world.api_url,
        "INPUT_REQUEST-ID": REQUEST_ID,
        "INPUT_PARENT-RUN-ID": str(PARENT_ID),
        "INPUT_PARENT-RUN-ATTEMPT": "1",
        "INPUT_SOURCE-REF": SOURCE_REF,
        "INPUT_SOURCE-SHA": world.refs["heads/feature"],
        "INPUT_TOKEN": TOKEN,
    }
    environ.update(overrides)
    return environ


def run_guard(
    world: FakeGitHub, clock: FakeClock, environ: Mapping[str, str], log: io.StringIO | None = None
) -> GuardResult:
    """Build the guard the way the CLI does (inputs and run context from `environ`) and run it."""
    inputs = read_guard_inputs(environ)
    ctx = read_run_context(environ)
    reporter = Reporter(log if log is not None else io.StringIO())
    token = inputs.token.get_secret_value()
    reporter.mask(token)
    client = GitHubClient(
        world.session(), ctx.api_url, ctx.repository, token, clock, log=reporter.log
    )
    result = Guard(inputs, ctx, client, clock, reporter).run()
    result.publish(reporter)
    return result


def requests_to(world: FakeGitHub, suffix: str) -> int:
    return sum(1 for entry in world.ledger if entry.path.endswith(suffix))


def refused_at(result: GuardResult, check: str) -> GuardRefused:
    assert not result.passed
    assert result.refusal is not None
    assert result.refusal.check == check
    failed = [c for c in result.checks if c.passed is False]
    assert [c.name for c in failed] == [check]
    later = list(CHECKS)[list(CHECKS).index(check) + 1 :]
    assert all(c.passed is None for c in result.checks if c.name in later)
    return result.refusal


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


# -- success ------------------------------------------------------------------------------


def test_every_check_holds_without_waiting(clock: FakeClock):
    world = make_world(clock)
    run_id = dispatch_child(world)
    result = run_guard(world, clock, guard_environ(world, run_id))
    assert result.passed
    assert [c.name for c in result.checks] == list(CHECKS)
    assert all(c.passed for c in result.checks)
    assert clock.sleeps == []
    assert [(e.method, e.status) for e in world.ledger] == [("GET", 200)] * 4


def test_parent_not_visible_for_20s_passes_at_20s(clock: FakeClock):
    world = make_world(clock, parent_after=20.0)
    run_id = dispatch_child(world)
    result = run_guard(world, clock, guard_environ(world, run_id))
    assert result.passed
    assert clock.monotonic() == 20.0
    assert clock.sleeps == [5.0] * 4
    assert requests_to(world, f"/actions/runs/{PARENT_ID}") == 5


def test_parent_still_queued_is_tolerated(clock: FakeClock):
    world = make_world(clock)
    world.runs[PARENT_ID].status = "queued"
    world._at(30.0, lambda: setattr(world.runs[PARENT_ID], "status", "in_progress"))
    run_id = dispatch_child(world)
    assert run_guard(world, clock, guard_environ(world, run_id)).passed
    assert clock.monotonic() == 30.0


def test_own_run_not_visible_yet_is_tolerated(clock: FakeClock):
    world = make_world(clock, visibility=12.0)
    run_id = dispatch_child(world)
    result = run_guard(world, clock, guard_environ(world, run_id))
    assert result.passed
    assert clock.monotonic() == 15.0
    assert requests_to(world, f"/actions/runs/{run_id}") == 4


# -- refusals -----------------------------------------------------------------------------


def test_rerun_of_a_child_is_refused_without_any_request(clock: FakeClock):
    world = make_world(clock)
    run_id = dispatch_child(world)
    result = run_guard(world, clock, guard_environ(world, run_id, GITHUB_RUN_ATTEMPT="2"))
    refusal = refused_at(result, ATTEMPT)
    assert (refusal.expected, refusal.observed) == ("attempt 1", "attempt 2")
    assert "rerun its parent instead" in str(refusal)
    assert world.ledger == []
    assert clock.monotonic() == 0.0


def test_wrong_run_name_is_refused(clock: FakeClock):
    world = make_world(clock)
    run_id = dispatch_child(world, request_id="someone-else")
    refusal = refused_at(run_guard(world, clock, guard_environ(world, run_id)), IDENTITY)
    assert REQUEST_ID in refusal.expected
    assert "'someone-else'" in refusal.observed
    assert requests_to(world, f"/actions/runs/{PARENT_ID}") == 0


def test_wrong_event_is_refused(clock: FakeClock):
    world = make_world(clock)
    run_id = dispatch_child(world)
    world.runs[run_id].event = "push"
    refusal = refused_at(run_guard(world, clock, guard_environ(world, run_id)), IDENTITY)
    assert "event push" in refusal.observed


def test_own_run_never_visible_gives_up_at_the_deadline(clock: FakeClock):
    world = make_world(clock, visibility=math.inf)
    run_id = dispatch_child(world)
    refusal = refused_at(run_guard(world, clock, guard_environ(world, run_id)), IDENTITY)
    assert "not visible" in refusal.observed
    assert clock.monotonic() == 120.0


@pytest.mark.parametrize("conclusion", ["cancelled", "success", "failure"])
def test_completed_parent_is_refused_at_once(clock: FakeClock, conclusion: str):
    world = make_world(clock)
    world.finish_parent(PARENT_ID, conclusion)
    run_id = dispatch_child(world)
    refusal = refused_at(run_guard(world, clock, guard_environ(world, run_id)), PARENT)
    assert "'completed'" in refusal.observed
    assert conclusion in refusal.observed
    assert "Rerun the parent" in str(refusal)
    assert clock.monotonic() == 0.0


def test_parent_on_another_attempt_is_refused(clock: FakeClock):
    world = make_world(clock)
    world.rerun_parent(PARENT_ID)
    run_id = dispatch_child(world)
    refusal = refused_at(run_guard(world, clock, guard_environ(world, run_id)), PARENT)
    assert refusal.observed.startswith("attempt 2")
    assert clock.monotonic() == 0.0


def test_parent_never_visible_gives_up_at_120s(clock: FakeClock):
    world = make_world(clock, parent_after=math.inf)
    run_id = dispatch_child(world)
    refusal = refused_at(run_guard(world, clock, guard_environ(world, run_id)), PARENT)
    assert "within 2 minutes" in refusal.observed
    assert clock.monotonic() == 120.0
    assert set(clock.sleeps) == {5.0}
    assert requests_to(world, f"/actions/runs/{PARENT_ID}") == 25  # at 0, 5, ..., 120
    assert requests_to(world, "/git/ref/heads/feature") == 0


def test_stale_source_is_refused(clock: FakeClock):
    world = make_world(clock)
    run_id = dispatch_child(world)
    approved = world.refs["heads/feature"]
    moved = world.move_ref("heads/feature")
    refusal = refused_at(
        run_guard(
            world,
            clock,
            guard_environ(
                world,
                run_id,
                **{
                    "INPUT_SOURCE-SHA": approved,
                },
            ),
        ),
        SOURCE,
    )
    assert refusal.expected == f"{SOURCE_REF} at {approved}"
    assert refusal.observed == f"{SOURCE_REF} at {moved}"


def test_deleted_source_ref_is_refused(clock: FakeClock):
    world = make_world(clock)
    run_id = dispatch_child(world)
    environ = guard_environ(world, run_id)
    del world.refs["heads/feature"]
    refusal = refused_at(run_guard(world, clock, environ), SOURCE)
    assert "not found" in refusal.observed


@pytest.mark.parametrize(
    "fault",
    [
        Fault("status", status=502),
        Fault("status", status=503),
        Fault("timeout"),
        Fault("malformed"),
    ],
    ids=["502", "503", "timeout", "malformed"],
)
def test_api_errors_on_every_request_block_the_workload_by_the_deadline(
    clock: FakeClock, fault: Fault
):
    world = make_world(clock)
    run_id = dispatch_child(world)
    world.inject(fault)
    refusal = refused_at(run_guard(world, clock, guard_environ(world, run_id)), IDENTITY)
    assert clock.monotonic() <= 120.0
    assert "attempt(s)" in refusal.observed or "attempts: 3" in refusal.observed
    assert clock.sleeps == [5.0, 10.0]  # the spec's two retries, then it stops


def test_api_errors_until_the_deadline_end_exactly_at_it(clock: FakeClock):
    """The parent is 404 for 110 s, then every read of it fails: the shared deadline ends it."""
    world = make_world(clock, parent_after=110.0)
    run_id = dispatch_child(world)
    world.inject(Fault("status", status=502, path=rf"/actions/runs/{PARENT_ID}$", start=110.0))
    refusal = refused_at(run_guard(world, clock, guard_environ(world, run_id)), PARENT)
    assert clock.monotonic() == 120.0
    assert "DeadlineExceeded" in refusal.observed
    assert requests_to(world, "/git/ref/heads/feature") == 0


def test_permission_denied_is_refused_at_once(clock: FakeClock):
    world = make_world(clock)
    run_id = dispatch_child(world)
    world.inject(Fault("forbidden"))
    refusal = refused_at(run_guard(world, clock, guard_environ(world, run_id)), IDENTITY)
    assert "403" in refusal.observed
    assert clock.sleeps == []
    assert len(world.ledger) == 1


def test_summary_and_log_name_every_check(clock: FakeClock):
    world = make_world(clock)
    world.finish_parent(PARENT_ID, "cancelled")
    run_id = dispatch_child(world)
    log = io.StringIO()
    result = run_guard(world, clock, guard_environ(world, run_id), log)
    markdown = result.markdown()
    assert "| check | expected | observed | result |" in markdown
    assert f"| {ATTEMPT} | attempt 1 | attempt 1 | pass |" in markdown
    assert f"| {SOURCE} | " in markdown
    assert "| not checked |" in markdown
    assert "| FAIL |" in markdown
    assert "**Refused:** parent run:" in markdown
    lines = result.log_lines()
    assert lines[0].startswith("Guard REFUSED the workload")
    assert len(lines) == 1 + len(CHECKS)
    assert TOKEN not in log.getvalue().replace(f"::add-mask::{TOKEN}", "")


@pytest.mark.parametrize("status", ["waiting", "action_required", "no-such-status"])
def test_parent_in_an_unknown_state_is_refused_at_once(clock: FakeClock, status: str):
    """Only queued, requested and pending are waited for; any other state refuses at once."""
    world = make_world(clock)
    world.runs[PARENT_ID].status = status
    run_id = dispatch_child(world)
    refusal = refused_at(run_guard(world, clock, guard_environ(world, run_id)), PARENT)
    assert f"status {status!r}" in refusal.observed
    assert clock.monotonic() == 0.0
    assert requests_to(world, f"/actions/runs/{PARENT_ID}") == 1


# -- copies: the real child is the first run bearing its request id ------------------------


def list_pages(world: FakeGitHub) -> list[str]:
    """The query strings of every runs-list page the guard read."""
    return [e.query for e in world.ledger if e.path.endswith("/runs") and e.method == "GET"]


@pytest.mark.found_by("review", issue=26)
@pytest.mark.parametrize("later", [3.0, 0.4], ids=["3s-later", "same-second"])
def test_a_copy_dispatched_seconds_after_the_real_child_is_refused(clock: FakeClock, later: float):
    """Someone copies a live child's inputs: same request id, parent and source. It is later.

    In the same second the two `created_at` are equal and the lower run id is the real child.
    Before (issue 26): the guard passed the copy and the workload ran twice (the review's test
    of this, through the CLI, merged here).
    """
    world = make_world(clock)
    real = dispatch_child(world)
    clock.sleep(later)
    copy = dispatch_child(world)
    clock.sleep(2.0)
    refusal = refused_at(run_guard(world, clock, guard_environ(world, copy)), ORIGINAL)
    assert refusal.observed.startswith(f"a copy of run {real} (created ")
    assert "copy of its inputs" in str(refusal)
    assert requests_to(world, "/git/ref/heads/feature") == 0  # refused before the source check
    assert run_guard(world, clock, guard_environ(world, real)).passed


def test_a_copy_behind_more_than_a_page_of_other_runs_is_refused(clock: FakeClock):
    """150 other requests between the real child and the copy: every page is read.

    A search that stopped at the first page holding a match saw only the copy itself.
    """
    world = make_world(clock)
    real = dispatch_child(world)
    for n in range(150):
        clock.sleep(0.2)
        dispatch_child(world, request_id=f"rqf-{PARENT_ID}-1-{n + 2}-{n:08x}")
    copy = dispatch_child(world)
    refusal = refused_at(run_guard(world, clock, guard_environ(world, copy)), ORIGINAL)
    assert refusal.observed.startswith(f"a copy of run {real} ")
    assert len(list_pages(world)) == 2


def test_the_listing_covers_the_parent_attempt_to_the_childs_creation(clock: FakeClock):
    """One range query: from the parent attempt's start to this run's `created_at`."""
    world = make_world(clock)
    clock.sleep(30.0)
    run_id = dispatch_child(world)
    clock.sleep(5.0)
    assert run_guard(world, clock, guard_environ(world, run_id)).passed
    [query] = list_pages(world)
    started = world.render.time(world.runs[PARENT_ID].started_at)
    created = world.render.time(world.runs[run_id].created_at)
    assert f"&created={started}..{created}&" in query


def test_more_runs_than_the_page_bound_refuses(clock: FakeClock):
    """1,001 runs since the parent attempt started, all in its first second: GitHub lists 1,000
    per query and a second cannot be split; refused after one page (issue 44: it read 10)."""
    world = make_world(clock)
    for n in range(1000):
        dispatch_child(world, request_id=f"rqf-{PARENT_ID}-1-{n + 2}-{n:08x}")
    run_id = dispatch_child(world)
    refusal = refused_at(run_guard(world, clock, guard_environ(world, run_id)), ORIGINAL)
    assert refusal.observed == (
        "0 run(s) listed, not every one: 1001 runs were created in the one second "
        "2026-11-02T09:00:00Z: GitHub lists 1000 of them"
    )
    assert len(list_pages(world)) == 1


def test_a_listing_that_says_more_runs_than_it_shows_refuses(clock: FakeClock):
    """GitHub lists at most 1,000 runs per query: a `total_count` above what was seen refuses."""
    world = make_world(clock)
    run_id = dispatch_child(world)

    def rule(method: str, path: str, reply: Reply, _world: FakeGitHub) -> Reply | None:
        body = json_body(reply)
        if method == "GET" and path.endswith("/runs") and isinstance(body, dict):
            return with_json(reply, {**body, "total_count": 1500})
        return None

    Tamper(world, [rule]).install()
    refusal = refused_at(run_guard(world, clock, guard_environ(world, run_id)), ORIGINAL)
    assert refusal.observed == (
        "0 run(s) listed, not every one: 1500 runs were created in the one second "
        "2026-11-02T09:00:00Z: GitHub lists 1000 of them"
    )


def test_the_real_child_passes_while_the_listing_lags(clock: FakeClock):
    """The listing does not show the child yet (older servers lag by minutes): it still passes."""
    world = make_world(clock, listing=600.0)
    run_id = dispatch_child(world)
    result = run_guard(world, clock, guard_environ(world, run_id))
    assert result.passed
    assert "earliest of 1 run(s) with this run-name among 0 listed" in result.checks[4].observed


def test_a_listing_that_lags_hides_the_real_child_from_a_copy_for_that_long(clock: FakeClock):
    """What remains (README, trust model): a copy checked before the real child is listed passes."""
    world = make_world(clock, listing=10.0)
    real = dispatch_child(world)
    clock.sleep(2.0)
    copy = dispatch_child(world)
    assert run_guard(world, clock, guard_environ(world, copy)).passed
    clock.sleep(10.0)
    refused_at(run_guard(world, clock, guard_environ(world, copy)), ORIGINAL)
    assert run_guard(world, clock, guard_environ(world, real)).passed


# -- the parent is this repository's coordinator, from coordinator-ref ----------------------

OTHER_PATH = "other-org/any-repo/.github/workflows/runner-check.yml@refs/heads/main"


def parent_shows(world: FakeGitHub, **fields: object) -> Tamper:
    """Rewrite the fields of the parent run in every reply that shows it."""

    def rule(method: str, path: str, reply: Reply, _world: FakeGitHub) -> Reply | None:
        body = json_body(reply)
        if method == "GET" and path.endswith(f"/runs/{PARENT_ID}") and isinstance(body, dict):
            return with_json(reply, {**body, **fields})
        return None

    return Tamper(world, [rule]).install()


def trusting_environ(
    world: FakeGitHub, run_id: int, ref: str | None = "refs/heads/main"
) -> dict[str, str]:
    extra = {"INPUT_COORDINATOR-WORKFLOW": COORDINATOR_WORKFLOW}
    if ref is not None:
        extra["INPUT_COORDINATOR-REF"] = ref
    return guard_environ(world, run_id, **extra)


@pytest.mark.found_by("review", issue=26)
@pytest.mark.parametrize(
    ("path", "passes"),
    [
        (".github/workflows/runner-check.yml", True),
        ("octo-org/octo-repo/.github/workflows/runner-check.yml@refs/heads/main", True),
        ("Octo-Org/Octo-Repo/.github/workflows/runner-check.yml", True),
        (OTHER_PATH, False),
        ("octo-org/octo-repo/x/.github/workflows/runner-check.yml", False),
        ("octo-org/octo-repo/.github/workflows/sub/runner-check.yml", False),
    ],
)
def test_the_parent_must_be_a_run_of_this_repositorys_coordinator(
    clock: FakeClock, path: str, passes: bool
):
    """A path that names another repository's `runner-check.yml` is not our coordinator.

    Before (issue 26): the file name matched `coordinator-workflow` whatever came before it (the
    review's test of this, through the CLI, merged here)."""
    world = make_world(clock)
    parent_shows(world, path=path)
    run_id = dispatch_child(world)
    result = run_guard(world, clock, trusting_environ(world, run_id, ref=None))
    if passes:
        assert result.passed, result.log_lines()
        return
    refusal = refused_at(result, PARENT)
    assert repr(path) in refusal.observed
    assert "in octo-org/octo-repo" in refusal.expected


@pytest.mark.parametrize(
    ("fields", "passes"),
    [
        pytest.param({}, True, id="dispatched-on-main"),
        pytest.param({"event": "push"}, True, id="push-to-main"),
        pytest.param({"event": "schedule"}, True, id="schedule"),
        pytest.param({"path": ".github/workflows/runner-check.yml@main"}, True, id="short-at-ref"),
        pytest.param(
            {"path": ".github/workflows/runner-check.yml@refs/heads/main", "event": "pull_request"},
            True,
            id="full-at-ref",
        ),
        pytest.param({"head_branch": "feature"}, False, id="dispatched-on-a-branch"),
        pytest.param(
            {"path": ".github/workflows/runner-check.yml@refs/heads/feature"},
            False,
            id="at-another-ref",
        ),
        pytest.param(
            {"path": ".github/workflows/runner-check.yml@feature"}, False, id="short-at-mismatch"
        ),
        pytest.param({"event": "pull_request"}, False, id="pull-request-from-main"),
        pytest.param({"head_branch": None}, False, id="no-head-branch"),
    ],
)
def test_coordinator_ref_is_the_parents_workflow_ref(
    clock: FakeClock, fields: dict[str, object], passes: bool
):
    """`coordinator-ref: refs/heads/main`: the parent's @ref, else its branch where that is its ref."""
    world = make_world(clock)
    parent_shows(world, **fields)
    run_id = dispatch_child(world)
    result = run_guard(world, clock, trusting_environ(world, run_id))
    if passes:
        assert result.passed, result.log_lines()
    else:
        refusal = refused_at(result, PARENT)
        assert "coordinator-ref" in str(refusal)
        assert refusal.expected.endswith(
            "at refs/heads/main, started before this child was created"
        )


def test_coordinator_ref_alone_refuses_another_repositorys_main(clock: FakeClock):
    """Without `coordinator-workflow`, a path naming another repository still has no ref of ours."""
    world = make_world(clock)
    parent_shows(world, path=OTHER_PATH)
    run_id = dispatch_child(world)
    environ = guard_environ(world, run_id, **{"INPUT_COORDINATOR-REF": "refs/heads/main"})
    refusal = refused_at(run_guard(world, clock, environ), PARENT)
    assert f"its workflow path {OTHER_PATH!r} is no workflow file of octo-org/octo-repo" in (
        refusal.observed
    )
    assert "coordinator-ref" in str(refusal)


def test_a_pull_request_from_a_fork_branch_named_main_is_refused(clock: FakeClock):
    """A fork's `main` is not ours: the message says where the parent's code came from."""
    world = make_world(clock)
    fork = {"full_name": "mallory/octo-repo", "fork": True}
    parent_shows(world, event="pull_request", head_branch="main", head_repository=fork)
    run_id = dispatch_child(world)
    refusal = refused_at(run_guard(world, clock, trusting_environ(world, run_id)), PARENT)
    assert "its code comes from 'mallory/octo-repo', not octo-org/octo-repo" in refusal.observed


def test_a_same_repository_pull_request_names_no_ref(clock: FakeClock):
    """Its `head_branch` is the branch the pull request comes from, not the ref it ran."""
    world = make_world(clock)
    world.runs[PARENT_ID].event = "pull_request"
    run_id = dispatch_child(world)
    refusal = refused_at(run_guard(world, clock, trusting_environ(world, run_id)), PARENT)
    assert "a pull_request run does not name the branch it ran from" in refusal.observed


def test_coordinator_ref_passes_on_the_default_world_and_with_refs_in_paths(clock: FakeClock):
    """The sim's parent (dispatched on main), also when it shows `path@main` as some servers do."""
    world = make_world(clock)
    world.path_with_ref = True
    run_id = dispatch_child(world)
    result = run_guard(world, clock, trusting_environ(world, run_id))
    assert result.passed, result.log_lines()
    assert "at refs/heads/main (the head branch of its workflow_dispatch run)" in (
        result.checks[3].observed
    )


# -- the CLI ------------------------------------------------------------------------------


def cli_environ(world: FakeGitHub, run_id: int, tmp_path: Path, **overrides: str) -> dict[str, str]:
    summary = tmp_path / "summary.md"
    summary.touch()
    return guard_environ(world, run_id, GITHUB_STEP_SUMMARY=str(summary), **overrides)


def assert_token_hidden(stdout: str, summary: str) -> None:
    """The only line holding the token is the runner's `::add-mask::` command (never shown)."""
    assert [line for line in stdout.splitlines() if TOKEN in line] == [f"::add-mask::{TOKEN}"]
    assert TOKEN not in summary


def test_cli_guard_passes_with_exit_0(clock: FakeClock, tmp_path: Path, capsys):
    world = make_world(clock)
    run_id = dispatch_child(world)
    environ = cli_environ(world, run_id, tmp_path)
    assert cli.main(["guard"], environ, clock=clock, session=world.session()) == 0
    stdout = capsys.readouterr().out
    summary = (tmp_path / "summary.md").read_text()
    assert stdout.splitlines()[0] == f"::add-mask::{TOKEN}"
    assert "Guard passed: the workload may start" in stdout
    assert "::error" not in stdout
    assert summary.count("| pass |") == len(CHECKS)
    assert_token_hidden(stdout, summary)


def test_cli_guard_refuses_stale_source_with_exit_1(clock: FakeClock, tmp_path: Path, capsys):
    world = make_world(clock)
    run_id = dispatch_child(world)
    environ = cli_environ(world, run_id, tmp_path)
    world.move_ref("heads/feature")
    assert cli.main(["guard"], environ, clock=clock, session=world.session()) == 1
    stdout = capsys.readouterr().out
    summary = (tmp_path / "summary.md").read_text()
    errors = [line for line in stdout.splitlines() if line.startswith("::error")]
    assert len(errors) == 1
    assert (
        "title=Guard refused the workload::source ref: expected refs/heads/feature at" in errors[0]
    )
    assert "| FAIL |" in summary
    assert_token_hidden(stdout, summary)


def test_cli_guard_refuses_a_rerun_without_touching_the_network(
    clock: FakeClock, tmp_path: Path, capsys, no_network
):
    session, adapter = no_network
    world = make_world(clock)
    environ = cli_environ(world, 1, tmp_path, GITHUB_RUN_ATTEMPT="3")
    assert cli.main(["guard"], environ, clock=clock, session=session) == 1
    assert adapter.sent == []
    stdout = capsys.readouterr().out
    assert "child attempt: expected attempt 1, observed attempt 3" in stdout
    assert_token_hidden(stdout, (tmp_path / "summary.md").read_text())


def test_cli_guard_api_outage_fails_closed(clock: FakeClock, tmp_path: Path, capsys):
    world = make_world(clock)
    run_id = dispatch_child(world)
    world.inject(Fault("status", status=502))
    environ = cli_environ(world, run_id, tmp_path)
    assert cli.main(["guard"], environ, clock=clock, session=world.session()) == 1
    assert clock.monotonic() <= 120.0
    stdout = capsys.readouterr().out
    assert "502" in stdout
    assert_token_hidden(stdout, (tmp_path / "summary.md").read_text())


def test_cli_guard_bad_input_fails_before_any_request(clock: FakeClock, tmp_path: Path, capsys):
    world = make_world(clock)
    run_id = dispatch_child(world)
    environ = cli_environ(world, run_id, tmp_path, **{"INPUT_SOURCE-SHA": "abc"})
    assert cli.main(["guard"], environ, clock=clock, session=world.session()) == 2
    assert world.ledger == []
    stdout = capsys.readouterr().out
    assert "source-sha" in stdout
    assert_token_hidden(stdout, "")


def test_cli_guard_through_responses(clock: FakeClock, tmp_path: Path, capsys):
    """The same fake, served through `responses` instead of the in-process adapter."""
    world = make_world(clock, parent_after=20.0)
    run_id = dispatch_child(world)
    environ = cli_environ(world, run_id, tmp_path)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        world.register(rsps)
        assert cli.main(["guard"], environ, clock=clock, session=requests.Session()) == 0
    assert clock.monotonic() == 20.0
    assert_token_hidden(capsys.readouterr().out, (tmp_path / "summary.md").read_text())


# -- end to end: the real coordinator dispatches, the simulated worker runs the real guard ---


class GuardedWorker:
    """The sim's worker hook: run the real guard from the step's environ before the workload."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.world: FakeGitHub | None = None
        self.results: list[GuardResult] = []
        self.logs: list[str] = []

    def __call__(self, context: WorkerContext) -> bool:
        assert self.world is not None
        log = io.StringIO()
        result = run_guard(self.world, self.clock, context.environ, log)
        self.results.append(result)
        self.logs.append(log.getvalue())
        return result.passed


def e2e_world(clock: FakeClock, *, runners: int = 1) -> tuple[FakeGitHub, GuardedWorker]:
    worker = GuardedWorker(clock)
    world = FakeGitHub(clock, workload=Workload(duration=60.0), on_worker_start=worker)
    worker.world = world
    world.add_workflow()
    world.add_ref("heads/feature")
    world.add_pool(GROUP, LABEL, runners=runners)
    world.add_parent_run(PARENT_ID)
    return world, worker


def coordinator_environ(world: FakeGitHub) -> dict[str, str]:
    return {
        "GITHUB_RUN_ID": str(PARENT_ID),
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_REPOSITORY": world.repository,
        "GITHUB_API_URL": world.api_url,
        "GITHUB_SERVER_URL": world.server_url,
        "INPUT_WORKFLOW": "runner-worker.yml",
        "INPUT_WORKFLOW-REF": "main",
        "INPUT_SOURCE-REF": SOURCE_REF,
        "INPUT_SOURCE-SHA": world.refs["heads/feature"],
        "INPUT_RUNNER-TYPE": "cpu",
        "INPUT_RUNNERS": json.dumps([{"group": GROUP, "labels": LABEL}]),
        "INPUT_QUEUE-TIMEOUT-MINUTES": "10",
        "INPUT_EXECUTION-TIMEOUT-MINUTES": "15",
        "INPUT_TOKEN": fake_token("coordinator_token"),
    }


def coordinate(world: FakeGitHub, clock: FakeClock) -> int:
    return cli.main(
        ["coordinate"], coordinator_environ(world), clock=clock, session=world.session()
    )


def only_child(world: FakeGitHub) -> int:
    children = [run_id for run_id, run in world.runs.items() if run.history is not None]
    assert len(children) == 1
    return children[0]


def test_e2e_guard_passes_and_the_workload_starts(clock: FakeClock, capsys):
    world, worker = e2e_world(clock)
    assert coordinate(world, clock) == 0
    assert world.hook_errors == []
    history = world.history[only_child(world)]
    assert [r.passed for r in worker.results] == [True]
    assert history.guard_passed is True
    assert history.workload_started_at is not None
    assert history.conclusion == "success"
    assert "Guard passed" in worker.logs[0]


def test_e2e_source_moves_after_dispatch_and_the_workload_never_starts(clock: FakeClock, capsys):
    world, worker = e2e_world(clock)
    world.move_ref("heads/feature", at=1.0)  # right after the dispatch at t=0
    assert coordinate(world, clock) != 0
    assert world.hook_errors == []
    history = world.history[only_child(world)]
    assert [r.refusal.check if r.refusal else None for r in worker.results] == [SOURCE]
    assert history.guard_passed is False
    assert history.workload_started_at is None
    assert history.conclusion != "success"


def test_e2e_parent_cancelled_and_the_workload_never_starts(clock: FakeClock, capsys):
    world, worker = e2e_world(clock)
    world.finish_parent(PARENT_ID, "cancelled", at=1.0)
    assert coordinate(world, clock) != 0
    assert world.hook_errors == []
    for run_id, history in world.history.items():
        assert history.workload_started_at is None, run_id
    assert len(worker.results) == 1  # the worker got a runner before the coordinator looked
    refusal = worker.results[0].refusal
    assert refusal is not None
    assert refusal.check == PARENT
    assert "'cancelled'" in refusal.observed


def test_e2e_a_copy_dispatched_2s_after_the_real_child_never_runs_its_workload(
    clock: FakeClock, capsys
):
    """A co-tenant copies the live child's inputs 2 s after the coordinator's dispatch.

    Both get a runner; the real child runs its workload once, the copy's guard refuses it.
    """
    world, worker = e2e_world(clock, runners=2)
    copies: list[int] = []

    def copy_the_child() -> None:
        [real] = [run for run in world.runs.values() if run.history is not None]
        copied = world.dispatch("runner-worker.yml", "main", dict(real.inputs))
        assert not isinstance(copied, DispatchRefused), copied
        copies.append(copied.id)

    world._at(2.0, copy_the_child)
    assert coordinate(world, clock) == 0
    assert world.hook_errors == []
    [copy] = copies
    [real] = [run_id for run_id in world.history if run_id != copy]
    assert world.history[real].workload_started_at is not None
    assert world.history[real].conclusion == "success"
    assert world.history[copy].guard_passed is False
    assert world.history[copy].workload_started_at is None
    refusals = [r.refusal for r in worker.results if r.refusal is not None]
    assert [(r.check, r.observed.split(" (")[0]) for r in refusals] == [
        (ORIGINAL, f"a copy of run {real}")
    ]
    assert len(worker.results) == 2


# -- the parent's workflow ref, and the child's own workflow, when they cannot be known ---------


@pytest.mark.found_by("mutation", issue=35)
def test_a_parent_whose_workflow_ref_is_unknown_is_refused_with_why_and_no_ref():
    """A pull request's run names no ref it ran: the refusal ends with that reason."""
    clock = FakeClock()
    world = make_world(clock)
    parent_shows(world, event="pull_request")
    run_id = dispatch_child(world)
    refusal = refused_at(run_guard(world, clock, trusting_environ(world, run_id)), PARENT)
    assert refusal.observed.endswith(
        ", its workflow ref is unknown: a pull_request run does not name the branch it ran from "
        "(only workflow_dispatch, push and schedule runs do)"
    ), refusal.observed
    assert ", at None" not in refusal.observed


@pytest.mark.found_by("mutation", issue=35)
def test_a_child_whose_own_workflow_cannot_be_named_is_refused_before_any_listing():
    """Its run shows no workflow id and a path that is no workflow file: which runs could be
    copies of it cannot be listed, so the original check refuses, naming the path."""
    clock = FakeClock()
    world = make_world(clock)
    run_id = dispatch_child(world)

    def unnamed(method: str, path: str, reply: Reply, _world: FakeGitHub) -> Reply | None:
        body = json_body(reply)
        if method != "GET" or not path.endswith(f"/runs/{run_id}") or not isinstance(body, dict):
            return None
        return with_json(reply, {**body, "workflow_id": None, "path": "dynamic/pages/build"})

    Tamper(world, [unnamed]).install()
    refusal = refused_at(run_guard(world, clock, guard_environ(world, run_id)), ORIGINAL)
    assert refusal.observed == "own workflow unknown ('dynamic/pages/build')"
    assert not [e for e in world.ledger if e.path.endswith("/runs") and e.method == "GET"]


# -- a child dispatched by hand, through the CLI on the simulator's repository ------------------


OTHER_RUN = 7_000_777


def hand_world(clock: FakeClock) -> tuple[FakeGitHub, str]:
    world, sha = standard_world(clock)
    world.add_parent_run(OTHER_RUN, workflow="ci.yml")  # an unrelated CI run, in progress
    return world, sha


def hand_dispatch(
    world: FakeGitHub, sha: str, request_id: str, parent: int, attempt: int = 1
) -> int:
    run = world.dispatch(
        "runner-worker.yml",
        "main",
        {
            "request-id": request_id,
            "parent-run-id": str(parent),
            "parent-run-attempt": str(attempt),
            "source-ref": SIM_SOURCE_REF,
            "source-sha": sha,
            "runner": json.dumps({"group": GROUP, "labels": LABEL}),
            "workload": "{}",
        },
    )
    assert hasattr(run, "id"), run
    return run.id


def cli_guard(
    world: FakeGitHub, clock: FakeClock, run_id: int, *, summary: str = "", **inputs: str
) -> tuple[int, str]:
    child = world.runs[run_id]
    environ = {
        "GITHUB_RUN_ID": str(run_id),
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_REPOSITORY": world.repository,
        "GITHUB_API_URL": world.api_url,
        "GITHUB_SERVER_URL": world.server_url,
        env_name("token"): WORKER_TOKEN,
        **{env_name(k): v for k, v in child.inputs.items() if k not in {"runner", "workload"}},
        **{env_name(k): v for k, v in inputs.items()},
        "GITHUB_STEP_SUMMARY": summary,
    }
    out = io.StringIO()
    with capture_stdout(out), watch_stdout() as watch:
        code = cli.main(["guard"], environ, clock=clock, session=world.session())
    assert watch.problems() == [], watch.problems()
    return code, out.getvalue()


@pytest.mark.found_by("review", issue=15)
def test_guard_refuses_a_hand_made_dispatch_with_a_foreign_request_id():
    """A person dispatched the child by hand: `request-id=hello`, an unrelated CI run as parent.

    Before: the run-name matched the request-id input (the dispatcher chose both) and the CI run
    was in progress, so the guard passed and the workload started. After: `hello` is no request
    id of that parent, and the guard refuses before any API request for it.
    """
    clock = FakeClock()
    world, sha = hand_world(clock)
    run_id = hand_dispatch(world, sha, "hello", OTHER_RUN)
    clock.sleep(10)
    code, log = cli_guard(world, clock, run_id)
    assert code == 1, log
    assert "request id" in log
    assert "'hello', not a request id" in log


@pytest.mark.found_by("review", issue=15)
def test_guard_refuses_a_parent_of_another_workflow_when_coordinator_workflow_is_set():
    """The request id has the right form and names its parent, but the parent is a CI run.

    Before: the guard checked only that the parent was in progress at that attempt, and knew of
    no coordinator workflow: it passed. After: with `coordinator-workflow: runner-check.yml` the
    parent must be a run of that workflow.
    """
    clock = FakeClock()
    world, sha = hand_world(clock)
    run_id = hand_dispatch(world, sha, f"rqf-{OTHER_RUN}-1-1-0123abcd", OTHER_RUN)
    clock.sleep(10)
    code, log = cli_guard(world, clock, run_id, **{"coordinator-workflow": "runner-check.yml"})
    assert code == 1, log
    assert "a run of ci.yml" in log
    assert "coordinator-workflow" in log
    # The same child with the real coordinator as parent passes.
    good = hand_dispatch(world, sha, f"rqf-{PARENT_RUN_ID}-1-1-0123abcd", PARENT_RUN_ID)
    clock.sleep(10)
    code, log = cli_guard(world, clock, good, **{"coordinator-workflow": "runner-check.yml"})
    assert code == 0, log


def show_parent(world: FakeGitHub, **fields: object) -> None:
    """The parent run as GitHub might show it: another path, event or head repository."""

    def rule(method: str, path: str, reply: Reply, _world: FakeGitHub) -> Reply | None:
        body = json_body(reply)
        if method == "GET" and path.endswith(f"/runs/{PARENT_RUN_ID}") and isinstance(body, dict):
            return with_json(reply, {**body, **fields})
        return None

    Tamper(world, [rule]).install()


HAND_REQUEST = f"rqf-{PARENT_RUN_ID}-1-1-0123abcd"


TRUSTED = {"coordinator-workflow": "runner-check.yml", "coordinator-ref": "refs/heads/main"}


@pytest.mark.found_by("review", issue=26)
@pytest.mark.parametrize(
    ("fields", "why"),
    [
        pytest.param(
            {"path": ".github/workflows/runner-check.yml@refs/heads/feature"},
            "at refs/heads/feature (the @ref of its workflow path)",
            id="from-a-branch",
        ),
        pytest.param(
            {"head_branch": "feature"},
            "at refs/heads/feature (the head branch of its workflow_dispatch run)",
            id="dispatched-on-a-branch",
        ),
        pytest.param(
            {
                "event": "pull_request",
                "head_repository": {"full_name": "mallory/octo-repo"},
            },
            "its code comes from 'mallory/octo-repo', not octo-org/octo-repo",
            id="fork-pull-request-from-main",
        ),
    ],
)
def test_guard_refuses_a_parent_run_from_another_ref_with_coordinator_ref(
    fields: dict[str, object], why: str
):
    """With `coordinator-ref: refs/heads/main`, the coordinator's file from any other ref fails.

    Before: a run of `runner-check.yml` from any branch, or a fork's pull request from its own
    `main`, passed as the parent.
    """
    clock = FakeClock()
    world, sha = hand_world(clock)
    show_parent(world, **fields)
    run_id = hand_dispatch(world, sha, HAND_REQUEST, PARENT_RUN_ID)
    clock.sleep(10)
    code, log = cli_guard(world, clock, run_id, **TRUSTED)
    assert code == 1, log
    assert why in log
    assert "coordinator-ref" in log


@pytest.mark.found_by("review", issue=26)
@pytest.mark.parametrize("ref", ["main", "refs/pull/1/merge", "refs/heads/a..b", "refs/heads/"])
def test_a_coordinator_ref_that_is_no_branch_or_tag_ref_is_an_input_error(no_network, ref: str):
    """Refused by name before any request (exit 2)."""
    session, adapter = no_network
    environ = {
        "GITHUB_RUN_ID": "5",
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_REPOSITORY": "octo-org/octo-repo",
        env_name("request-id"): HAND_REQUEST,
        env_name("parent-run-id"): str(PARENT_RUN_ID),
        env_name("parent-run-attempt"): "1",
        env_name("source-ref"): SIM_SOURCE_REF,
        env_name("source-sha"): "a" * 40,
        env_name("coordinator-ref"): ref,
        env_name("token"): fake_token("x"),
    }
    out = io.StringIO()
    with capture_stdout(out):
        code = cli.main(["guard"], environ, clock=FakeClock(), session=session)
    assert code == 2
    assert "coordinator-ref" in out.getvalue()
    assert adapter.sent == []
