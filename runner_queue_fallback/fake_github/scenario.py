"""Scenarios: a fake repository, its pools, timings, faults and events, as data.

A scenario is frozen dataclasses; `Scenario.from_mapping` reads the same shape from a dict (parsed
YAML or TOML), `Scenario.from_yaml` from text, and `build(clock)` makes the `FakeGitHub`.

```yaml
name: primary-busy-falls-back
pools:
  - {group: nv-cpu-general, labels: linux-amd64-cpu16, runners: 1, busy: [[0, 3600]]}
  - {group: nv-cpu-general, labels: linux-amd64-cpu8, runners: 2}
  - {group: GitHub-hosted, labels: ubuntu-24.04, hosted: true, runners: 20}   # concurrency limit
timings: {visibility_delay: 3, jobs_delay: 2, start_delay: 5, cancel_delay: 3}
api_versions: ["2022-11-28", "2026-03-10"]   # ["2022-11-28"] (quoted): an older GHES
workload: {outcome: success, duration: 120}
faults:
  - {kind: status, status: 502, path: "/jobs$", start: 60, end: 120, count: 1}
events:
  - {at: 300, kind: move_ref, ref: heads/feature}
parent: {run_id: 4242, attempt: 1}
refs: {heads/feature: null}
platform: {requeue: visible, zombies: [2], unheeded_cancel: true}   # GitHub's 2026 surprises
runner_groups: {groups: [{name: nv-cpu-general, restricted_to_workflows: true}]}   # the org's
```
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import yaml
from pydantic import ConfigDict, TypeAdapter

from runner_queue_fallback.core.clock import Clock
from runner_queue_fallback.core.labels import label_names
from runner_queue_fallback.fake_github.actions import CHILD_INPUTS, WorkerHook
from runner_queue_fallback.fake_github.faults import Fault, FaultPlan
from runner_queue_fallback.fake_github.limits import SecondaryLimits
from runner_queue_fallback.fake_github.model import Platform, Timings, Workload
from runner_queue_fallback.fake_github.runner_groups import RunnerGroupsSpec
from runner_queue_fallback.fake_github.world import (
    API_VERSIONS,
    ETagPolicy,
    FakeGitHub,
    RateLimitStatus,
)

__all__ = ["Event", "ParentSpec", "PoolSpec", "Scenario", "WorkflowSpec"]

_STRICT: ConfigDict = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class PoolSpec:
    """A runner pool: `{group, labels}`, how many runners, when none is free, its own workload.

    `hosted: true`: GitHub-hosted runners of `labels`, reached by `runs-on` without a group (the
    `group` given only names the pool in the story); `runners` is the plan's concurrency limit.
    """

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    group: str
    labels: str | tuple[str, ...]
    runners: int = 1
    busy: tuple[tuple[float, float], ...] = ()
    workload: Workload | None = None
    hosted: bool = False


@dataclass(frozen=True)
class ParentSpec:
    """The coordinator's own run."""

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    run_id: int = 4242
    attempt: int = 1
    status: str = "in_progress"
    visible_after: float = 0.0


@dataclass(frozen=True)
class WorkflowSpec:
    """A workflow file on a branch; `inputs: null` accepts any inputs."""

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    file: str = "runner-worker.yml"
    ref: str = "main"
    dispatchable: bool = True
    inputs: tuple[str, ...] | None = CHILD_INPUTS
    required: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Event:
    """Something that happens to the repository at virtual second `at`.

    `move_ref` moves `ref` (e.g. `heads/feature`) to `sha` (a new commit if omitted);
    `change_workflow` commits a new revision of `file` on branch `ref` (default `main`);
    `parent_cancel`, `parent_complete` (with `conclusion`) and `parent_rerun` act on the parent.
    """

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    at: float
    kind: Literal["move_ref", "change_workflow", "parent_cancel", "parent_complete", "parent_rerun"]
    ref: str | None = None
    sha: str | None = None
    file: str = "runner-worker.yml"
    conclusion: str = "success"


