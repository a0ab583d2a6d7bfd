"""The guard: rules the fixed mutation runner found held by no test (issue 35).

Each test states one rule of `action/guard.py` and fails when it breaks: a parent whose workflow ref
cannot be known is refused saying why (no ref is made up for it), and a child whose own workflow
cannot be named is refused before any listing. The guard runs as the CLI builds it, against the
fake GitHub (`tests.test_guard`).
"""

from __future__ import annotations

from runner_queue_fallback.action.guard import ORIGINAL, PARENT
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import FakeGitHub
from tests.outside import Tamper, json_body, with_json
from tests.test_guard import (
    dispatch_child,
    guard_environ,
    make_world,
    parent_shows,
    refused_at,
    run_guard,
    trusting_environ,
)


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
