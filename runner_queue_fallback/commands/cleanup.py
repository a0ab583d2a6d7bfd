"""`cleanup`: the action's post step. Cancel and confirm a child the main step left running."""

from __future__ import annotations

import argparse

from runner_queue_fallback.action.post_step import clean_up
from runner_queue_fallback.commands import EXIT_FAILED, EXIT_OK, AppInputs, Context
from runner_queue_fallback.core.clock import Clock
from runner_queue_fallback.core.hand_off import HandOff
from runner_queue_fallback.core.inputs import env_name, read_run_context
from runner_queue_fallback.github.client import GitHubClient

__all__ = ["run"]


def run(_args: argparse.Namespace, ctx: Context) -> int:
    """The post step: the main step saved the active child's run id in GITHUB_STATE."""
    reporter = ctx.reporter()
    token = ctx.environ.get(env_name("token"), "").strip()

    def connect(version: str) -> tuple[GitHubClient, Clock]:
        context = read_run_context(ctx.environ)
        clock = ctx.clock_factory()
        # The runner passes the inputs to the post step too: with App credentials it mints its
        # own token (the main step's has expired, or soon will), never from GITHUB_STATE.
        app = AppInputs.from_environ(ctx.environ)
        if app is None:
            return ctx.client(context, token, clock, reporter, version), clock
        tokens = ctx.app_tokens(context, app, clock, reporter, version)
        reporter.log(f"GitHub App {app.app_id}: the post step mints its own installation token")
        return ctx.client(context, tokens, clock, reporter, version), clock

    workflow = ctx.environ.get(env_name("workflow"), "").strip().removeprefix(".github/workflows/")
    over = clean_up(
        HandOff.load(ctx.environ), reporter, token=token, workflow=workflow, connect=connect
    )
    return EXIT_OK if over else EXIT_FAILED
