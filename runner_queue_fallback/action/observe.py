"""Pure reading of a child run: which phase it is in, and whether it is the run we dispatched.

The coordinator decides on these observations only; nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner_queue_fallback.github.models import Job, WorkflowRun

__all__ = [
    "ACTIVE_RUN_STATUSES",
    "GRACE_RUN_STATUSES",
    "WORKER_JOB",
    "Expected",
    "Observation",
]

WORKER_JOB = "worker"
#: A parent in one of these states is still becoming visible as active (spec: initial grace).
GRACE_RUN_STATUSES = frozenset({"queued", "requested", "pending"})
#: The state of a run that is running the step we are in.
ACTIVE_RUN_STATUSES = frozenset({"in_progress"})
_UNSTARTED_STEP = frozenset({"queued", "pending", "waiting", "requested"})


@dataclass(frozen=True)
class Expected:
    """The identity the dispatched child must show, exactly."""

    run_name: str
    workflow_path: str
    head_sha: str
    event: str = "workflow_dispatch"
    attempt: int = 1

    def run_mismatches(self, run: WorkflowRun) -> list[str]:
        """Every identity field of the run that differs, as 'field: expected X, observed Y'."""
        return self.pending_fields(run) + self.wrong_fields(run)

    def title_pending(self, run: WorkflowRun) -> bool:
        """The run-name is not filled in yet: `display_title` empty or still the workflow's name.

        The spec's startup window tolerates it until its expiry ("pending metadata").
        """
        title = run.display_title
        return title != self.run_name and (not title.strip() or title == run.name)

    def pending_fields(self, run: WorkflowRun) -> list[str]:
        """The identity fields not filled in yet (only the run-name can be), as mismatches."""
        if not self.title_pending(run):
            return []
        observed = f"{run.display_title!r} (not filled in yet)"
        return [f"run-name (display_title): expected {self.run_name!r}, observed {observed}"]

    def wrong_fields(self, run: WorkflowRun) -> list[str]:
        """The identity fields that are filled in and differ: a wrong run, at once."""
        path = run.workflow_file_path
        title = (
            []
            if self.title_pending(run)
            else [("run-name (display_title)", self.run_name, run.display_title)]
        )
        pairs = [
            *title,
            ("event", self.event, run.event),
            ("head_sha", self.head_sha, run.head_sha),
            ("run_attempt", str(self.attempt), str(run.run_attempt)),
        ]
        mismatches = [
            f"{field}: expected {want!r}, observed {got!r}"
            for field, want, got in pairs
            if want != got
        ]
        if path != self.workflow_path and not path.endswith("/" + self.workflow_path):
            mismatches.append(
                f"workflow path: expected {self.workflow_path!r}, observed {run.path!r}"
            )
        return mismatches


def job_mismatches(jobs: list[Job]) -> list[str]:
    """The child must have exactly one job, named worker."""
    names = [job.name for job in jobs]
    if names == [WORKER_JOB]:
        return []
    return [f"jobs: expected exactly one job named {WORKER_JOB!r}, observed {names!r}"]


@dataclass(frozen=True)
class Observation:
    """One read of a child run together with the jobs of its first attempt."""

    run: WorkflowRun
    jobs: list[Job]

    @property
    def job(self) -> Job | None:
        """The worker job, when the run shows exactly one."""
        return self.jobs[0] if len(self.jobs) == 1 else None

    @property
    def has_evidence(self) -> bool:
        """Whether a runner was allocated or a step started: from here on there is no fallback."""
        return any(_job_evidence(job) for job in self.jobs)

    @property
    def step_started(self) -> bool:
        """Whether a step of a job has begun: the worker ran (not only a runner assigned)."""
        return any(step.status not in _UNSTARTED_STEP for job in self.jobs for step in job.steps)

    @property
    def reported_over(self) -> bool:
        """The run or one of its jobs already says completed (the other report may lag behind)."""
        return self.run.status == "completed" or any(job.status == "completed" for job in self.jobs)

    @property
    def finished(self) -> bool:
        """Run and every job completed (a lagging job keeps this False)."""
        return self.run.status == "completed" and all(
            job.status == "completed" for job in self.jobs
        )

    @property
    def conclusion_pending(self) -> bool:
        """Completed, but the run's or a job's conclusion is not reported yet (null): no verdict.

        "Polls tolerate delayed status/conclusion updates": read again until it appears.
        """
        return self.finished and (
            self.run.conclusion is None or any(job.conclusion is None for job in self.jobs)
        )

    @property
    def cancelled_cleanly(self) -> bool:
        """Completed and cancelled with no runner and no step: proof that nothing ran."""
        return (
            self.finished
            and self.job is not None  # the proof covers the worker job, so it must be seen
            and self.run.conclusion == "cancelled"
            and all(job.conclusion == "cancelled" for job in self.jobs)
            and not self.has_evidence
        )

    @property
    def succeeded(self) -> bool:
        """Run and its worker job both concluded success."""
        job = self.job
        return (
            self.finished
            and self.run.conclusion == "success"
            and job is not None
            and job.name == WORKER_JOB
            and job.conclusion == "success"
        )

    def describe(self) -> str:
        """One log line: run and job states and the runner allocation."""
        return self._states(f"run {self.run.id}")

    def state(self) -> str:
        """`describe` without the run id, for a line that already names the child."""
        return self._states("run")

    def _states(self, name: str) -> str:
        run = f"{name} {self.run.status}/{self.run.conclusion or '-'}"
        if not self.jobs:
            return f"{run}; no job yet"
        parts = [run]
        for job in self.jobs:
            runner = job.runner_name or (str(job.runner_id) if job.runner_id else "none")
            started = sum(1 for step in job.steps if step.status not in _UNSTARTED_STEP)
            parts.append(
                f"job {job.name} {job.status}/{job.conclusion or '-'}, runner {runner}, "
                f"{started} step(s) started"
            )
        return "; ".join(parts)


def _job_evidence(job: Job) -> bool:
    """A runner assigned, the job in progress, or any step started."""
    return (
        job.has_runner
        or job.status == "in_progress"
        or any(step.status not in _UNSTARTED_STEP for step in job.steps)
    )
