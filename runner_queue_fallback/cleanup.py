"""Cancel a child run and confirm it is over: shared by the coordinator, the post step and signals."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from runner_queue_fallback import timing
from runner_queue_fallback.clock import Clock
from runner_queue_fallback.errors import GitHubError, PermissionDenied
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.observe import Observation

__all__ = ["CleanupResult", "cancel_and_confirm", "observe_run", "run_left_by_main_step"]


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
    is already over answers 409. A 404 (a child not visible yet) does not end the window.

    With the client waiting out a spent quota (`Patience.CHILD_EXISTS`), the time spent waiting
    for a reset extends the window, by at most `reset_budget`: nothing here ends past
    `window + reset_budget`. A reset beyond that ends the cleanup unconfirmed at once.
    """
    start = clock.monotonic()
    limit = start + window + reset_budget
    waited_before = client.stats.quota_waited
    last: Observation | None = None
    detail = ""
    try:
        outcome = client.cancel_run(run_id, deadline=limit)
        log(f"Cancel requested for child run {run_id}: {outcome.value}")
    except GitHubError as exc:
        detail = f"cancel failed: {exc}"
    while True:
        try:
            last = observe_run(client, run_id, limit)
        except PermissionDenied as exc:  # reading will not start working within the window
            return CleanupResult(run_id, confirmed=False, last=last, detail=f"read refused: {exc}")
        except GitHubError as exc:
            detail = f"last read failed: {exc}"
        else:
            log(f"Cleanup check: {last.describe()}")
            if last.finished:
                return CleanupResult(run_id, confirmed=True, last=last, detail=last.describe())
        end = min(limit, start + window + client.stats.quota_waited - waited_before)
        reset_in = client.quota_reset_in()
        if reset_in is not None and clock.monotonic() + reset_in > limit:
            detail = f"the API quota is spent until its reset at {client.reset_time()}; {detail}"
            end = clock.monotonic()
        if clock.monotonic() + timing.CANCEL_POLL_SECONDS > end:
            return CleanupResult(
                run_id, confirmed=False, last=last, detail=_unconfirmed(last, detail)
            )
        clock.sleep(timing.CANCEL_POLL_SECONDS)


def _unconfirmed(last: Observation | None, detail: str) -> str:
    seen = last.describe() if last is not None else "never observed"
    return f"the window closed; last seen: {seen}" + (f"; {detail}" if detail else "")


#: How far back the post step looks for a run dispatched by the main step (a job's time limit).
_POST_LOOKBACK = timedelta(hours=6)
#: Margin for the difference between the runner's clock and GitHub's `created_at`.
_CLOCK_SKEW = timedelta(minutes=5)
#: How long the post step keeps looking for a run known only by its run-name (not in the spec:
#: one more startup window, at the startup cadence; an older server may list a run late).
POST_SEARCH_WINDOW_SECONDS = timing.STARTUP_WINDOW_SECONDS


def run_left_by_main_step(
    client: GitHubClient,
    clock: Clock,
    state: Mapping[str, str],
    workflow: str,
    log: Callable[[str], None],
    *,
    deadline: float | None = None,
) -> int | None:
    """The child the post step must look after, from the main step's saved state.

    The main step saves `request-id` before each dispatch and `child-run-id` with
    `child-request-id` once the run id is known. When the last request id has no run id (the
    step died while its dispatch was in flight, the reply was lost, or an older server's run never
    showed up by its run-name), the run is looked up by its unique run-name, every 5 s for up to
    2 minutes, unless GitHub definitely refused that dispatch (`refused-request-id`).
    """
    run_id = state.get("child-run-id", "").strip()
    known = int(run_id) if run_id.isascii() and run_id.isdigit() else None
    pending = state.get("request-id", "").strip()
    if not pending or pending == state.get("child-request-id", "").strip() or not workflow:
        return known
    if pending == state.get("refused-request-id", "").strip():
        log(f"GitHub refused the dispatch of {pending}: no run was created for it")
        return known
    try:
        since = datetime.fromisoformat(state["dispatched-at"]) - _CLOCK_SKEW
    except (KeyError, ValueError):
        since = clock.now() - _POST_LOOKBACK
    found = _search_by_run_name(
        client, clock, workflow, pending, since=since, log=log, deadline=deadline
    )
    if found is not None:
        log(f"Found run {found} with run-name {pending}, whose dispatch reply named no run")
        return found
    log(
        f"No run with run-name {pending} was found since {since.isoformat()}: if one appears, "
        "cancel it by hand"
    )
    return known


def _search_by_run_name(
    client: GitHubClient,
    clock: Clock,
    workflow: str,
    run_name: str,
    *,
    since: datetime,
    log: Callable[[str], None],
    deadline: float | None = None,
) -> int | None:
    """Search by run-name every 5 s within the post step's search window; the first run created.

    The window ends early at `deadline` (the post step's own limit) when that comes first.
    """
    window_end = clock.monotonic() + POST_SEARCH_WINDOW_SECONDS
    deadline = window_end if deadline is None else min(deadline, window_end)
    while True:
        try:
            runs = client.find_runs_by_name(
                workflow, run_name, created_after=since, deadline=deadline
            )
        except PermissionDenied as exc:  # will not start working within the window
            log(f"Could not look for run-name {run_name}: {exc}")
            return None
        except GitHubError as exc:
            log(f"Could not look for run-name {run_name}: {exc}")
        else:
            if runs:
                return min(runs, key=lambda run: (run.created_at, run.id)).id
        if clock.monotonic() + timing.STARTUP_POLL_SECONDS > deadline:
            return None
        clock.sleep(timing.STARTUP_POLL_SECONDS)