@dataclass(frozen=True)
class Scenario:
    """Everything a fake repository needs; `build(clock)` makes it."""

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    name: str = "default"
    description: str = ""
    repository: str = "octo-org/octo-repo"
    pools: tuple[PoolSpec, ...] = ()
    timings: Timings = field(default_factory=Timings)
    workload: Workload = field(default_factory=Workload)
    faults: tuple[Fault, ...] = ()
    events: tuple[Event, ...] = ()
    parent: ParentSpec | None = field(default_factory=ParentSpec)
    workflows: tuple[WorkflowSpec, ...] = (WorkflowSpec(),)
    refs: Mapping[str, str | None] = field(default_factory=dict)
    seed: int = 0
    quota: int = 1000
    path_with_ref: bool = False
    #: a job cancelled before it got a runner shows `runner_id: 0`, `runner_name: ""`
    unassigned_runner_as_zero: bool = False
    #: how a rate-limit refusal is answered (GitHub documents 403 and 429)
    rate_limit_status: RateLimitStatus = 403
    #: the secondary limits (see fake_github/limits.py), or None: off
    secondary: SecondaryLimits | None = None
    #: "every-read": every reply has a new ETag, so no conditional request is answered 304
    etags: ETagPolicy = "stable"
    #: the REST API versions the server has; `[2022-11-28]` is an older GitHub Enterprise Server
    #: (2026-03-10 refused, dispatch answers 204; see `timings.listing_delay`)
    api_versions: tuple[str, ...] = tuple(sorted(API_VERSIONS))
    #: what GitHub does beyond the tidy model: re-queues, runs without a job, unheeded cancels
    platform: Platform = field(default_factory=Platform)
    #: the organisation's runner groups and policy, read with a runners token (None: not served)
    runner_groups: RunnerGroupsSpec | None = None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Scenario:
        """Read a scenario from a dict; unknown keys and wrong types are errors."""
        return _ADAPTER.validate_python(dict(data))

    @classmethod
    def from_yaml(cls, text: str) -> Scenario:
        """Read a scenario from YAML text."""
        data = yaml.safe_load(text)
        if not isinstance(data, Mapping):
            raise TypeError("a scenario is a YAML mapping")
        return cls.from_mapping(data)

    def build(
        self,
        clock: Clock,
        *,
        on_worker_start: WorkerHook | None = None,
        api_url: str = "https://api.github.test",
        server_url: str = "https://github.test",
    ) -> FakeGitHub:
        """Make the fake GitHub this scenario describes, on `clock`."""
        world = FakeGitHub(
            clock,
            repository=self.repository,
            api_url=api_url,
            server_url=server_url,
            timings=self.timings,
            workload=self.workload,
            on_worker_start=on_worker_start,
            faults=FaultPlan(self.faults, self.seed),
            quota=self.quota,
            path_with_ref=self.path_with_ref,
            unassigned_runner_as_zero=self.unassigned_runner_as_zero,
            rate_limit_status=self.rate_limit_status,
            secondary=self.secondary,
            etags=self.etags,
            api_versions=frozenset(self.api_versions),
            platform=self.platform,
        )
        for wf in self.workflows:
            world.add_workflow(
                wf.file,
                wf.ref,
                dispatchable=wf.dispatchable,
                inputs=wf.inputs,
                required=wf.required,
            )
        for ref, sha in self.refs.items():
            world.add_ref(ref, sha)
        for pool in self.pools:
            if pool.hosted:
                world.add_hosted_pool(
                    pool.labels, concurrency=pool.runners, busy=pool.busy, workload=pool.workload
                )
                continue
            world.add_pool(
                pool.group,
                pool.labels,
                runners=pool.runners,
                busy=pool.busy,
                workload=pool.workload,
            )
        if self.runner_groups is not None:
            world.org_runners = self.runner_groups.build(
                self.repository,
                [(p.group, label_names(p.labels), p.runners) for p in self.pools if not p.hosted],
            )
        if self.parent is not None:
            p = self.parent
            world.add_parent_run(p.run_id, p.attempt, p.status, p.visible_after)
        for event in self.events:
            self._schedule(world, event)
        return world

    def _schedule(self, world: FakeGitHub, event: Event) -> None:
        parent = self.parent.run_id if self.parent else None
        if event.kind == "move_ref":
            if event.ref is None:
                raise ValueError("a move_ref event needs `ref`")
            world.move_ref(event.ref, event.sha, at=event.at)
        elif event.kind == "change_workflow":
            world.change_workflow(event.file, event.ref or "main", at=event.at)
        elif parent is None:
            raise ValueError(f"a {event.kind} event needs a parent run")
        elif event.kind == "parent_rerun":
            world.rerun_parent(parent, at=event.at)
        else:
            conclusion = "cancelled" if event.kind == "parent_cancel" else event.conclusion
            world.finish_parent(parent, conclusion, at=event.at)


_ADAPTER: TypeAdapter[Scenario] = TypeAdapter(Scenario)
