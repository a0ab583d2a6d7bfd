"""Reading the past: our children of one workflow over a window, and how each one ended.

A run is ours when its run-name (`display_title`) is exactly a request id (`request_id.parse`);
anything else in the workflow (a manual dispatch) is counted and skipped. Each child's `worker` job
(of the attempt the list shows) gives the pool (its `labels`, a set: `core/labels.py`), the queue
wait (`queue_wait`, the one function that reads GitHub's timestamps) and the ending. History as
GitHub serves it (github-api.md 12): a `created` window past the 1,000 results GitHub lists per
query is halved until each part fits; a job carried into a re-run attempt (its `started_at` before
its `created_at`) is left out and counted; a job still `queued` whose steps ran counts as run. I/O
goes through `GitHubClient` only; the rest is pure.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from runner_queue_fallback.core.labels import canonical
from runner_queue_fallback.core.request_id import RequestId, parse
from runner_queue_fallback.github.client import GitHubClient, RequestStats
from runner_queue_fallback.github.models import Job, WorkflowRun
from runner_queue_fallback.tools.stats.survival import Observation

__all__ = [
    "LISTING_CAP",
    "QUOTA_RESERVE",
    "Child",
    "Ending",
    "History",
    "SequenceSummary",
    "carried_forward",
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
#: Results GitHub lists for one filtered query; a window with more is split.
LISTING_CAP = 1000
#: Halvings that take a 90-day window down to one second (2**23 s is 97 days).
MAX_SPLIT_DEPTH = 23


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
    labels: tuple[str, ...]  # the job's labels, as GitHub lists them (none: a group-only job)
    group: str | None  # the runner group, known only once a runner took the job
    dispatched: datetime  # the run's created_at
    wait: Observation | None
    runner_at: datetime | None
    ending: Ending
    conclusion: str | None

    @property
    def pool(self) -> str:
        """The pool's key: its labels as a set (`core/labels.py: canonical`), never a label."""
        return canonical(self.labels)


def queue_wait(job: Job, now: datetime) -> Observation | None:  # noqa: PLR0911  # one return per case the docstring lists
    """The queue wait of a worker job, from GitHub's timestamps; None if they do not tell.

    The fields, and what we take them to mean:
      - `created_at`: the job entered the queue (the start of every wait);
      - `started_at`: a runner started the job: the end of the wait, used only when a runner was
        assigned (`runner_id`/`runner_name` set; GitHub also fills `started_at` for a job that
        never started, so it is not read then);
      - `completed_at`: for a job that completed with no runner (cancelled at its deadline), the
        wait lasted at least until then: a censored observation;
      - a job still `queued` whose steps ran (`ran_while_queued`) waited until its first step;
      - any other job still `queued` has waited at least until `now`: censored at `now`.
    A job carried forward into a re-run attempt (`carried_forward`) is left out before this.
    Which field means what for a queued job is not documented and cannot be checked offline.
    """
    if job.created_at is None:
        return None
    if (began := ran_while_queued(job)) is not None:
        return Observation(max(0.0, (began - job.created_at).total_seconds()), event=True)
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


def carried_forward(job: Job) -> bool:
    """A job carried into a re-run attempt: a runner's `started_at` before its own `created_at`.

    "Re-run failed jobs" copies the jobs that passed into the new attempt with their old start
    and a newer creation (github-api.md 12); their wait belongs to an earlier attempt.
    """
    return (
        job.has_runner
        and job.started_at is not None
        and job.created_at is not None
        and job.started_at < job.created_at
    )


def ran_while_queued(job: Job) -> datetime | None:
    """When a job GitHub still shows `queued` began running: its first step's start, or None.

    Such jobs ran (their steps exist; pytorch's dashboard counts them so, github-api.md 12).
    """
    if job.status != "queued" or job.has_runner:
        return None
    return min((step.started_at for step in job.steps if step.started_at), default=None)


