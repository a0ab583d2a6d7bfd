"""The access phase (action/sequence/access.py), end to end through `main` on the fake GitHub.

With `runners-token`, a candidate whose pool is proven unable to serve the child is skipped at
once: no dispatch, no queue time, an entry in `attempts-json`, a line in the log and the summary.
Anything short of proof dispatches as without the token; every candidate skipped is `no-pool`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner_queue_fallback.core.outcome import NO_POOL
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.runner_groups import OrgRunners
from runner_queue_fallback.tools.simulate.steps import TOKEN, SimulationRun
from tests.invariants import dispatch_posts
from tests.outside import MARKER, PLANTS
from tests.scenario import CPU8, CPU16, FOREVER, Scenario, attempts
from tests.test_sim_support import GROUP

RUNNERS_TOKEN = "ghs_runnersreadonly0123456789abcdef"
EXPIRED = "ghs_expired0123456789abcdef"
REPO = "octo-org/octo-repo"
FIRST = "nv-cpu-first"
CHILD = f"{REPO}/.github/workflows/runner-worker.yml@refs/heads/main"
OTHER = f"{REPO}/.github/workflows/nightly.yml@refs/heads/main"
#: Candidate 1 (FIRST / CPU16, free) and candidate 2 (GROUP / CPU8, free), 1-minute queues.
RUNNERS = json.dumps([{"group": FIRST, "labels": CPU16}, {"group": GROUP, "labels": CPU8}])


def world(
    first: dict[str, Any] | None = None,
    second: dict[str, Any] | None = None,
    *,
    busy: bool = False,
    faults: tuple[Fault, ...] = (),
    **org: Any,
) -> Scenario:
    """Candidate 1's group FIRST with `first`'s settings (absent when None), candidate 2's GROUP
    with `second`'s (admitting all by default).

    Each pool has a free runner (candidate 2's busy for good with `busy`), so GitHub serves the
    first candidate whose group lets it: the fake refuses runners to a group that does not.
    """
    s = Scenario(watched=True, faults=faults)
    s.world.add_pool(FIRST, CPU16, runners=1)
    s.world.add_pool(GROUP, CPU8, runners=1, busy=FOREVER if busy else ())
    access = {"readers": {RUNNERS_TOKEN}, "expired": {EXPIRED}, **org}
    owners = OrgRunners("octo-org", **access)
    if first is not None:
        owners.add_group(FIRST, **first)
    owners.add_group(GROUP, **(second or {}))
    s.world.org_runners = owners
    s.inputs |= {"runners": RUNNERS, "queue-timeout-minutes": "1", "runners-token": RUNNERS_TOKEN}
    return s


def sent_with(s: Scenario, token: str) -> list[tuple[str, str]]:
    number = s.world.client_number(token)
    return [(e.method, e.path) for e in s.world.ledger if number is not None and e.client == number]


def dispatched_to(s: Scenario) -> list[str]:
    """The labels of each child dispatched, in order (the parent run has no `runner` input)."""
    runs = [run for run in s.world.runs.values() if "runner" in run.inputs]
    return [json.loads(run.inputs["runner"])["labels"] for run in runs]


def error_line(run: SimulationRun) -> str:
    [line] = [line for line in run.log.splitlines() if line.startswith("::error")]
    return line


# -- each skip reason: no dispatch, no queue time, the next candidate at once -------------------

SKIPS: dict[str, dict[str, Any] | None] = {
    "group-not-found": None,
    "repository-not-granted": {"visibility": "selected", "selected_repositories": ()},
    "workflow-not-admitted": {"restricted_to_workflows": True, "selected_workflows": (OTHER,)},
}


@pytest.mark.parametrize("reason", list(SKIPS))
def test_a_pool_proven_unable_to_serve_is_skipped_at_once_and_the_next_serves(reason: str):
    s = world(SKIPS[reason])
    run = s.run()
    assert run.exit_code == 0, run.log
    assert run.outputs["outcome"] == "success"
    assert run.outputs["attempts"] == "1"  # dispatches only
    skipped, served = attempts(run)
    assert skipped["outcome"] == "skipped"
    assert skipped["skip-reason"] == reason
    assert skipped["fix"]
    assert skipped["attempt"] is None
    assert skipped["run-id"] is None
    assert skipped["group"] == FIRST
    assert served["attempt"] == 2
    assert served["outcome"] == "run success, worker success"
    assert f"candidate 1/2 ({FIRST} / {CPU16}): skipped ({reason}): " in run.log
    assert (
        f"candidate 2/2 ({GROUP} / {CPU8}): runner group {GROUP} exists, grants {REPO}" in run.log
    )
    assert f"**Skipped:** candidate 1 ({FIRST} / {CPU16}), {reason}: " in run.summary
    assert "| 1 | nv-cpu-first / linux-amd64-cpu16 | 1 min | - | - | skipped |" in run.summary
    # No dispatch to the skipped pool, and no queue time: the one dispatch goes out at once.
    assert dispatched_to(s) == [CPU8]
    [post] = dispatch_posts(s.world)
    assert post < 10.0, post


def test_a_restriction_is_compared_with_the_commit_the_preflight_read():
    """An entry naming workflow-ref's commit admits the child (usable, dispatched); one naming
    another commit is proven not to (skipped): the access reads know the commit."""
    path = f"{REPO}/.github/workflows/runner-worker.yml"
    same = world({"restricted_to_workflows": True, "selected_workflows": ()})
    commit = same.world.refs["heads/main"]
    owners = same.world.org_runners
    assert owners is not None
    owners.groups[0].selected_workflows = (f"{path}@{commit}",)
    run = same.run()
    assert run.exit_code == 0, run.log
    assert dispatched_to(same) == [CPU16]
    assert f"candidate 1/2 ({FIRST} / {CPU16}): runner group {FIRST} exists" in run.log
    other = world({"restricted_to_workflows": True, "selected_workflows": (f"{path}@{'b' * 40}",)})
    run = other.run()
    assert run.exit_code == 0, run.log
    assert dispatched_to(other) == [CPU8]
    assert attempts(run)[0]["skip-reason"] == "workflow-not-admitted"


def test_a_policy_that_leaves_the_repository_out_skips_every_pool_as_no_pool():
    """The policy is the organisation's: no candidate can run, nothing is dispatched."""
    s = world({}, enabled_repositories="none")
    run = s.run()
    assert run.exit_code == 1, run.log
    assert run.outputs["outcome"] == NO_POOL
    assert [a["skip-reason"] for a in attempts(run)] == ["policy-off", "policy-off"]
    assert dispatch_posts(s.world) == []


def test_a_skip_costs_no_dispatch_and_no_queue_time_against_the_same_run_without_the_token():
    """Without the token the first pool's child waits out its 1-minute deadline, then falls
    back; with it the first pool is skipped and the sequence is that much shorter."""
    first = {"restricted_to_workflows": True, "selected_workflows": (OTHER,)}
    without = world(first)
    plain = without.run({"runners-token": ""})
    assert plain.exit_code == 0, plain.log
    assert dispatched_to(without) == [CPU16, CPU8]
    late = dispatch_posts(without.world)[-1]
    assert late >= 60.0  # the first pool's deadline
    skipping = world(first)
    run = skipping.run()
    assert run.exit_code == 0, run.log
    [post] = dispatch_posts(skipping.world)
    assert post <= late - 60.0
    assert skipping.clock.monotonic() <= without.clock.monotonic() - 60.0
    assert not [e for e in skipping.world.ledger if e.path.endswith("/cancel")]


def test_each_access_read_is_made_once_per_sequence_with_the_runners_token_only():
    """Two candidates, one listing of the groups and one of the policy; only GETs; none of them
    spends `token` (the repository's quota)."""
    s = world({"restricted_to_workflows": True, "selected_workflows": (OTHER,)})
    run = s.run()
    assert run.exit_code == 0, run.log
    reads = sent_with(s, RUNNERS_TOKEN)
    assert {method for method, _ in reads} == {"GET"}
    paths = [path for _, path in reads]
    assert len(paths) == len(set(paths)), paths
    assert paths.count("/orgs/octo-org/actions/runner-groups") == 1
    main = [path for _, path in sent_with(s, TOKEN)]
    assert main
    assert not [p for p in main if p.startswith("/orgs/") or p == f"/repos/{REPO}"]
    assert "runners-token: " in run.log
    assert RUNNERS_TOKEN not in run.log.replace(f"::add-mask::{RUNNERS_TOKEN}", "")


# -- every candidate skipped: no-pool ---------------------------------------------------------------


def test_every_candidate_skipped_is_no_pool_naming_each_reason_and_fix():
    s = world(None, {"restricted_to_workflows": True, "selected_workflows": (OTHER,)})
    run = s.run()
    assert run.exit_code == 1, run.log
    assert run.outputs["outcome"] == NO_POOL
    assert run.outputs["attempts"] == "0"
    assert run.outputs["run-id"] == ""
    entries = attempts(run)
    assert [e["skip-reason"] for e in entries] == ["group-not-found", "workflow-not-admitted"]
    assert all(e["run-id"] is None and e["attempt"] is None for e in entries)
    assert dispatch_posts(s.world) == []
    assert dispatched_to(s) == []
    line = error_line(run)
    assert "title=no-pool%3A no pool can serve this workflow::" in line
    pools = (f"{FIRST} / {CPU16}", f"{GROUP} / {CPU8}")
    for number, (pool, entry) in enumerate(zip(pools, entries, strict=True), start=1):
        assert f"candidate {number} ({pool}): {entry['skip-reason']}; fix: {entry['fix']}" in line
    assert "create it, or correct the candidate's `group`" in line
    assert f"add the entry {REPO}/.github/workflows/runner-worker.yml@main" in line
    assert run.summary.startswith("## no-pool: no pool can serve this workflow; every candidate")


def test_a_skip_then_a_pool_without_a_runner_is_no_runner_and_says_what_was_skipped():
    """Not every candidate was skipped: the one dispatched ran out of queue, so no-runner."""
    s = world(None, busy=True)
    run = s.run()
    assert run.exit_code == 1, run.log
    assert run.outputs["outcome"] == "no-runner"
    assert run.outputs["attempts"] == "1"
    assert [a["outcome"] for a in attempts(run)] == [
        "skipped",
        "cancelled before a runner (queue timeout)",
    ]
    assert "all 1 queue(s) exhausted" in error_line(run)
    assert "1 skipped before any dispatch" in error_line(run)


# -- anything short of proof dispatches as without the token -------------------------------------


NOT_PROVEN: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, str]]] = {
    "403, a token without the permission": ({}, {"readers": set()}, {}),
    "401, an expired token": ({}, {}, {"runners-token": EXPIRED}),
    "a wildcard restriction": (
        {"restricted_to_workflows": True, "selected_workflows": (f"{REPO}/.github/workflows/*@*",)},
        {},
        {},
    ),
    "a user's repository": ({}, {"owner_type": "User"}, {}),
    "a server without the policy endpoints": ({}, {"serves_policy": False}, {}),
    "a repository the token cannot see": ({}, {"repository_readers": set()}, {}),
}


