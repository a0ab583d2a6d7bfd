"""GitHub's own API description is a test: every request the program sends and every reply the fake
serves conform to it, over the scenario catalogue, the other commands and 200 fuzzed runs.

The descriptions are `@octokit/openapi`'s, subset by scripts/api_description.py into
tests/data/openapi (see tests/api_contract.py for what is checked and the named exceptions).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import re
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner_queue_fallback import cli
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.errors import AppTokenUnavailable, Unauthorized
from runner_queue_fallback.core.inputs import env_name
from runner_queue_fallback.fake_github.apps import generate_app_keys
from runner_queue_fallback.fake_github.runner_groups import OrgRunners
from runner_queue_fallback.fake_github.world import API_VERSIONS, OLDER_SERVER, FakeGitHub
from runner_queue_fallback.github.app_token import AppCredentials, AppTokenSource
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.tools.simulate.scenarios import load_catalogue
from runner_queue_fallback.tools.simulate.steps import (
    PARENT_RUN_ID,
    SOURCE_REF,
    TOKEN,
    run_coordinator,
    simulate_entry,
    standard_world,
)
from tests.api_contract import (
    EXCEPTIONS,
    Exchange,
    Report,
    capture,
    check,
    ghes_views,
    load_view,
    view_names,
)
from tests.invariants import Observed
from tests.script_files import load_file
from tests.stats_support import history_world, run_stats, slow_first_spec
from tests.test_fuzz_coordinator import Case, build_world, cases
from tests.test_guard import PARENT_ID, dispatch_child, guard_environ
from tests.test_sim_support import child_inputs

ROOT = Path(__file__).resolve().parent.parent
CATALOGUE = load_catalogue()
DISPATCH = "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches"
GROUP, CPU16 = "nv-cpu-general", "linux-amd64-cpu16"


def _script() -> Any:
    """scripts/api_description.py as a module (scripts/ is not a package)."""
    return load_file(ROOT / "scripts" / "api_description.py", "api_description")


SCRIPT = _script()


def _assert_conforms(report: Report) -> None:
    assert report.violations == [], "\n".join(report.violations[:20])


# ----------------------------------------------------------------- the committed subset


def test_each_committed_description_names_its_package_version_file_and_tarball_digest():
    assert view_names() == [
        "api.github.com-2022-11-28",
        "api.github.com-2026-03-10",
        "ghes-3.17",
        "ghes-3.19",
    ]
    for name in view_names():
        provenance = load_view(name).provenance
        assert provenance["package"] == "@octokit/openapi"
        assert provenance["version"] == SCRIPT.VERSION
        assert provenance["version"].startswith("23.")
        assert provenance["tarball_sha256"] == SCRIPT.TARBALL_SHA256
        assert re.fullmatch(r"[0-9a-f]{64}", provenance["file_sha256"])
        expected_file = "api.github.com.json" if name.startswith("api.") else f"{name}.json"
        assert provenance["file"] == f"generated/{expected_file}"


def test_each_description_holds_exactly_the_operations_the_client_sends():
    """All of them, but for the self-hosted-runner policy's two, which GHES 3.17 does not have."""
    wanted = {(method, template) for method, template in SCRIPT.OPERATIONS}
    for name in view_names():
        view = load_view(name)
        held = {(op.method, op.template) for op in view.operations}
        assert held == (wanted - SCRIPT.NEWER_OPERATIONS if name == "ghes-3.17" else wanted), name
    assert wanted > SCRIPT.NEWER_OPERATIONS


def test_only_an_older_servers_description_may_lack_a_newer_operation():
    description = _description(breaking=False)
    method, template = min(SCRIPT.NEWER_OPERATIONS)
    del description["paths"][template][method]
    view = SCRIPT.subset(description, older_server=True)
    assert method not in view["paths"].get(template, {})
    with pytest.raises(SystemExit, match="is not in the description"):
        SCRIPT.subset(description)
    other = _description(breaking=False)
    del other["paths"][DISPATCH]["post"]
    with pytest.raises(SystemExit, match="is not in the description"):
        SCRIPT.subset(other, older_server=True)


