"""`stats` on history as GitHub serves it, and the history file that lets it run offline.

The listings over 1,000 runs, the re-run carry-forwards and the jobs shown `queued` although they
ran are all served by the stateful fake GitHub (`fake_github/history.py`,
`fake_github/world.py`), read through the composition root; the history file round trip and its
refusals go through it too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs; only validates a document
import pytest

from runner_queue_fallback.cli import main
from runner_queue_fallback.fake_github.world import LISTING_CAP
from runner_queue_fallback.tools.stats.history import request_budget
from runner_queue_fallback.tools.stats.history_file import (
    EARLIEST,
    LATEST,
    MAX_COUNT,
    MAX_SECONDS,
    QUEUE_DURATION,
)
from tests.stats_support import GROUP, history_world, run_stats, slow_first_spec
from tests.test_sim_support import AUTH, REPO

DOCS = Path(__file__).resolve().parent.parent / "docs"
HISTORY_SCHEMA = json.loads((DOCS / "history-schema.json").read_text())
STATS_SCHEMA = json.loads((DOCS / "stats-schema.json").read_text())
RUNS = f"{REPO}/actions/workflows/runner-worker.yml/runs"


def _crowded(extra: int = 1150, sequences: int = 40):
    """A 14-day history with `extra` manual dispatches besides our children: over 1,000 runs."""
    world, clock = history_world(slow_first_spec(sequences=sequences, seed=3))
    now = world.now()
    for n in range(extra):
        at = now - 3 * 3600 - n * (13 * 86400 / extra)
        world.add_past_run(
            "runner-worker.yml",
            "Runner worker",
            inputs={"request-id": ""},
            created_at=at,
            completed_at=at + 60.0,
            conclusion="success",
        )
    return world, clock


def _listed(world) -> list[str]:
    return [e.query for e in world.ledger if e.path.endswith("/runs")]


def test_the_fake_lists_at_most_1000_runs_per_query_but_counts_them_all():
    world, _ = _crowded()
    query = "?event=workflow_dispatch&per_page=100&page="
    first = json.loads(world.handle("GET", RUNS + query + "1", AUTH).body)
    tenth = json.loads(world.handle("GET", RUNS + query + "10", AUTH).body)
    past = world.handle("GET", RUNS + query + "11", AUTH)
    assert first["total_count"] == len(world.runs) > LISTING_CAP
    assert len(tenth["workflow_runs"]) == 100
    assert json.loads(past.body)["workflow_runs"] == []
    assert json.loads(past.body)["total_count"] == len(world.runs)


def test_a_listing_over_1000_runs_is_read_whole_by_splitting_the_created_window(capsys):
    world, clock = _crowded()
    assert run_stats(world, clock, "--max-runs", "5000", "--json") == 0
    reading = json.loads(capsys.readouterr().out)["reading"]
    assert reading["runs_in_window"] == len(world.runs) > LISTING_CAP
    assert reading["runs_examined"] == len(world.runs)  # unsplit, 1,000 would be the most
    assert reading["stopped"] is None
    assert reading["windows"] >= 3  # the whole window, then its halves
    spans = [re.search(r"created=([^&]+)", q)[1] for q in _listed(world)]  # type: ignore[index]  # every listing has one
    assert all(".." in span for span in spans)
    assert len(world.ledger) <= request_budget(5000)


def test_max_runs_past_1000_stops_the_split_reading_with_a_note(capsys):
    world, clock = _crowded()
    assert run_stats(world, clock, "--max-runs", "1100") == 0
    out = capsys.readouterr().out
    assert f"1100 of {len(world.runs)} runs read" in out
    assert f"--max-runs 1100 reached: 1100 of {len(world.runs)} runs read (raise it" in out


def test_re_run_carry_forwards_are_left_out_and_counted(tmp_path, capsys):
    """Their wait (started_at before created_at) was counted as an instant start before."""
    spec = slow_first_spec(sequences=80, seed=4)
    spec = dataclasses.replace(spec, carried_forward=4)
    world, clock = history_world(spec)
    carried = {r.id for r in world.runs.values() if r.attempt == 2}
    assert len(carried) == 4
    saved = tmp_path / "h.json"
    assert run_stats(world, clock, "--save-history", str(saved)) == 0
    assert "4 carried into a re-run attempt (left out)" in capsys.readouterr().out
    document = json.loads(saved.read_text())
    assert document["reading"]["carried_forward"] == 4
    assert carried.isdisjoint(c["run_id"] for c in document["children"])
    assert all(c[QUEUE_DURATION] is None or c[QUEUE_DURATION] > 0 for c in document["children"])


def test_a_queued_job_with_steps_counts_as_run_until_its_first_step(tmp_path, capsys):
    spec = slow_first_spec(sequences=80, seed=4)
    spec = dataclasses.replace(spec, queued_with_steps=3)
    world, clock = history_world(spec)
    stuck = {r.id: r for r in world.runs.values() if r.job and r.job.status == "queued"}
    assert len(stuck) == 3
    saved = tmp_path / "h.json"
    assert run_stats(world, clock, "--save-history", str(saved)) == 0
    assert "3 still shown queued although they ran (counted run)" in capsys.readouterr().out
    children = {c["run_id"]: c for c in json.loads(saved.read_text())["children"]}
    for run_id in stuck:
        truth = world.history[run_id]
        assert children[run_id]["ending"] == "allocated"
        assert children[run_id]["censored"] is False
        waited = truth.allocated_at - truth.job_queued_at  # type: ignore[operator]  # allocated
        assert children[run_id][QUEUE_DURATION] == pytest.approx(waited, abs=1.0)


def test_a_runner_clock_behind_githubs_never_puts_the_runner_before_the_dispatch(
    tmp_path, no_network
):
    """A job shown `queued` ran from its first step, a time the runner reports by its own clock.

    Behind GitHub's by 5 minutes, it would fall before the run's creation: the runner is counted
    at the dispatch, and the saved file reads back (a reader refuses a runner before it).
    """
    spec = dataclasses.replace(slow_first_spec(sequences=80, seed=4), queued_with_steps=1)
    world, clock = history_world(spec)
    [run] = [r for r in world.runs.values() if r.job and r.job.status == "queued"]
    assert run.job is not None
    for step in run.job.steps:
        if step.started_at is not None:
            step.started_at = run.created_at - 300.0
    saved = tmp_path / "h.json"
    assert run_stats(world, clock, "--save-history", str(saved)) == 0
    [child] = [c for c in json.loads(saved.read_text())["children"] if c["run_id"] == run.id]
    assert child["runner_at"] == child["dispatched_at"]
    assert main(["stats", "--history", str(saved)], {}, session=no_network[0]) == 0


# ------------------------------------------------------------------------- the history file


@pytest.fixture(scope="module")
def saved_reading(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """One reading from the fake GitHub, its --json report and its history file."""
    world, clock = history_world(slow_first_spec(sequences=120, seed=11))
    path = tmp_path_factory.mktemp("history") / "history.json"
    args = ["--json", "--runner-type", "cpu", "--save-history", str(path)]
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        assert run_stats(world, clock, *args) == 0
    return path, json.loads(captured.getvalue())


def test_the_saved_history_follows_its_schema_and_reads_back_to_the_same_report(
    saved_reading, no_network, capsys
):
    path, online = saved_reading
    jsonschema.validate(json.loads(path.read_text()), HISTORY_SCHEMA)
    session, adapter = no_network
    code = main(
        ["stats", "--history", str(path), "--json", "--runner-type", "cpu"], {}, session=session
    )
    assert code == 0
    assert adapter.sent == []
    offline = json.loads(capsys.readouterr().out)
    jsonschema.validate(offline, STATS_SCHEMA)
    assert offline["reading"]["source"] == "history"
    assert offline["reading"]["requests_sent"] == 0
    for key in ("pools", "sequences", "recommendation", "window", "repository", "workflow"):
        assert offline[key] == online[key], key


def test_each_child_record_and_pool_carry_the_wait_under_the_ecosystems_name(saved_reading):
    path, online = saved_reading
    children = json.loads(path.read_text())["children"]
    assert all(QUEUE_DURATION in c for c in children)
    for pool in online["pools"]:
        named = pool[QUEUE_DURATION]
        assert named == {"median": pool["median_seconds"], "p90": pool["p90_seconds"]}


def _bad_files() -> dict[str, tuple[str, str | None]]:
    good: dict[str, Any] = {
        "schema": "runner-queue-fallback/history",
        "version": 1,
        "source": "github",
        "repository": "o/r",
        "workflow": "w.yml",
        "window": {"since": "2026-11-01T00:00:00Z", "until": "2026-11-02T00:00:00Z"},
        "reading": dict.fromkeys(
            (
                "runs_in_window",
                "runs_examined",
                "runs_not_ours",
                "carried_forward",
                "queued_with_steps",
                "windows",
            ),
            1,
        )
        | {"stopped": None},
        "children": [
            {
                "run_id": 5,
                "request_id": "rqf-7-1-1-0123abcd",
                "labels": "linux-amd64-cpu8",
                "group": GROUP,
                "dispatched_at": "2026-11-01T10:00:00Z",
                "runner_at": "2026-11-01T10:01:00Z",
                "ending": "allocated",
                "conclusion": "success",
                QUEUE_DURATION: 55.0,
                "censored": False,
            }
        ],
    }

    def changed(edit: Callable[[Any], object]) -> str:
        data = json.loads(json.dumps(good))
        edit(data)
        return json.dumps(data)

    return {
        "not JSON": ("{", "not a readable JSON file"),
        "deeply nested": ("[" * 100_000 + "]" * 100_000, "too deeply nested"),
        "nested where a string goes": (
            changed(lambda d: d["children"][0].update(labels=json.loads("[" * 500 + "]" * 500))),
            "children[0].labels: must be a string",
        ),
        "another schema": (changed(lambda d: d.update(version=3)), "not a history file"),
        "version true": (changed(lambda d: d.update(version=True)), "not a history file"),
        "an unknown ending": (
            changed(lambda d: d["children"][0].update(ending="won")),
            "children[0].ending: must be one of",
        ),
        "an unknown key": (changed(lambda d: d.update(extra=1)), "unknown key 'extra'"),
        "a negative wait": (
            changed(lambda d: d["children"][0].update({QUEUE_DURATION: -3})),
            f"children[0].{QUEUE_DURATION}: must be seconds",
        ),
        "a run id of true": (
            changed(lambda d: d["children"][0].update(run_id=True)),
            "children[0].run_id: must be a whole number",
        ),
        "a bad request id": (
            changed(lambda d: d["children"][0].update(request_id="rqf-x")),
            "children[0].request_id: not a request id",
        ),
        "a naive time": (
            changed(lambda d: d["window"].update(since="2026-11-01T00:00:00")),
            "window.since: must be a UTC time",
        ),
        # Issue 44, item 6: numbers and times past what the arithmetic can hold.
        "a 400-digit wait": (
            changed(lambda d: d["children"][0].update({QUEUE_DURATION: int("9" * 400)})),
            f"children[0].{QUEUE_DURATION}: must be seconds",
        ),
        "a wait longer than any window": (
            changed(lambda d: d["children"][0].update({QUEUE_DURATION: 1e300})),
            f"children[0].{QUEUE_DURATION}: must be seconds",
        ),
        "a dispatch before year 1 in UTC": (
            changed(lambda d: d["children"][0].update(dispatched_at="0001-01-01T00:00:00+14:00")),
            "children[0].dispatched_at: must be a time from 1970 to 2999",
        ),
        "a window ending after year 9999 in UTC": (
            changed(lambda d: d["window"].update(until="9999-12-31T23:59:59-14:00")),
            "window.until: must be a time from 1970 to 2999",
        ),
        "a runner before its dispatch": (
            changed(lambda d: d["children"][0].update(runner_at="2026-11-01T09:59:59Z")),
            "children[0].runner_at: before children[0].dispatched_at",
        ),
        "a 400-digit run id": (
            changed(lambda d: d["children"][0].update(run_id=int("9" * 400))),
            "children[0].run_id: must be a whole number from 0 to",
        ),
        "a 400-digit count": (
            changed(lambda d: d["reading"].update(windows=int("9" * 400))),
            "reading.windows: must be a whole number from 0 to",
        ),
        "the good one": (json.dumps(good), None),
    }


@pytest.mark.parametrize(("name", "case"), list(_bad_files().items()), ids=list(_bad_files()))
def test_a_malformed_history_file_is_an_input_error_naming_it(
    name, case, tmp_path, no_network, capsys
):
    text, said = case
    path = tmp_path / "history.json"
    path.write_text(text)
    session, adapter = no_network
    code = main(["stats", "--history", str(path)], {}, session=session)
    err = capsys.readouterr().err
    assert adapter.sent == []
    if said is None:
        assert code == 0, err
        return
    assert code == 2
    assert f"stats: error: --history {path}: " in err
    assert said in err
    assert "Traceback" not in err


def test_the_schema_states_the_readers_bounds():
    """docs/history-schema.json gives the ranges the reader holds a file to (issue 44, item 6)."""
    reading = HISTORY_SCHEMA["properties"]["reading"]["properties"]
    child = HISTORY_SCHEMA["properties"]["children"]["items"]["properties"]
    counts = [reading[key] for key in reading if key != "stopped"] + [child["run_id"]]
    assert {spec["maximum"] for spec in counts} == {MAX_COUNT}
    assert child[QUEUE_DURATION]["maximum"] == MAX_SECONDS
    bounds = f"from {EARLIEST:%Y-%m-%dT%H:%M:%SZ} to before {LATEST:%Y-%m-%dT%H:%M:%SZ}"
    assert bounds in HISTORY_SCHEMA["description"]


def test_history_file_text_is_printed_through_the_escaping_path(tmp_path, no_network, capsys):
    """Labels and a stop reason from the file cannot start a workflow command or a line."""
    text, _ = _bad_files()["the good one"]
    data = json.loads(text)
    data["children"][0]["labels"] = "cpu\n::error::owned ##[group]x"
    data["reading"]["stopped"] = "\u2028::set-output name=x::y"
    path = tmp_path / "history.json"
    path.write_text(json.dumps(data))
    session, _ = no_network
    for output in ([], ["--markdown"], ["--json"]):
        assert main(["stats", "--history", str(path), *output], {}, session=session) == 0
        out = capsys.readouterr().out
        assert all(not line.lstrip().startswith("::") for line in out.splitlines()), output
        assert "##[" not in out, output
        assert "\u2028" not in out, output


def test_history_refuses_the_flags_of_an_online_reading(tmp_path, no_network, capsys):
    session, adapter = no_network
    code = main(
        ["stats", "--history", str(tmp_path / "h.json"), "--repo", "o/r", "--since", "3d"],
        {},
        session=session,
    )
    assert code == 2
    assert "--since, --repo cannot apply to it" in capsys.readouterr().err
    assert adapter.sent == []


# ------------------------------------------------- the offline report the docs page shows


_OFFLINE = re.compile(r"<!-- offline report -->\s*```console\n(?P<body>.*?)```", re.DOTALL)


def test_simulate_writes_a_history_that_stats_reports_offline_as_the_docs_show(
    tmp_path, monkeypatch, no_network, capsys
):
    """docs/queue-insight.md's offline block: each `$` command, run here, prints what follows it."""
    body = _OFFLINE.search((DOCS / "queue-insight.md").read_text())
    assert body is not None
    session, adapter = no_network
    monkeypatch.chdir(tmp_path)
    commands = re.split(r"^\$ ", body["body"], flags=re.MULTILINE)[1:]
    assert len(commands) == 2
    for command in commands:
        line, _, shown = command.partition("\n")
        argv = line.split()
        assert argv[0] == "runner-queue-fallback"
        assert main(argv[1:], {}, session=session) == 0
        assert capsys.readouterr().out == shown, line
    assert adapter.sent == []
    jsonschema.validate(json.loads((tmp_path / "history.json").read_text()), HISTORY_SCHEMA)
