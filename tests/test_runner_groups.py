"""The optional `runners-token` and `preflight`'s runner-group checks (action/runner_groups.py)."""

from __future__ import annotations

import contextlib
import io
import re
from typing import Any, cast
from urllib.parse import parse_qs

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.action.workflow_restriction import restriction_admits
from runner_queue_fallback.commands.flags import INPUT_HELP
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.inputs import env_name
from runner_queue_fallback.fake_github.runner_groups import STAND_IN_TOKEN, OrgRunners
from runner_queue_fallback.github.calls import Calls
from runner_queue_fallback.github.runner_groups import RunnerReads
from runner_queue_fallback.tools.simulate.steps import TOKEN
from tests.test_preflight import World

RUNNERS_TOKEN = "ghs_runnersreadonly0123456789abcdef"


def test_no_flag_takes_the_runners_token():
    """Like `token`, the runners token comes only from a variable, never a flag's value."""
    code, out = World().preflight("--runners-token", RUNNERS_TOKEN)
    assert code == 2, out
    assert "runners-token" not in INPUT_HELP


def test_a_blank_runners_token_env_names_the_input_and_sends_nothing():
    """`--runners-token-env NAME` with NAME unset: a clear error naming the input, no request."""
    world = World()
    code, out = world.preflight("--runners-token-env", "RQF_NOT_SET")
    assert code == 2, out
    assert "runners-token" in out, out
    assert "RQF_NOT_SET" in out, out
    assert world.github.ledger == []


def test_the_runners_token_is_masked_and_never_printed():
    """The runners token is registered as a secret before anything runs, and shown nowhere else."""
    world = World()
    world.inputs["runners-token"] = RUNNERS_TOKEN
    _, out = world.preflight()
    masks = [line for line in out.splitlines() if line.startswith("::add-mask::")]
    assert f"::add-mask::{RUNNERS_TOKEN}" in masks, out
    assert out.count(RUNNERS_TOKEN) == 1, out


def test_a_runners_token_with_a_space_is_refused_without_showing_it():
    """A malformed runners token fails the input check, names the input, hides the value."""
    world = World()
    world.inputs["runners-token"] = "ghs_abc def"
    code, out = world.preflight()
    assert code == 2, out
    assert "runners-token" in out
    assert "ghs_abc" not in out.replace("::add-mask::ghs_abc def", "")
    assert world.github.ledger == []
    assert env_name("runners-token") == "INPUT_RUNNERS-TOKEN"


# -- the checks, against the fake GitHub's organisation -------------------------------------------

REPO = "octo-org/octo-repo"
CHILD = f"{REPO}/.github/workflows/runner-worker.yml@refs/heads/main"


def _org_world(**group: object) -> World:
    world = World()
    world.github.add_workflow("runner-worker.yml", "main")
    org = OrgRunners("octo-org", readers={RUNNERS_TOKEN}, expired={"ghs_expired"})
    org.add_group("nv-cpu-general", **group)
    org.add_runner("nv-cpu-general", ("self-hosted", "Linux-AMD64-CPU16"))
    org.add_runner("nv-cpu-general", ("linux-amd64-cpu16",), busy=True)
    org.add_runner("nv-cpu-general", ("linux-amd64-cpu16",), status="offline")
    world.github.org_runners = org
    world.inputs["runners-token"] = RUNNERS_TOKEN
    return world


def _runner_lines(out: str) -> list[str]:
    """The runner-group checks' lines, verdict first."""
    names = ("runner group", "runner policy", "runners of", "runners with")
    return [
        line.strip()
        for line in out.splitlines()
        if line.startswith("  ")
        and not line.strip().startswith("-")
        and any(f" {n}" in line for n in names)
    ]


def _line(out: str, name: str) -> str:
    """The one check line whose name starts with `name` (after the verdict)."""
    found = [
        line for line in _runner_lines(out) if re.match(rf"\S+( \S+)?\s+{re.escape(name)}", line)
    ]
    assert len(found) == 1, (name, out)
    return found[0]


