"""Run the real coordinator, its post step and the guard against the fake GitHub on virtual time.

This is composition, like cli.py: it wires the simulator to the product through the composition
root's `main`, the same door the runner uses, with the environment, files and signals a real step
would get. The root is passed in (`main=cli.main`), never imported: `simulate` is one of the root's
own subcommands, and the harness sits below the root, not beside it in a circle. Every
line a step prints is kept with the virtual second it was written at, so `simulate` can show the
log as the Actions UI would, stamped with simulated time.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from runner_queue_fallback.core.clock import Clock, FakeClock
from runner_queue_fallback.core.inputs import env_name
from runner_queue_fallback.core.main import Main
from runner_queue_fallback.fake_github.actions import WorkerContext
from runner_queue_fallback.fake_github.model import RunHistory, fake_token
from runner_queue_fallback.fake_github.runner_groups import STAND_IN_TOKEN
from runner_queue_fallback.fake_github.vclock import VirtualClock
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.simulate.capture import (
    GuardLog,
    Stamped,
    StampedLog,
    capture_stdout,
    read_key_values,
)
from runner_queue_fallback.tools.simulate.own_job import add_own_workflow
from runner_queue_fallback.tools.simulate.scenarios import CatalogueEntry, CatalogueError, Observed
from runner_queue_fallback.tools.simulate.sigterm import Signalled

__all__ = [
    "PARENT_RUN_ID",
    "SOURCE_REF",
    "TOKEN",
    "Simulated",
    "SimulationRun",
    "coordinator_environ",
    "guard_hook",
    "job_environ",
    "run_coordinator",
    "run_coordinators",
    "simulate_entry",
    "standard_world",
    "step_files_dir",
    "with_defaults",
]

PARENT_RUN_ID = 9_000_001
SOURCE_REF = "refs/pull/123/merge"
#: A fake token in GitHub's 2026 format (520 characters with `.`, `_`, `-`), to prove it is never
#: printed; the guard's is `sim.model.WORKER_TOKEN`.
TOKEN = fake_token("2718281")
#: The step's files, as the runner names them: GITHUB_OUTPUT, GITHUB_STATE, GITHUB_STEP_SUMMARY.
STEP_FILES = ("output", "state", "summary.md")


@dataclass
class SimulationRun:
    """Everything a person or a test sees after a simulated coordinator run."""

    exit_code: int
    log: str
    outputs: dict[str, str]
    summary: str
    state: dict[str, str]
    post_exit_code: int | None = None
    post_log: str = ""
    guard_logs: list[str] = field(default_factory=list)
    log_lines: list[Stamped] = field(default_factory=list)
    post_log_lines: list[Stamped] = field(default_factory=list)
    parent_run_id: int = PARENT_RUN_ID


def standard_world(clock: FakeClock, world: FakeGitHub | None = None) -> tuple[FakeGitHub, str]:
    """A repository with the child workflow on main, the approved source ref and the parent run."""
    world = world or FakeGitHub(clock)
    world.add_workflow("runner-worker.yml", "main")
    sha = world.add_ref(SOURCE_REF.removeprefix("refs/"))
    world.add_parent_run(PARENT_RUN_ID)
    return world, sha


def coordinator_environ(
    world: FakeGitHub,
    inputs: Mapping[str, str],
    files: Path,
    *,
    parent_run_id: int = PARENT_RUN_ID,
    token: str = TOKEN,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment the runner gives the coordinator's container (`extra` added last).

    Without `extra` it says nothing of the coordinator's own job (`job_environ` does): a test's
    coordinator knows when its job ends only if the test asks; `simulate_entry` always does.
    """
    environ = {env_name(name): value for name, value in inputs.items()}
    environ.setdefault(env_name("token"), token)
    environ.update(
        {
            "GITHUB_REPOSITORY": world.repository,
            "GITHUB_RUN_ID": str(parent_run_id),
            "GITHUB_RUN_ATTEMPT": "1",
            "GITHUB_API_URL": world.api_url,
            "GITHUB_SERVER_URL": world.server_url,
            "GITHUB_OUTPUT": str(files / STEP_FILES[0]),
            "GITHUB_STATE": str(files / STEP_FILES[1]),
            "GITHUB_STEP_SUMMARY": str(files / STEP_FILES[2]),
        }
    )
    environ.update(extra or {})
    return environ


def job_environ(
    world: FakeGitHub, *, parent_run_id: int = PARENT_RUN_ID, ref: str = "main"
) -> dict[str, str]:
    """What the runner says of the coordinator's own job: its workflow file, commit, key, runner.

    Read from the parent run as `world` has it (`add_parent_run`); the file is the parent's
    workflow on branch `ref`, at the commit the branch points at now.
    """
    parent = world.runs[parent_run_id]
    assert parent.job is not None  # noqa: S101  # every parent run has its own job
    path = f".github/workflows/{parent.workflow_file}"
    return {
        "GITHUB_WORKFLOW_REF": f"{world.repository}/{path}@refs/heads/{ref}",
        "GITHUB_WORKFLOW_SHA": world.refs[f"heads/{ref}"],
        "GITHUB_JOB": parent.job.name,
        "RUNNER_NAME": parent.job.runner_name or "",
    }


