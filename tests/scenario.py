"""The coordinator's scenarios: one builder for every test that runs it on the fake GitHub.

`Scenario` is a world with CPU pools (the standard repository: the child workflow on main, the
approved source ref and the parent run) on a fake clock, the inputs of one coordinator, and a
run of the real coordinator and its post step through `cli.main`, checked against the design's
invariants. The presets and helpers around it build what the tests of more than one module
need: candidates from the `runners` input with 1-minute queues (`minute_queues`), outside text
watched on every line printed (`watched=True`), an older server that answers a dispatch with 204
(`older_server`), a copy of each dispatch by someone else (`copy_every_dispatch`), a catalogue
scenario (`simulated`), and a dispatched child cleaned up by hand on a client (`Child`).

No tests here: each test lives in the file of the module or behaviour it holds (see
docs/contributing.md, "Where a test goes").
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from runner_queue_fallback import cli
from runner_queue_fallback.action.cleanup import cancel_and_confirm
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.inputs import InputErrors, env_name, read_pool_settings
from runner_queue_fallback.core.profiles import load_profiles
from runner_queue_fallback.fake_github import DispatchRefused
from runner_queue_fallback.fake_github.faults import Fault, FaultPlan
from runner_queue_fallback.fake_github.model import FakeRun, Platform, Timings, Workload, fake_token
from runner_queue_fallback.fake_github.world import API_VERSIONS, OLDER_SERVER, FakeGitHub
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.tools.simulate.scenarios import CatalogueEntry, load_catalogue
from runner_queue_fallback.tools.simulate.steps import (
    PARENT_RUN_ID,
    SOURCE_REF,
    Simulated,
    SimulationRun,
    run_coordinator,
    simulate_entry,
    standard_world,
)
from tests.invariants import check_invariants
from tests.outside import StdoutWatch, Tamper, commands_from_outside, watch_stdout
from tests.test_sim_support import GROUP, dispatch, make_world

CPU16, CPU8, CPU32 = "linux-amd64-cpu16", "linux-amd64-cpu8", "linux-amd64-cpu32"
CPU = [CPU16, CPU8, CPU32]
#: A pool busy for good.
FOREVER = [(0.0, 10.0**9)]
#: The post step's token, in GitHub's 2026 format (520 characters with `.`, `_`, `-`).
POST_TOKEN = fake_token("post_token")
CATALOGUE = load_catalogue()


class Scenario:
    """A small builder: a world with CPU pools, then a run of the real coordinator.

    `watched`: outside text is never a command: every reply can be rewritten (`tamper`, installed
    now, so that no read is answered 304), and each run checks every line the steps printed.
    """

    def __init__(
        self,
        *,
        timings: Timings | None = None,
        workload: Workload | None = None,
        faults: Sequence[Fault] = (),
        clock: FakeClock | None = None,
        api_versions: frozenset[str] = API_VERSIONS,
        watched: bool = False,
    ):
        self.clock = clock or FakeClock()
        world = FakeGitHub(
            self.clock,
            timings=timings or Timings(),
            workload=workload,
            faults=FaultPlan(list(faults)),
            api_versions=api_versions,
        )
        self.world, self.sha = standard_world(self.clock, world)
        self.inputs = {
            "workflow": "runner-worker.yml",
            "workflow-ref": "main",
            "source-ref": SOURCE_REF,
            "source-sha": self.sha,
            "runner-type": "cpu",
            "execution-timeout-minutes": "15",
        }
        self.watched = watched
        self._tamper = Tamper(self.world).install() if watched else None

    @property
    def tamper(self) -> Tamper:
        """Rules rewriting the fake's replies (installed at first use: no read is answered 304)."""
        if self._tamper is None:
            self._tamper = Tamper(self.world).install()
        return self._tamper

    def pools(
        self, *busy: Sequence[tuple[float, float]], labels: Sequence[str] = CPU, group: str = GROUP
    ) -> Scenario:
        for label, intervals in zip(labels, busy, strict=False):
            self.world.add_pool(group, label, runners=1, busy=intervals)
        return self

    def run(
        self,
        changes: Mapping[str, str] | None = None,
        *,
        invariants: bool = True,
        bug: bool = False,
        **kwargs: Any,
    ) -> SimulationRun:
        """Run the coordinator (and its post step unless `post_step=False`) with the inputs and
        `changes` to them; check the invariants unless told not to (a copy is a second live run),
        and, when watched, that no outside text became a command and (unless `bug`) no traceback."""
        inputs = {**self.inputs, **(changes or {})}
        with _watching(self.watched) as watch:
            result = run_coordinator(self.world, self.clock, inputs, main=cli.main, **kwargs)
        if invariants:
            environ = {env_name(k): v for k, v in inputs.items()}
            try:
                candidates = len(read_pool_settings(environ, load_profiles()).candidates)
            except InputErrors:
                candidates = 0
            check_invariants(self.world, result, candidates=candidates)
        if watch is not None:
            assert watch.problems() == [], watch.problems()
            everything = "\n".join([result.log, result.post_log, *result.guard_logs])
            assert commands_from_outside(everything) == [], commands_from_outside(everything)
            assert bug or "Traceback" not in everything
        return result

    def cancels(self) -> list[float]:
        return cancels(self.world)

    def requests_after(self, at: float) -> list[float]:
        """When the coordinator sent each request from `at` on (client 0: the main step's token)."""
        return [e.time for e in self.world.ledger if e.client == 0 and e.time >= at]


