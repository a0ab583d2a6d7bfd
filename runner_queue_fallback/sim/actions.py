"""The Actions state machine of the fake GitHub: dispatch, scheduling, cancellation, the worker hook.

`ActionsModel` owns refs, workflow files, runs and pools, and moves them through time. It catches
up with the shared clock whenever the clock moves (`on_advance`) and before every request; a
reentrant call (the worker hook making requests or sleeping) sees the model as it is and returns.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from runner_queue_fallback.clock import Clock
from runner_queue_fallback.sim.model import (
    DEFAULT_TIMINGS,
    STEP_GUARD,
    STEP_SETUP,
    STEP_WORKLOAD,
    EventQueue,
    FakeJob,
    FakeRun,
    FakeStep,
    Pool,
    PoolKey,
    RunHistory,
    Timings,
    WorkflowFile,
    Workload,
    fake_commit_sha,
    parse_runner,
    pool_key,
)

__all__ = ["CHILD_INPUTS", "ActionsModel", "DispatchRefused", "WorkerContext", "WorkerHook"]

#: The seven inputs of the child workflow in the specification.
CHILD_INPUTS = (
    "request-id",
    "parent-run-id",
    "parent-run-attempt",
    "source-ref",
    "source-sha",
    "runner",
    "workload",
)
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


@dataclass(frozen=True)
class DispatchRefused:
    """GitHub refused a dispatch: the status and message it answers."""

    status: int
    message: str


def _workflow_text(name: str, inputs: Sequence[str] | None, revision: int) -> str:
    lines = [f"name: {name}", "run-name: ${{ inputs.request-id }}", "on:", "  workflow_dispatch:"]
    lines += ["    inputs:"] + [
        f"      {i}: {{required: true, type: string}}" for i in inputs or ()
    ]
    lines += ["jobs:", "  worker:", "    runs-on: ${{ fromJSON(inputs.runner) }}"]
    lines += ["    steps:", "      - uses: ./guard"]
    return "\n".join(lines) + ("" if revision == 0 else f"\n# revision {revision}") + "\n"


@dataclass
class _Counters:
    run_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(9_000_000_001))
    job_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(25_000_000_001))
    run_numbers: dict[str, int] = field(default_factory=dict)
    revisions: itertools.count[int] = field(default_factory=lambda: itertools.count(1))


class ActionsModel:
    """One repository's Actions, moving through virtual time."""

    def __init__(
        self,
        clock: Clock,
        *,
        repository: str = "octo-org/octo-repo",
        api_url: str = "https://api.github.test",
        server_url: str = "https://github.test",
        timings: Timings = DEFAULT_TIMINGS,
        workload: Workload | None = None,
        on_worker_start: WorkerHook | None = None,
        worker_token: str = "ghs_worker_token",  # noqa: S107 (a fake token the guard is handed)
        default_branch: str = "main",
    ) -> None:
        """Build an empty repository with `default_branch` at one commit and no workflows."""
        self.clock = clock
        self.repository = repository
        self.api_url = api_url.rstrip("/")
        self.server_url = server_url.rstrip("/")
        self.timings = timings
        self.workload = workload or Workload()
        self.on_worker_start = on_worker_start
        self.worker_token = worker_token
        self.default_branch = default_branch
        self.refs: dict[str, str] = {}
        self.commits: dict[str, dict[str, WorkflowFile]] = {}
        #: annotated tag objects: tag object SHA -> (tag name, commit SHA it points at)
        self.tag_objects: dict[str, tuple[str, str]] = {}
        self.runs: dict[int, FakeRun] = {}
        self.pools: dict[PoolKey, Pool] = {}
        self.history: dict[int, RunHistory] = {}
        self.hook_errors: list[BaseException] = []
        self.workflow_ids: dict[str, int] = {}
        self._ids = _Counters()
        self._events = EventQueue()
        self._waiting: list[int] = []
        self._pending_hooks: list[int] = []
        self._time = clock.monotonic()
        self._lock = threading.RLock()
        self._catching = False
        self._hook_depth = 0
        self._hook_base: tuple[float, float] | None = None
        self.add_ref(f"heads/{default_branch}")
        on_advance = getattr(clock, "on_advance", None)
        if on_advance is not None:
            on_advance(self.catch_up)

    # ----------------------------------------------------------------- repository content

    def add_ref(self, ref: str, sha: str | None = None) -> str:
        """Create `ref` (`heads/x`, `tags/v1`, `pull/1/merge`) at `sha`, or at a new commit."""
        with self._lock:
            base = self.refs.get(f"heads/{self.default_branch}")
            sha = sha or fake_commit_sha(ref, len(self.commits))
            self.commits.setdefault(sha, dict(self.commits.get(base or "", {})))
            self.refs[ref] = sha
            return sha

    def add_annotated_tag(self, name: str, commit: str | None = None) -> str:
        """Create `tags/<name>` as an annotated tag: the ref points at a tag object, not a commit."""
        with self._lock:
            commit = commit or self.refs[f"heads/{self.default_branch}"]
            tag_sha = fake_commit_sha("annotated tag", name, commit)
            self.tag_objects[tag_sha] = (name, commit)
            self.refs[f"tags/{name}"] = tag_sha
            return tag_sha

    def move_ref(self, ref: str, new_sha: str | None = None, *, at: float | None = None) -> str:
        """Point `ref` at `new_sha` (a new commit if omitted), now or at virtual time `at`."""
        sha = new_sha or fake_commit_sha(ref, "moved", len(self.commits), at)

        def move() -> None:
            self.commits.setdefault(sha, dict(self.commits.get(self.refs.get(ref, ""), {})))
            self.refs[ref] = sha

        self._at(at, move)
        return sha

    def add_workflow(
        self,
        file: str = "runner-worker.yml",
        ref: str = "main",
        *,
        dispatchable: bool = True,
        inputs: Sequence[str] | None = CHILD_INPUTS,
        required: Sequence[str] | None = None,
        name: str = "Runner worker",
    ) -> str:
        """Put a workflow file on branch `ref` (in its current commit); return its blob SHA."""
        with self._lock:
            sha = self.refs.get(f"heads/{ref}") or self.add_ref(f"heads/{ref}")
            wf = WorkflowFile(
                content=_workflow_text(name, inputs if dispatchable else (), 0),
                dispatchable=dispatchable,
                inputs=None if inputs is None else tuple(inputs),
                required=tuple(inputs or ()) if required is None else tuple(required),
                name=name,
            )
            self.commits[sha][f".github/workflows/{file}"] = wf
            self.workflow_ids.setdefault(file, 161_335_000 + len(self.workflow_ids))
            return wf.sha

    def change_workflow(
        self, file: str = "runner-worker.yml", ref: str = "main", *, at: float | None = None
    ) -> None:
        """Commit a new revision of `file` on branch `ref` (new blob and commit SHA), now or at `at`."""
        revision = next(self._ids.revisions)

        def change() -> None:
            old = self.refs[f"heads/{ref}"]
            tree = dict(self.commits[old])
            path = f".github/workflows/{file}"
            wf = tree[path]
            text = _workflow_text(wf.name, wf.inputs if wf.dispatchable else (), revision)
            tree[path] = replace(wf, content=text)
            new = fake_commit_sha(old, file, revision)
            self.commits[new] = tree
            self.refs[f"heads/{ref}"] = new

        self._at(at, change)

    def add_pool(
        self,
        group: str,
        labels: str | Sequence[str],
        *,
        runners: int = 1,
        busy: Sequence[tuple[float, float]] = (),
        workload: Workload | None = None,
    ) -> PoolKey:
        """Add a runner pool; no runner is free inside `busy` intervals; `runners=0` never serves."""
        with self._lock:
            key = pool_key(group, labels)
            groups = {p.key[0]: p.group_id for p in self.pools.values()}
            group_id = groups.get(group, len(groups) + 2)
            intervals = tuple((float(start), float(end)) for start, end in busy)
            self.pools[key] = Pool(key, runners, intervals, workload, group_id)
            for _, end in busy:
                self._events.push(end, lambda: None)  # wake the allocator when the pool frees
            return key

    # ------------------------------------------------------------------------- parent run

    def add_parent_run(
        self,
        run_id: int,
        attempt: int = 1,
        status: str = "in_progress",
        visible_after: float = 0.0,
        *,
        workflow: str = "runner-check.yml",
    ) -> FakeRun:
        """Add the coordinator's own run, visible (200) from `visible_after` virtual seconds."""
        with self._lock:
            t = self.clock.monotonic()
            sha = self.refs[f"heads/{self.default_branch}"]
            run = FakeRun(
                id=run_id,
                workflow_file=workflow,
                workflow_id=self.workflow_ids.setdefault(workflow, 161_334_000),
                workflow_name="Runner check",
                head_branch=self.default_branch,
                head_sha=sha,
                display_title="Runner check",
                run_number=self._next_number(workflow),
                created_at=t,
                visible_at=visible_after,
                updated_at=t,
                attempt=attempt,
                status=status,
                started_at=t,
            )
            self.runs[run_id] = run
            return run

    def finish_parent(self, run_id: int, conclusion: str, *, at: float | None = None) -> None:
        """The parent run completes with `conclusion` (`cancelled`, `success`, ...) now or at `at`."""

        def finish() -> None:
            run = self.runs[run_id]
            run.status, run.conclusion = "completed", conclusion
            run.touch(self._time)

        self._at(at, finish)

    def rerun_parent(self, run_id: int, *, at: float | None = None) -> None:
        """The parent is re-run: attempt + 1, in progress again (the old attempt is kept)."""

        def rerun() -> None:
            run = self.runs[run_id]
            run.attempts[run.attempt] = (run.status, run.conclusion, run.updated_at, run.started_at)
            run.attempt += 1
            run.status, run.conclusion, run.started_at = "in_progress", None, self._time
            run.touch(self._time)

        self._at(at, rerun)

    # ---------------------------------------------------------------------------- lookups

    def resolve(self, ref: str, *, allow_sha: bool = False) -> tuple[str, str] | None:
        """Resolve a branch/tag name (or `refs/...`, or a commit SHA) to (ref, commit SHA)."""
        name = ref.removeprefix("refs/")
        for candidate in (name, f"heads/{name}", f"tags/{name}"):
            if candidate.startswith(("heads/", "tags/")) and candidate in self.refs:
                return candidate, self.peel(self.refs[candidate])
        if allow_sha and ref in self.commits:
            return ref, ref
        return None

    def peel(self, sha: str) -> str:
        """The commit an object SHA stands for: an annotated tag object resolves to its commit."""
        return self.tag_objects[sha][1] if sha in self.tag_objects else sha

    def visible_run(self, run_id: int) -> FakeRun | None:
        """The run if GitHub would show it now, else None (404)."""
        run = self.runs.get(run_id)
        if run is None or self._time < run.visible_at:
            return None
        return run

    def now(self) -> float:
        """The model's current virtual time."""
        return self._time

    # ------------------------------------------------------------------- dispatch, cancel

    def dispatch(
        self, file: str, ref: str, inputs: Mapping[str, object]
    ) -> FakeRun | DispatchRefused:
        """Create a child run as `POST .../dispatches` does, or say why GitHub refuses."""
        with self._lock:
            resolved = self.resolve(ref)
            if resolved is None:
                return DispatchRefused(422, f"No ref found for: {ref}")
            refname, sha = resolved
            wf = self.commits[sha].get(f".github/workflows/{file}")
            if wf is None:
                return DispatchRefused(404, "Not Found")
            if not wf.dispatchable:
                return DispatchRefused(422, "Workflow does not have 'workflow_dispatch' trigger")
            values = {k: v if isinstance(v, str) else str(v).lower() for k, v in inputs.items()}
            refused = _check_inputs(wf, values)
            if refused is not None:
                return refused
            return self._create_run(file, wf, refname, sha, values)

    def _create_run(
        self, file: str, wf: WorkflowFile, refname: str, sha: str, inputs: dict[str, str]
    ) -> FakeRun:
        t, timings = self._time, self.timings
        key, labels = parse_runner(inputs.get("runner", ""))
        run_id = next(self._ids.run_ids)
        visible, job_at = t + timings.visibility_delay, t + timings.visibility_delay
        job_at += timings.jobs_delay
        title = inputs.get("request-id") or wf.name
        history = RunHistory(run_id, title, key, t, visible, job_at)
        run = FakeRun(
            id=run_id,
            workflow_file=file,
            workflow_id=self.workflow_ids.setdefault(file, 161_335_000 + len(self.workflow_ids)),
            workflow_name=wf.name,
            head_branch=refname.split("/", 1)[1],
            head_sha=sha,
            display_title=title,
            run_number=self._next_number(file),
            created_at=t,
            visible_at=visible,
            updated_at=t,
            started_at=t,
            inputs=inputs,
            job_at=job_at,
            history=history,
            pool=key,
        )
        self.runs[run_id] = run
        self.history[run_id] = history
        self._events.push(job_at, lambda: self._job_appears(run, labels))
        return run

    def request_cancel(self, run_id: int, *, force: bool = False) -> int:
        """Ask for cancellation: 202 accepted, 409 already completed, 404 unknown."""
        with self._lock:
            run = self.visible_run(run_id)
            if run is None:
                return 404
            if run.status == "completed":
                return 409
            delay = self.timings.force_cancel_delay if force else self.timings.cancel_delay
            if run.history is None:  # the parent: it just completes cancelled
                self.finish_parent(run_id, "cancelled", at=self._time + delay)
                return 202
            if run.history.cancel_requested_at is None:
                run.history.cancel_requested_at = self._time
            self._events.push(self._time + delay, lambda: self._cancel_lands(run))
            return 202

    # ------------------------------------------------------------------------- scheduling

    def catch_up(self) -> None:
        """Bring the model up to the clock, running worker hooks at their start times.

        The model stops at a guard's start, runs the hook there, and continues. While a hook
        runs, the model's target is the hook's own timeline: its start plus however far the clock
        moved since (the hook's sleeps), so the guard sees the world as it was when it started.
        """
        while True:
            with self._lock:
                if not self._advance_locked() or self._hook_depth:
                    return  # reentrant, or inside a hook: hooks run one at a time, outermost
                run = self._next_hook()
                if run is None:
                    return
                self._hook_depth += 1
                saved, self._hook_base = self._hook_base, (self._time, self.clock.monotonic())
            try:
                passed = self._call_hook(self._worker_context(run))
            finally:
                with self._lock:
                    self._advance_locked()
                    self._hook_base = saved
                    self._hook_depth -= 1
            with self._lock:
                self._guard_done(run, passed=passed)
                self._allocate()

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

    def _advance_to(self, now: float) -> None:
        self._allocate()
        while (t := self._events.next_time()) is not None and t <= now:
            self._time = max(self._time, t)
            self._events.pop()()
            self._allocate()
            if self._pending_hooks and self._hook_depth == 0:
                return  # a guard starts here: run its hook before time moves on
        self._time = max(self._time, now)

    def _at(self, at: float | None, action: Callable[[], None]) -> None:
        """Act now, or at virtual time `at` (applied by the next catch-up that reaches it)."""
        with self._lock:
            if at is None:
                action()
            else:
                self._events.push(at, action)

    def _next_number(self, file: str) -> int:
        self._ids.run_numbers[file] = self._ids.run_numbers.get(file, 0) + 1
        return self._ids.run_numbers[file]

    def _job_appears(self, run: FakeRun, labels: list[str]) -> None:
        if run.finished:
            return
        run.job = FakeJob(next(self._ids.job_ids), self._time, labels, started_at=self._time)
        self._waiting.append(run.id)

    def _allocate(self) -> None:
        for run_id in list(self._waiting):
            run = self.runs[run_id]
            pool = self.pools.get(run.pool) if run.pool else None
            if pool is not None and pool.free(self._time) > 0:
                self._assign(run, pool)

    def _assign(self, run: FakeRun, pool: Pool) -> None:
        assert run.job is not None  # noqa: S101 (only runs with a listed job wait for runners)
        assert run.history is not None  # noqa: S101 (only children wait for runners)
        t, job = self._time, run.job
        self._waiting.remove(run.id)
        pool.holding.append(run.id)
        pool.served += 1
        job.runner_id = pool.group_id * 1000 + pool.served
        job.runner_name = f"{pool.key[1][0] if pool.key[1] else 'runner'}-{pool.served:03d}"
        job.runner_group_id, job.runner_group_name = pool.group_id, pool.key[0]
        job.status, job.started_at = "in_progress", t
        run.status = "in_progress"
        run.touch(t)
        run.history.allocated_at, run.history.runner = t, job.runner_name
        self._events.push(t + self.timings.start_delay, lambda: self._start_steps(run))

    def _start_steps(self, run: FakeRun) -> None:
        if run.finished or run.job is None or run.history is None:
            return
        t = self._time
        setup = FakeStep(STEP_SETUP, 1, "completed", "success", run.job.started_at, t)
        run.job.steps = [setup, FakeStep(STEP_GUARD, 2, started_at=t)]
        run.history.started_at = t
        if self.on_worker_start is not None:
            self._pending_hooks.append(run.id)
        else:
            self._events.push(
                t + self.timings.guard_duration, lambda: self._guard_done(run, passed=True)
            )

    def _guard_done(self, run: FakeRun, *, passed: bool) -> None:
        if run.finished or run.job is None or run.history is None:
            return
        t, steps = self._time, run.job.steps
        steps[1].status, steps[1].completed_at = "completed", t
        steps[1].conclusion = "success" if passed else "failure"
        run.history.guard_passed = passed
        if not passed:
            steps.append(FakeStep(STEP_WORKLOAD, 3, "completed", "skipped", t, t))
            self._finish(run, "failure")
            return
        steps.append(FakeStep(STEP_WORKLOAD, 3, started_at=t))
        run.history.workload_started_at = t
        pool = self.pools.get(run.pool) if run.pool else None
        work = (pool.workload if pool else None) or self.workload
        limit = (run.history.allocated_at or t) + self.timings.timeout_minutes * 60
        if t + work.duration > limit:
            self._events.push(limit, lambda: self._finish(run, "timed_out"))
        else:
            self._events.push(t + work.duration, lambda: self._finish(run, work.outcome))

    def _cancel_lands(self, run: FakeRun) -> None:
        if run.finished:
            return
        if run.job is None:  # cancelled before its job was even listed
            run.job = FakeJob(next(self._ids.job_ids), self._time, [], started_at=self._time)
        self._finish(run, "cancelled")

    def _finish(self, run: FakeRun, conclusion: str) -> None:
        assert run.job is not None  # noqa: S101 (a run only finishes once its job exists)
        run.finished, t = True, self._time
        if run.id in self._waiting:
            self._waiting.remove(run.id)
        pool = self.pools.get(run.pool) if run.pool else None
        if pool is not None and run.id in pool.holding:
            pool.holding.remove(run.id)
        if run.history is not None:
            run.history.completed_at, run.history.conclusion = t, conclusion
        step_conclusion = conclusion if conclusion in {"success", "failure"} else "cancelled"
        for step in run.job.steps:
            if step.status != "completed":
                step.status, step.conclusion, step.completed_at = "completed", step_conclusion, t
        job, lag = run.job, self.timings

        def show_job() -> None:
            job.status, job.conclusion, job.completed_at = "completed", conclusion, self._time

        def show_run() -> None:
            run.status, run.conclusion = "completed", conclusion
            run.touch(self._time)

        self._at_lag(lag.job_completion_lag, show_job)
        self._at_lag(lag.run_completion_lag, show_run)

    def _at_lag(self, lag: float, action: Callable[[], None]) -> None:
        if lag <= 0:
            action()
        else:
            self._events.push(self._time + lag, action)

    # ----------------------------------------------------------------------- worker hook

    def _next_hook(self) -> FakeRun | None:
        with self._lock:
            while self._pending_hooks:
                run = self.runs[self._pending_hooks.pop(0)]
                if not run.finished:
                    return run
            return None

    def _call_hook(self, context: WorkerContext) -> bool:
        assert self.on_worker_start is not None  # noqa: S101 (only queued when a hook is set)
        try:
            return self.on_worker_start(context)
        except Exception as exc:  # noqa: BLE001 (a crashing guard fails its step, as on a runner)
            self.hook_errors.append(exc)
            return False

    def _worker_context(self, run: FakeRun) -> WorkerContext:
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
            "INPUT_TOKEN": self.worker_token,
        }
        for name in GUARD_INPUTS:
            environ[f"INPUT_{name.upper()}"] = run.inputs.get(name, "")
        return WorkerContext(run.id, run.attempt, dict(run.inputs), environ)


def _check_inputs(wf: WorkflowFile, inputs: Mapping[str, str]) -> DispatchRefused | None:
    if wf.inputs is None:
        return None
    unexpected = sorted(set(inputs) - set(wf.inputs))
    if unexpected:
        listed = ", ".join(f'"{name}"' for name in unexpected)
        return DispatchRefused(422, f"Unexpected inputs provided: [{listed}]")
    for name in wf.required:
        if name not in inputs:
            return DispatchRefused(422, f"Required input '{name}' not provided")
    return None