@pytest.mark.parametrize("case", list(NOT_PROVEN))
def test_anything_short_of_proof_dispatches_as_without_the_token(case: str):
    first, org, changes = NOT_PROVEN[case]
    with_token = world(first, **org)
    run = with_token.run(changes)
    plain = world(first, **org)
    baseline = plain.run({"runners-token": ""})
    assert run.exit_code == baseline.exit_code == 0, run.log
    assert dispatched_to(with_token) == dispatched_to(plain) == [CPU16]
    assert [a["outcome"] for a in attempts(run)] == [a["outcome"] for a in attempts(baseline)]
    assert "skipped (" not in run.log
    assert "is not proven unable to serve the child (" in run.log
    assert dispatch_posts(with_token.world) == dispatch_posts(plain.world)


def test_a_failed_group_listing_is_not_proven_and_dispatches():
    fault = Fault(kind="status", status=502, path=r"/runner-groups$")
    s = world({"restricted_to_workflows": True, "selected_workflows": (OTHER,)}, faults=(fault,))
    run = s.run()
    assert run.exit_code == 0, run.log  # candidate 1 waited its deadline, candidate 2 served
    assert dispatched_to(s) == [CPU16, CPU8]
    assert "not proven unable to serve the child" in run.log
    assert "skipped (" not in run.log


