"""`coordinate`: the action's main step, the fallback sequence over the candidate pools."""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from runner_queue_fallback.action.coordinator import Coordinator
from runner_queue_fallback.action.summary import publish
from runner_queue_fallback.commands import EXIT_FAILED, EXIT_OK, AppInputs, Context
from runner_queue_fallback.commands.flags import warn_unknown_inputs, with_token
from runner_queue_fallback.core.actions_io import Reporter
from runner_queue_fallback.core.clock import Clock
from runner_queue_fallback.core.errors import Interrupted, RQFError
from runner_queue_fallback.core.input_names import COORDINATOR_INPUTS
from runner_queue_fallback.core.inputs import (
    CoordinatorInputs,
    RunContext,
    read_coordinator_inputs,
    read_run_context,
)
from runner_queue_fallback.core.outcome import outcome_of_exception, title
from runner_queue_fallback.core.profiles import load_profiles
from runner_queue_fallback.github.tokens import TokenSource
from runner_queue_fallback.workflow.plan import Plan, make_plan

__all__ = ["run", "signals_interrupt"]


def run(args: argparse.Namespace, ctx: Context) -> int:
    """Run the sequence, publish outputs and summary; 0 only when the child succeeded.

    A step ended before its result is published (an input error, a signal, a bug) still sets
    the `outcome` output, and the annotation of an error of ours leads with the same word.
    """
    reporter = ctx.reporter()
    try:
        return _coordinate(with_token(ctx.environ, args.token_env), ctx, reporter)
    except BaseException as exc:  # re-raised: the root reports it, or the traceback shows it
        if "outcome" not in reporter.outputs:
            word = outcome_of_exception(exc)
            reporter.set_output("outcome", word)
            if isinstance(exc, RQFError):
                exc.title = title(word, exc)  # the root's annotation leads with the word too
        raise


def _coordinate(environ: Mapping[str, str], ctx: Context, reporter: Reporter) -> int:
    warn_unknown_inputs(environ, COORDINATOR_INPUTS, reporter)
    inputs = read_coordinator_inputs(environ, load_profiles())
    context = read_run_context(environ)
    token = inputs.token.get_secret_value()
    reporter.mask(token)
    reporter.mask(inputs.runners_token.get_secret_value())  # only the pools' access reads
    _say_hosted(make_plan(inputs.pools), reporter)
    clock = ctx.clock_factory()
    client = ctx.client(
        context,
        _credential(inputs, context, ctx, clock, reporter),
        clock,
        reporter,
        inputs.api_version,
    )
    runners = ctx.runners_client(context, inputs, clock, reporter)  # None without runners-token
    with signals_interrupt() as settle:
        coordinator = Coordinator(
            inputs, context, client, clock, reporter, rng=ctx.rng, runners=runners
        )
        result = coordinator.run()
        settle()  # a late signal must not cut the outputs and the summary short
        publish(result, reporter)
    stats = client.stats
    waited = f"; {stats.quota_waited:.0f}s waited for a spent quota" if stats.quota_waited else ""
    reporter.log(
        f"API requests: {stats.sent} sent, {stats.not_modified} answered 304 (free), "
        f"{stats.counted} counted against the rate limit{waited}"
    )
    if runners is not None and runners.stats.sent:
        reporter.log(f"runners-token: {runners.stats.sent} API requests sent (reads only)")
    return EXIT_OK if result.success else EXIT_FAILED


def _credential(
    inputs: CoordinatorInputs, context: RunContext, ctx: Context, clock: Clock, reporter: Reporter
) -> str | TokenSource:
    """`token`, or with App credentials the App's installation token for every request.

    `token` defaults to the job's GITHUB_TOKEN, so it is there beside App credentials: the App
    wins, and the log says so. The signal's cleanup goes through the same client, so it too
    sends a token minted anew when the one held has expired.
    """
    if not inputs.app:
        return inputs.token.get_secret_value()
    installation = inputs.app_installation_id
    app = AppInputs(
        inputs.app_id,
        inputs.app_private_key.get_secret_value(),
        "" if installation is None else str(installation),
    )
    tokens = ctx.app_tokens(context, app, clock, reporter, inputs.api_version)
    reporter.log(
        f"GitHub App {inputs.app_id}: every request of the coordinator goes out with the App's "
        "installation token for this repository (the installation's own API quota, minted anew "
        "before each expires); the token input is not used"
    )
    return tokens


def _say_hosted(plan: Plan, reporter: Reporter) -> None:
    """A hosted last resort is billed: say so up front, and warn of a label on trust."""
    for note in plan.hosted_notes:
        reporter.log(f"Note: {note}")
    for text in plan.hosted_warnings:
        reporter.warning(text, title="Hosted last resort")


@contextmanager
def signals_interrupt() -> Iterator[Callable[[], None]]:
    """Turn SIGINT and SIGTERM (the runner cancelling the step) into Interrupted, then restore.

    Yields `settle`: once called, signals no longer interrupt (the outputs are being written).
    """
    received: list[str] = []

    def settle() -> None:
        received.append("settled")

    if threading.current_thread() is not threading.main_thread():
        yield settle
        return

    def handler(signum: int, _frame: object) -> None:
        # The runner sends SIGINT, then SIGTERM 7.5 s later: only the first one interrupts, so
        # the second cannot break the cleanup the first one started.
        if not received:
            received.append(signal.Signals(signum).name)
            raise Interrupted(received[0])

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield settle
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