@contextlib.contextmanager
def _watching(watched: bool) -> Iterator[StdoutWatch | None]:
    if not watched:
        yield None
        return
    with watch_stdout() as watch:
        yield watch


def minute_queues(
    *labels: str, execution: str = "5", watched: bool = False, **kwargs: Any
) -> Scenario:
    """A scenario whose candidates are `labels` (CPU16, then CPU8, by default), given as the
    `runners` input, each with a 1-minute queue deadline, and `execution` minutes of execution
    timeout. The pools are the test's (`pools`, the same labels in the same order)."""
    labels = labels or (CPU16, CPU8)
    s = Scenario(watched=watched, **kwargs)
    s.inputs |= {
        "queue-timeout-minutes": "1",
        "execution-timeout-minutes": execution,
        "runners": json.dumps([{"group": GROUP, "labels": label} for label in labels]),
    }
    return s


def older_server(
    *, busy: bool = False, listing_delay: float = 0.0, clock: FakeClock | None = None
) -> Scenario:
    """The main step on an older server (API version 2022-11-28 only: a dispatch answers 204 and
    the child is found by its run-name): CPU16 (busy for good with `busy`) then CPU8, 1-minute
    queues, 15 minutes of execution, the child's runs listed `listing_delay` s late, no guard."""
    s = minute_queues(
        execution="15",
        timings=Timings(listing_delay=listing_delay),
        api_versions=OLDER_SERVER,
        clock=clock,
    )
    return s.pools(FOREVER if busy else [], [], labels=[CPU16, CPU8])


def attempts(result: SimulationRun) -> list[dict[str, object]]:
    return json.loads(result.outputs["attempts-json"])  # type: ignore[no-any-return]  # list of objects


def cancels(world: FakeGitHub) -> list[float]:
    """When a cancel was sent (any run, any client)."""
    return [e.time for e in world.ledger if e.method == "POST" and e.path.endswith("/cancel")]


# -- copies: the same run-name dispatched by someone else ----------------------------------------


def copy_every_dispatch(world: FakeGitHub, *, after: float, hide_real_for: float = 0.0) -> None:
    """Each dispatch is copied `after` seconds later by someone else (same inputs, same run-name).

    `hide_real_for`: the real run is shown (and listed) that much later than usual: a listing
    that lags, so that the copy is listed first.
    """
    real = world.dispatch

    def dispatch(file: str, ref: str, inputs: Mapping[str, object]) -> FakeRun | DispatchRefused:
        run = real(file, ref, inputs)
        if not isinstance(run, DispatchRefused):
            world.dispatch_at(world.now() + after, file, ref, inputs)
            run.visible_at += hide_real_for
        return run

    world.dispatch = dispatch  # type: ignore[method-assign]  # the fake calls it per request


def real_and_copy(world: FakeGitHub) -> tuple[FakeRun, FakeRun]:
    """The real child (dispatched by the coordinator) and its copy: same run-name, later."""
    kids = sorted(
        (run for run in world.runs.values() if run.id != PARENT_RUN_ID and run.history),
        key=lambda run: (run.created_at, run.id),
    )
    real, copy = kids
    assert real.display_title == copy.display_title
    assert copy.created_at > real.created_at
    return real, copy


def named_over(run: SimulationRun, run_id: int) -> bool:
    """Run `run_id` is named as confirmed over by the main step or the post step."""
    text = run.log + run.post_log
    return (
        f"cleanup confirmed: child run {run_id}" in text
        or f"Child run {run_id} is already completed" in run.post_log
    )


# -- the catalogue's scenarios -------------------------------------------------------------------


def simulated(entry: CatalogueEntry) -> Simulated:
    """A catalogue scenario as `simulate` runs it, each coordinator's run held to the invariants."""
    sim = simulate_entry(entry, main=cli.main)
    for run in sim.runs:
        check_invariants(sim.world, run, candidates=7)
    return sim


# -- a child cleaned up by hand -------------------------------------------------------------------


class Child:
    """A dispatched child whose job stays queued (no runner), and a client to clean it up."""

    def __init__(self, *faults: Fault, platform: Platform | None = None, **timings: float) -> None:
        """Dispatch the child 30 s before the cleanup starts; `faults` apply from then on."""
        self.clock = FakeClock()
        self.world = make_world(
            self.clock,
            timings=Timings(**timings),
            faults=FaultPlan([replace(f, start=30.0) for f in faults]),
            platform=platform or Platform(),
        )
        self.world.add_pool(GROUP, CPU8, runners=0)
        self.run_id = dispatch(self.world, "rqf-1", labels=CPU8)
        self.clock.advance(30)
        session = self.world.session()
        self.client = GitHubClient(
            session, self.world.api_url, self.world.repository, POST_TOKEN, self.clock
        )
        self.lines: list[str] = []
        self.said = ""

    def clean_up(self, **kwargs: float) -> str:
        """Cancel and confirm the child; what the result says."""
        result = cancel_and_confirm(
            self.client, self.clock, self.run_id, log=self.lines.append, **kwargs
        )
        self.confirmed = result.confirmed
        return result.describe()

    def cancels(self) -> list[tuple[float, str]]:
        return [
            (e.time, e.path.rsplit("/", 1)[-1])
            for e in self.world.ledger
            if e.method == "POST" and e.path.endswith("cancel")
        ]

    def reads(self) -> list[float]:
        return [
            e.time
            for e in self.world.ledger
            if e.method == "GET" and e.path.endswith(f"/runs/{self.run_id}")
        ]
