"""The fake GitHub gives a job a runner only where its runner group and the policy allow it.

A group that does not grant the repository, does not admit the child workflow at its ref, or is
under a policy that leaves the repository out never takes the job: it waits, as on GitHub, with
nothing said (fake_github/runner_groups.py `OrgRunners.admits`, applied by fake_github/actions.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github.runner_groups import OrgRunners
from runner_queue_fallback.fake_github.world import FakeGitHub
from tests.test_sim_support import (
    GROUP,
    PRIMARY,
    advance_to,
    child_inputs,
    dispatch,
    job_of,
    make_world,
    post,
)

REPO = "octo-org/octo-repo"
CHILD = f"{REPO}/.github/workflows/runner-worker.yml"
HOUR = 3600.0


def _world(org: dict[str, Any] | None = None, **group: Any) -> tuple[FakeClock, FakeGitHub]:
    clock = FakeClock()
    world = make_world(clock)
    world.org_runners = OrgRunners("octo-org", **(org or {}))
    world.org_runners.add_group(GROUP, **group)
    return clock, world


def _served(clock: FakeClock, world: FakeGitHub) -> bool:
    """Dispatch the child to GROUP/PRIMARY; whether a runner took its job within an hour."""
    run_id = dispatch(world)
    advance_to(clock, clock.monotonic() + HOUR)
    job = job_of(world, run_id)
    if job["runner_name"] is None:
        assert job["status"] == "queued", job
        assert world.history[run_id].allocated_at is None
        return False
    return True


def test_without_the_organisations_settings_every_job_is_served():
    clock = FakeClock()
    world = make_world(clock)
    assert world.org_runners is None
    assert _served(clock, world)


def test_a_group_with_the_defaults_serves_a_private_repository():
    assert _served(*_world())


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param(f"{CHILD}@refs/heads/main", id="full-ref"),
        pytest.param(f"{CHILD}@main", id="short-ref"),
        pytest.param(
            "OCTO-ORG/Octo-Repo/.github/workflows/runner-worker.yml@main", id="repository-case"
        ),
        pytest.param(f"{CHILD}@*", id="wildcard"),
    ],
)
def test_a_restriction_listing_the_child_at_its_ref_admits_it(entry: str):
    assert _served(*_world(restricted_to_workflows=True, selected_workflows=(entry,)))


def test_a_restriction_naming_the_childs_commit_admits_it():
    clock, world = _world(restricted_to_workflows=True)
    assert world.org_runners is not None
    sha = world.refs["heads/main"]
    world.org_runners.groups[0].selected_workflows = (f"{CHILD}@{sha}",)
    assert _served(clock, world)


@pytest.mark.parametrize(
    "entries",
    [
        pytest.param((f"{REPO}/.github/workflows/nightly.yml@main",), id="another-file"),
        pytest.param((f"{CHILD}@feature",), id="another-ref"),
        pytest.param(("octo-org/other/.github/workflows/runner-worker.yml@main",), id="other-repo"),
        pytest.param((), id="none"),
    ],
)
def test_a_restriction_without_the_child_never_gives_it_a_runner(entries: tuple[str, ...]):
    assert not _served(*_world(restricted_to_workflows=True, selected_workflows=entries))


def test_an_unrestricted_group_ignores_its_selected_workflows():
    assert _served(*_world(selected_workflows=(f"{REPO}/.github/workflows/nightly.yml@main",)))


@pytest.mark.parametrize(
    ("org", "group", "served"),
    [
        pytest.param({}, {"visibility": "selected"}, False, id="selected-without-it"),
        pytest.param(
            {},
            {"visibility": "selected", "selected_repositories": (REPO,)},
            True,
            id="selected-with-it",
        ),
        pytest.param({}, {"visibility": "private"}, True, id="private-for-a-private-one"),
        pytest.param({"private": False}, {}, False, id="public-not-allowed"),
        pytest.param(
            {"private": False}, {"allows_public_repositories": True}, True, id="public-allowed"
        ),
        pytest.param(
            {"private": False},
            {"visibility": "private", "allows_public_repositories": True},
            False,
            id="private-only-for-a-public-one",
        ),
    ],
)
def test_a_group_serves_only_the_repositories_it_grants(
    org: dict[str, Any], group: dict[str, Any], served: bool
):
    assert _served(*_world(org, **group)) is served


@pytest.mark.parametrize(
    ("org", "served"),
    [
        pytest.param({"enabled_repositories": "none"}, False, id="none"),
        pytest.param({"enabled_repositories": "selected"}, False, id="selected-without-it"),
        pytest.param(
            {"enabled_repositories": "selected", "policy_repositories": (REPO.upper(),)},
            True,
            id="selected-with-it",
        ),
    ],
)
def test_the_organisations_policy_decides_for_every_self_hosted_group(
    org: dict[str, Any], served: bool
):
    assert _served(*_world(org)) is served


def test_a_group_the_organisation_does_not_have_serves_nothing():
    clock, world = _world()
    assert world.org_runners is not None
    world.org_runners.groups[0].name = "renamed"
    assert not _served(clock, world)


def test_hosted_runners_are_not_under_the_self_hosted_policy():
    clock, world = _world({"enabled_repositories": "none"})
    world.add_hosted_pool("ubuntu-24.04")
    inputs = child_inputs() | {"runner": json.dumps({"labels": "ubuntu-24.04"})}
    reply = post(
        world, "/actions/workflows/runner-worker.yml/dispatches", {"ref": "main", "inputs": inputs}
    )
    run_id = reply.json()["workflow_run_id"]
    advance_to(clock, HOUR)
    assert job_of(world, run_id)["runner_name"] is not None


def test_a_job_asking_labels_alone_goes_to_a_group_that_admits_it():
    """Two groups carry the labels; the first does not admit the child: the second serves it."""
    clock, world = _world(restricted_to_workflows=True)
    world.add_pool("nv-cpu-open", PRIMARY, runners=1)
    assert world.org_runners is not None
    world.org_runners.add_group("nv-cpu-open")
    inputs = child_inputs() | {"runner": json.dumps({"labels": PRIMARY})}
    reply = post(
        world, "/actions/workflows/runner-worker.yml/dispatches", {"ref": "main", "inputs": inputs}
    )
    run_id = reply.json()["workflow_run_id"]
    advance_to(clock, HOUR)
    assert job_of(world, run_id)["runner_group_name"] == "nv-cpu-open"


def test_a_job_that_never_gets_a_runner_is_cancelled_as_any_queued_one():
    """The coordinator's deadline still ends it: cancelled, no runner, proven by a read."""
    clock, world = _world(restricted_to_workflows=True)
    run_id = dispatch(world)
    advance_to(clock, 600.0)
    assert post(world, f"/actions/runs/{run_id}/cancel").status == 202
    advance_to(clock, 700.0)
    job = job_of(world, run_id)
    assert (job["status"], job["conclusion"], job["runner_name"]) == (
        "completed",
        "cancelled",
        None,
    )