def test_the_ghes_descriptions_are_the_oldest_and_newest_the_package_ships():
    names = [f"generated/ghes-3.{n}.json" for n in (19, 17, 18)] + ["generated/ghec.json"]
    assert SCRIPT.ghes_range(names) == ("generated/ghes-3.17.json", "generated/ghes-3.19.json")
    assert [f"ghes-{r}" for r in ("3.17", "3.19")] == ghes_views()


def test_the_2026_03_10_view_applies_the_breaking_changes_to_the_dispatch():
    """The file's `x-github-breaking-changes` (all 2026-03-10) drop `return_run_details` and 204."""
    old, new = (load_view(f"api.github.com-{v}") for v in ("2022-11-28", "2026-03-10"))
    old_op, new_op = (next(o for o in v.operations if o.template == DISPATCH) for v in (old, new))

    def body_fields(op: Any) -> set[str]:
        return set(op.spec["requestBody"]["content"]["application/json"]["schema"]["properties"])

    assert set(old_op.spec["responses"]) == {"200", "204"}
    assert set(new_op.spec["responses"]) == {"200"}
    assert body_fields(old_op) == {"ref", "inputs", "return_run_details"}
    assert body_fields(new_op) == {"ref", "inputs"}
    applied = new.provenance["breaking_changes_applied"]
    assert "change_workflow_dispatch_response_status" in {c["changeset"] for c in applied}
    assert old.provenance["breaking_changes_applied"] == []
    for ghes in ghes_views():  # GHES: no 2026-03-10, the dispatch answers 204 only
        op = next(o for o in load_view(ghes).operations if o.template == DISPATCH)
        assert set(op.spec["responses"]) == {"204"}


def test_breaking_changes_apply_as_json_patch_and_as_merge_patch():
    node = {
        "required": ["a", "b", "c"],
        "properties": {"a": {}, "b": {}, "c": {"type": "string"}},
        "x-github-breaking-changes": [
            {"version": "2026-03-10", "changeset": "one", "patch": [
                {"op": "remove", "path": "/properties/b"},
                {"op": "remove", "path": "/required/1"},
            ]},
            {"version": "2026-03-10", "changeset": "two", "patch": {
                "properties": {"a": None, "c": {"nullable": True}}, "required": ["c"],
            }},
        ],
    }  # fmt: skip
    applied = SCRIPT.apply_breaking_changes(node, "2026-03-10")
    assert node == {"required": ["c"], "properties": {"c": {"type": "string", "nullable": True}}}
    assert [c["changeset"] for c in applied] == ["one", "two"]


def _package(tmp_path: Path, files: dict[str, Any]) -> Path:
    """A package tarball laid out as npm packs `@octokit/openapi`."""
    tarball = tmp_path / "octokit-openapi-test.tgz"
    with tarfile.open(tarball, "w:gz") as archive:
        for name, content in files.items():
            data = json.dumps(content).encode()
            member = tarfile.TarInfo(f"package/generated/{name}")
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
    return tarball


def _description(*, breaking: bool) -> dict[str, Any]:
    reply = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/used"}}}}
    op = {"responses": {"200": reply, "204": {"description": "none"}}, "examples": {"x": {}}}
    if breaking:
        change = [{"op": "remove", "path": "/responses/204"}]
        op["x-github-breaking-changes"] = [
            {"version": "2026-03-10", "changeset": "drop_204", "patch": change}
        ]
    paths: dict[str, Any] = {}
    for method, template in SCRIPT.OPERATIONS:
        paths.setdefault(template, {})[method] = json.loads(json.dumps(op))
    schemas = {
        "used": {"properties": {"inner": {"$ref": "#/components/schemas/nested"}}},
        "nested": {"type": "string"},
        "unused": {"type": "integer"},
    }
    return {"openapi": "3.0.3", "info": {}, "paths": paths, "components": {"schemas": schemas}}


