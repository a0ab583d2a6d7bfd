"""The action's post step: cancel and confirm what the main step left running.

It reads what the main step handed it (`core/hand_off.py`): with the child's run id known and
seen over, nothing is sent; a dispatch whose run was never known (or found by run-name) is
looked for by its run-name; every run found is cancelled and confirmed within the 4 minutes a
post step has, and the report links the worker job as the main step would.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import NamedTuple

from runner_queue_fallback.action.cleanup import (
    CleanupResult,
    RunNameSearch,
    cancel_and_confirm_all,
    observe_run,
)
from runner_queue_fallback.action.observe import Observation
from runner_queue_fallback.action.summary import LINK_SEPARATOR, RUN_LINK_ONLY, WORKER_LINK
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.actions_io import Reporter, escape_markdown
from runner_queue_fallback.core.api_versions import API_VERSION_CHOICES, AUTO
from runner_queue_fallback.core.clock import Clock
from runner_queue_fallback.core.errors import (
    GitHubError,
    PermissionDenied,
    RQFError,
    UnexpectedError,
)
from runner_queue_fallback.core.hand_off import HandOff
from runner_queue_fallback.core.request_id import created_since
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.github.retry import Patience

__all__ = [
    "POST_SEARCH_WINDOW_SECONDS",
    "LeftRuns",
    "clean_up",
    "confirmed_over_by_main_step",
    "runs_left_by_main_step",
]


def clean_up(
    state: HandOff,
    reporter: Reporter,
    *,
    token: str,
    workflow: str,
    connect: Callable[[str], tuple[GitHubClient, Clock]],
) -> bool:
    """The post step: cancel and confirm what the main step left; whether nothing is left.

    `connect(api_version)` reads the run's context and builds the client and its clock, only once
    a request is due: with nothing dispatched, or the child seen over, no request is sent.
    """
    if not state.request_id:
        reporter.log("No child run was dispatched: nothing to clean up")
        return True
    if confirmed_over_by_main_step(state):
        reporter.log(
            f"The main step confirmed child run {state.child_over} over: nothing to clean up"
        )
        return True
    reporter.mask(token)
    try:
        return _clean_up_after_main_step(state, reporter, workflow, connect)
    except RQFError:
        raise
    except Exception as exc:  # noqa: BLE001  # invariant 10: say which child may be left
        known = state.child_run_id or state.request_id
        reporter.error(
            f"{UnexpectedError('the post step', exc)}; child {known} may still be running: "
            "check it and cancel it by hand",
            title=UnexpectedError.title,
        )
        return False


def confirmed_over_by_main_step(state: HandOff) -> bool:
    """The last dispatch's run is known, and the main step saw it end (no request needed).

    Not a run found by its run-name in a sequence that failed: a listing that lagged may have
    hidden an earlier run bearing it, which the post step lists for.
    """
    last = state.request_id.strip()
    run_id = state.child_run_id.strip()
    return (
        bool(run_id)
        and last == state.child_request_id.strip()
        and run_id == state.child_over.strip()
        and last != state.child_found_by_name.strip()
    )


def _clean_up_after_main_step(
    state: HandOff,
    reporter: Reporter,
    workflow: str,
    connect: Callable[[str], tuple[GitHubClient, Clock]],
) -> bool:
    # The version the main step settled on (saved before each dispatch); auto when it is missing.
    saved = state.api_version.strip()
    client, clock = connect(saved if saved in API_VERSION_CHOICES else AUTO)
    # A child may exist: wait out a spent quota, but only within the post step's own limit
    # (GitHub ends a post step 5 minutes after the job is cancelled).
    client.patience = Patience.CHILD_EXISTS
    limit = clock.monotonic() + timing.POST_STEP_LIMIT_SECONDS
    left = runs_left_by_main_step(client, clock, state, workflow, reporter.log, deadline=limit)
    run_ids = left.run_ids
    if not run_ids:
        reporter.log("No child run is known: nothing to clean up")
        return True
    seen: dict[int, Observation] = {}
    for run_id in run_ids:
        try:
            seen[run_id] = observe_run(client, run_id, limit)
        except GitHubError as exc:
            reporter.log(f"Could not read child run {run_id}: {exc}; trying to cancel it anyway")
        else:
            if seen[run_id].finished and run_id not in left.cancelled:
                reporter.log(f"Child run {run_id} is already completed: nothing to clean up")
    # A run this step cancelled itself is reported as confirmed, not as "already completed".
    running = [
        run_id
        for run_id in run_ids
        if run_id not in seen or not seen[run_id].finished or run_id in left.cancelled
    ]
    if not running:
        return True
    window = max(0.0, min(timing.CANCEL_WINDOW_SECONDS, limit - clock.monotonic()))
    budget = max(0.0, limit - clock.monotonic() - window)
    results = cancel_and_confirm_all(
        client, clock, running, window=window, reset_budget=budget, log=reporter.log
    )
    for result in results:  # the worker link is the child's (listed first), not a copy's
        child = result.run_id == run_ids[0]
        link = _worker_link(state, result, seen.get(result.run_id)) if child else None
        _report(reporter, result, link)
    return all(result.confirmed for result in results)


#: How far back the post step looks for a run dispatched by the main step (a job's time limit).
_POST_LOOKBACK = timedelta(hours=6)
#: Margin for the difference between the runner's clock and GitHub's `created_at`.
_CLOCK_SKEW = timedelta(minutes=5)
#: How long the post step keeps looking for a run known only by its run-name (not in the spec:
#: one more startup window, at the startup cadence; an older server may list a run late).
POST_SEARCH_WINDOW_SECONDS = timing.STARTUP_WINDOW_SECONDS
#: How long after its dispatch a run may still be missing from the listing: once that much has
#: passed and a run was found, listing again finds nothing new.
_LISTING_SETTLES = timedelta(seconds=timing.STARTUP_WINDOW_SECONDS)


class LeftRuns(NamedTuple):
    """The runs the post step looks after (the child first), and those it already cancelled."""

    run_ids: list[int]
    cancelled: frozenset[int] = frozenset()


def runs_left_by_main_step(
    client: GitHubClient,
    clock: Clock,
    state: HandOff,
    workflow: str,
    log: Callable[[str], None],
    *,
    deadline: float | None = None,
) -> LeftRuns:
    """The runs the post step must look after, from the main step's saved state; the child first.

    The main step saves the request id before each dispatch, and the child's run id with its
    request id once the run id is known. When the last request id has no run id (the step died
    while its dispatch was in flight, the reply was lost, or an older server's run never showed
    up by its run-name), or its run was found by run-name, every run bearing that run-name is
    looked for, every 5 s for up to 2 minutes, and each one found is sent its cancel at once (a
    run bearing our request id that we did not dispatch is a copy: cancelling it is safe). They
    are listed from the dispatch time less a margin, or from the time the request id states
    (GitHub's clock) when that is earlier; an id of the older form states none. Not when GitHub
    definitely refused that dispatch. Runs the main step already cancelled as copies are looked
    after too.
    """
    known = state.child_run
    pending = state.request_id.strip()
    named = pending == state.child_request_id.strip()
    by_name = named and pending == state.child_found_by_name.strip()
    only_known = LeftRuns([] if known is None else [known])
    if not pending or (named and not by_name) or not workflow:
        return only_known
    if pending == state.refused_request_id.strip():
        log(f"GitHub refused the dispatch of {pending}: no run was created for it")
        return only_known
    copies = state.copies if by_name else []
    dispatched = state.dispatched
    since = clock.now() - _POST_LOOKBACK if dispatched is None else dispatched - _CLOCK_SKEW
    since = created_since(pending, since)  # GitHub's time, if the request id states an earlier one
    search = RunNameSearch(client, workflow, pending, since)
    settled = None if dispatched is None else dispatched + _LISTING_SETTLES
    _search_by_run_name(search, clock, log=log, settled=settled, deadline=deadline)
    found = [run.id for run in search.ordered]
    if len(found) > 1:
        log(
            f"{len(found)} runs bear run-name {pending}: {', '.join(map(str, found))}; every one "
            "but the run created first was dispatched by someone else. All are cancelled"
        )
    elif not by_name:
        log(
            f"No run with run-name {pending} was found since {since.isoformat()}: if one "
            "appears, cancel it by hand"
        )
    first = [known] if by_name and known is not None else []
    runs = list(dict.fromkeys([*first, *found, *copies]))
    return LeftRuns(runs, frozenset(search.cancelled)) if runs else only_known


def _search_by_run_name(
    search: RunNameSearch,
    clock: Clock,
    *,
    log: Callable[[str], None],
    settled: datetime | None,
    deadline: float | None = None,
) -> None:
    """List every 5 s within the post step's search window, cancelling each run found at once.

    Once a run was found, the listing stops when it is `settled` (a listing that lags hides a
    run only for a while after its dispatch); with no dispatch time, at the first run found.
    The window ends early at `deadline` (the post step's own limit) when that comes first.
    """
    window_end = clock.monotonic() + POST_SEARCH_WINDOW_SECONDS
    deadline = window_end if deadline is None else min(deadline, window_end)
    while True:
        try:
            search.cancel(search.look(deadline), deadline, log)
        except PermissionDenied as exc:  # will not start working within the window
            log(f"Could not look for run-name {search.run_name}: {exc}")
            return
        except GitHubError as exc:
            log(f"Could not look for run-name {search.run_name}: {exc}")
        if search.found and (settled is None or clock.now() >= settled):
            return
        if clock.monotonic() + timing.STARTUP_POLL_SECONDS > deadline:
            return
        clock.sleep(timing.STARTUP_POLL_SECONDS)


def _worker_link(
    state: HandOff, result: CleanupResult, before: Observation | None
) -> tuple[str, str] | None:
    """The worker job's link when it is known; else the run's, labelled as the fallback."""
    mine = str(result.run_id) == state.child_run_id.strip()
    seen = [o for o in (result.last, before) if o is not None]
    jobs = [o.job for o in seen if o.job is not None]
    saved_job = state.child_job_url.strip() if mine else ""
    run_url = seen[0].run.html_url if seen else ""
    run_url = run_url or (state.child_run_url.strip() if mine else "")
    job_url = next((job.html_url for job in jobs if job.html_url), saved_job)
    if not job_url and jobs and run_url:
        job_url = f"{run_url}/job/{jobs[0].id}"  # as the main step links it
    if job_url:
        return WORKER_LINK, job_url
    return (f"{WORKER_LINK} ({RUN_LINK_ONLY})", run_url) if run_url else None


def _report(reporter: Reporter, result: CleanupResult, link: tuple[str, str] | None) -> None:
    """One run's cleanup: a log line (an error when not confirmed) and a summary line."""
    suffix = f"{LINK_SEPARATOR}{link[0]}: {link[1]}" if link else ""
    markdown = reporter.link(*link) if link else ""
    reporter.summary(f"**Post-step cleanup:** {escape_markdown(result.describe())} {markdown}\n")
    if result.confirmed:
        reporter.log(f"{result.describe()}{suffix}")
    else:
        reporter.error(f"{result.describe()}{suffix}", title="Cleanup not confirmed")
