"""Run the real coordinator, its post step and the guard against the fake GitHub on virtual time.

This is composition, like cli.py: it wires the simulator to the product through `cli.main`, the
same door the runner uses, with the environment, files and signals a real step would get.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from runner_queue_fallback import cli
from runner_queue_fallback.clock import FakeClock
from runner_queue_fallback.errors import Interrupted
from runner_queue_fallback.inputs import env_name
from runner_queue_fallback.sim.actions import WorkerContext
from runner_queue_fallback.sim.world import FakeGitHub

__all__ = [
    "PARENT_RUN_ID",
    "SOURCE_REF",
    "SimulationRun",
    "guard_hook",
    "read_key_values",
    "run_coordinator",
    "standard_world",
]

PARENT_RUN_ID = 9_000_001
SOURCE_REF = "refs/pull/123/merge"
TOKEN = "ghs_simulated_coordinator_token"  # noqa: S105  # a fake token, to prove it is never printed


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


def read_key_values(path: Path) -> dict[str, str]:
    """Read a GITHUB_OUTPUT / GITHUB_STATE file (`name<<delimiter` blocks or `name=value` lines)."""
    values: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    index = 0
    while index < len(lines):
        line = lines[index]
        if "<<" in line:
            name, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, index + 1)
            values[name] = "\n".join(lines[index + 1 : end])
            index = end + 1
        else:
            name, _, value = line.partition("=")
            values[name] = value
            index += 1
    return values


def standard_world(clock: FakeClock, world: FakeGitHub | None = None) -> tuple[FakeGitHub, str]:
    """A repository with the child workflow on main, the approved source ref and the parent run."""
    world = world or FakeGitHub(clock)
    world.add_workflow("runner-worker.yml", "main")
    sha = world.add_ref(SOURCE_REF.removeprefix("refs/"))
    world.add_parent_run(PARENT_RUN_ID)
    return world, sha


def coordinator_environ(
    world: FakeGitHub, inputs: Mapping[str, str], files: Path
) -> dict[str, str]:
    """The environment the runner gives the coordinator's container."""
    environ = {env_name(name): value for name, value in inputs.items()}
    environ.setdefault(env_name("token"), TOKEN)
    environ.update(
        {
            "GITHUB_REPOSITORY": world.repository,
            "GITHUB_RUN_ID": str(PARENT_RUN_ID),
            "GITHUB_RUN_ATTEMPT": "1",
            "GITHUB_API_URL": world.api_url,
            "GITHUB_SERVER_URL": world.server_url,
            "GITHUB_OUTPUT": str(files / "output"),
            "GITHUB_STATE": str(files / "state"),
            "GITHUB_STEP_SUMMARY": str(files / "summary.md"),
        }
    )
    return environ


def guard_hook(
    world: FakeGitHub, clock: FakeClock, logs: list[str]
) -> Callable[[WorkerContext], bool]:
    """A worker hook that runs the real guard step in the simulated child, on the same clock."""

    def run_guard(context: WorkerContext) -> bool:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = cli.main(["guard"], dict(context.environ), clock=clock, session=world.session())
        logs.append(out.getvalue())
        return code == 0

    return run_guard


def run_coordinator(
    world: FakeGitHub,
    clock: FakeClock,
    inputs: Mapping[str, str],
    *,
    interrupt_at: float | None = None,
    post_step: bool = True,
) -> SimulationRun:
    """Run `coordinate` (and then the post step, as the runner would) against `world`."""
    with tempfile.TemporaryDirectory(prefix="rqf-sim-") as tmp:
        files = Path(tmp)
        environ = coordinator_environ(world, inputs, files)
        if interrupt_at is not None:
            _interrupt(clock, interrupt_at)
        log = io.StringIO()
        with contextlib.redirect_stdout(log):
            code = cli.main(["coordinate"], environ, clock=clock, session=world.session())
        state = read_key_values(files / "state")
        result = SimulationRun(
            exit_code=code,
            log=log.getvalue(),
            outputs=read_key_values(files / "output"),
            summary=(files / "summary.md").read_text() if (files / "summary.md").exists() else "",
            state=state,
        )
        if post_step:
            post_env = {**environ, **{f"STATE_{k}": v for k, v in state.items()}}
            post_log = io.StringIO()
            with contextlib.redirect_stdout(post_log):
                result.post_exit_code = cli.main(
                    ["cleanup"], post_env, clock=clock, session=world.session()
                )
            result.post_log = post_log.getvalue()
            result.summary = (
                (files / "summary.md").read_text() if (files / "summary.md").exists() else ""
            )
        return result


def _interrupt(clock: FakeClock, at: float) -> None:
    """Deliver SIGTERM (as Interrupted) the first time the clock reaches `at`."""
    fired = False

    def check() -> None:
        nonlocal fired
        if not fired and clock.monotonic() >= at:
            fired = True
            raise Interrupted("SIGTERM")

    clock.on_advance(check)