def test_the_script_writes_the_used_subset_of_each_view_with_its_provenance(tmp_path, monkeypatch):
    files = {
        "api.github.com.json": _description(breaking=True),
        "api.github.com.deref.json": {},
        **{f"ghes-3.{n}.json": _description(breaking=False) for n in (9, 10, 2)},
    }
    tarball = _package(tmp_path, files)
    monkeypatch.setattr(SCRIPT, "TARBALL_SHA256", SCRIPT.sha256(tarball.read_bytes()))
    views = SCRIPT.build_views(tarball)
    assert sorted(views) == [
        "api.github.com-2022-11-28.json",
        "api.github.com-2026-03-10.json",
        "ghes-3.10.json",  # the newest, by release number, not by spelling
        "ghes-3.2.json",
    ]
    for name, view in views.items():
        assert sorted(view["components"]["schemas"]) == ["nested", "used"], name
        op = view["paths"][DISPATCH]["post"]
        assert "examples" not in op
        assert set(op["responses"]) == ({"200"} if "2026" in name else {"200", "204"})
        assert view["x-provenance"]["file_sha256"] == SCRIPT.sha256(
            json.dumps(files[view["x-provenance"]["file"].removeprefix("generated/")]).encode()
        )
    applied = views["api.github.com-2026-03-10.json"]["x-provenance"]["breaking_changes_applied"]
    assert len(applied) == len(SCRIPT.OPERATIONS)
    monkeypatch.setattr(SCRIPT, "TARBALL_SHA256", "0" * 64)
    with pytest.raises(SystemExit, match="is not the pinned"):
        SCRIPT.build_views(tarball)


# ------------------------------------------------------------- the dispatch, both views


def _dispatch_exchange(version: str) -> Exchange:
    """The program's own dispatch of one child on github.com, asking for `version`."""
    clock = FakeClock()
    world, sha = standard_world(clock)
    world.add_pool(GROUP, CPU16, runners=1)
    inputs = {
        "workflow": "runner-worker.yml",
        "workflow-ref": "main",
        "source-ref": SOURCE_REF,
        "source-sha": sha,
        "runner-type": "cpu",
        "runners": json.dumps([{"group": GROUP, "labels": CPU16}]),
        "api-version": version,
    }
    with capture() as exchanges:
        run_coordinator(world, clock, inputs, main=cli.main)
    return next(e for e in exchanges if e.path.endswith("/dispatches"))


def test_dispatch_answers_200_with_run_details_on_2026_03_10_and_204_is_allowed_on_2022_11_28():
    new = _dispatch_exchange("2026-03-10")
    assert new.status == 200
    assert set(json.loads(new.reply_body)) == {"workflow_run_id", "run_url", "html_url"}
    assert check(new) == []
    old = _dispatch_exchange("2022-11-28")
    assert (old.status, old.reply_body) == (204, b"")
    assert check(old) == []
    # The step between the views: a 204 is no answer on 2026-03-10, while 2022-11-28 allows both.
    assert [f.part for f in check(old, ["api.github.com-2026-03-10"])] == ["headers", "status"]
    as_new = dataclasses.replace(old, headers={**old.headers, "x-github-api-version": "2026-03-10"})
    assert [str(f) for f in check(as_new)] == [
        f"api.github.com-2026-03-10: status: POST {DISPATCH} -> 204: status not documented (only 200)"
    ]
    assert check(new, ["api.github.com-2022-11-28"])[0].part == "headers"  # the version, only
    assert len(check(new, ["api.github.com-2022-11-28"])) == 1


# ------------------------------------------------------------ the GitHub App's own token


def _app_token_exchanges(versions: frozenset[str]) -> list[Exchange]:
    """The App's token minted and renewed around reads and a dispatch; a JWT GitHub refuses; a
    token that lapsed in use (401), then minted anew."""
    clock = FakeClock()
    keys = generate_app_keys()
    with capture() as exchanges:
        world = FakeGitHub(clock, api_versions=versions, clock_offset=30.0)
        world.add_workflow()
        world.add_parent_run(PARENT_RUN_ID)
        app = world.add_app(31337, keys.public_pem)
        world.install_app(app)
        credentials = AppCredentials.read("31337", keys.private_pem)
        tokens = AppTokenSource(
            world.session(), world.api_url, world.repository, credentials, clock, margin=0.0
        )
        client = GitHubClient(
            world.session(), world.api_url, world.repository, tokens, clock, api_version="auto"
        )
        client.get_run(PARENT_RUN_ID)
        client.dispatch_workflow("runner-worker.yml", "main", child_inputs())
        clock.advance(3600.0)
        with contextlib.suppress(Unauthorized):
            client.get_run(PARENT_RUN_ID)
        client.get_run(PARENT_RUN_ID)
        wrong = AppCredentials.read("31337", generate_app_keys().private_pem)
        refused = AppTokenSource(world.session(), world.api_url, world.repository, wrong, clock)
        with contextlib.suppress(AppTokenUnavailable):
            refused.token()
    return exchanges