def test_a_group_that_admits_the_child_passes_every_check_and_counts_runners():
    """Exists, grants, admits, policy all: pass; runners counted by label set, case ignored."""
    world = _org_world(restricted_to_workflows=True, selected_workflows=(CHILD,))
    code, out = world.preflight()
    assert code == 0, out
    assert "pass        runner group nv-cpu-general: exists" in out, out
    assert "pass        runner group nv-cpu-general grants octo-org/octo-repo" in out, out
    assert "pass        runner group nv-cpu-general admits the child workflow" in out, out
    assert "pass        self-hosted runner policy" in out, out
    assert "1 online idle, 1 online busy, 1 offline" in out, out
    assert RUNNERS_TOKEN not in out.replace(f"::add-mask::{RUNNERS_TOKEN}", "")


def test_a_restriction_without_the_child_fails_and_prints_the_entry_it_needs():
    """A workflow restriction that lists another file: FAIL, exit 1, the exact entry to add."""
    other = f"{REPO}/.github/workflows/other.yml@refs/heads/main"
    world = _org_world(restricted_to_workflows=True, selected_workflows=(other,))
    code, out = world.preflight()
    assert code == 1, out
    assert "FAIL        runner group nv-cpu-general admits the child workflow" in out, out
    assert f"{REPO}/.github/workflows/runner-worker.yml@main" in out, out


def test_a_wildcard_restriction_is_not_proven_and_exits_zero():
    """An entry of another form (a wildcard) is never a FAIL: not proven, exit 0."""
    world = _org_world(
        restricted_to_workflows=True, selected_workflows=(f"{REPO}/.github/workflows/*@*",)
    )
    code, out = world.preflight()
    assert code == 0, out
    assert "not proven  runner group nv-cpu-general admits the child workflow" in out, out


def test_a_missing_group_and_a_group_not_granting_the_repository_fail():
    """A candidate's group absent from the whole listing: FAIL; `selected` without us: FAIL."""
    world = _org_world(visibility="selected", selected_repositories=("octo-org/other",))
    code, out = world.preflight()
    assert code == 1, out
    assert "FAIL        runner group nv-cpu-general grants octo-org/octo-repo" in out, out
    world = _org_world()
    world.inputs["runners"] = '[{"group":"NV-CPU-GENERAL","labels":"linux-amd64-cpu16"}]'
    assert world.preflight()[0] == 0  # a name compared ignoring case
    world.inputs["runners"] = '[{"group":"nv-gpu","labels":"linux-amd64-cpu16"}]'
    code, out = world.preflight()
    assert code == 1, out
    assert "FAIL        runner group nv-gpu: organisation octo-org has no group" in out, out


def test_a_policy_that_enables_no_repository_fails():
    """The organisation's self-hosted-runner policy `none`: FAIL with the fix."""
    world = _org_world()
    assert world.github.org_runners is not None
    world.github.org_runners.enabled_repositories = "none"
    code, out = world.preflight()
    assert code == 1, out
    assert "FAIL        self-hosted runner policy" in out, out


def test_a_refused_token_leaves_each_check_not_checked_naming_its_permission():
    """403: the policy names "Actions policies", each group "Self-hosted runners"; exit 0."""
    world = _org_world()
    world.inputs["runners-token"] = "ghs_noperm"
    code, out = world.preflight()
    assert code == 0, out
    policy = _line(out, "self-hosted runner policy")
    assert policy.startswith("not checked"), out
    assert "403" in policy, out
    assert '"Actions policies" (read)' in policy, out
    group = _line(out, "runner group nv-cpu-general")
    assert group.startswith("not checked"), out
    assert "403" in group, out
    assert '"Self-hosted runners" (read)' in group, out


def test_an_expired_token_leaves_every_check_not_checked_and_exits_zero():
    """401 on the first read: every check not checked, each naming what it needs."""
    world = _org_world()
    world.inputs["runners-token"] = "ghs_expired"
    code, out = world.preflight()
    assert code == 0, out
    for name in ("self-hosted runner policy", "runner group nv-cpu-general"):
        line = _line(out, name)
        assert line.startswith("not checked"), out
        assert "401" in line, out
        assert "(read)" in line, out


def test_a_token_without_actions_policies_still_checks_the_groups():
    """Self-hosted runners (read) alone: the groups are checked, the policy is not."""
    world = _org_world()
    assert world.github.org_runners is not None
    world.github.org_runners.policy_readers = set()
    code, out = world.preflight()
    assert code == 0, out
    assert _line(out, "self-hosted runner policy").startswith("not checked"), out
    assert _line(out, "runner group nv-cpu-general: exists").startswith("pass"), out