def _ending(job: Job) -> Ending:
    """Allocated, timed out, race, waiting or other, from the job alone."""
    if ran_while_queued(job) is not None:
        return Ending.ALLOCATED
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
        return Child(run.id, request, (), None, run.created_at, None, None, Ending.OTHER, None)
    wait = queue_wait(job, now)
    ending = _ending(job) if wait is not None else Ending.OTHER
    runner_at = ran_while_queued(job) or (job.started_at if job.has_runner else None)
    if runner_at is not None:  # a step's time is the runner's clock: never before the dispatch
        runner_at = max(runner_at, run.created_at)
    return Child(
        run_id=run.id,
        request=request,
        labels=tuple(job.labels),
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
    carried_forward: int = 0  # children whose worker job came from an earlier attempt: left out
    queued_with_steps: int = 0  # children whose job shows `queued` although it ran: counted run
    windows: int = 0  # `created` windows listed (more than 1 once a window passed 1,000 runs)
    stopped: str | None = None  # why reading stopped before the window's end


def request_budget(max_runs: int) -> int:
    """The most requests a reading of `max_runs` runs sends: list pages plus one job read each.

    Past 1,000 runs, splitting windows adds list requests: a probe per window halved and a
    partial page per part, bounded by `_split_allowance` (the reading stops there, and says so).
    """
    return _list_budget(max_runs) + max_runs


def _list_budget(max_runs: int) -> int:
    return math.ceil(max_runs / PAGE_SIZE) + _split_allowance(max_runs)


def _split_allowance(max_runs: int) -> int:
    if max_runs <= LISTING_CAP:
        return 0
    return 2 * (math.ceil(max_runs / (LISTING_CAP // 2)) + MAX_SPLIT_DEPTH)


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

    Newest first. Sends at most `request_budget(max_runs)` requests (plus the client's retries
    of a failed one); stops earlier when `quota_stop` says so. Raises NotFound for an unknown
    workflow.
    """
    reading = _Reading(client, workflow, now, max_runs=max_runs, reserve=reserve)
    reading.progress = progress
    start = int(since.timestamp())
    reading.window(start, max(start, math.ceil(now.timestamp())), root=True)
    return reading.history


class _Reading:
    """One reading's state: the bounds, the runs seen, what was found."""

    def __init__(
        self, client: GitHubClient, workflow: str, now: datetime, *, max_runs: int, reserve: int
    ) -> None:
        self.client, self.workflow, self.now = client, workflow, now
        self.max_runs, self.reserve = max_runs, reserve
        self.progress: Callable[[History], None] | None = None
        self.history = History()
        self.list_requests = 0
        self.seen: set[int] = set()

    def window(self, start: int, end: int, *, root: bool = False) -> None:
        """List runs created from `start` to `end` (epoch seconds, both in), halving if needed."""
        if not root and not self._may_list_more():
            return
        self.history.windows += 1
        pages = self.client.iter_runs_created_in(
            self.workflow, _at(start), _at(end), per_page=min(PAGE_SIZE, self.max_runs)
        )
        try:
            for number, page in enumerate(pages, start=1):
                self.list_requests += 1
                if root and number == 1:
                    self.history.in_window = page.total_count
                if number == 1 and self._split(page.total_count, start, end):
                    pages.close()
                    mid = (start + end) // 2
                    self.window(mid + 1, end)  # the newer half first: newest first overall
                    self.window(start, mid)
                    return
                if not self._examine(page.workflow_runs) or not self._may_list_more():
                    return
        finally:
            pages.close()

    def _split(self, total: int, start: int, end: int) -> bool:
        """Whether to halve a window: more runs than one query lists, and more of them wanted."""
        if total <= LISTING_CAP or self.max_runs - self.history.examined <= LISTING_CAP:
            return False
        if end > start:
            return True
        self.history.stopped = (
            f"{total} runs created in the one second {_iso(_at(start))}: GitHub lists "
            f"{LISTING_CAP} of them"
        )
        return False

    def _examine(self, runs: Iterable[WorkflowRun]) -> bool:
        """Read each new run of a page, up to --max-runs; False once the quota stopped it."""
        for run in runs:
            if self.history.examined >= self.max_runs:
                break
            if run.id in self.seen:
                continue
            if (reason := quota_stop(self.client.stats, self.reserve)) is not None:
                self.history.stopped = reason
                return False
            self.seen.add(run.id)
            _read_one(self.client, run, self.history, self.now)
            if self.progress is not None:
                self.progress(self.history)
        return True

    def _may_list_more(self) -> bool:
        """Whether to send another list request; if not, why (when it stops the reading short)."""
        history = self.history
        if history.stopped is not None:
            return False
        if history.examined >= self.max_runs:
            if history.examined < history.in_window:
                history.stopped = (
                    f"--max-runs {self.max_runs} reached: {history.examined} of "
                    f"{history.in_window} runs read (raise it to read more)"
                )
            return False
        if (reason := quota_stop(self.client.stats, self.reserve)) is not None:
            history.stopped = reason
            return False
        if self.list_requests >= _list_budget(self.max_runs):
            history.stopped = f"stopped after {self.list_requests} list requests splitting windows"
            return False
        return True


def _read_one(client: GitHubClient, run: WorkflowRun, history: History, now: datetime) -> None:
    """Examine one listed run: skip it if not ours, else read its jobs (one request).

    The jobs are those of the attempt the list shows; a worker carried forward into it from an
    earlier attempt is counted and left out.
    """
    history.examined += 1
    if parse(run.display_title) is None:
        history.not_ours += 1
        return
    jobs = client.list_attempt_jobs(run.id, run.run_attempt)
    workers = [job for job in jobs if job.name == "worker"]
    if len(workers) == 1 and carried_forward(workers[0]):
        history.carried_forward += 1
        return
    if len(workers) == 1 and ran_while_queued(workers[0]) is not None:
        history.queued_with_steps += 1
    child = child_from(run, jobs, now)
    if child is not None:
        history.children.append(child)


def _at(epoch: int) -> datetime:
    return datetime.fromtimestamp(0, UTC) + timedelta(seconds=epoch)


def _iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


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
