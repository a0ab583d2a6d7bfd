"""A pool is its labels as a set (issue 43): `stats` and `simulate --waits` compare as GitHub does.

A past served by the stateful fake GitHub (`fake_github/history.py`) is read through the
composition root. Each test states one rule: pools keyed by their label set (order and case
ignored, `core/labels.py`), a recommendation that `plan` accepts pasted back as it stands, a group
the history cannot measure said so with its reason, and the history file's labels as a list.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs; only validates a document
import pytest

from runner_queue_fallback.cli import main
from runner_queue_fallback.core.inputs import env_name, read_pool_settings
from runner_queue_fallback.core.labels import label_set
from runner_queue_fallback.core.profiles import load_profiles
from runner_queue_fallback.fake_github.history import (
    Exponential,
    HistorySpec,
    LogNormal,
    PoolHistory,
)
from tests.stats_support import CPU8, CPU16, GROUP, history_world, run_stats

DOCS = Path(__file__).resolve().parent.parent / "docs"
STATS_SCHEMA = json.loads((DOCS / "stats-schema.json").read_text())
HISTORY_SCHEMA = json.loads((DOCS / "history-schema.json").read_text())
NOT_MEASURABLE = "not measurable from history"
WHY = "history records a runner group only for jobs that got a runner"

#: Two pools of a team's own labels: cpu16 slow, and a build pool that says its machine only by
#: a declaration (its labels name no OS or architecture).
SLOW = ("self-hosted", CPU16)
BUILD = ("self-hosted", "build-large")
DECLARED = {"os": "linux", "arch": "amd64"}


def _spec(*pools: PoolHistory, sequences: int = 160, seed: int = 6) -> HistorySpec:
    """Sequences that try the pools in the order given and in the reverse order."""
    forward = tuple((n, 10.0) for n in range(len(pools)))
    return HistorySpec(pools=pools, orders=(forward, forward[::-1]), sequences=sequences, seed=seed)


@pytest.fixture(scope="module")
def team_pools() -> HistorySpec:
    return _spec(
        PoolHistory(GROUP, SLOW, Exponential(mean=20 * 60.0)),
        PoolHistory(GROUP, BUILD, LogNormal(median=45.0, sigma=0.7)),
    )


def _stats_json(spec: HistorySpec, capsys: Any, *args: str) -> dict[str, Any]:
    world, clock = history_world(spec)
    code = run_stats(world, clock, "--json", *args)
    out = capsys.readouterr().out
    assert code == 0, out
    document: dict[str, Any] = json.loads(out)
    jsonschema.validate(document, STATS_SCHEMA)
    return document


def _accepted(runners_json: str) -> list[frozenset[str]]:
    """The label sets of a `runners` input that `plan` accepts (it fails the test otherwise)."""
    assert main(["plan", "--runner-type", "cpu", "--runners", runners_json]) == 0
    environ = {env_name("runner-type"): "cpu", env_name("runners"): runners_json}
    settings = read_pool_settings(environ, load_profiles())
    return [label_set(c.labels) for c in settings.candidates]


def test_runners_in_another_order_and_case_are_evaluated_and_the_recommendation_pastes_into_plan(
    team_pools, capsys
):
    """Before: the pools were keyed `self-hosted,linux-amd64-cpu16` (sorted, joined), so these
    `runners` were "not evaluated", and a recommendation's labels were one comma-joined string."""
    current = json.dumps(
        [
            {"group": GROUP, "labels": ["LINUX-AMD64-CPU16", "Self-Hosted"]},
            {"group": GROUP, "labels": ["Build-Large", "self-hosted"], **DECLARED},
        ]
    )
    document = _stats_json(team_pools, capsys, "--runner-type", "cpu", "--runners", current)
    rec = document["recommendation"]
    assert rec["refused"] == []
    assert rec["current_note"] is None
    assert rec["current"] is not None
    assert {frozenset(pool["labels"]) for pool in document["pools"]} == {
        frozenset(SLOW),
        frozenset(BUILD),
    }
    best = rec["best"][0]
    assert [label_set(step["labels"]) for step in best["steps"]] == [
        label_set(BUILD),
        label_set(SLOW),
    ]  # the quick build pool first
    for evaluation in [rec["current"], *rec["best"]]:
        assert all(isinstance(step["labels"], list) for step in evaluation["steps"])
        assert json.loads(evaluation["runners"]) == evaluation["steps"]
        assert _accepted(evaluation["runners"]) == [
            label_set(s["labels"]) for s in evaluation["steps"]
        ]
    # the labels as the user wrote them, the declaration the build pool needs, the group
    assert best["steps"][0] == {
        "group": GROUP,
        "labels": ["Build-Large", "self-hosted"],
        **DECLARED,
        "gpus": 0,
        "queue-timeout-minutes": best["steps"][0]["queue-timeout-minutes"],
    }
    assert "os" not in best["steps"][1]  # linux-amd64-cpu16 says its machine itself