@pytest.mark.parametrize(
    ("listed", "verdict", "code"),
    [(True, "pass", 0), (False, "FAIL", 1)],
)
def test_a_selected_policy_is_read_whole_and_passes_or_fails_on_the_repository(
    listed, verdict, code
):
    """`enabled_repositories: selected`: the policy's repositories, every page, name ours or not."""
    world = _org_world()
    org = world.github.org_runners
    assert org is not None
    others = tuple(f"octo-org/repo-{n:03d}" for n in range(120))
    org.enabled_repositories = "selected"
    org.policy_repositories = (*others, REPO.upper()) if listed else others
    got, out = world.preflight()
    assert got == code, out
    line = _line(out, "self-hosted runner policy")
    assert line.startswith(verdict), out
    if not listed:
        assert "120 selected repositories, not this one" in line, out
        assert "Fix: in the organisation's Actions policies" in line, out
    pages = [e.query for e in world.github.ledger if e.path.endswith("/repositories")]
    assert [parse_qs(q)["page"] for q in pages] == [["1"], ["2"]]


def test_a_group_on_the_listings_second_page_is_found():
    """The group listing is read to its end: a group past the first 100 exists."""
    world = _org_world()
    org = world.github.org_runners
    assert org is not None
    org.groups[:0] = [org.add_group(f"team-{n:03d}") for n in range(130)]
    del org.groups[131:]
    code, out = world.preflight()
    assert code == 0, out
    assert _line(out, "runner group nv-cpu-general: exists").startswith("pass"), out


def _no_group_world(**group: object) -> World:
    world = _org_world(**group)
    world.inputs["runners"] = '[{"labels":"linux-amd64-cpu16"}]'
    return world


def test_a_candidate_without_a_group_counts_the_runners_of_the_groups_it_may_use():
    """A `selected` group that lists the repository is one it may use: its runners count."""
    world = _no_group_world(visibility="selected", selected_repositories=(REPO,))
    code, out = world.preflight()
    assert code == 0, out
    line = _line(out, "runners with linux-amd64-cpu16 (no group)")
    assert line.startswith("pass"), out
    assert "(nv-cpu-general): 1 online idle, 1 online busy, 1 offline" in line, out


def test_a_candidate_without_a_group_and_no_group_granting_it_is_not_proven():
    """No group grants the repository: not proven (its own or the enterprise's runners may)."""
    world = _no_group_world(visibility="selected", selected_repositories=("octo-org/other",))
    code, out = world.preflight()
    assert code == 0, out
    line = _line(out, "runners with linux-amd64-cpu16 (no group)")
    assert line.startswith("not proven"), out
    assert "repository's own or the enterprise's runners" in line, out


def test_a_candidate_without_a_group_skips_a_group_that_does_not_admit_the_child():
    """A group granting the repository but restricted to another workflow is not one it may use."""
    other = f"{REPO}/.github/workflows/other.yml@main"
    world = _no_group_world(restricted_to_workflows=True, selected_workflows=(other,))
    _, out = world.preflight()
    assert _line(out, "runners with linux-amd64-cpu16 (no group)").startswith("not proven"), out


@pytest.mark.parametrize(("allows_public", "verdict"), [(False, "not proven"), (True, "pass")])
def test_a_token_that_cannot_see_the_repository_still_reads_its_organisations_groups(
    allows_public, verdict
):
    """404 on the repository: its owner is the organisation read; whether it is public is
    unknown, so a group closed to public repositories is not proven to grant it, never FAILed."""
    world = _org_world(allows_public_repositories=allows_public)
    org = world.github.org_runners
    assert org is not None
    org.repository_readers = set()
    code, out = world.preflight()
    assert code == 0, out
    assert _line(out, "runner group nv-cpu-general: exists").startswith("pass"), out
    line = _line(out, "runner group nv-cpu-general grants")
    assert line.startswith(verdict), out
    if verdict == "not proven":
        assert "could not read whether the repository is private (404)" in line, out
    assert _line(out, "self-hosted runner policy").startswith("pass"), out