@pytest.mark.parametrize("server", ["github.com", "older-server"])
def test_the_app_installation_lookup_and_its_minted_tokens_conform(server):
    versions = API_VERSIONS if server == "github.com" else OLDER_SERVER
    exchanges = _app_token_exchanges(versions)
    report = Report().add(exchanges)
    _assert_conforms(report)
    used = {key.split(" ", 1)[1] for key in report.operations}
    assert {
        "GET /repos/{owner}/{repo}/installation",
        "POST /app/installations/{installation_id}/access_tokens",
    } <= used
    assert [e.status for e in exchanges if e.path.endswith("/access_tokens")] == [201, 201]
    assert report.excepted["bad-credentials-401"] >= 2  # the lapsed token, the refused JWT


# ------------------------------------------------------------------- the whole program


def test_every_request_and_reply_of_the_scenario_catalogue_conforms():
    """Coordinator, post step and guard in every scenario, on github.com and an older server."""
    with capture() as exchanges:
        for entry in CATALOGUE.values():
            simulate_entry(entry, main=cli.main)
    report = Report().add(exchanges)
    _assert_conforms(report)
    assert report.exchanges > 900
    assert {"github.com", "ghes"} <= {e.server for e in exchanges}
    assert {"coordinate", "guard"} <= {_step(e) for e in exchanges}


def _step(exchange: Exchange) -> str:
    """Which step sent it, by token: the guard has the worker's, the main and post steps ours."""
    token = exchange.headers.get("authorization", "").split(" ")[-1]
    return "coordinate" if token.startswith(TOKEN) else "guard"


def _coordinate(world: FakeGitHub, clock: FakeClock, sha: str, **changes: str) -> None:
    inputs = {
        "workflow": "runner-worker.yml",
        "workflow-ref": "main",
        "source-ref": SOURCE_REF,
        "source-sha": sha,
        "runner-type": "cpu",
        "runners": json.dumps([{"group": GROUP, "labels": CPU16}]),
        **changes,
    }
    run_coordinator(world, clock, inputs, main=cli.main)


def _annotated_tags(versions: frozenset[str]) -> None:
    """workflow-ref and source-ref as annotated tags: git/tags is read to peel them."""
    clock = FakeClock()
    world, _ = standard_world(clock, FakeGitHub(clock, api_versions=versions))
    world.add_pool(GROUP, CPU16, runners=1)
    world.add_annotated_tag("v1")
    sha = world.refs["heads/main"]
    world.add_annotated_tag("release-7", sha)
    _coordinate(world, clock, sha, **{"workflow-ref": "v1", "source-ref": "refs/tags/release-7"})


def _low_quota(versions: frozenset[str]) -> None:
    """Little quota left: the coordinator reads GET /rate_limit before it dispatches."""
    clock = FakeClock()
    world, sha = standard_world(clock, FakeGitHub(clock, api_versions=versions))
    world.add_pool(GROUP, CPU16, runners=1)
    world.spend_quota(world.quota - 25)
    _coordinate(world, clock, sha)


def _preflight(versions: frozenset[str]) -> None:
    clock = FakeClock()
    world, sha = standard_world(clock, FakeGitHub(clock, api_versions=versions))
    inputs = {
        "workflow": "runner-worker.yml",
        "workflow-ref": "main",
        "source-ref": SOURCE_REF,
        "source-sha": sha,
        "runner-type": "cpu",
        "token": TOKEN,
    }
    environ = {env_name(k): v for k, v in inputs.items()} | {
        "GITHUB_REPOSITORY": world.repository,
        "GITHUB_API_URL": world.api_url,
        "GITHUB_RUN_ID": str(PARENT_RUN_ID),
        "GITHUB_RUN_ATTEMPT": "1",
    }
    cli.main(["preflight"], environ, clock=clock, session=world.session())


