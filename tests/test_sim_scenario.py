"""Scenarios as data: the mapping format, strict reading, and what `build` makes of it."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github import (
    Event,
    Fault,
    PoolSpec,
    Scenario,
    Timings,
    Workload,
    pool_key,
)
from tests.test_sim_support import AUTH, GROUP, PRIMARY, REPO, SECONDARY, advance_to, dispatch

CATALOGUE_ENTRY = """
name: primary-busy-then-fallback
description: the preferred pool stays busy; the fallback pool serves at once
pools:
  - {group: nv-cpu-general, labels: linux-amd64-cpu16, runners: 1, busy: [[0, 3600]]}
  - group: nv-cpu-general
    labels: [linux-amd64-cpu8]
    runners: 2
    workload: {outcome: failure, duration: 30}
timings: {visibility_delay: 4, jobs_delay: 1, cancel_delay: 6}
workload: {outcome: success, duration: 120}
faults:
  - {kind: status, status: 502, path: "/jobs$", start: 60, end: 120, count: 1}
events:
  - {at: 300, kind: move_ref, ref: heads/feature, sha: "ffffffffffffffffffffffffffffffffffffffff"}
  - {at: 400, kind: change_workflow}
  - {at: 500, kind: parent_rerun}
  - {at: 600, kind: parent_cancel}
parent: {run_id: 4242}
refs: {heads/feature: null}
seed: 3
quota: 500
"""


def test_yaml_reads_into_the_dataclasses():
    scenario = Scenario.from_yaml(CATALOGUE_ENTRY)
    assert scenario.pools[0] == PoolSpec(GROUP, PRIMARY, 1, ((0.0, 3600.0),))
    assert scenario.pools[1].labels == (SECONDARY,)
    assert scenario.pools[1].workload == Workload("failure", 30.0)
    assert scenario.timings == Timings(visibility_delay=4, jobs_delay=1, cancel_delay=6)
    assert scenario.faults == (
        Fault("status", path="/jobs$", start=60, end=120, count=1, status=502),
    )
    assert scenario.events[0] == Event(300, "move_ref", ref="heads/feature", sha="f" * 40)
    assert scenario == Scenario.from_mapping(yaml.safe_load(CATALOGUE_ENTRY))


@pytest.mark.parametrize(
    "mapping",
    [
        {"pools": [{"group": "g", "labels": "l", "runners": 1, "colour": "red"}]},
        {"timings": {"visibility": 3}},
        {"faults": [{"kind": "gremlins"}]},
        {"events": [{"at": 1, "kind": "explode"}]},
        {"name": "x", "extra": True},
    ],
)
def test_unknown_keys_and_values_are_errors(mapping):
    with pytest.raises(ValidationError):
        Scenario.from_mapping(mapping)


def test_build_makes_the_world_the_scenario_describes():
    clock = FakeClock()
    world = Scenario.from_yaml(CATALOGUE_ENTRY).build(clock)
    assert world.quota == 500
    assert world.pools[pool_key(GROUP, PRIMARY)].busy == ((0.0, 3600.0),)
    primary = dispatch(world, "p", PRIMARY)
    fallback = dispatch(world, "f", SECONDARY)
    advance_to(clock, 60.0)
    assert world.handle("GET", f"{REPO}/actions/runs/{primary}/jobs", AUTH).status == 502
    assert world.history[primary].allocated_at is None
    assert world.history[fallback].conclusion == "failure"  # the pool's own workload
    old_blob = world.handle(
        "GET", f"{REPO}/contents/.github/workflows/runner-worker.yml", AUTH
    ).json()["sha"]
    advance_to(clock, 700.0)
    assert world.refs["heads/feature"] == "f" * 40
    new_blob = world.handle(
        "GET", f"{REPO}/contents/.github/workflows/runner-worker.yml", AUTH
    ).json()["sha"]
    assert new_blob != old_blob
    parent = world.handle("GET", f"{REPO}/actions/runs/4242", AUTH).json()
    assert (parent["run_attempt"], parent["conclusion"]) == (2, "cancelled")


def test_default_scenario_builds_a_dispatchable_repository():
    clock = FakeClock()
    world = Scenario(pools=(PoolSpec(GROUP, PRIMARY),)).build(clock)
    run_id = dispatch(world)
    advance_to(clock, 100.0)
    assert world.history[run_id].conclusion == "success"
