"""Reading the past: our children of one workflow over a window, and how each one ended.

A run is ours when its run-name (`display_title`) is exactly a request id (`request_id.parse`);
anything else in the workflow (a manual dispatch) is counted and skipped. Each child's `worker` job
gives the pool (its `labels`), the queue wait (`queue_wait`, the one function that reads GitHub's
timestamps) and the ending. I/O goes through `GitHubClient` only; the rest is pure.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from runner_queue_fallback.github.client import GitHubClient, RequestStats
from runner_queue_fallback.github.models import Job, WorkflowRun
from runner_queue_fallback.request_id import RequestId, parse
from runner_queue_fallback.stats.survival import Observation

__all__ = [
    "QUOTA_RESERVE",
    "Child",
    "Ending",
    "History",
    "SequenceSummary",
    "child_from",
    "queue_wait",
    "quota_stop",
    "read_history",
    "request_budget",
    "sequences",
]

#: Requests of the hour's quota that `stats` leaves to live coordinators: it stops reading when
#: GitHub reports fewer left than this. 300 is about 40 coordinator sequences (7 counted
#: requests to start, 6 per fallback), several hours of a busy repository's traffic.
QUOTA_RESERVE = 300
#: Runs per list page (GitHub's maximum).
PAGE_SIZE = 100


class Ending(enum.StrEnum):
    """How one child ended, as far as its run and job tell."""

    ALLOCATED = "allocated"  # a runner took the job
    TIMED_OUT = "timed-out"  # cancelled with no runner and no step: the coordinator's deadline
    RACE = "race"  # a runner arrived while it was being cancelled: the sequence stopped
    WAITING = "waiting"  # still queued now (censored at now)
    OTHER = "other"  # no job, cancelled before queueing, or a shape we cannot read


@dataclass(frozen=True)
class Child:
    """One child run of ours and its worker job, reduced to what `stats` measures."""

    run_id: int
    request: RequestId
    pool: str  # the job's labels, sorted, comma-separated
    group: str | None  # the runner group, known only once a runner took the job
    dispatched: datetime  # the run's created_at
    wait: Observation | None
    runner_at: datetime | None
    ending: Ending
    conclusion: str | None


def queue_wait(job: Job, now: datetime) -> Observation | None:  # noqa: PLR0911  # one return per case the docstring lists
    """The queue wait of a worker job, from GitHub's timestamps; None if they do not tell.

    The fields, and what we take them to mean:
      - `created_at`: the job entered the queue (the start of every wait);
      - `started_at`: a runner started the job: the end of the wait, used only when a runner was
        assigned (`runner_id`/`runner_name` set; GitHub also fills `started_at` for a job that
        never started, so it is not read then);
      - `completed_at`: for a job that completed with no runner (cancelled at its deadline), the
        wait lasted at least until then: a censored observation;
      - a job still `queued` has waited at least until `now`: censored at `now`.
    Which field means what for a queued job is not documented and cannot be checked offline.
    """
    if job.created_at is None:
        return None
    if job.has_runner:
        if job.started_at is None:
            return None
        return Observation(max(0.0, (job.started_at - job.created_at).total_seconds()), event=True)
    if job.status == "completed":
        if job.completed_at is None:
            return None
        waited = (job.completed_at - job.created_at).total_seconds()
        return Observation(max(0.0, waited), event=False)
    if job.status in {"queued", "waiting", "pending", "requested"}:
        return Observation(max(0.0, (now - job.created_at).total_seconds()), event=False)
    return None


def _ending(job: Job) -> Ending:
    """Allocated, timed out, race, waiting or other, from the job alone."""
    if job.has_runner:
        workload_began = any(step.number >= 3 for step in job.steps)
        if job.conclusion == "cancelled" and not workload_began:
            return Ending.RACE
        return Ending.ALLOCATED
    if job.status == "completed":
        never_ran = not any(step.started_at for step in job.steps)
        return Ending.TIMED_OUT if job.conclusion == "cancelled" and never_ran else Ending.OTHER
    return Ending.WAITING if job.status == "queued" else Ending.OTHER


def child_from(run: WorkflowRun, jobs: Iterable[Job], now: datetime) -> Child | None:
    """Our view of one child run; None when the run-name is not a request id (not ours)."""
    request = parse(run.display_title)
    if request is None:
        return None
    workers = [job for job in jobs if job.name == "worker"]
    job = workers[0] if len(workers) == 1 else None
    if job is None:
        return Child(run.id, request, "", None, run.created_at, None, None, Ending.OTHER, None)
    wait = queue_wait(job, now)
    ending = _ending(job) if wait is not None else Ending.OTHER
    runner_at = job.started_at if job.has_runner else None
    return Child(
        run_id=run.id,
        request=request,
        pool=",".join(sorted(job.labels)),
        group=job.runner_group_name if job.has_runner else None,
        dispatched=run.created_at,
        wait=wait,
        runner_at=runner_at,
        ending=ending,
        conclusion=job.conclusion,
    )


@dataclass
class History:
    """What one `stats` reading found, and what it cost."""

    children: list[Child] = field(default_factory=list)
    in_window: int = 0  # runs of the workflow in the window, as GitHub counts them
    examined: int = 0  # runs read from the list (at most --max-runs)
    not_ours: int = 0  # runs whose run-name is not a request id
    stopped: str | None = None  # why reading stopped before the window's end


def request_budget(max_runs: int) -> int:
    """The most requests a reading of `max_runs` runs sends: list pages plus one job read each."""
    return math.ceil(max_runs / PAGE_SIZE) + max_runs


def quota_stop(stats: RequestStats, reserve: int = QUOTA_RESERVE) -> str | None:
    """Why to stop now to leave live coordinators their share of the quota, or None to go on.

    The one place that decides; it will call the fleet's shared admission policy once that exists.
    """
    left = stats.rate_remaining
    if left is not None and left <= reserve:
        return f"stopped early: {left} requests left this hour, {reserve} kept for coordinators"
    return None


def read_history(
    client: GitHubClient,
    workflow: str,
    *,
    since: datetime,
    now: datetime,
    max_runs: int,
    reserve: int = QUOTA_RESERVE,
    progress: Callable[[History], None] | None = None,
) -> History:
    """Read up to `max_runs` runs of `workflow` created since `since`, and our children's jobs.

    Sends at most `request_budget(max_runs)` requests (plus the client's retries of a failed
    one); stops earlier when `quota_stop` says so. Raises NotFound for an unknown workflow.
    """
    history = History()
    pages = client.iter_workflow_runs(
        workflow, created_after=since, per_page=min(PAGE_SIZE, max_runs)
    )
    for page in pages:
        history.in_window = max(history.in_window, page.total_count)
        for run in page.workflow_runs[: max_runs - history.examined]:
            if (reason := quota_stop(client.stats, reserve)) is not None:
                history.stopped = reason
                break
            _read_one(client, run, history, now)
            if progress is not None:
                progress(history)
        if history.stopped is None and history.examined >= max_runs:
            if history.in_window > history.examined:
                history.stopped = f"--max-runs {max_runs} reached"
            break
        if history.stopped is not None:
            break
        if (reason := quota_stop(client.stats, reserve)) is not None:
            history.stopped = reason
            break
    pages.close()
    return history


def _read_one(client: GitHubClient, run: WorkflowRun, history: History, now: datetime) -> None:
    """Examine one listed run: skip it if not ours, else read its jobs (one request)."""
    history.examined += 1
    if parse(run.display_title) is None:
        history.not_ours += 1
        return
    child = child_from(run, client.list_attempt_jobs(run.id, 1), now)
    if child is not None:
        history.children.append(child)


@dataclass(frozen=True)
class SequenceSummary:
    """One coordinator run (parent run and attempt): what its children add up to."""

    parent_run_id: int
    parent_attempt: int
    candidates: int  # children seen
    seconds_to_runner: float | None  # first dispatch to the runner's start
    ending: str  # runner, exhausted, race, waiting, other
    pools: tuple[str, ...]


def sequences(children: Iterable[Child]) -> list[SequenceSummary]:
    """Group children by their request id's parent run and attempt, oldest first."""
    groups: dict[tuple[int, int], list[Child]] = {}
    for child in children:
        groups.setdefault((child.request.run_id, child.request.run_attempt), []).append(child)
    found = []
    for (run_id, attempt), members in groups.items():
        members.sort(key=lambda c: c.request.candidate)
        last = members[-1]
        first = min(c.dispatched for c in members)
        to_runner = None
        if last.runner_at is not None:
            to_runner = (last.runner_at - first).total_seconds()
        ending = {
            Ending.ALLOCATED: "runner",
            Ending.RACE: "race",
            Ending.TIMED_OUT: "exhausted",
            Ending.WAITING: "waiting",
        }.get(last.ending, "other")
        pools = tuple(c.pool for c in members)
        found.append(SequenceSummary(run_id, attempt, len(members), to_runner, ending, pools))
    return sorted(found, key=lambda s: (s.parent_run_id, s.parent_attempt))
