"""Issue 49: the optional `runners-token` and `preflight`'s runner-group checks."""

from __future__ import annotations

from runner_queue_fallback.commands.flags import INPUT_HELP
from runner_queue_fallback.core.inputs import env_name
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

from runner_queue_fallback.action.runner_groups import restriction_admits  # noqa: E402
from runner_queue_fallback.fake_github.runner_groups import OrgRunners  # noqa: E402

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


def _lines(out: str) -> list[str]:
    return [line.strip() for line in out.splitlines() if "runner group" in line or "policy" in line]


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


def test_a_refused_or_expired_runners_token_leaves_the_groups_not_checked_and_exits_zero():
    """403 (no permission) or 401 (expired): not checked, naming the permission; exit 0."""
    for token, status in (("ghs_noperm", "403"), ("ghs_expired", "401")):
        world = _org_world()
        world.inputs["runners-token"] = token
        code, out = world.preflight()
        assert code == 0, out
        assert "not checked runner groups" in out, out
        assert status in out, out
        assert "Self-hosted runners (read)" in out, out


def test_without_runners_token_no_runner_group_request_is_made():
    """No runners token: preflight reads exactly what it read before."""
    world = _org_world()
    del world.inputs["runners-token"]
    world.preflight()
    paths = [e.path for e in world.github.ledger]
    assert not [p for p in paths if p.startswith("/orgs/") or p.endswith("/actions/runners")]


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