def _stats(versions: frozenset[str]) -> None:
    """With the traps of real history: jobs carried into a re-run, jobs shown queued that ran."""
    spec = dataclasses.replace(
        slow_first_spec(sequences=30, seed=3), carried_forward=2, queued_with_steps=2
    )
    world, clock = history_world(spec, api_versions=versions)
    run_stats(world, clock, "--max-runs", "60")


OTHER_PATHS: dict[str, Callable[[frozenset[str]], None]] = {
    "annotated-tags": _annotated_tags,
    "low-quota": _low_quota,
    "preflight": _preflight,
    "stats": _stats,
}


@pytest.mark.parametrize("server", ["github.com", "older-server"])
def test_preflight_stats_annotated_tags_and_the_quota_check_conform(server, capsys):
    versions = API_VERSIONS if server == "github.com" else OLDER_SERVER
    report = Report()
    for name, run in OTHER_PATHS.items():
        with capture() as exchanges:
            run(versions)
        assert exchanges, f"{name} sent no request"
        report.add(exchanges)
    capsys.readouterr()
    _assert_conforms(report)
    used = {key.split(" ", 1)[1] for key in report.operations}
    assert {"GET /repos/{owner}/{repo}/git/tags/{tag_sha}", "GET /rate_limit"} <= used


RUNNERS_TOKEN = "ghs_runnersreadonly0123456789abcdef"
CHILD_ENTRY = "octo-org/octo-repo/.github/workflows/runner-worker.yml@refs/heads/main"
RUNNER_READS = {
    "GET /repos/{owner}/{repo}",
    "GET /orgs/{org}/actions/runner-groups",
    "GET /orgs/{org}/actions/runner-groups/{runner_group_id}/repositories",
    "GET /orgs/{org}/actions/runner-groups/{runner_group_id}/runners",
    "GET /orgs/{org}/actions/permissions/self-hosted-runners",
    "GET /orgs/{org}/actions/permissions/self-hosted-runners/repositories",
    "GET /repos/{owner}/{repo}/actions/runners",
}


def _runner_reads(versions: frozenset[str], case: str, *, serves_policy: bool = True) -> None:
    """`preflight` with `runners-token`: an organisation whose groups grant the repository by
    selection and restrict workflows, under a `selected` policy; a public repository; a token
    refused (403) or expired (401); a user's repository (its own runners only)."""
    clock = FakeClock()
    world, sha = standard_world(clock, FakeGitHub(clock, api_versions=versions))
    org = OrgRunners(
        "octo-org",
        owner_type="User" if case == "user" else "Organization",
        private=case != "public",
        enabled_repositories="selected",
        policy_repositories=("octo-org/other", world.repository),
        readers={RUNNERS_TOKEN},
        expired={"ghs_expired"},
        serves_policy=serves_policy,
    )
    org.add_group(
        GROUP,
        visibility="selected",
        selected_repositories=("octo-org/other", world.repository),
        allows_public_repositories=True,
        restricted_to_workflows=True,
        selected_workflows=(CHILD_ENTRY,),
    )
    org.add_group("everyone")
    org.add_runner(GROUP, ("self-hosted", CPU16))
    org.add_runner(GROUP, (CPU16,), busy=True)
    org.add_runner("everyone", ("linux-amd64-cpu8",), status="offline")
    org.add_runner(None, (CPU16,))
    world.org_runners = org
    token = {"refused": "ghs_noperm", "expired": "ghs_expired"}.get(case, RUNNERS_TOKEN)
    runners = [{"group": GROUP, "labels": CPU16}, {"labels": "linux-amd64-cpu8"}]
    inputs = {
        "workflow": "runner-worker.yml",
        "workflow-ref": "main",
        "source-ref": SOURCE_REF,
        "source-sha": sha,
        "runner-type": "cpu",
        "runners": json.dumps(runners),
        "token": TOKEN,
        "runners-token": token,
    }
    environ = {env_name(k): v for k, v in inputs.items()} | {
        "GITHUB_REPOSITORY": world.repository,
        "GITHUB_API_URL": world.api_url,
        "GITHUB_RUN_ID": str(PARENT_RUN_ID),
        "GITHUB_RUN_ATTEMPT": "1",
    }
    cli.main(["preflight"], environ, clock=clock, session=world.session())