def guard_hook(
    world: FakeGitHub,
    clock: Clock,
    logs: list[str],
    *,
    main: Main,
    stamped: list[GuardLog] | None = None,
) -> Callable[[WorkerContext], bool]:
    """A worker hook that runs the real guard step in the simulated child, on the same clock.

    Guard lines are stamped with the model's time: while a hook runs, the fake GitHub follows the
    guard's own timeline (see `ActionsModel.catch_up`), which is what the worker would see.
    """

    def run_guard(context: WorkerContext) -> bool:
        out = StampedLog(world.now)
        with capture_stdout(out):
            code = main(["guard"], dict(context.environ), clock=clock, session=world.session())
        logs.append(out.getvalue())
        if stamped is not None:
            stamped.append(GuardLog(context.run_id, out.lines, passed=code == 0))
        return code == 0

    return run_guard


def run_coordinator(
    world: FakeGitHub,
    clock: Clock,
    inputs: Mapping[str, str],
    *,
    main: Main,
    interrupt_at: float | None = None,
    post_step: bool = True,
    parent_run_id: int = PARENT_RUN_ID,
    token: str = TOKEN,
    extra_environ: Mapping[str, str] | None = None,
    step_files: Path | None = None,
) -> SimulationRun:
    """Run `coordinate` (and then the post step, as the runner would) through `main`, on `world`.

    `extra_environ`: more of the step's environment (`job_environ`: the coordinator's own job).
    `step_files`: a directory for the step's files, emptied of them first (for runs by the
    thousand: a new temporary directory costs more than a short run's requests).

    The admission spread is seeded by the parent run (see `cli._spread_source`): each coordinator
    of a fleet differs, and every run of a simulation is the same.
    """
    with step_files_dir(step_files) as files:
        environ = coordinator_environ(
            world, inputs, files, parent_run_id=parent_run_id, token=token, extra=extra_environ
        )
        signal = Signalled(clock, interrupt_at) if interrupt_at is not None else None
        log = StampedLog(clock.monotonic)
        with capture_stdout(log):
            code = main(["coordinate"], environ, clock=signal or clock, session=world.session())
        if signal is not None:
            signal.disarm()
        state = read_key_values(files / STEP_FILES[1])
        result = SimulationRun(
            exit_code=code,
            log=log.getvalue(),
            outputs=read_key_values(files / STEP_FILES[0]),
            summary=_read(files / STEP_FILES[2]),
            state=state,
            log_lines=log.lines,
            parent_run_id=parent_run_id,
        )
        if post_step:
            post_env = {**environ, **{f"STATE_{k}": v for k, v in state.items()}}
            post_log = StampedLog(clock.monotonic)
            with capture_stdout(post_log):
                result.post_exit_code = main(
                    ["cleanup"], post_env, clock=clock, session=world.session()
                )
            result.post_log = post_log.getvalue()
            result.post_log_lines = post_log.lines
            result.summary = _read(files / STEP_FILES[2])
        return result


def run_coordinators(
    world: FakeGitHub,
    clock: VirtualClock,
    inputs: Sequence[Mapping[str, str]],
    *,
    main: Main,
    parent_run_ids: Sequence[int] | None = None,
    post_step: bool = True,
    extra_environs: Sequence[Mapping[str, str]] | None = None,
) -> list[SimulationRun]:
    """Run several coordinators at once in one repository, taking turns on a virtual clock.

    Each has its own parent run (added to `world` if missing), token, files and log, as parallel
    jobs of a matrix would; they share the repository's API quota and its runner pools.
    `extra_environs`: more of each one's environment (`job_environ`: its own job).
    """
    ids = list(parent_run_ids or [PARENT_RUN_ID + n for n in range(len(inputs))])
    if len(ids) != len(inputs):
        raise ValueError("one parent run id per coordinator")
    for parent in ids:
        if parent not in world.runs:
            world.add_parent_run(parent)

    def participant(index: int) -> Callable[[], SimulationRun]:
        def run() -> SimulationRun:
            return run_coordinator(
                world,
                clock,
                inputs[index],
                main=main,
                post_step=post_step,
                parent_run_id=ids[index],
                token=TOKEN if index == 0 else f"{TOKEN}_{index + 1}",
                extra_environ=extra_environs[index] if extra_environs else None,
            )

        return run

    results: list[SimulationRun] = clock.run_all([participant(i) for i in range(len(inputs))])
    return results


