"""The guard proves a parent's ref read from its branch name (issue 44, finding 1).

A workflow run's reply has no ref field: a run started on a tag (a push of the tag, or a dispatch
with the tag as its ref) shows the tag's short name as `head_branch`, and its `path` has no
`@ref`. With `coordinator-ref: refs/heads/main`, a parent whose ref the guard reads from
`head_branch` must have its commit on the branch (GitHub's compare API, the branch named in full)
and no tag of that name may exist. The guard runs as the CLI builds it, against the stateful fake
GitHub (`tests.test_guard`), whose commits know their parents.
"""

from __future__ import annotations

import pytest

from runner_queue_fallback.action.guard import PARENT
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github import FakeGitHub
from tests.api_contract import capture
from tests.test_guard import (
    PARENT_ID,
    dispatch_child,
    make_world,
    refused_at,
    run_guard,
    trusting_environ,
)

REPO = "/repos/octo-org/octo-repo"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def reads(world: FakeGitHub) -> list[tuple[str, int | None]]:
    """Every request the guard sent (path and status), in order."""
    return [(entry.path.removeprefix(REPO), entry.status) for entry in world.ledger]


def parent_on_tag_main(world: FakeGitHub, event: str, *, at: str | None = None) -> str:
    """The coordinator run from a tag `main` (at a new commit, or at `at`), as GitHub shows it:
    `head_branch` "main", the tag's commit, no `@ref` in its path."""
    tag = world.add_ref("tags/main", at)
    parent = world.runs[PARENT_ID]
    parent.head_sha, parent.event = tag, event
    return tag


@pytest.mark.parametrize("event", ["workflow_dispatch", "push"])
def test_a_coordinator_run_from_a_tag_named_main_is_refused(clock: FakeClock, event: str):
    """The tag holds a changed coordinator: its commit is not on branch main."""
    world = make_world(clock)
    tag = parent_on_tag_main(world, event)
    run_id = dispatch_child(world)
    refusal = refused_at(run_guard(world, clock, trusting_environ(world, run_id)), PARENT)
    assert f"at refs/heads/main (the head branch of its {event} run)" in refusal.observed
    assert refusal.observed.endswith(
        f", but its commit {tag} is not on refs/heads/main (behind: 1 commit(s) of it are not "
        "on the branch)"
    ), refusal.observed
    assert "a run started from a tag shows the tag's name as its head branch" in str(refusal)
    assert (f"/compare/{tag}...refs/heads/main", 200) in reads(world)


def test_a_tag_named_main_at_a_commit_of_the_branch_is_refused(clock: FakeClock):
    """The commit is main's own, but the run may have been the tag's: a tag `main` exists."""
    world = make_world(clock)
    head = world.refs["heads/main"]
    parent_on_tag_main(world, "push", at=head)
    run_id = dispatch_child(world)
    refusal = refused_at(run_guard(world, clock, trusting_environ(world, run_id)), PARENT)
    assert refusal.observed.endswith(f", but a tag 'main' exists too (refs/tags/main at {head})"), (
        refusal.observed
    )
    assert ("/git/ref/tags/main", 200) in reads(world)


def test_a_tag_deleted_after_its_run_is_still_refused(clock: FakeClock):
    """Without the tag, the commit that is not on the branch still tells."""
    world = make_world(clock)
    tag = parent_on_tag_main(world, "workflow_dispatch")
    del world.refs["tags/main"]
    run_id = dispatch_child(world)
    refusal = refused_at(run_guard(world, clock, trusting_environ(world, run_id)), PARENT)
    assert f"its commit {tag} is not on refs/heads/main (behind: " in refusal.observed


