"""`cleanup`: the action's post step. Cancel and confirm a child the main step left running."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from runner_queue_fallback.action.cleanup import (
    CleanupResult,
    cancel_and_confirm_all,
    observe_run,
    runs_left_by_main_step,
)
from runner_queue_fallback.action.observe import Observation
from runner_queue_fallback.action.summary import LINK_SEPARATOR, RUN_LINK_ONLY, WORKER_LINK
from runner_queue_fallback.commands import EXIT_FAILED, EXIT_OK, Context
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.actions_io import Reporter, escape_markdown
from runner_queue_fallback.core.api_versions import API_VERSION_CHOICES, AUTO
from runner_queue_fallback.core.errors import GitHubError, RQFError, UnexpectedError
from runner_queue_fallback.core.inputs import env_name, read_run_context
from runner_queue_fallback.github.retry import Patience

__all__ = ["run"]


def run(_args: argparse.Namespace, ctx: Context) -> int:
    """The post step: the main step saved the active child's run id in GITHUB_STATE."""
    reporter = ctx.reporter()
    state = {
        key.removeprefix("STATE_"): value
        for key, value in ctx.environ.items()
        if key.startswith("STATE_")
    }
    if not state.get("request-id"):
        reporter.log("No child run was dispatched: nothing to clean up")
        return EXIT_OK
    if _confirmed_over_by_main_step(state):
        reporter.log(
            f"The main step confirmed child run {state['child-over']} over: nothing to clean up"
        )
        return EXIT_OK
    token = ctx.environ.get(env_name("token"), "").strip()
    reporter.mask(token)
    try:
        return _clean_up_after_main_step(ctx, reporter, state, token)
    except RQFError:
        raise
    except Exception as exc:  # noqa: BLE001  # invariant 10: say which child may be left
        known = state.get("child-run-id") or state.get("request-id")
        reporter.error(
            f"{UnexpectedError('the post step', exc)}; child {known} may still be running: "
            "check it and cancel it by hand",
            title=UnexpectedError.title,
        )
        return EXIT_FAILED


def _confirmed_over_by_main_step(state: Mapping[str, str]) -> bool:
    """The last dispatch's run is known, and the main step saw it end (no request needed).

    Not a run found by its run-name in a sequence that failed: a listing that lagged may have
    hidden an earlier run bearing it, which the post step lists for.
    """
    last = state.get("request-id", "").strip()
    run_id = state.get("child-run-id", "").strip()
    return (
        bool(run_id)
        and last == state.get("child-request-id", "").strip()
        and run_id == state.get("child-over", "").strip()
        and last != state.get("child-found-by-name", "").strip()
    )


def _clean_up_after_main_step(
    ctx: Context, reporter: Reporter, state: Mapping[str, str], token: str
) -> int:
    context = read_run_context(ctx.environ)
    clock = ctx.clock_factory()
    # The version the main step settled on (saved before each dispatch); auto when it is missing.
    saved = state.get("api-version", "").strip()
    version = saved if saved in API_VERSION_CHOICES else AUTO
    client = ctx.client(context, token, clock, reporter, version)
    # A child may exist: wait out a spent quota, but only within the post step's own limit
    # (GitHub ends a post step 5 minutes after the job is cancelled).
    client.patience = Patience.CHILD_EXISTS
    limit = clock.monotonic() + timing.POST_STEP_LIMIT_SECONDS
    workflow = ctx.environ.get(env_name("workflow"), "").strip().removeprefix(".github/workflows/")
    left = runs_left_by_main_step(client, clock, state, workflow, reporter.log, deadline=limit)
    run_ids = left.run_ids
    if not run_ids:
        reporter.log("No child run is known: nothing to clean up")
        return EXIT_OK
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
        return EXIT_OK
    window = max(0.0, min(timing.CANCEL_WINDOW_SECONDS, limit - clock.monotonic()))
    budget = max(0.0, limit - clock.monotonic() - window)
    results = cancel_and_confirm_all(
        client, clock, running, window=window, reset_budget=budget, log=reporter.log
    )
    for result in results:  # the worker link is the child's (listed first), not a copy's
        child = result.run_id == run_ids[0]
        link = _worker_link(state, result, seen.get(result.run_id)) if child else None
        _report(reporter, result, link)
    return EXIT_OK if all(result.confirmed for result in results) else EXIT_FAILED


def _worker_link(
    state: Mapping[str, str], result: CleanupResult, before: Observation | None
) -> tuple[str, str] | None:
    """The worker job's link when it is known; else the run's, labelled as the fallback."""
    mine = str(result.run_id) == state.get("child-run-id", "").strip()
    seen = [o for o in (result.last, before) if o is not None]
    jobs = [o.job for o in seen if o.job is not None]
    saved_job = state.get("child-job-url", "").strip() if mine else ""
    run_url = seen[0].run.html_url if seen else ""
    run_url = run_url or (state.get("child-run-url", "").strip() if mine else "")
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