@contextlib.contextmanager
def step_files_dir(reused: Path | None) -> Iterator[Path]:
    """`reused` emptied of the step's files, or a temporary directory of the run's own."""
    if reused is None:
        with tempfile.TemporaryDirectory(prefix="rqf-sim-") as tmp:
            yield Path(tmp)
        return
    for name in STEP_FILES:
        (reused / name).unlink(missing_ok=True)
    yield reused


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""


# ------------------------------------------------------------------ catalogue scenarios


@dataclass
class Simulated:
    """A whole simulated scenario: the world afterwards, each coordinator's run, the guards."""

    name: str
    world: FakeGitHub
    runs: list[SimulationRun]
    guards: list[GuardLog]
    virtual_seconds: float
    #: the `timeout-minutes` the simulation gave the coordinators' own job (None: not its own)
    job_timeout_minutes: int | None = None

    def children(self, run: SimulationRun) -> list[RunHistory]:
        """The child runs one coordinator dispatched, in dispatch order."""
        mine = [
            history
            for run_id, history in self.world.history.items()
            if self.world.runs[run_id].inputs.get("parent-run-id") == str(run.parent_run_id)
        ]
        return sorted(mine, key=lambda h: h.dispatched_at)

    def observed(self, run: SimulationRun) -> Observed:
        """What one coordinator did, in the catalogue's terms."""
        served = [h for h in self.children(run) if h.allocated_at is not None and h.pool]
        attempts = json.loads(run.outputs.get("attempts-json") or "[]")
        return Observed(
            exit_code=run.exit_code,
            attempts=int(run.outputs.get("attempts") or 0),
            served_by=self._served_by(served[-1]) if served else None,
            outcomes=tuple(str(a.get("outcome", "")) for a in attempts),
            log=run.log + run.post_log,
            post_exit_code=run.post_exit_code,
        )

    def _served_by(self, history: RunHistory) -> str:
        """The pool that served a child, as `runs-on` asked: its labels as written, else its group."""
        job = self.world.runs[history.run_id].job
        if job is not None and job.labels:
            return ",".join(job.labels)
        assert history.pool is not None  # noqa: S101  # only served children are asked
        return history.pool[0]


def simulate_entry(entry: CatalogueEntry, *, main: Main, guard: bool = True) -> Simulated:
    """Build the entry's world and run its coordinators (with post steps and guards) to the end.

    Every step runs through `main`, the composition root (`cli.main`).
    """
    multi = len(entry.coordinators) > 1
    if multi and entry.interrupt_at is not None:
        raise CatalogueError(f"{entry.name}: interrupt_at needs a single coordinator")
    clock: FakeClock | VirtualClock = VirtualClock() if multi else FakeClock()
    guards: list[GuardLog] = []
    world = entry.world.build(clock)
    if guard:
        world.on_worker_start = guard_hook(world, clock, [], main=main, stamped=guards)
    base = entry.world.parent.run_id if entry.world.parent else PARENT_RUN_ID
    parents = [c.parent_run_id or base + n for n, c in enumerate(entry.coordinators)]
    inputs = [with_defaults(world, c.inputs) for c in entry.coordinators]
    for parent in parents:
        if parent not in world.runs:
            world.add_parent_run(parent)
    # What a runner tells each step of its own job, and that job's file (`own_job`).
    timeout = add_own_workflow(world, parents, inputs)
    jobs = [job_environ(world, parent_run_id=p, ref=world.default_branch) for p in parents]
    if multi:
        assert isinstance(clock, VirtualClock)  # noqa: S101  # chosen above
        runs = run_coordinators(
            world, clock, inputs, main=main, parent_run_ids=parents, extra_environs=jobs
        )
    else:
        runs = [
            run_coordinator(
                world,
                clock,
                inputs[0],
                main=main,
                interrupt_at=entry.interrupt_at,
                parent_run_id=parents[0],
                extra_environ=jobs[0],
            )
        ]
    world.catch_up()
    return Simulated(entry.name, world, runs, guards, clock.monotonic(), timeout)


def with_defaults(world: FakeGitHub, inputs: Mapping[str, str]) -> dict[str, str]:
    """Fill the inputs a scenario leaves out: the child workflow, and the source at its SHA.

    A world with runner groups gets the stand-in `runners-token` its organisation accepts, so
    the coordinator (and `preflight --simulate`) read the groups as they would with a real one.
    """
    source = inputs.get("source-ref", SOURCE_REF)
    name = source.removeprefix("refs/")
    sha = world.refs.get(name) or world.add_ref(name)
    runners = {} if world.org_runners is None else {"runners-token": STAND_IN_TOKEN}
    return {
        "workflow": "runner-worker.yml",
        "workflow-ref": world.default_branch,
        "source-ref": source,
        "source-sha": sha,
        **runners,
        **inputs,
    }