def test_a_candidate_without_a_group_is_not_proven_and_dispatches():
    s = world({})
    s.inputs["runners"] = json.dumps([{"labels": CPU16}, {"group": GROUP, "labels": CPU8}])
    run = s.run()
    assert run.exit_code == 0, run.log
    assert attempts(run)[0]["outcome"] == "run success, worker success"
    assert "(no group)" in run.log


# -- without runners-token nothing changes -------------------------------------------------------


def test_without_the_runners_token_no_access_read_is_made_and_nothing_is_said():
    """The same misconfigured organisation: the first child waits out its deadline as before."""
    s = world({"restricted_to_workflows": True, "selected_workflows": (OTHER,)})
    run = s.run({"runners-token": ""})
    assert run.exit_code == 0, run.log
    assert dispatched_to(s) == [CPU16, CPU8]
    assert not [
        e for e in s.world.ledger if e.path.startswith("/orgs/") or e.path == f"/repos/{REPO}"
    ]
    assert s.world.client_number(RUNNERS_TOKEN) is None
    assert "skipped" not in run.log
    assert "runners-token: " not in run.log
    assert "not proven" not in run.log


# -- the organisation's text is outside text ------------------------------------------------------


def test_the_organisations_group_names_in_a_skip_never_become_a_command():
    """group-not-found lists the organisation's groups: each carries every command syntax."""
    s = world(None)
    assert s.world.org_runners is not None
    for plant in PLANTS:
        s.world.org_runners.add_group(f"evil{plant}")
    run = s.run()  # watched: no command from outside text, in the log or the summary
    assert run.exit_code == 0, run.log
    assert MARKER in run.log  # the names are shown, escaped
    assert attempts(run)[0]["skip-reason"] == "group-not-found"