class _Pages:
    """A `Calls` stand-in serving the policy's listing without `total_count`, 100 a page."""

    def __init__(self, names: list[str]) -> None:
        self.names, self.pages = names, 0

    def get(self, path: str, params: dict[str, str], model: Any, deadline: None) -> Any:
        del path, deadline
        self.pages += 1
        page, size = int(params["page"]), int(params["per_page"])
        items = [{"full_name": n} for n in self.names[(page - 1) * size : page * size]]
        return model.model_validate({"repositories": items})


def test_a_listing_without_total_count_is_read_until_a_short_page():
    """GitHub's description does not promise `total_count` on the policy's listing."""
    names = [f"octo-org/repo-{n:03d}" for n in range(103)]
    calls = _Pages(names)
    reads = RunnerReads(cast("Calls", calls), REPO)
    assert reads.policy_repositories("octo-org") == names
    assert calls.pages == 2


VERDICTS = ("pass", "FAIL", "not checked", "not proven")


@pytest.mark.parametrize(
    "setting",
    ["admits", "wildcard", "not-granted", "public", "policy-none", "refused", "user", "no-group"],
)
def test_every_runner_check_is_one_of_four_verdicts_and_each_not_checked_names_a_permission(
    setting,
):
    """pass, FAIL (with a fix), not checked (why, the permission), not proven: nothing else."""
    settings: dict[str, dict[str, object]] = {
        "admits": {"restricted_to_workflows": True, "selected_workflows": (CHILD,)},
        "wildcard": {"restricted_to_workflows": True, "selected_workflows": ("*",)},
        "not-granted": {"visibility": "selected"},
    }
    group = settings.get(setting, {})
    world = _no_group_world(**group) if setting == "no-group" else _org_world(**group)
    org = world.github.org_runners
    assert org is not None
    org.private = setting != "public"
    org.enabled_repositories = "none" if setting == "policy-none" else "all"
    org.owner_type = "User" if setting == "user" else "Organization"
    if setting == "refused":
        world.inputs["runners-token"] = "ghs_noperm"
    code, out = world.preflight()
    lines = _runner_lines(out)
    assert lines, out
    for line in lines:
        verdict = next(v for v in VERDICTS if line.startswith(v))
        if verdict == "FAIL":
            assert "Fix:" in line, line
        if verdict == "not checked":
            assert "(read)" in line, line
    assert code == (1 if any(line.startswith("FAIL") for line in lines) else 0), out


def test_without_runners_token_no_runner_group_request_is_made():
    """No runners token: preflight reads exactly what it read before."""
    world = _org_world()
    del world.inputs["runners-token"]
    world.preflight()
    paths = [e.path for e in world.github.ledger]
    assert not [p for p in paths if p.startswith("/orgs/") or p.endswith("/actions/runners")]


def test_without_runners_token_preflight_sends_the_same_requests_as_before():
    """No runners token: request for request what preflight sends on a world with no runner
    groups at all, and the same count (4: the source ref, the parent run, workflow-ref and the
    child workflow's file; the first read proves the token, the replies' headers the quota)."""
    plain = World()
    plain.github.add_workflow("runner-worker.yml", "main")
    with_org = _org_world()
    del with_org.inputs["runners-token"]
    outs = [world.preflight()[1] for world in (plain, with_org)]
    requests = [
        [(e.method, e.path, e.query) for e in world.github.ledger] for world in (plain, with_org)
    ]
    assert requests[0] == requests[1]
    assert len(requests[1]) == PLAIN_REQUESTS, requests[1]
    assert all(f"API requests: {PLAIN_REQUESTS} sent, all GET" in out for out in outs), outs
    assert [_runner_lines(out) for out in outs] == [[], []]


PLAIN_REQUESTS = 4


def test_the_runners_token_is_used_only_for_gets_and_never_reaches_the_child():
    """Every request with the runners token is a GET; the dispatch carries no trace of it."""
    world = _org_world()
    world.preflight()
    number = world.github.client_number(RUNNERS_TOKEN)
    assert number is not None
    assert {e.method for e in world.github.ledger if e.client == number} == {"GET"}
    world.coordinate()
    assert world.github.runs
    assert all(RUNNERS_TOKEN not in repr(r.inputs) for r in world.github.runs.values())


