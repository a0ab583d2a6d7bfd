"""The Actions state machine of the fake GitHub: dispatch, scheduling, cancellation.

Long (the Actions state machine) because dispatch, scheduling, re-queue, zombies and cancels move
runs and jobs through one timeline.

`ActionsModel` owns runs and pools on top of the repository content (`repo.py`) and moves them
through time. It catches up with the shared clock whenever the clock moves (`on_advance`) and before
every request, stopping at each guard start to run the worker hook (`hooks.py`); a reentrant call
(the worker hook making requests or sleeping) sees the model as it is and returns.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from runner_queue_fallback.core.clock import Clock
from runner_queue_fallback.fake_github.hooks import HookRunner, WorkerContext, WorkerHook
from runner_queue_fallback.fake_github.model import (
    DEFAULT_PLATFORM,
    DEFAULT_TIMINGS,
    HOSTED_GROUP_NAME,
    STEP_GUARD,
    STEP_SETUP,
    STEP_WORKLOAD,
    WORKER_TOKEN,
    CancelRequest,
    EventQueue,
    FakeJob,
    FakeRun,
    FakeStep,
    Platform,
    Pool,
    PoolKey,
    RunHistory,
    Timings,
    WorkflowFile,
    Workload,
    parse_runner,
    pool_key,
    serves,
)
from runner_queue_fallback.fake_github.repo import CHILD_INPUTS, RepoContent
from runner_queue_fallback.fake_github.runner_groups import OrgRunners

__all__ = ["CHILD_INPUTS", "ActionsModel", "DispatchRefused", "WorkerContext", "WorkerHook"]


@dataclass(frozen=True)
class DispatchRefused:
    """GitHub refused a dispatch: the status and message it answers."""

    status: int
    message: str


@dataclass
class _Counters:
    run_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(9_000_000_001))
    job_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(25_000_000_001))
    parent_job_ids: itertools.count[int] = field(
        default_factory=lambda: itertools.count(24_000_000_001)
    )
    run_numbers: dict[str, int] = field(default_factory=dict)


class ActionsModel(RepoContent, HookRunner):
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
        worker_token: str = WORKER_TOKEN,
        default_branch: str = "main",
        unassigned_runner_as_zero: bool = False,
        platform: Platform = DEFAULT_PLATFORM,
    ) -> None:
        """Build an empty repository with `default_branch` at one commit and no workflows.

        `unassigned_runner_as_zero`: a job cancelled before it ever got a runner shows
        `runner_id: 0`, `runner_name: ""` and empty `steps` once completed, as GitHub has been
        seen to answer, instead of nulls. `platform`: what GitHub does beyond that (re-queues,
        runs that never get a job, a cancel that does not take; `Platform`).
        """
        self.clock = clock
        self.repository = repository
        self.api_url = api_url.rstrip("/")
        self.server_url = server_url.rstrip("/")
        self.timings = timings
        self.workload = workload or Workload()
        self.unassigned_runner_as_zero = unassigned_runner_as_zero
        self.platform = platform
        self.children_made = 0  # children dispatched so far (names the zombies)
        self.runs: dict[int, FakeRun] = {}
        self.pools: dict[PoolKey, Pool] = {}
        self.history: dict[int, RunHistory] = {}
        self._ids = _Counters()
        self._events = EventQueue()
        self._waiting: list[int] = []
        self._time = clock.monotonic()
        #: The owner's runner groups and policy (`fake_github/runner_groups.py`), served to a
        #: runners token and deciding which jobs each group's runners take; None: no restriction.
        self.org_runners: OrgRunners | None = None
        RepoContent.__init__(self, default_branch)
        HookRunner.__init__(self, on_worker_start, worker_token)
        on_advance = getattr(clock, "on_advance", None)
        if on_advance is not None:
            on_advance(self.catch_up)

    # ---------------------------------------------------------------------------- pools

    def add_pool(
        self,
        group: str,
        labels: str | Sequence[str],
        *,
        runners: int = 1,
        busy: Sequence[tuple[float, float]] = (),
        workload: Workload | None = None,
        wait: Callable[[], float] | None = None,
    ) -> PoolKey:
        """Add a runner pool; no runner is free inside `busy` intervals; `runners=0` never serves.

        `wait` (replay of measured queue waits): called once per new job, the seconds before a
        runner may take it (`inf`: none comes).
        """
        with self._lock:
            key = pool_key(group, labels)
            groups = {p.key[0]: p.group_id for p in self.pools.values()}
            group_id = groups.get(group, len(groups) + 2)
            intervals = tuple((float(start), float(end)) for start, end in busy)
            self.pools[key] = Pool(key, runners, intervals, workload, group_id, wait=wait)
            for _, end in busy:
                self._events.push(end, lambda: None)  # wake the allocator when the pool frees
            return key

    def add_hosted_pool(
        self,
        labels: str | Sequence[str],
        *,
        concurrency: int = 20,
        busy: Sequence[tuple[float, float]] = (),
        workload: Workload | None = None,
    ) -> PoolKey:
        """Add GitHub-hosted runners of `labels`, at most `concurrency` jobs at once.

        A job is served while fewer than `concurrency` hosted jobs run (the plan's limit) and
        queues past it; none is free inside `busy`. A child reaches them with `runs-on` naming
        the labels alone, no group (`parse_runner`).
        """
        with self._lock:
            key = pool_key("", labels)
            intervals = tuple((float(start), float(end)) for start, end in busy)
            self.pools[key] = Pool(key, concurrency, intervals, workload, 0, hosted=True)
            for _, end in busy:
                self._events.push(end, lambda: None)  # wake the allocator when the pool frees
            return key

    def _serving(
        self, asked: PoolKey | None, admitted: Callable[[Pool], bool] = lambda _: True
    ) -> PoolKey | None:
        """The pool whose runners take a job asking `asked` (`runs-on`), else `asked` itself.

        The pool named exactly comes first; else the first pool added that carries every label
        asked for, in the group named (if any), as GitHub gives a job to any runner that does:
        the first whose group `admitted` the job, else the first.
        """
        if asked is None or asked in self.pools:
            return asked
        fits = [key for key in self.pools if serves(key, asked)]
        return next((key for key in fits if admitted(self.pools[key])), fits[0] if fits else asked)

    def _admits(self, pool: Pool, file: str, branch: str | None, sha: str) -> bool:
        """Whether the pool's group takes a job of `file` at `branch` (`sha`) at all.

        Hosted runners have no group and no self-hosted policy; without `org_runners` every
        group takes every job. A group that does not (the repository not granted, the workflow
        not admitted, the policy off) never gives the job a runner: it waits, as on GitHub.
        """
        if pool.hosted or self.org_runners is None:
            return True
        return self.org_runners.admits(pool.key[0], self.repository, file, branch or "", sha)

    # ------------------------------------------------------------------------- parent run

    def add_parent_run(
        self,
        run_id: int,
        attempt: int = 1,
        status: str = "in_progress",
        visible_after: float = 0.0,
        *,
        workflow: str = "runner-check.yml",
        job: str = "runner-check",
        runner_name: str | None = None,
        job_started: float | None = None,
    ) -> FakeRun:
        """Add the coordinator's own run, visible (200) from `visible_after` virtual seconds.

        Its one job (key `job`) runs on `runner_name` (by default `GitHub Actions <run id>`, as a
        hosted runner is named) since `job_started` (virtual seconds; default now).
        """
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
            start = t if job_started is None else job_started
            run.job = FakeJob(
                next(self._ids.parent_job_ids),
                start,
                ["ubuntu-latest"],
                status="in_progress",
                started_at=start,
                runner_id=run_id % 1000 + 1,
                runner_name=runner_name or f"GitHub Actions {run_id}",
                name=job,
            )
            self.runs[run_id] = run
            return run

    def finish_parent(self, run_id: int, conclusion: str, *, at: float | None = None) -> None:
        """The parent run completes with `conclusion` (`cancelled`, `success`, ...) now or at `at`."""

        def finish() -> None:
            run = self.runs[run_id]
            run.status, run.conclusion = "completed", conclusion
            run.touch(self._time)
            if run.job is not None:  # its own job ends with it
                run.job.status, run.job.conclusion = "completed", conclusion
                run.job.completed_at = self._time

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

    def visible_run(self, run_id: int) -> FakeRun | None:
        """The run if GitHub would show it now, else None (404)."""
        run = self.runs.get(run_id)
        if run is None or self._time < run.visible_at:
            return None
        return run

    def now(self) -> float:
        """The model's current virtual time."""
        return self._time

    def next_event_at(self) -> float | None:
        """When the next fixed-time happening is due (None: nothing is scheduled)."""
        with self._lock:
            return self._events.next_time()

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
        branch = refname.split("/", 1)[1]
        key = self._serving(key, lambda pool: self._admits(pool, file, branch, sha))
        run_id = next(self._ids.run_ids)
        visible = t + timings.visibility_delay
        pending_at = visible + timings.requested_delay
        queued_at = pending_at + timings.pending_delay
        job_at = queued_at + timings.jobs_delay
        title = inputs.get("request-id") or wf.name
        history = RunHistory(run_id, title, key, t, visible, job_at)
        run = FakeRun(
            id=run_id,
            workflow_file=file,
            workflow_id=self.workflow_id(file),
            workflow_name=wf.name,
            head_branch=refname.split("/", 1)[1],
            head_sha=sha,
            display_title=title,
            run_number=self._next_number(file),
            created_at=t,
            visible_at=visible,
            updated_at=t,
            started_at=t,
            status=_first_status(timings),
            inputs=inputs,
            job_at=job_at,
            history=history,
            pool=key,
        )
        self.runs[run_id] = run
        self.history[run_id] = history
        self.children_made += 1
        run.twice = self.children_made in self.platform.twice
        if self.children_made in self.platform.zombies:  # queued for good, with no job
            run.zombie, run.job_at, history.job_queued_at = True, None, float("inf")
            return run
        if timings.requested_delay > 0 and timings.pending_delay > 0:
            self._events.push(pending_at, lambda: self._promote(run, "pending"))
        if queued_at > visible:
            self._events.push(queued_at, lambda: self._promote(run, "queued"))
        self._events.push(job_at, lambda: self._job_appears(run, labels))
        return run

    def dispatch_at(self, at: float, file: str, ref: str, inputs: Mapping[str, object]) -> None:
        """Someone else dispatches `file` at virtual time `at`: a copy of a child's inputs, say.

        Sent as a plain dispatch (not through a wrapper a test put on `dispatch`).
        """
        values = dict(inputs)

        def send() -> None:
            ActionsModel.dispatch(self, file, ref, values)

        self._at(at, send)

    def request_cancel(self, run_id: int, *, force: bool = False, client: int | None = None) -> int:
        """Ask for cancellation: 202 accepted, 409 already completed, 404 unknown.

        `client`: the ledger's number for the sender, kept with the request (`CancelRequest`).
        """
        with self._lock:
            run = self.visible_run(run_id)
            if run is None:
                return 404
            if run.status == "completed" or run.zombie:
                return 409  # a zombie: "Cannot cancel a workflow run that has not been queued yet."
            delay = self.timings.force_cancel_delay if force else self.timings.cancel_delay
            if run.history is None:  # the parent: it just completes cancelled
                self.finish_parent(run_id, "cancelled", at=self._time + delay)
                return 202
            if run.history.cancel_requested_at is None:
                run.history.cancel_requested_at = self._time
            run.history.cancel_requests.append(self._cancel_request(run, force, client))
            if not force and self.platform.unheeded_cancel and _unstarted(run):
                return 202  # accepted, and nothing happens: only a force-cancel ends it
            self._events.push(self._time + delay, lambda: self._cancel_lands(run))
            return 202

    def _cancel_request(self, run: FakeRun, force: bool, client: int | None) -> CancelRequest:
        """The request, with the state of the child, its parent and its source right now."""
        history = run.history
        assert history is not None  # noqa: S101 (only children are recorded)
        inputs = run.inputs
        parent = self.runs.get(_int(inputs.get("parent-run-id")))
        attempt = _int(inputs.get("parent-run-attempt")) or 1
        active = parent is not None and parent.status != "completed" and parent.attempt == attempt
        ref, sha = inputs.get("source-ref", ""), inputs.get("source-sha", "")
        current = self.refs.get(ref.removeprefix("refs/")) if ref else None
        moved = bool(ref and sha) and (current is None or self.peel(current) != sha)
        return CancelRequest(
            at=self._time,
            client=client,
            force=force,
            allocated=history.allocated_at is not None,
            workload_started=history.workload_started_at is not None,
            parent_active=active,
            source_moved=moved,
        )

    def add_hand_dispatches(self, file: str, count: int, *, start: float, end: float) -> None:
        """`count` runs of `file` dispatched by hand from `start` to `end` (spread evenly).

        Their run-names are no request id and their guard refused them: completed, no job, and
        nobody's child (no history). They are listed like any run, as a flood of hand dispatches
        fills the guard's copy-check window.
        """
        with self._lock:
            sha = self.refs[f"heads/{self.default_branch}"]
            for n in range(count):
                at = start + (end - start) * n / max(1, count)
                run = FakeRun(
                    id=self._ids_next_run(),
                    workflow_file=file,
                    workflow_id=self.workflow_id(file),
                    workflow_name="Runner worker",
                    head_branch=self.default_branch,
                    head_sha=sha,
                    display_title=f"by hand {n}",
                    run_number=self._next_number(file),
                    created_at=at,
                    visible_at=at,
                    updated_at=at,
                    started_at=at,
                    status="completed",
                    conclusion="failure",
                    finished=True,
                )
                self.runs[run.id] = run

    def add_past_run(
        self,
        file: str,
        title: str,
        *,
        inputs: Mapping[str, str],
        created_at: float,
        completed_at: float,
        conclusion: str,
        allocated_at: float | None = None,
        workload_started: bool = False,
    ) -> FakeRun:
        """Record a child run that ended before now (a history for `stats` to read).

        Its worker job is listed `jobs_delay` after `created_at`; a runner took it at
        `allocated_at` (None: never); the guard passed and the workload ran when
        `workload_started`; everything ended `conclusion` at `completed_at`.
        """
        with self._lock:
            key, labels = parse_runner(inputs.get("runner", ""))
            key = self._serving(key)
            sha = self.refs[f"heads/{self.default_branch}"]
            job_at = created_at + self.timings.jobs_delay
            history = RunHistory(self._ids_next_run(), title, key, created_at, created_at, job_at)
            run = FakeRun(
                id=history.run_id,
                workflow_file=file,
                workflow_id=self.workflow_id(file),
                workflow_name="Runner worker",
                head_branch=self.default_branch,
                head_sha=sha,
                display_title=title,
                run_number=self._next_number(file),
                created_at=created_at,
                visible_at=created_at,
                updated_at=completed_at,
                started_at=created_at,
                status="completed",
                conclusion=conclusion,
                inputs=dict(inputs),
                job_at=job_at,
                history=history,
                pool=key,
                finished=True,
            )
            job = FakeJob(next(self._ids.job_ids), job_at, labels, status="completed")
            job.conclusion, job.completed_at = conclusion, completed_at
            job.started_at = job_at if allocated_at is None else allocated_at
            if allocated_at is not None:
                self._past_runner(
                    job,
                    key,
                    allocated_at=allocated_at,
                    completed_at=completed_at,
                    conclusion=conclusion,
                    workload_started=workload_started,
                )
            elif self.unassigned_runner_as_zero:
                job.runner_id, job.runner_name = 0, ""
            history.allocated_at = allocated_at
            history.completed_at, history.conclusion = completed_at, conclusion
            run.job = job
            self.runs[run.id] = run
            self.history[run.id] = history
            return run

    def _ids_next_run(self) -> int:
        return next(self._ids.run_ids)

    def _past_runner(
        self,
        job: FakeJob,
        key: PoolKey | None,
        *,
        allocated_at: float,
        completed_at: float,
        conclusion: str,
        workload_started: bool,
    ) -> None:
        """Fill a past job's runner and steps: set up, guard, and the workload if it started."""
        pool = self.pools.get(key) if key else None
        group = (pool.group_name if pool else key[0] or HOSTED_GROUP_NAME) if key else "Default"
        group_id = pool.group_id if pool else 1
        job.runner_id = group_id * 1000 + 500 + job.id % 400
        job.runner_name = f"{key[1][0] if key and key[1] else 'runner'}-p{job.id % 400:03d}"
        job.runner_group_id, job.runner_group_name = group_id, group
        begun = min(completed_at, allocated_at + self.timings.start_delay)
        steps = [FakeStep(STEP_SETUP, 1, "completed", "success", allocated_at, begun)]
        if workload_started:
            guard_end = min(completed_at, begun + self.timings.guard_duration)
            steps.append(FakeStep(STEP_GUARD, 2, "completed", "success", begun, guard_end))
            steps.append(
                FakeStep(STEP_WORKLOAD, 3, "completed", conclusion, guard_end, completed_at)
            )
        else:
            steps.append(FakeStep(STEP_GUARD, 2, "completed", "cancelled", begun, completed_at))
        job.steps = steps

    # ------------------------------------------------------------------------- scheduling

    def _advance_to(self, now: float) -> None:
        self._allocate()
        while (t := self._events.next_time()) is not None and t <= now:
            self._time = max(self._time, t)
            self._events.pop()()
            self._allocate()
            if self._hook_due():
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

    def _promote(self, run: FakeRun, status: str) -> None:
        """A new run moves on from `requested` or `pending` (not once it was cancelled)."""
        if not run.finished and run.status in {"requested", "pending"}:
            run.status = status
            run.touch(self._time)

    def _job_appears(self, run: FakeRun, labels: list[str]) -> None:
        if run.finished:
            return
        run.job = FakeJob(next(self._ids.job_ids), self._time, labels, started_at=self._time)
        if self.platform.requeue != "off":
            run.requeues_left = self.platform.requeues
        self._waiting.append(run.id)
        pool = self.pools.get(run.pool) if run.pool else None
        if pool is not None and pool.wait is not None:
            run.ready_at = self._time + pool.wait()
            if run.ready_at != float("inf"):
                self._events.push(run.ready_at, lambda: None)  # wake the allocator then

    def _allocate(self) -> None:
        for run_id in list(self._waiting):
            run = self.runs[run_id]
            pool = self.pools.get(run.pool) if run.pool else None
            if (
                pool is not None
                and pool.free(self._time) > 0
                and self._time >= run.ready_at
                and self._admits(pool, run.workflow_file, run.head_branch, run.head_sha)
            ):
                if run.requeues_left > 0:
                    self._assign_stale(run, pool)
                else:
                    self._assign(run, pool)

    def _assign_stale(self, run: FakeRun, pool: Pool) -> None:
        """A runner is assigned the job and never picks it up; GitHub re-queues it after a while.

        `visible`: the runner shows on the still-queued job (no step starts) until it clears.
        """
        assert run.job is not None  # noqa: S101 (only runs with a listed job wait for runners)
        t, job = self._time, run.job
        self._waiting.remove(run.id)
        pool.holding.append(run.id)
        pool.served += 1
        name = pool.runner_name(pool.served)
        shown = self.platform.requeue == "visible"
        run.stale = (t, name, shown)
        if shown:
            job.runner_id, job.runner_name = pool.group_id * 1000 + pool.served, name
            job.runner_group_id, job.runner_group_name = pool.group_id, pool.group_name
            job.started_at = t
            run.touch(t)
        self._events.push(t + self.platform.requeue_after, lambda: self._requeue(run, pool))

    def _requeue(self, run: FakeRun, pool: Pool) -> None:
        """The assigned runner did not pick the job up: back in the queue, for any runner."""
        if run.finished or run.job is None or run.history is None or run.stale is None:
            return
        job, (_, _, shown) = run.job, run.stale
        run.stale = None
        run.requeues_left -= 1
        if run.id in pool.holding:
            pool.holding.remove(run.id)
        if shown:
            job.runner_id = job.runner_name = None
            job.runner_group_id = job.runner_group_name = None
            run.touch(self._time)
        run.history.requeued_at.append(self._time)
        self._waiting.append(run.id)

    def shown_stale_runner(self, run: FakeRun) -> None:
        """A reply GitHub delivered showed the runner of an assignment that will be re-queued.

        From then on the child counts as allocated in its history (the runner was there to see),
        at the assignment's time; an assignment no reply showed leaves no trace.
        """
        history, stale = run.history, run.stale
        if history is None or stale is None or not stale[2] or history.allocated_at is not None:
            return
        history.allocated_at, history.runner = stale[0], stale[1]

    def _assign(self, run: FakeRun, pool: Pool) -> None:
        assert run.job is not None  # noqa: S101 (only runs with a listed job wait for runners)
        assert run.history is not None  # noqa: S101 (only children wait for runners)
        t, job = self._time, run.job
        self._waiting.remove(run.id)
        pool.holding.append(run.id)
        pool.served += 1
        job.runner_id = pool.group_id * 1000 + pool.served
        job.runner_name = pool.runner_name(pool.served)
        job.runner_group_id, job.runner_group_name = pool.group_id, pool.group_name
        job.status, job.started_at = "in_progress", t
        run.status = "in_progress"
        run.touch(t)
        if run.history.allocated_at is None:  # a re-queued runner shown earlier came first
            run.history.allocated_at, run.history.runner = t, job.runner_name
        self._events.push(t + self.timings.start_delay, lambda: self._start_steps(run))

    def _start_steps(self, run: FakeRun) -> None:
        if run.finished or run.job is None or run.history is None:
            return
        t = self._time
        setup = FakeStep(STEP_SETUP, 1, "completed", "success", run.job.started_at, t)
        run.job.steps = [setup, FakeStep(STEP_GUARD, 2, started_at=t)]
        run.history.started_at = t
        if not self._queue_hook(run):
            self._events.push(
                t + self.timings.guard_duration, lambda: self._guard_done(run, passed=True)
            )
        elif run.twice:  # the same job's steps start on a second runner (`Platform.twice`)
            self._queue_hook(run, runner=f"{run.job.runner_name}-2")

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
        # The job's own timeout counts from the runner that picked it up (not a re-queued one).
        picked_up = run.job.started_at if run.job.started_at is not None else t
        limit = picked_up + self.timings.timeout_minutes * 60
        if t + work.duration > limit:
            self._events.push(limit, lambda: self._finish_unless_over(run, "timed_out"))
        else:
            self._events.push(
                t + work.duration, lambda: self._finish_unless_over(run, work.outcome)
            )

    def _finish_unless_over(self, run: FakeRun, conclusion: str) -> None:
        """The workload's own end: nothing once the run was cancelled."""
        if not run.finished:
            self._finish(run, conclusion)

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
            if job.runner_id is None and self.unassigned_runner_as_zero:
                job.runner_id, job.runner_name, job.steps = 0, "", []  # as seen on GitHub

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


def _first_status(timings: Timings) -> str:
    """What a new child run says first: `requested`, `pending` (concurrency limit) or `queued`."""
    if timings.requested_delay > 0:
        return "requested"
    return "pending" if timings.pending_delay > 0 else "queued"


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


def _unstarted(run: FakeRun) -> bool:
    """No runner has picked the run's job up (none listed yet, or it is still queued)."""
    return run.job is None or run.job.status == "queued"


def _int(value: str | None) -> int:
    """An input read as a number (0 when it is not one)."""
    try:
        return int(value or 0)
    except ValueError:
        return 0
