"""`stats` through the composition root, against the fake GitHub's generated history."""

from __future__ import annotations

import io
import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs; only validates a document
import pytest
import requests
from githubkit_schemas.v2026_03_10.models import (
    ReposOwnerRepoActionsRunsRunIdAttemptsAttemptNumberJobsGetResponse200,
    ReposOwnerRepoActionsWorkflowsWorkflowIdRunsGetResponse200,
)

from runner_queue_fallback.cli import main
from runner_queue_fallback.fake_github import FakeGitHub, Reply, SimAdapter
from runner_queue_fallback.tools.stats.history import request_budget
from runner_queue_fallback.tools.stats.report import MINUTES
from tests.stats_support import (
    CPU8,
    CPU16,
    TOKEN,
    history_world,
    run_stats,
    runners,
    slow_first_spec,
)
from tests.test_sim_support import AUTH, REPO

SCHEMA = json.loads(
    (Path(__file__).resolve().parent.parent / "docs" / "stats-schema.json").read_text()
)


@pytest.fixture(scope="module")
def small():
    return slow_first_spec(sequences=120, seed=11)


def test_history_pages_and_jobs_validate_against_githubs_models(small):
    """The generated past is served through the ordinary endpoints, pagination and shapes."""
    world, _ = history_world(small, unassigned_runner_as_zero=True)
    path = "/actions/workflows/runner-worker.yml/runs?event=workflow_dispatch&per_page=50"
    first = world.handle("GET", REPO + path, AUTH)
    page = ReposOwnerRepoActionsWorkflowsWorkflowIdRunsGetResponse200.model_validate_json(
        first.body, strict=True, extra="forbid"
    )
    assert len(page.workflow_runs) == 50
    assert 'rel="next"' in first.headers["Link"]
    assert first.headers["Link"].startswith(f"<{world.api_url}{REPO}/actions/workflows/")
    for run in page.workflow_runs[:20]:
        jobs = world.handle("GET", f"{REPO}/actions/runs/{run.id}/attempts/1/jobs", AUTH)
        ReposOwnerRepoActionsRunsRunIdAttemptsAttemptNumberJobsGetResponse200.model_validate_json(
            jobs.body, strict=True, extra="forbid"
        )


def test_json_output_follows_the_documented_schema(small, capsys):
    world, clock = history_world(small)
    code = run_stats(
        world,
        clock,
        "--json",
        "--runner-type",
        "cpu",
        "--runners",
        runners((CPU16, 10), (CPU8, 10)),
    )
    out = capsys.readouterr().out
    assert code == 0
    document = json.loads(out)
    jsonschema.validate(document, SCHEMA)
    pools = {",".join(p["labels"]): p for p in document["pools"]}
    assert set(pools) == {CPU16, CPU8}
    assert pools[CPU16]["timed_out"] > pools[CPU16]["allocated"]  # censoring dominates cpu16
    assert pools[CPU8]["within"]["10"] > 0.9
    assert pools[CPU16]["within"]["15"] is None  # deadlines were 10 min: the data stop there
    assert document["reading"]["runs_not_ours"] > 0  # manual dispatches are skipped


def test_max_runs_bounds_the_requests_sent(small, capsys):
    """Counted on the fake's ledger: at most one list page per 100 runs plus one job read each."""
    world, clock = history_world(small)
    assert run_stats(world, clock, "--max-runs", "130", "--json") == 0
    document = json.loads(capsys.readouterr().out)
    assert len(world.ledger) <= request_budget(130)
    assert document["reading"]["runs_examined"] == 130
    assert document["reading"]["requests_sent"] == len(world.ledger)
    assert "--max-runs 130 reached" in document["reading"]["stopped"]


def test_stops_early_to_leave_coordinators_their_reserve(small, capsys):
    world, clock = history_world(small, quota=340)  # 40 requests above the 300 reserve
    assert run_stats(world, clock, "--json") == 0
    document = json.loads(capsys.readouterr().out)
    assert "kept for coordinators" in document["reading"]["stopped"]
    assert world.counted_requests() <= 41


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--since", "2w"], "--since"),
        (["--since", "0d"], "--since"),
        (["--since", "400d"], "--since"),
        (["--max-runs", "0"], "--max-runs"),
        (["--max-runs", "lots"], "--max-runs"),
        (["--max-runs", "10001"], "--max-runs"),
        (["--max-runs", "1" + "0" * 400], "--max-runs"),
        (["--save-history", "no/such/dir/h.json"], "--save-history"),
        (["--plot", "chart.pdf"], "--plot"),
        (["--runners", "[]"], "--runner-type"),
        (["--workflow", "../x.yml"], "--workflow"),
    ],
)
def test_bad_flags_exit_2_before_any_request(flags, named, no_network, capsys):
    session, adapter = no_network
    environ = {"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": "o/r"}
    args = ["stats", *(["--workflow", "runner-worker.yml"] if "--workflow" not in flags else [])]
    assert main([*args, *flags], environ, session=session) == 2
    err = capsys.readouterr().err
    assert named in err
    assert adapter.sent == []


