"""`guard`: the child's first step; the workload runs only when every check holds."""

from __future__ import annotations

import argparse

from runner_queue_fallback.action.guard import Guard
from runner_queue_fallback.commands import EXIT_FAILED, EXIT_OK, Context
from runner_queue_fallback.core.errors import UnexpectedError
from runner_queue_fallback.core.input_names import GUARD_INPUTS, unknown_inputs
from runner_queue_fallback.core.inputs import env_name, read_guard_inputs, read_run_context

__all__ = ["run"]


def run(_args: argparse.Namespace, ctx: Context) -> int:
    """Check identity, parent and source: exit 0 only when every check holds."""
    reporter = ctx.reporter()
    reporter.mask(ctx.environ.get(env_name("token"), "").strip())  # before anything can fail
    for warning in unknown_inputs(ctx.environ, GUARD_INPUTS):
        reporter.warning(warning, title="Unknown input")
    inputs = read_guard_inputs(ctx.environ)
    context = read_run_context(ctx.environ)
    token = inputs.token.get_secret_value()
    reporter.mask(token)
    clock = ctx.clock_factory()
    try:
        client = ctx.client(context, token, clock, reporter, inputs.api_version)
        result = Guard(inputs, context, client, clock, reporter).run()
        result.publish(reporter)
    except Exception as exc:  # noqa: BLE001  # the guard fails closed, whatever happened
        reporter.error(
            f"{UnexpectedError('the guard', exc)}; the workload is refused",
            title="Guard refused the workload",
        )
        return EXIT_FAILED
    return EXIT_OK if result.passed else EXIT_FAILED