@pytest.mark.parametrize("server", ["github.com", "older-server"])
def test_the_runner_group_reads_conform(server, capsys):
    """Every read `runners-token` makes, and the fake's replies, as GitHub describes them. The
    older server is one without the policy's endpoints (GHES 3.17 lacks them: 404), checked
    against both GHES views; one with them is checked against ghes-3.19, which has them."""
    versions = API_VERSIONS if server == "github.com" else OLDER_SERVER
    older = server == "older-server"
    report = Report()
    for case in ("selected", "public", "refused", "expired", "user"):
        with capture() as exchanges:
            _runner_reads(versions, case, serves_policy=not older)
        report.add(exchanges)
        statuses = {e.status for e in exchanges if e.path.startswith("/orgs/")}
        expected = {"refused": {403}, "expired": set(), "user": set()}.get(case, {200})
        if older and expected:  # the policy's endpoints: absent, 404 before any permission
            expected |= {404}
        assert statuses == expected, case
    capsys.readouterr()
    _assert_conforms(report)
    used = {key.split(" ", 1)[1] for key in report.operations}
    policy_listing = "GET /orgs/{org}/actions/permissions/self-hosted-runners/repositories"
    assert used >= (RUNNER_READS - {policy_listing} if older else RUNNER_READS)
    assert report.excepted["token-refused-403"] > 0
    assert (report.excepted["not-on-this-release-404"] > 0) == older
    if older:
        with capture() as exchanges:
            _runner_reads(versions, "selected")
        capsys.readouterr()
        policy = [e for e in exchanges if "/self-hosted-runners" in e.path]
        assert [e.status for e in policy] == [200, 200]
        found = [f for e in exchanges for f in check(e, ["ghes-3.19"]) if f.exception is None]
        assert [str(f) for f in found] == []


def _guard_reads(versions: frozenset[str], case: str) -> None:
    """The guard with `coordinator-ref` read from the parent's branch name (the compare and the
    tag ref) and its runner's name (its own job): the parent on the branch's head, on an older
    commit with the coordinator changed on the branch since, or from a tag `main` (refused)."""
    clock = FakeClock()
    world = FakeGitHub(clock, api_versions=versions)
    world.add_workflow()
    world.add_workflow("runner-check.yml")
    world.add_ref("heads/feature")
    world.add_pool(GROUP, CPU16, runners=1)
    parent = world.add_parent_run(PARENT_ID)
    if case == "older":
        world.change_workflow("runner-check.yml")
    if case == "tag":
        parent.head_sha, parent.event = world.add_ref("tags/main"), "push"
    run_id = dispatch_child(world)
    clock.sleep(10.0)  # its job is listed and a runner takes it
    job = world.runs[run_id].job
    assert job is not None
    environ = guard_environ(
        world,
        run_id,
        RUNNER_NAME=job.runner_name or "",
        **{
            "INPUT_COORDINATOR-WORKFLOW": "runner-check.yml",
            "INPUT_COORDINATOR-REF": "refs/heads/main",
        },
    )
    code = cli.main(["guard"], environ, clock=clock, session=world.session())
    assert code == (1 if case == "tag" else 0), case


@pytest.mark.parametrize("server", ["github.com", "older-server"])
def test_the_guards_compare_tag_ref_and_own_job_reads_conform(server, capsys):
    """Issue 44: the endpoints the guard reads to prove a parent's branch and its own runner."""
    versions = API_VERSIONS if server == "github.com" else OLDER_SERVER
    report = Report()
    for case in ("head", "older", "tag"):
        with capture() as exchanges:
            _guard_reads(versions, case)
        report.add(exchanges)
        compares = [e for e in exchanges if "/compare/" in e.path]
        assert [e.status for e in compares] == [200], case
        tag_refs = [e.status for e in exchanges if e.path.endswith("/git/ref/tags/main")]
        assert tag_refs == ([] if case == "tag" else [404]), case  # the tag: refused at compare
        status = json.loads(compares[0].reply_body)["status"]
        assert status == {"head": "identical", "older": "ahead", "tag": "behind"}[case]
    capsys.readouterr()
    _assert_conforms(report)
    used = {key.split(" ", 1)[1] for key in report.operations}
    assert {
        "GET /repos/{owner}/{repo}/compare/{basehead}",
        "GET /repos/{owner}/{repo}/git/ref/{ref}",
        "GET /repos/{owner}/{repo}/actions/runs/{run_id}/attempts/{attempt_number}/jobs",
    } <= used


