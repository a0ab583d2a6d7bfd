"""`cleanup`: the action's post step. Cancel and confirm a child the main step left running."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from runner_queue_fallback import timing
from runner_queue_fallback.cleanup import cancel_and_confirm, observe_run, run_left_by_main_step
from runner_queue_fallback.commands import EXIT_FAILED, EXIT_OK, Context
from runner_queue_fallback.errors import GitHubError, RQFError, UnexpectedError
from runner_queue_fallback.github.retry import Patience
from runner_queue_fallback.github.versions import API_VERSION_CHOICES, AUTO
from runner_queue_fallback.inputs import env_name, read_run_context
from runner_queue_fallback.report import Reporter, escape_markdown
from runner_queue_fallback.summary import LINK_SEPARATOR, WORKER_LINK

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
    """The last dispatch's run is known, and the main step saw it end (no request needed)."""
    last = state.get("request-id", "").strip()
    run_id = state.get("child-run-id", "").strip()
    return (
        bool(run_id)
        and last == state.get("child-request-id", "").strip()
        and run_id == state.get("child-over", "").strip()
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
    run_id = run_left_by_main_step(client, clock, state, workflow, reporter.log, deadline=limit)
    if run_id is None:
        reporter.log("No child run is known: nothing to clean up")
        return EXIT_OK
    try:
        observation = observe_run(client, run_id, limit)
    except GitHubError as exc:
        reporter.log(f"Could not read child run {run_id}: {exc}; trying to cancel it anyway")
    else:
        if observation.finished:
            reporter.log(f"Child run {run_id} is already completed: nothing to clean up")
            return EXIT_OK
    window = max(0.0, min(timing.CANCEL_WINDOW_SECONDS, limit - clock.monotonic()))
    budget = max(0.0, limit - clock.monotonic() - window)
    result = cancel_and_confirm(
        client, clock, run_id, window=window, reset_budget=budget, log=reporter.log
    )
    url = state.get("child-run-url", "") if str(run_id) == state.get("child-run-id") else ""
    label = f"{WORKER_LINK} (run link)"
    link = f"{LINK_SEPARATOR}{label}: {url}" if url else ""
    markdown = reporter.link(label, url) if url else ""
    reporter.summary(f"**Post-step cleanup:** {escape_markdown(result.describe())} {markdown}\n")
    if result.confirmed:
        reporter.log(f"{result.describe()}{link}")
        return EXIT_OK
    reporter.error(f"{result.describe()}{link}", title="Cleanup not confirmed")
    return EXIT_FAILED