def test_missing_token_names_the_variable(no_network, capsys):
    session, adapter = no_network
    code = main(
        ["stats", "--workflow", "w.yml", "--token-env", "STATS_TOKEN"],
        {"GITHUB_REPOSITORY": "o/r"},
        session=session,
    )
    assert code == 2
    assert "STATS_TOKEN" in capsys.readouterr().err
    assert adapter.sent == []


def test_unknown_workflow_file_is_named(small, capsys):
    world, clock = history_world(small)
    assert run_stats(world, clock, "--workflow", "no-such.yml") == 2
    assert "'no-such.yml' not found in octo-org/octo-repo" in capsys.readouterr().err


class _ForeignLink:
    """The fake GitHub, with every pagination link pointing at another host."""

    def __init__(self, world: FakeGitHub) -> None:
        self.world = world
        self.api_url = world.api_url

    def handle(self, method, path_and_query, headers, body=b""):
        reply = self.world.handle(method, path_and_query, headers, body)
        if "Link" in reply.headers:
            link = reply.headers["Link"].replace(self.api_url, "https://evil.test")
            return Reply(reply.status, {**reply.headers, "Link": link}, reply.body)
        return reply


def test_pagination_never_leaves_the_api_host(small, no_network, capsys):
    world, clock = history_world(small)
    session, elsewhere = no_network
    session.mount(world.api_url + "/", SimAdapter(_ForeignLink(world)))
    assert run_stats(world, clock, "--max-runs", "300", session=session) == 1
    assert "not on the API host" in capsys.readouterr().err
    assert elsewhere.sent == []
    assert all(entry.path.startswith(REPO) for entry in world.ledger)


def test_the_window_is_measured_on_the_clock(small, capsys):
    """Ten days later on the fake clock, --since 7d sees nothing of a history that ended then."""
    world, clock = history_world(small)
    clock.advance(timedelta(days=10).total_seconds())
    assert run_stats(world, clock, "--since", "7d", "--json") == 0
    document = json.loads(capsys.readouterr().out)
    assert document["reading"]["runs_in_window"] == 0
    assert document["window"]["since"] == "2026-11-05T09:00:00Z"
    assert world.ledger[0].query.count("created=2026-11-05T09:00:00Z..2026-11-12T09:00:00Z") == 1
    assert run_stats(world, clock, "--since", "12d", "--json") == 0
    later = json.loads(capsys.readouterr().out)
    assert 0 < later["reading"]["runs_in_window"] < len(world.runs)


def test_markdown_has_a_mermaid_chart_per_pool(small, capsys):
    world, clock = history_world(small)
    assert run_stats(world, clock, "--markdown") == 0
    out = capsys.readouterr().out
    assert out.count("```mermaid") == 2
    assert "xychart-beta" in out
    assert f'x-axis "minutes" [{", ".join(str(m) for m in MINUTES[:4])}]' in out