def test_the_text_report_evaluates_them_too_and_prints_a_list(team_pools, capsys):
    world, clock = history_world(team_pools)
    current = json.dumps(
        [
            {"group": GROUP, "labels": ["Self-Hosted", "linux-amd64-cpu16"]},
            {"group": GROUP, "labels": ["build-large", "SELF-HOSTED"], **DECLARED},
        ]
    )
    assert run_stats(world, clock, "--runner-type", "cpu", "--runners", current) == 0
    out = capsys.readouterr().out
    assert "not evaluated" not in out
    assert "nothing rests on" not in out
    recommended = [
        line.split("runners: ", 1)[1] for line in out.splitlines() if "runners: [" in line
    ]
    assert recommended
    for runners_json in recommended:
        assert '"labels":["' in runners_json
        _accepted(runners_json)


def test_a_labels_only_candidate_and_a_hosted_last_resort_paste_back_as_they_were_written(capsys):
    """Before: the labels-only candidate came back as `"group": ""`, which `plan` refuses, and a
    hosted step broke the schema's `runners` entry."""
    spec = HistorySpec(
        pools=(
            PoolHistory(GROUP, CPU16, Exponential(mean=20 * 60.0)),
            PoolHistory("team", (CPU8, "self-hosted"), LogNormal(median=60.0, sigma=0.8)),
            PoolHistory("", "ubuntu-24.04", LogNormal(median=20.0, sigma=0.5)),
        ),
        orders=(((0, 10.0),), ((1, 10.0),), ((2, 10.0),)),  # each pool tried on its own
        sequences=150,
        seed=6,
    )
    written = [
        {"group": GROUP, "labels": [CPU16]},
        {"labels": [CPU8, "self-hosted"]},
        {"hosted": "ubuntu-24.04"},
    ]
    args = ("--runner-type", "cpu", "--runners", json.dumps(written))
    rec = _stats_json(spec, capsys, *args)["recommendation"]
    assert rec["current"] is not None
    assert rec["best"]
    for evaluation in rec["best"]:
        first, *_, last = evaluation["steps"]
        assert first == {"labels": [CPU8, "self-hosted"], **_minutes(first)}
        assert last == {"hosted": "ubuntu-24.04", **_minutes(last)}
        _accepted(evaluation["runners"])


def _minutes(step: dict[str, Any]) -> dict[str, Any]:
    return {"queue-timeout-minutes": step["queue-timeout-minutes"]}


def test_a_group_only_candidate_is_not_measurable_from_history_and_says_why(capsys):
    """History records a job's runner group only once a runner took it: a group-only pool's
    timed-out children could be anyone's. Before: "nothing rests on : no children observed"."""
    spec = _spec(
        PoolHistory("nv-cpu-build", (), LogNormal(median=30.0, sigma=0.5)),
        PoolHistory(GROUP, CPU8, LogNormal(median=60.0, sigma=0.8)),
    )
    current = json.dumps([{"group": "nv-cpu-build", **DECLARED}, {"group": GROUP, "labels": CPU8}])
    document = _stats_json(spec, capsys, "--runner-type", "cpu", "--runners", current)
    rec = document["recommendation"]
    [refused] = rec["refused"]
    assert (refused["group"], refused["labels"]) == ("nv-cpu-build", [])
    assert refused["reason"].startswith(NOT_MEASURABLE)
    assert WHY in refused["reason"]
    assert rec["current"] is None
    assert NOT_MEASURABLE in rec["current_note"]
    [bare] = [pool for pool in document["pools"] if pool["labels"] == []]
    assert bare["refused"].startswith(NOT_MEASURABLE)
    assert bare["curve"] is None  # no figure rests on it
    for evaluation in rec["best"]:  # the measurable pool alone, pasted back as it stands
        assert _accepted(evaluation["runners"]) == [label_set(CPU8)]
    world, clock = history_world(spec)
    assert run_stats(world, clock, "--runner-type", "cpu", "--runners", current) == 0
    out = capsys.readouterr().out
    assert f"nothing rests on group nv-cpu-build (no labels): {NOT_MEASURABLE}" in out
    assert WHY in out


def test_pools_that_differ_only_by_group_are_never_merged(capsys):
    """Two groups' runners with the same labels: one quick, one slow. Before: one pool, the
    quicker group's curve mixed with the slower's timed-out children."""
    spec = HistorySpec(
        pools=(
            PoolHistory("team-a", CPU8, LogNormal(median=30.0, sigma=0.5)),
            PoolHistory("team-b", CPU8, Exponential(mean=30 * 60.0)),
            PoolHistory(GROUP, CPU16, LogNormal(median=60.0, sigma=0.8)),
        ),
        orders=(((0, 10.0),), ((1, 10.0),), ((2, 10.0),)),  # each pool tried on its own
        sequences=150,
        seed=6,
    )
    current = json.dumps(
        [{"group": "team-a", "labels": CPU8}, {"group": "elsewhere", "labels": CPU16}]
    )
    document = _stats_json(spec, capsys, "--runner-type", "cpu", "--runners", current)
    [shared] = [pool for pool in document["pools"] if pool["labels"] == [CPU8]]
    assert shared["refused"].startswith(NOT_MEASURABLE)
    assert "team-a" in shared["refused"]
    assert "team-b" in shared["refused"]
    assert shared["group"] is None
    assert shared["curve"] is None
    assert shared["median_seconds"] is None
    reasons = {r["group"]: r["reason"] for r in document["recommendation"]["refused"]}
    assert set(reasons) == {"team-a", "elsewhere"}
    assert all(reason.startswith(NOT_MEASURABLE) for reason in reasons.values())
    assert f"group {GROUP}" in reasons["elsewhere"]  # the group history saw, not the one asked
    assert document["recommendation"]["best"] == []