def test_the_branch_head_passes_with_its_proof_for_two_more_requests(clock: FakeClock):
    """The compare names the branch in full (a bare `main` is read as a tag first); the tag
    ref answers 404. Two requests more than the guard sent before."""
    world = make_world(clock)
    head = world.refs["heads/main"]
    run_id = dispatch_child(world)
    result = run_guard(world, clock, trusting_environ(world, run_id))
    assert result.passed, result.log_lines()
    assert result.checks[3].observed.endswith(
        f", its commit {head} on refs/heads/main (the branch's head), no tag 'main', started "
        "before this child"
    ), result.checks[3].observed
    paths = [path.split("?")[0] for path, _ in reads(world)]
    assert paths == [
        f"/actions/runs/{run_id}",
        f"/actions/runs/{PARENT_ID}",
        f"/compare/{head}...refs/heads/main",
        "/git/ref/tags/main",
        f"/actions/workflows/{world.runs[run_id].workflow_id}/runs",
        "/git/ref/heads/feature",
    ]
    assert ("/git/ref/tags/main", 404) in reads(world)


def test_an_older_commit_of_the_branch_passes(clock: FakeClock):
    """The branch moved on while the coordinator ran (a merge to main): its commit is still on it."""
    world = make_world(clock)
    old = world.refs["heads/main"]
    world.change_workflow("runner-worker.yml")
    run_id = dispatch_child(world)
    result = run_guard(world, clock, trusting_environ(world, run_id))
    assert result.passed, result.log_lines()
    assert f", its commit {old} on refs/heads/main (1 commit(s) behind the branch's head), " in (
        result.checks[3].observed
    )


def test_a_schedule_run_is_proven_as_well(clock: FakeClock):
    """A scheduled run names its branch only in `head_branch` too."""
    world = make_world(clock)
    world.runs[PARENT_ID].event = "schedule"
    run_id = dispatch_child(world)
    result = run_guard(world, clock, trusting_environ(world, run_id))
    assert result.passed, result.log_lines()
    assert "(the head branch of its schedule run), its commit " in result.checks[3].observed
    assert sum(1 for path, _ in reads(world) if path.startswith("/compare/")) == 1


def test_a_commit_github_cannot_compare_is_refused(clock: FakeClock):
    """A head SHA the repository does not hold: the compare answers 404, the guard refuses."""
    world = make_world(clock)
    world.runs[PARENT_ID].head_sha = "f" * 40
    run_id = dispatch_child(world)
    refusal = refused_at(run_guard(world, clock, trusting_environ(world, run_id)), PARENT)
    assert refusal.observed.endswith(
        f", but comparing its commit {'f' * 40} with refs/heads/main finds nothing (HTTP 404)"
    ), refusal.observed


def test_a_head_sha_that_is_no_commit_sha_is_refused_before_any_compare(clock: FakeClock):
    """Outside text never becomes a path: `../x` is refused as it is."""
    world = make_world(clock)
    world.runs[PARENT_ID].head_sha = "../../x"
    run_id = dispatch_child(world)
    refusal = refused_at(run_guard(world, clock, trusting_environ(world, run_id)), PARENT)
    assert refusal.observed.endswith(", its head_sha '../../x' is no commit SHA")
    assert not [path for path, _ in reads(world) if "compare" in path]


def test_a_branch_name_is_sent_as_path_segments_each_encoded(clock: FakeClock):
    """`coordinator-ref: refs/heads/release/v1+rc`: the compare's `BASE...HEAD` and the tag ref
    keep the ref's slashes (both parameters are multi-segment) and encode the rest."""
    world = make_world(clock)
    branch = "release/v1+rc"
    head = world.add_ref(f"heads/{branch}")
    parent = world.runs[PARENT_ID]
    parent.head_branch, parent.head_sha = branch, head
    run_id = dispatch_child(world)
    environ = trusting_environ(world, run_id, ref=f"refs/heads/{branch}")
    with capture() as exchanges:
        result = run_guard(world, clock, environ)
    assert result.passed, result.log_lines()
    sent = [e.path.removeprefix(REPO) for e in exchanges]
    assert f"/compare/{head}...refs/heads/release/v1%2Brc" in sent
    assert "/git/ref/tags/release/v1%2Brc" in sent
