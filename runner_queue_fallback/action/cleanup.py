"""Cancel a child run and confirm it is over: shared by the coordinator, the post step and signals.

Cancel-and-confirm, the 409 re-check and the run-name search are one mechanism shared by three
callers; what only the post step does is in `action/post_step.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from runner_queue_fallback.action.observe import Observation
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.clock import Clock
from runner_queue_fallback.core.errors import CancelRefused, GitHubError, PermissionDenied
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.github.models import CancelOutcome, WorkflowRun

__all__ = [
    "CancelRequests",
    "CleanupResult",
    "RunNameSearch",
    "cancel_and_confirm",
    "cancel_and_confirm_all",
    "observe_run",
]


@dataclass(frozen=True)
class CleanupResult:
    """Whether the child is confirmed over, and the last thing seen of it."""

    run_id: int
    confirmed: bool
    last: Observation | None
    detail: str

    def describe(self) -> str:
        """A sentence for the log and the summary."""
        if self.confirmed:
            return f"cleanup confirmed: child run {self.run_id} is completed ({self.detail})"
        return (
            f"cleanup NOT confirmed for child run {self.run_id}: {self.detail}. "
            f"Check run {self.run_id} and cancel it by hand if it is still running."
        )


def observe_run(
    client: GitHubClient,
    run_id: int,
    deadline: float | None,
    *,
    clock: Clock | None = None,
) -> Observation:
    """Read a child run and the jobs of its first attempt together.

    With `clock` (the startup window), the pair is one read judged on its replies: it must be
    sent before `deadline`, but replies that arrive after it count, and the jobs request follows
    the run's reply even when that came late (one attempt, no retry wait past the deadline).
    """
    if clock is None:
        run = client.get_run(run_id, deadline=deadline)
        jobs = client.list_attempt_jobs(run_id, 1, deadline=deadline)
        return Observation(run, jobs)
    run = client.get_run(run_id, deadline=deadline, accept_late=True)
    jobs_deadline = None if deadline is None else max(deadline, clock.monotonic())
    jobs = client.list_attempt_jobs(run_id, 1, deadline=jobs_deadline, accept_late=True)
    return Observation(run, jobs)


@dataclass
class CancelRequests:
    """The cancels of one confirmation window, and what a cancel GitHub refused calls for.

    A 409 is "already completed" only when a fresh read shows the run completed (the client
    checks); any other 409 (`CancelRefused`: GitHub's answer to a run that never got a job is
    "Cannot cancel a workflow run that has not been queued yet.") is sent again at the next poll,
    then as one force-cancel. Errors other than a refusal are the caller's.
    """

    client: GitHubClient
    run_id: int
    deadline: float | None
    log: Callable[[str], None]
    #: GitHub's last refusal, kept for the report (None: no request was refused)
    refused: CancelRefused | None = None
    #: a refused cancel is due to be sent again (then forced)
    due: bool = False
    resent: bool = False
    forced: bool = False
    #: the fresh read a refused cancel made failed: it was this poll's read (`raise_read_error`)
    read_error: GitHubError | None = None

    def send(self, *, force: bool = False) -> CancelOutcome | None:
        """One cancel (or force-cancel), logged; None when GitHub refused it."""
        name = "Force-cancel" if force else "Cancel"
        self.forced = self.forced or force
        send = self.client.force_cancel_run if force else self.client.cancel_run
        try:
            outcome = send(self.run_id, deadline=self.deadline)
        except CancelRefused as exc:
            self.refused, self.due = exc, not self.forced
            cause = exc.__cause__
            self.read_error = cause if isinstance(cause, GitHubError) else None
            self.log(f"{name} of run {self.run_id} refused: {exc.reply}")
            return None
        self.due = False
        self.log(f"{name} requested for child run {self.run_id}: {outcome.value}")
        return outcome

    def raise_read_error(self) -> None:
        """Raise, once, the failure of the cancel's fresh read: that read is this poll's.

        Sent again at once, it would be a retry without the wait the retry policy just refused.
        """
        error, self.read_error = self.read_error, None
        if error is not None:
            raise error

    def follow_up(self) -> None:
        """After a read that shows the run not completed: a refused cancel again, then forced."""
        if not self.due:
            return
        if self.resent:
            self.send(force=True)
        else:
            self.resent = True
            self.send()

    def never_created(self, had_job: bool, last: Observation | None) -> str:
        """What an unconfirmed report says of a run GitHub never gave a job ('' otherwise)."""
        if had_job or last is None or last.run.status == "completed":
            return ""
        refused = f"; GitHub refused its cancel: {self.refused.reply}" if self.refused else ""
        return (
            f"GitHub never created its job: run {self.run_id} stayed {last.run.status} with no "
            f"job{refused}"
        )


def cancel_and_confirm(  # the run, its window and its quota allowance
    client: GitHubClient,
    clock: Clock,
    run_id: int,
    *,
    window: float = timing.CANCEL_WINDOW_SECONDS,
    reset_budget: float = 0.0,
    log: Callable[[str], None] = lambda _line: None,
) -> CleanupResult:
    """Cancel `run_id`, then read run and job every 5 s until both are completed.

    The cancel goes first: within a signal's short grace it is what matters most, and a run that
    is already over answers 409. A 404 (a child not visible yet) does not end the window. Only a
    read that shows run and job completed confirms; a cancel refused with a 409 while the run is
    not completed is sent again 5 s later, then force-cancelled (`CancelRequests`). A run still
    not completed at the end is reported unconfirmed; one that never showed a job, as a run
    GitHub never created a job for.

    With the client waiting out a spent quota (`Patience.CHILD_EXISTS`), the time spent waiting
    for a reset extends the window, by at most `reset_budget`: nothing here ends past
    `window + reset_budget`. A reset beyond that ends the cleanup unconfirmed at once.
    """
    start = clock.monotonic()
    limit = start + window + reset_budget
    waited_before = client.stats.quota_waited
    last: Observation | None = None
    detail = ""
    had_job = False
    cancels = CancelRequests(client, run_id, limit, log)
    try:
        cancels.send()
    except GitHubError as exc:
        detail = f"cancel failed: {exc}"
    while True:
        try:
            cancels.raise_read_error()
            last = observe_run(client, run_id, limit)
        except PermissionDenied as exc:  # reading will not start working within the window
            return CleanupResult(run_id, confirmed=False, last=last, detail=f"read refused: {exc}")
        except GitHubError as exc:
            detail = f"last read failed: {exc}"
        else:
            log(f"Cleanup check: {last.describe()}")
            had_job = had_job or bool(last.jobs)
            if last.finished:
                return CleanupResult(run_id, confirmed=True, last=last, detail=last.describe())
        end = min(limit, start + window + client.stats.quota_waited - waited_before)
        reset_in = client.quota_reset_in()
        if reset_in is not None and clock.monotonic() + reset_in > limit:
            spent = f"the API quota is spent until its reset at {client.reset_time()}"
            detail = f"{spent}; {detail}" if detail else spent
            end = clock.monotonic()
        if clock.monotonic() + timing.CANCEL_POLL_SECONDS > end:
            never = cancels.never_created(had_job, last)
            detail = f"{never}; {detail}" if never and detail else never or detail
            return CleanupResult(
                run_id, confirmed=False, last=last, detail=_unconfirmed(last, detail)
            )
        clock.sleep(timing.CANCEL_POLL_SECONDS)
        try:  # a cancel refused while the run is not completed: once more, then forced
            cancels.follow_up()
        except GitHubError as exc:
            detail = f"cancel failed: {exc}"


def _unconfirmed(last: Observation | None, detail: str) -> str:
    seen = last.describe() if last is not None else "never observed"
    return f"the window closed; last seen: {seen}" + (f"; {detail}" if detail else "")


def cancel_and_confirm_all(  # the runs, their shared window and quota allowance
    client: GitHubClient,
    clock: Clock,
    run_ids: Sequence[int],
    *,
    window: float = timing.CANCEL_WINDOW_SECONDS,
    reset_budget: float = 0.0,
    log: Callable[[str], None] = lambda _line: None,
) -> list[CleanupResult]:
    """`cancel_and_confirm` for several runs within one shared window, in order.

    Every run but the first is sent its cancel before the first is confirmed: within a signal's
    short grace the cancels are what matters most.
    """
    end = clock.monotonic() + window
    budget_end = end + reset_budget
    for run_id in run_ids[1:]:
        _cancel_once(client, run_id, end, log)
    results = []
    for run_id in run_ids:
        now = clock.monotonic()
        left = max(0.0, end - now)
        results.append(
            cancel_and_confirm(
                client,
                clock,
                run_id,
                window=left,
                reset_budget=max(0.0, budget_end - now - left),
                log=log,
            )
        )
    return results


def _cancel_once(
    client: GitHubClient, run_id: int, deadline: float | None, log: Callable[[str], None]
) -> bool:
    """Send one cancel; whether it was accepted.

    A failure is only logged: the confirmation that follows reports the run.
    """
    try:
        outcome = client.cancel_run(run_id, deadline=deadline)
    except GitHubError as exc:
        log(f"Cancel of run {run_id} failed: {exc}")
        return False
    log(f"Cancel requested for run {run_id}: {outcome.value}")
    return outcome is CancelOutcome.ACCEPTED


def created_first(runs: Sequence[WorkflowRun]) -> list[WorkflowRun]:
    """Runs in the order they were created (`created_at`, then id): the first is the child."""
    return sorted(runs, key=lambda run: (run.created_at, run.id))


@dataclass
class RunNameSearch:
    """Every run bearing one run-name (a request id) created since one fixed time.

    The run dispatched first is the child; any later one bearing the same request id is a copy
    someone else dispatched. Each listing reads every page from the same `since`, so an
    unchanged listing is answered 304.
    """

    client: GitHubClient
    workflow: str
    run_name: str
    since: datetime
    #: every run found so far, by id
    found: dict[int, WorkflowRun] = field(default_factory=dict)
    #: the runs already named in a warning as not the child
    named: set[int] = field(default_factory=set)
    #: the runs whose cancel (sent by `cancel`) was accepted: still running when found
    cancelled: set[int] = field(default_factory=set)

    def look(self, deadline: float | None) -> list[WorkflowRun]:
        """List once; the runs not found before, first created first (raises GitHubError)."""
        runs = self.client.find_runs_by_name(
            self.workflow, self.run_name, created_after=self.since, deadline=deadline
        )
        new = created_first([run for run in runs if run.id not in self.found])
        self.found.update((run.id, run) for run in new)
        return new

    @property
    def ordered(self) -> list[WorkflowRun]:
        """Every run found, first created first."""
        return created_first(list(self.found.values()))

    def cancel(
        self, runs: Sequence[WorkflowRun], deadline: float | None, log: Callable[[str], None]
    ) -> None:
        """Send each run its cancel at once: in the paths that only cancel, before listing again."""
        for run in runs:
            log(f"Found run {run.id} with run-name {self.run_name}: {run.html_url}")
            if _cancel_once(self.client, run.id, deadline, log):
                self.cancelled.add(run.id)