def test_the_coordinator_keeps_the_runners_token_out_of_state_outputs_summary_and_log():
    """Given to the coordinator (part of its inputs), it is masked and saved nowhere; the
    requests that carry it are the pools' access reads, only GETs, never a write."""
    world = _org_world()
    sim = world.coordinate()
    assert sim.exit_code == 0, sim.log
    kept = [*sim.state.keys(), *sim.state.values(), *sim.outputs.values(), sim.summary]
    assert all(RUNNERS_TOKEN not in text for text in kept)
    for log in (sim.log, sim.post_log):
        assert RUNNERS_TOKEN not in log.replace(f"::add-mask::{RUNNERS_TOKEN}", "")
    number = world.github.client_number(RUNNERS_TOKEN)
    assert number is not None  # the coordinator read the group with it
    sent = [e for e in world.github.ledger if e.client == number]
    assert sent
    assert {e.method for e in sent} == {"GET"}
    assert not [e for e in sent if "/dispatches" in e.path or e.path.endswith("/cancel")]
    assert f"::add-mask::{RUNNERS_TOKEN}" in sim.log


def test_a_user_repository_reads_only_its_own_runners():
    """No organisation: only `GET /repos/{owner}/{repo}/actions/runners` after the repository."""
    world = _org_world()
    assert world.github.org_runners is not None
    world.github.org_runners.owner_type = "User"
    code, out = world.preflight()
    assert code == 0, out
    assert not [e for e in world.github.ledger if e.path.startswith("/orgs/")]
    assert "its own runners" in out, out


def test_restriction_matching_is_exact_or_not_proven():
    """Full or short refs, case-blind owner/repo, SHA entries, unknown forms."""
    sha = "a" * 40
    wf = "runner-worker.yml"

    def admits(entry: str, ref: str = "main", commit: str | None = sha) -> bool | None:
        return restriction_admits([entry], REPO, wf, ref, commit)

    assert admits(CHILD) is True
    assert admits(CHILD.replace(REPO, REPO.upper()).replace("refs/heads/main", "main")) is True
    assert admits(f"{REPO}/.github/workflows/{wf}@main", "refs/heads/main") is True
    assert admits(f"{REPO}/.github/workflows/{wf}@{sha}") is True
    assert admits(f"{REPO}/.github/workflows/{wf}@{'b' * 40}") is False
    assert admits(f"{REPO}/.github/workflows/{wf}@{sha}", commit=None) is None
    assert admits(f"{REPO}/.github/workflows/{wf}@dev") is False
    assert admits(f"{REPO}/.github/workflows/{wf}@refs/tags/main", "refs/heads/main") is False
    assert admits(f"{REPO}/.github/workflows/*@main") is None


# -- preflight --simulate SCENARIO: a catalogue world with runner groups ---------------------------


def _cli(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(argv, {}, clock=FakeClock())
    return code, out.getvalue()


def test_preflight_simulate_group_not_admitted_fails_with_the_entry_the_group_needs():
    """The scenario's first group restricts workflows to another file: FAIL and the entry; the
    fake's stand-in runners token reads it, and is shown nowhere but its mask."""
    code, out = _cli(["preflight", "--simulate", "group-not-admitted"])
    assert code == 1, out
    line = _line(out, "runner group nv-cpu-restricted admits the child workflow")
    assert line.startswith("FAIL"), out
    assert "Fix: add the entry octo-org/octo-repo/.github/workflows/runner-worker.yml@main" in line
    assert _line(out, "runner group nv-cpu-general admits the child workflow").startswith("pass")
    assert out.count(STAND_IN_TOKEN) == 1, out  # the ::add-mask:: line
    code, out = _cli(["preflight", "--simulate", "group-not-admitted", "--workflow-ref", "dev"])
    assert "runner-worker.yml@dev" in _line(out, "runner group nv-cpu-restricted admits"), out


def test_preflight_simulate_names_the_scenarios_when_one_is_unknown():
    code, out = _cli(["preflight", "--simulate", "group-not-admited"])
    assert code == 2, out
    assert "unknown scenario 'group-not-admited'" in out, out
    assert "group-not-admitted" in out.split("shows:")[1], out


def test_a_scenario_without_runner_groups_sends_no_runners_token():
    """`preflight --simulate fallback`: no organisation in the world, so no group check."""
    code, out = _cli(["preflight", "--simulate", "fallback"])
    assert code == 0, out
    assert _runner_lines(out) == [], out
    assert "add-mask" not in out.replace(f"::add-mask::{TOKEN}", ""), out