FUZZ_SHARDS = 4
#: 240 runs: Hypothesis repeats a few simple cases, and at least 200 must differ.
FUZZ_RUNS = 240


@pytest.mark.parametrize("shard", range(FUZZ_SHARDS))
@settings(
    max_examples=FUZZ_RUNS // FUZZ_SHARDS,
    derandomize=True,  # the same 200 runs every time (each shard has its own seed)
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_every_request_and_reply_of_the_fuzzed_runs_conforms(shard, data):
    case = data.draw(cases(), label="case")
    with capture() as exchanges:
        _run(case)
    _assert_conforms(Report().add(exchanges))


def _run(case: Case) -> None:
    """A fuzz case's world and run, built as the fuzzer builds them, without its invariant checks
    (tests/test_fuzz_coordinator.py holds those): here the contract alone decides."""
    clock = FakeClock()
    world, sha = build_world(case, clock, Observed())
    inputs = {**case.inputs, "source-sha": sha}
    run_coordinator(world, clock, inputs, main=cli.main, interrupt_at=case.interrupt_at)


# ------------------------------------------------------ the contract test can fail


def _sample() -> list[Exchange]:
    with capture() as exchanges:
        simulate_entry(CATALOGUE["fallback"], main=cli.main)
    return exchanges


SAMPLE = _sample()


def _first(method: str, pattern: str, status: int = 200) -> Exchange:
    return next(
        e
        for e in SAMPLE
        if e.method == method and re.search(pattern, e.path) and e.status == status
    )


def _with_json(exchange: Exchange, change: Callable[[Any], None], *, reply: bool) -> Exchange:
    data = json.loads(exchange.reply_body if reply else exchange.body)
    change(data)
    encoded = json.dumps(data).encode()
    if reply:
        return dataclasses.replace(exchange, reply_body=encoded)
    return dataclasses.replace(exchange, body=encoded)


def test_a_request_with_an_undocumented_body_field_fails_the_contract():
    """`return_run_details` is documented on 2022-11-28 only: on 2026-03-10 it is a violation."""
    sent = _first("POST", r"/dispatches$")
    assert check(sent) == []
    gained = _with_json(sent, lambda body: body.update(return_run_details=True), reply=False)
    findings = [str(f) for f in check(gained)]
    assert findings == [
        (
            f"api.github.com-2026-03-10: body: POST {DISPATCH}: body (root): Additional properties "
            "are not allowed ('return_run_details' was unexpected)"
        )
    ]
    assert check(gained, ["api.github.com-2022-11-28"])[0].part == "headers"  # the version only


def test_a_request_with_an_undocumented_query_parameter_fails_the_contract():
    sent = _first("GET", r"/actions/runs/\d+$")
    gained = dataclasses.replace(sent, query="exclude_pull_requests=true&shard=1")
    assert [str(f) for f in check(gained)] == [
        (
            "api.github.com-2026-03-10: query: GET /repos/{owner}/{repo}/actions/runs/{run_id}: "
            "undocumented query parameter 'shard'"
        )
    ]


def test_a_reply_without_a_required_field_fails_the_contract():
    served = next(
        e
        for e in SAMPLE
        if e.path.endswith("/jobs") and e.status == 200 and b'"status": "completed"' in e.reply_body
    )
    assert check(served) == []
    lost = _with_json(served, lambda body: body["jobs"][0].pop("created_at"), reply=True)
    assert [str(f) for f in check(lost)] == [
        (
            "api.github.com-2026-03-10: reply: GET /repos/{owner}/{repo}/actions/runs/{run_id}/"
            "attempts/{attempt_number}/jobs -> 200: body jobs/0: 'created_at' is a required property"
        )
    ]


def test_a_reply_with_a_field_the_version_removed_fails_the_contract():
    """`has_downloads` left the nested repository in 2026-03-10: served there, it is a violation."""
    served = _first("GET", r"/actions/runs/\d+$")
    added = _with_json(served, lambda run: run["repository"].update(has_downloads=True), reply=True)
    findings = check(added)
    assert len(findings) == 1
    assert "'has_downloads' was unexpected" in findings[0].message
    assert findings[0].exception is None
    as_old = dataclasses.replace(
        added, headers={**added.headers, "x-github-api-version": "2022-11-28"}
    )
    assert check(as_old) == []  # 2022-11-28 still has it


# -------------------------------------------------------------- the named exceptions


def _sent(exchange: Exchange, **changes: Any) -> Exchange:
    return dataclasses.replace(exchange, **changes)


def _error(status: int, message: str) -> bytes:
    return json.dumps(
        {"message": message, "documentation_url": "https://docs.github.test"}
    ).encode()


def _exception_cases() -> dict[str, tuple[Exchange, Exchange]]:
    """For each prose fact: an exchange it excuses, and a near miss that stays a violation."""
    run = _first("GET", r"/actions/runs/\d+$")
    listing = next(e for e in SAMPLE if e.path.endswith("/runs") and "created=" in e.query)
    jobs = next(
        e for e in SAMPLE if e.path.endswith("/jobs") and b'"conclusion": null' in e.reply_body
    )
    cancel = _first("POST", r"/cancel$", 202)
    conditional = {**run.headers, "if-none-match": 'W/"abc"'}
    spent = {**run.reply_headers, "x-ratelimit-remaining": "0"}
    refused = _error(400, "API version '2026-03-10' is not a supported version.")
    v2022 = {**run.headers, "x-github-api-version": "2022-11-28"}
    groups = _sent(run, path="/orgs/octo-org/actions/runner-groups", query="")
    policy = _sent(
        groups, path="/orgs/octo-org/actions/permissions/self-hosted-runners", headers=v2022
    )
    return {
        "created-range-syntax": (
            listing,
            _sent(listing, query="event=workflow_dispatch&created=yesterday&per_page=100"),
        ),
        "not-modified-304": (
            _sent(run, headers=conditional, status=304, reply_body=b""),
            _sent(run, status=304, reply_body=b""),
        ),
        "rate-limit-403-429": (
            _sent(
                cancel,
                status=429,
                reply_headers=spent,
                reply_body=_error(429, "API rate limit exceeded"),
            ),
            _sent(cancel, status=429, reply_body=_error(429, "Too many")),
        ),
        "unsupported-version-400": (
            _sent(run, status=400, reply_body=refused),
            _sent(run, status=400, reply_body=_error(400, "Problems parsing JSON")),
        ),
        "queued-job-conclusion-null": (
            jobs,
            _with_json(jobs, lambda b: b["jobs"][0].update(conclusion="queued"), reply=True),
        ),
        "not-found-404": (
            _sent(run, status=404, reply_body=_error(404, "Not Found")),
            _sent(cancel, status=404, reply_body=_error(404, "Gone")),
        ),
        "bad-credentials-401": (
            _sent(run, status=401, reply_body=_error(401, "Bad credentials")),
            _sent(run, status=401, reply_body=_error(401, "Requires authentication")),
        ),
        "injected-fault": (
            _sent(run, status=503, reply_body=_error(503, "Service Unavailable"), fault="status"),
            _sent(run, status=503, reply_body=_error(503, "Service Unavailable")),
        ),
        "token-refused-403": (
            _sent(
                groups, status=403, reply_body=_error(403, "Resource not accessible by integration")
            ),
            _sent(groups, status=403, reply_body=_error(403, "Forbidden")),
        ),
        "not-on-this-release-404": (
            _sent(policy, server="ghes", status=404, reply_body=_error(404, "Not Found")),
            _sent(
                policy,
                server="ghes",
                path="/orgs/octo-org/actions/permissions/no-such-setting",
                status=404,
                reply_body=_error(404, "Not Found"),
            ),
        ),
    }


@pytest.mark.parametrize("fact", [fact.name for fact in EXCEPTIONS])
def test_each_prose_only_fact_excuses_its_own_case_and_no_other(fact):
    """A named exception (with its source) marks what it excuses; a near miss stays a violation."""
    excused, near_miss = _exception_cases()[fact]
    assert next(f for f in EXCEPTIONS if f.name == fact).source
    found = check(excused)
    assert found
    assert {f.exception for f in found} == {fact}
    assert [f for f in check(near_miss) if f.exception is None]