def test_plot_writes_an_svg(small, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    world, clock = history_world(small)
    target = tmp_path / "waits.svg"
    assert run_stats(world, clock, "--plot", str(target)) == 0
    assert target.read_text().lstrip().startswith("<?xml")
    assert "wrote" in capsys.readouterr().err


def test_progress_line_only_on_a_terminal(small, capsys, monkeypatch):
    world, clock = history_world(small)
    run_stats(world, clock)
    assert "\r" not in capsys.readouterr().err

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    run_stats(world, clock, "--max-runs", "20")
    assert "\rstats: 20/20 runs read" in terminal.getvalue()


def test_the_plan_is_shown_before_the_first_request(small, capsys):
    world, clock = history_world(small)

    class Spy(requests.Session):
        plan_seen = False

        def request(self, *args, **kwargs):
            Spy.plan_seen = "stats: plan:" in capsys.readouterr().err or Spy.plan_seen
            return super().request(*args, **kwargs)

    session = Spy()
    session.mount(world.api_url + "/", SimAdapter(world))
    assert run_stats(world, clock, "--max-runs", "5", session=session) == 0
    assert Spy.plan_seen


def _as_version_2(document: Any) -> Any:
    """A version 3 document as version 2 wrote it: labels sorted and comma-joined, refusals keyed
    by them, every step `{group, labels}` (no hosted step here)."""
    old = json.loads(json.dumps(document))
    old["version"] = 2
    for pool in old["pools"]:
        pool["labels"] = ",".join(sorted(pool["labels"]))
    rec = old["recommendation"]
    if rec:
        rec["refused"] = {",".join(r["labels"]): r["reason"] for r in rec["refused"]}
    for evaluation in [rec["current"], *rec["best"]] if rec else []:
        if evaluation is not None:
            for step in evaluation["steps"]:
                step["labels"] = ",".join(step["labels"])
    return old


def _as_version_1(document: Any) -> Any:
    """A version 3 document as version 1 wrote it: without what versions 2 and 3 added."""
    old = _as_version_2(document)
    old["version"] = 1
    for key in ("carried_forward", "queued_with_steps", "windows", "source"):
        del old["reading"][key]
    for pool in old["pools"]:
        del pool["cicd.pipeline.run.queue.duration"]
    rec = old["recommendation"]
    for evaluation in [rec["current"], *rec["best"]] if rec else []:
        if evaluation is not None:
            del evaluation["raises_failure_rate"], evaluation["versus_current"]
    return old


def test_the_schema_validates_every_version_and_simulate_waits_reads_each(small, tmp_path, capsys):
    world, clock = history_world(small)
    current = runners((CPU16, 10), (CPU8, 10))
    assert run_stats(world, clock, "--json", "--runner-type", "cpu", "--runners", current) == 0
    new = json.loads(capsys.readouterr().out)
    old, older = _as_version_1(new), _as_version_2(new)
    assert new["version"] == 3
    jsonschema.validate(new, SCHEMA)
    jsonschema.validate(older, SCHEMA)
    jsonschema.validate(old, SCHEMA)
    with pytest.raises(jsonschema.ValidationError):  # version 3 writes labels as a list
        jsonschema.validate({**older, "version": 3}, SCHEMA)
    with pytest.raises(jsonschema.ValidationError):  # a version 2 pool without the OTel name
        jsonschema.validate({**old, "version": 2}, SCHEMA)
    with pytest.raises(jsonschema.ValidationError):  # version 1 has no such fields
        jsonschema.validate({**new, "version": 1}, SCHEMA)
    replayed = []
    for version, document in ((1, old), (2, older), (3, new)):
        path = tmp_path / f"v{version}.json"
        path.write_text(json.dumps(document))
        args = ["simulate", "--waits", str(path), "--runner-type", "cpu", "--runners", current]
        assert main([*args, "--replays", "5", "--json"]) == 0, version
        replayed.append(json.loads(capsys.readouterr().out)["replayed"])
    assert replayed[0] == replayed[1] == replayed[2]
    path = tmp_path / "v4.json"
    path.write_text(json.dumps({**new, "version": 4}))
    assert main(["simulate", "--waits", str(path), "--runner-type", "cpu"]) == 2
    assert "version 1, 2 or 3" in capsys.readouterr().out


def test_the_markdown_heading_names_workflow_and_repository_in_code_spans_without_escapes(
    small, capsys
):
    """A code span takes no backslash escape: `runner\\_worker.yml` would show the backslash."""
    world, clock = history_world(small)
    assert run_stats(world, clock, "--markdown") == 0
    heading = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("## "))
    assert heading == f"## Queue waits: `runner-worker.yml` in `{world.repository}`"
    assert "\\" not in heading


def test_without_token_env_the_token_is_input_token_then_github_token(no_network, capsys):
    """The order every command reads it in; the error names both and no flag."""
    session, adapter = no_network
    code = main(["stats", "--workflow", "w.yml"], {"GITHUB_REPOSITORY": "o/r"}, session=session)
    assert code == 2
    err = capsys.readouterr().err
    assert "no token: set INPUT_TOKEN or GITHUB_TOKEN" in err
    assert adapter.sent == []
    with pytest.raises(AssertionError, match="network"):  # taken: the first request is refused
        main(
            ["stats", "--workflow", "w.yml"],
            {"GITHUB_REPOSITORY": "o/r", "INPUT_TOKEN": TOKEN},
            session=session,
        )
