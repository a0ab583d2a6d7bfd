"""The worker hook: what runs when a child's first step (the guard) starts, and on whose timeline.

When the model reaches a guard's start it stops there, hands the hook a `WorkerContext` (the
guard's inputs and environment, as a runner would give them, its runner's name included) and
continues once the hook returns. A job GitHub runs twice (`Platform.twice`) has a second hook, on
a runner the job never shows, whose result is only recorded.
While a hook runs, the model's target is the hook's own timeline: its start plus however far the
clock moved since (the hook's sleeps), so the guard sees the world as it was when it started.
Hooks run one at a time, outermost; a reentrant catch-up (the hook making requests) returns.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from runner_queue_fallback.core.clock import Clock
from runner_queue_fallback.fake_github.model import FakeRun

__all__ = ["GUARD_INPUTS", "HookRunner", "WorkerContext", "WorkerHook"]

#: The guard's inputs, as the child passes them (`INPUT_<NAME>`, hyphens kept).
GUARD_INPUTS = ("request-id", "parent-run-id", "parent-run-attempt", "source-ref", "source-sha")


@dataclass(frozen=True)
class WorkerContext:
    """What the child's first step (the guard) sees when it starts."""

    run_id: int
    run_attempt: int
    inputs: Mapping[str, str]
    environ: Mapping[str, str]


WorkerHook = Callable[[WorkerContext], bool]


class HookRunner:
    """Catching up with the clock, stopping at each guard start to run the worker hook.

    A base of the Actions model: it needs the model's clock, runs, lock and time, and the
    model's `_advance_to`, `_guard_done` and `_allocate`.
    """

    clock: Clock
    repository: str
    api_url: str
    server_url: str
    runs: dict[int, FakeRun]
    _lock: threading.RLock
    _time: float

    def __init__(self, on_worker_start: WorkerHook | None, worker_token: str) -> None:
        """No hook queued, none running."""
        self.on_worker_start = on_worker_start
        self.worker_token = worker_token
        self.hook_errors: list[BaseException] = []
        #: run ids whose guard starts, each with the name of a second runner (None: its own)
        self._pending_hooks: list[tuple[int, str | None]] = []
        self._catching = False
        self._hook_depth = 0
        self._hook_base: tuple[float, float] | None = None

    def _advance_to(self, now: float) -> None:
        raise NotImplementedError

    def _guard_done(self, run: FakeRun, *, passed: bool) -> None:
        raise NotImplementedError

    def _allocate(self) -> None:
        raise NotImplementedError

    def catch_up(self) -> None:
        """Bring the model up to the clock, running worker hooks at their start times."""
        while True:
            with self._lock:
                if not self._advance_locked() or self._hook_depth:
                    return  # reentrant, or inside a hook: hooks run one at a time, outermost
                due = self._next_hook()
                if due is None:
                    return
                run, second = due
                self._hook_depth += 1
                saved, self._hook_base = self._hook_base, (self._time, self.clock.monotonic())
            try:
                passed = self._call_hook(self._worker_context(run, second))
            finally:
                with self._lock:
                    self._advance_locked()
                    self._hook_base = saved
                    self._hook_depth -= 1
            with self._lock:
                if second is not None:  # the job's second execution: recorded, nothing else
                    if run.history is not None:
                        run.history.second_runner, run.history.second_guard_passed = second, passed
                    continue
                self._guard_done(run, passed=passed)
                self._allocate()

    def _queue_hook(self, run: FakeRun, *, runner: str | None = None) -> bool:
        """Queue the hook for `run`'s guard, which starts now; False if there is no hook.

        `runner`: the guard of a second execution of the job, on that runner.
        """
        if self.on_worker_start is None:
            return False
        self._pending_hooks.append((run.id, runner))
        return True

    def _hook_due(self) -> bool:
        """A guard started and its hook should run before time moves on."""
        return bool(self._pending_hooks) and self._hook_depth == 0

    def _advance_locked(self) -> bool:
        """Advance towards the target unless already advancing (reentrancy); False if skipped."""
        if self._catching:
            return False
        self._catching = True
        try:
            self._advance_to(self._target())
        finally:
            self._catching = False
        return True

    def _target(self) -> float:
        if self._hook_base is None:
            return self.clock.monotonic()
        model_start, clock_start = self._hook_base
        return model_start + max(0.0, self.clock.monotonic() - clock_start)

    def _next_hook(self) -> tuple[FakeRun, str | None] | None:
        with self._lock:
            while self._pending_hooks:
                run_id, runner = self._pending_hooks.pop(0)
                run = self.runs[run_id]
                if not run.finished:
                    return run, runner
            return None

    def _call_hook(self, context: WorkerContext) -> bool:
        assert self.on_worker_start is not None  # noqa: S101 (only queued when a hook is set)
        try:
            return self.on_worker_start(context)
        except Exception as exc:  # noqa: BLE001 (a crashing guard fails its step, as on a runner)
            self.hook_errors.append(exc)
            return False

    def _worker_context(self, run: FakeRun, runner: str | None = None) -> WorkerContext:
        """What the guard step sees; `runner`: a second runner's name (else the job's own)."""
        if runner is None:
            runner = run.job.runner_name if run.job is not None else None
        environ = {
            "GITHUB_RUN_ID": str(run.id),
            "GITHUB_RUN_ATTEMPT": str(run.attempt),
            "GITHUB_REPOSITORY": self.repository,
            "GITHUB_API_URL": self.api_url,
            "GITHUB_SERVER_URL": self.server_url,
            "GITHUB_EVENT_NAME": run.event,
            "GITHUB_JOB": "worker",
            "GITHUB_SHA": run.head_sha,
            "GITHUB_REF": f"refs/heads/{run.head_branch}",
            "GITHUB_WORKFLOW_REF": (
                f"{self.repository}/.github/workflows/{run.workflow_file}"
                f"@refs/heads/{run.head_branch}"
            ),
            "RUNNER_NAME": runner or "",
            "INPUT_TOKEN": self.worker_token,
        }
        for name in GUARD_INPUTS:
            environ[f"INPUT_{name.upper()}"] = run.inputs.get(name, "")
        return WorkerContext(run.id, run.attempt, dict(run.inputs), environ)