def _replay(waits: Path, runners_json: str, capsys: Any) -> tuple[int, str]:
    args = ["simulate", "--waits", str(waits), "--runner-type", "cpu", "--runners", runners_json]
    code = main([*args, "--replays", "3", "--json"])
    return code, capsys.readouterr().out


def test_simulate_waits_finds_a_pool_written_in_another_order(team_pools, tmp_path, capsys):
    """Before: "no measured waits for LINUX-AMD64-CPU16,Self-Hosted; it has: ..."."""
    document = _stats_json(team_pools, capsys)
    waits = tmp_path / "stats.json"
    waits.write_text(json.dumps(document))
    current = json.dumps(
        [
            {"group": GROUP, "labels": ["LINUX-AMD64-CPU16", "Self-Hosted"]},
            {"group": GROUP, "labels": ["build-large", "self-hosted"], **DECLARED},
        ]
    )
    code, out = _replay(waits, current, capsys)
    assert code == 0, out
    replayed = json.loads(out)
    assert replayed["predicted"] is not None
    assert [entry["labels"] for entry in replayed["runners"]] == [
        ["LINUX-AMD64-CPU16", "Self-Hosted"],
        ["build-large", "self-hosted"],
    ]
    # an older `stats --json` names a pool by its sorted, comma-joined labels: still a set
    older = {
        "schema": "runner-queue-fallback/stats",
        "version": 2,
        "pools": [
            {"group": p["group"], "labels": ",".join(sorted(p["labels"])), "curve": p["curve"]}
            for p in document["pools"]
        ],
    }
    waits.write_text(json.dumps(older))
    code, out = _replay(waits, current, capsys)
    assert code == 0, out
    assert json.loads(out)["replayed"] == replayed["replayed"]


def test_simulate_waits_says_why_a_group_only_candidate_has_no_waits(team_pools, tmp_path, capsys):
    waits = tmp_path / "stats.json"
    waits.write_text(json.dumps(_stats_json(team_pools, capsys)))
    code, out = _replay(waits, json.dumps([{"group": "nv-cpu-build", **DECLARED}]), capsys)
    assert code == 2
    assert "no measured waits for group nv-cpu-build (no labels)" in out
    assert NOT_MEASURABLE in out


def test_the_history_file_records_labels_as_a_list_and_an_older_file_still_loads(
    team_pools, tmp_path, no_network, capsys
):
    world, clock = history_world(team_pools)
    saved = tmp_path / "history.json"
    assert run_stats(world, clock, "--save-history", str(saved)) == 0
    capsys.readouterr()
    data = json.loads(saved.read_text())
    jsonschema.validate(data, HISTORY_SCHEMA)
    assert data["version"] == 2
    assert {frozenset(c["labels"]) for c in data["children"]} == {frozenset(SLOW), frozenset(BUILD)}
    assert all(isinstance(c["labels"], list) for c in data["children"])
    # version 1, as the last release wrote it: labels sorted and comma-joined
    older = dict(data, version=1)
    older["children"] = [dict(c, labels=",".join(sorted(c["labels"]))) for c in data["children"]]
    jsonschema.validate(older, HISTORY_SCHEMA)
    session, _ = no_network
    reports = []
    current = json.dumps(
        [
            {"group": GROUP, "labels": ["LINUX-AMD64-CPU16", "self-hosted"]},
            {"group": GROUP, "labels": ["self-hosted", "build-large"], **DECLARED},
        ]
    )
    for document in (data, older):
        saved.write_text(json.dumps(document))
        args = ["stats", "--history", str(saved), "--json", "--runner-type", "cpu"]
        assert main([*args, "--runners", current], {}, session=session) == 0
        reports.append(json.loads(capsys.readouterr().out))
    assert reports[0]["recommendation"]["current"] is not None
    assert reports[1]["recommendation"] == reports[0]["recommendation"]
    assert {frozenset(p["labels"]) for p in reports[1]["pools"]} == {
        frozenset(SLOW),
        frozenset(BUILD),
    }
    with pytest.raises(jsonschema.ValidationError):  # version 2 keeps no comma-joined labels
        jsonschema.validate(dict(older, version=2), HISTORY_SCHEMA)
