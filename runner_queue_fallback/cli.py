"""Composition root: the only place that reads os.environ, builds a requests.Session or a SystemClock.

Subcommands: plan (and, as they land, coordinate, cleanup, guard, simulate, lint). Known errors
become `::error::` annotations and a non-zero exit code; unexpected ones keep their traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import requests

from runner_queue_fallback import __version__, lint
from runner_queue_fallback.cleanup import cancel_and_confirm, observe_run, run_left_by_main_step
from runner_queue_fallback.clock import Clock, SystemClock
from runner_queue_fallback.coordinator import Coordinator
from runner_queue_fallback.errors import GitHubError, Interrupted, RQFError, UnexpectedError
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.github.versions import API_VERSION_CHOICES, AUTO
from runner_queue_fallback.guard import Guard
from runner_queue_fallback.inputs import (
    COORDINATOR_INPUTS,
    InputErrors,
    RunContext,
    env_name,
    read_coordinator_inputs,
    read_guard_inputs,
    read_pool_settings,
    read_run_context,
)
from runner_queue_fallback.plan import make_plan
from runner_queue_fallback.profiles import load_profiles
from runner_queue_fallback.report import Reporter, escape_markdown
from runner_queue_fallback.summary import publish

__all__ = ["Context", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


@dataclass
class Context:
    """What a subcommand may use: the environment, time, HTTP and where to write."""

    environ: Mapping[str, str]
    clock_factory: Callable[[], Clock]
    session_factory: Callable[[], requests.Session]
    stdout: TextIO = field(default_factory=lambda: sys.stdout)

    def reporter(self) -> Reporter:
        """A Reporter writing to stdout and to the runner's files named in the environment."""
        return Reporter(
            self.stdout,
            output_path=_path(self.environ.get("GITHUB_OUTPUT")),
            state_path=_path(self.environ.get("GITHUB_STATE")),
            summary_path=_path(self.environ.get("GITHUB_STEP_SUMMARY")),
            server_url=self.environ.get("GITHUB_SERVER_URL", "").strip().rstrip("/")
            or "https://github.com",
        )


Command = Callable[[argparse.Namespace, Context], int]


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="runner-queue-fallback",
        description="Run a one-job child workflow on the first runner pool that gives it a runner.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    plan = commands.add_parser(
        "plan", help="show the candidate pools, deadlines and the timeout the job needs"
    )
    _add_input_flags(plan)
    plan.add_argument("--json", action="store_true", help="print the plan as JSON")
    plan.set_defaults(run=_run_plan)
    lint_parser = commands.add_parser(
        "lint", help="check a coordinator workflow and its child against the spec's rules"
    )
    lint.add_arguments(lint_parser)
    lint_parser.set_defaults(run=_run_lint)
    coordinate = commands.add_parser(
        "coordinate", help="run the fallback sequence (the action's main step)"
    )
    coordinate.set_defaults(run=_run_coordinate)
    cleanup = commands.add_parser(
        "cleanup", help="cancel and confirm a child left running (the post step)"
    )
    cleanup.set_defaults(run=_run_cleanup)
    guard = commands.add_parser(
        "guard", help="the child's first step: check identity, parent and source"
    )
    guard.set_defaults(run=_run_guard)
    _add_simulate_parser(commands)
    _add_stats_parser(commands)
    return parser


def _add_stats_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from runner_queue_fallback.stats import command  # noqa: PLC0415  # stats stays out of the action's path

    stats = commands.add_parser(
        "stats", help="measure each pool's queue waits from past children; recommend an order"
    )
    command.add_arguments(stats)
    stats.set_defaults(run=_run_stats)


def _run_stats(args: argparse.Namespace, ctx: Context) -> int:
    from runner_queue_fallback.stats import command  # noqa: PLC0415  # see _add_stats_parser

    return command.run(args, ctx.environ, ctx.clock_factory(), ctx.session_factory, ctx.stdout)


def _add_simulate_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    simulate = commands.add_parser(
        "simulate",
        help="run the real coordinator, post step and guard against a fake GitHub, on virtual time",
        description=(
            "Run a scenario of the catalogue (default: fallback), or your own inputs against one "
            "free pool per candidate. Exit 0 when it ran (and ended as a catalogue scenario "
            "states), 1 when a catalogue scenario did not end as stated, 2 on a bad flag."
        ),
    )
    simulate.add_argument("scenario", nargs="?", metavar="SCENARIO", help="a name from --list")
    simulate.add_argument("--list", action="store_true", help="list the scenarios and exit")
    simulate.add_argument("--json", action="store_true", help="print attempts, outputs, ledger")
    simulate.add_argument(
        "--busy",
        action="append",
        metavar="POOL=DURATION",
        help="no free runner in POOL (its labels) for DURATION (40m, 90s, 1h, always); repeatable",
    )
    simulate.add_argument("--workload-outcome", choices=("success", "failure"))
    simulate.add_argument("--workload-minutes", type=float, metavar="MINUTES")
    simulate.add_argument("--waits", metavar="STATS_JSON", help="replay waits from `stats --json`")
    simulate.add_argument("--replays", metavar="N", help="with --waits: runs (default 200)")
    simulate.add_argument("--seed", metavar="N", help="with --waits: random seed (default 1)")
    group = simulate.add_argument_group("coordinator inputs (INPUT_* variables are not read here)")
    for name in COORDINATOR_INPUTS:
        if name != "token":
            group.add_argument(f"--{name}", dest=f"input:{name}", metavar="VALUE")
    simulate.set_defaults(run=_run_simulate)


def _add_input_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per coordinator input (not the token); a flag wins over INPUT_* in the environment."""
    group = parser.add_argument_group(
        "coordinator inputs (default: the INPUT_* environment variables)"
    )
    for name in COORDINATOR_INPUTS:
        if name != "token":
            group.add_argument(f"--{name}", dest=f"input:{name}", metavar="VALUE")


def _inputs_environ(args: argparse.Namespace, environ: Mapping[str, str]) -> dict[str, str]:
    merged = dict(environ)
    for key, value in vars(args).items():
        if key.startswith("input:") and value is not None:
            merged[env_name(key.removeprefix("input:"))] = value
    return merged


def _run_plan(args: argparse.Namespace, ctx: Context) -> int:
    settings = read_pool_settings(_inputs_environ(args, ctx.environ), load_profiles())
    plan = make_plan(settings)
    print(json.dumps(plan.as_dict(), indent=2) if args.json else plan.render(), file=ctx.stdout)
    return EXIT_OK


def _client(
    ctx: Context,
    run: RunContext,
    token: str,
    clock: Clock,
    reporter: Reporter,
    *,
    api_version: str = AUTO,
) -> GitHubClient:
    return GitHubClient(
        ctx.session_factory(),
        run.api_url,
        run.repository,
        token,
        clock,
        log=reporter.log,
        api_version=api_version,
    )


@contextmanager
def _signals_interrupt() -> Iterator[Callable[[], None]]:
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


def _run_coordinate(_args: argparse.Namespace, ctx: Context) -> int:
    inputs = read_coordinator_inputs(ctx.environ, load_profiles())
    run = read_run_context(ctx.environ)
    reporter = ctx.reporter()
    token = inputs.token.get_secret_value()
    reporter.mask(token)
    clock = ctx.clock_factory()
    client = _client(ctx, run, token, clock, reporter, api_version=inputs.api_version)
    with _signals_interrupt() as settle:
        result = Coordinator(inputs, run, client, clock, reporter).run()
        settle()  # a late signal must not cut the outputs and the summary short
        publish(result, reporter)
    stats = client.stats
    reporter.log(
        f"API requests: {stats.sent} sent, {stats.not_modified} answered 304 (free), "
        f"{stats.counted} counted against the rate limit"
    )
    return EXIT_OK if result.success else EXIT_FAILED


def _run_cleanup(_args: argparse.Namespace, ctx: Context) -> int:
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


def _clean_up_after_main_step(
    ctx: Context, reporter: Reporter, state: Mapping[str, str], token: str
) -> int:
    run = read_run_context(ctx.environ)
    clock = ctx.clock_factory()
    # The version the main step settled on (saved before each dispatch); auto when it is missing.
    saved = state.get("api-version", "").strip()
    version = saved if saved in API_VERSION_CHOICES else AUTO
    client = _client(ctx, run, token, clock, reporter, api_version=version)
    workflow = ctx.environ.get(env_name("workflow"), "").strip().removeprefix(".github/workflows/")
    run_id = run_left_by_main_step(client, clock, state, workflow, reporter.log)
    if run_id is None:
        reporter.log("No child run is known: nothing to clean up")
        return EXIT_OK
    try:
        observation = observe_run(client, run_id, None)
    except GitHubError as exc:
        reporter.log(f"Could not read child run {run_id}: {exc}; trying to cancel it anyway")
    else:
        if observation.finished:
            reporter.log(f"Child run {run_id} is already completed: nothing to clean up")
            return EXIT_OK
    result = cancel_and_confirm(client, clock, run_id, log=reporter.log)
    url = state.get("child-run-url", "") if str(run_id) == state.get("child-run-id") else ""
    link = f" View worker job logs here (run link): {url}" if url else ""
    markdown = reporter.link("View worker job logs here (run link)", url) if url else ""
    reporter.summary(f"**Post-step cleanup:** {escape_markdown(result.describe())} {markdown}\n")
    if result.confirmed:
        reporter.log(f"{result.describe()}{link}")
        return EXIT_OK
    reporter.error(f"{result.describe()}{link}", title="Cleanup not confirmed")
    return EXIT_FAILED


def _run_guard(_args: argparse.Namespace, ctx: Context) -> int:
    """The child's startup guard: exit 0 only when every check holds."""
    reporter = ctx.reporter()
    reporter.mask(ctx.environ.get(env_name("token"), "").strip())  # before anything can fail
    inputs = read_guard_inputs(ctx.environ)
    run = read_run_context(ctx.environ)
    token = inputs.token.get_secret_value()
    reporter.mask(token)
    clock = ctx.clock_factory()
    try:
        client = _client(ctx, run, token, clock, reporter, api_version=inputs.api_version)
        result = Guard(inputs, run, client, clock, reporter).run()
        result.publish(reporter)
    except Exception as exc:  # noqa: BLE001  # the guard fails closed, whatever happened
        reporter.error(
            f"{UnexpectedError('the guard', exc)}; the workload is refused",
            title="Guard refused the workload",
        )
        return EXIT_FAILED
    return EXIT_OK if result.passed else EXIT_FAILED


def _run_simulate(args: argparse.Namespace, ctx: Context) -> int:
    """Simulate on virtual time; the environment is ignored, the inputs come from flags only."""
    from runner_queue_fallback import simulate  # noqa: PLC0415  # simulate drives cli.main: a cycle

    inputs = {
        key.removeprefix("input:"): value
        for key, value in vars(args).items()
        if key.startswith("input:") and value is not None
    }
    return simulate.run(args, inputs, ctx.stdout)


def _run_lint(args: argparse.Namespace, ctx: Context) -> int:
    return lint.run(args, ctx.stdout)


def main(
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    clock: Clock | None = None,
    session: requests.Session | None = None,
) -> int:
    """Run one subcommand and return its exit code."""
    ctx = Context(
        environ=dict(os.environ) if environ is None else environ,
        clock_factory=(lambda: clock) if clock is not None else SystemClock,
        session_factory=(lambda: session) if session is not None else requests.Session,
    )
    parser = _build_parser()
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    except SystemExit as exc:  # argparse exits on --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    command: Command = args.run
    try:
        return command(args, ctx)
    except InputErrors as exc:
        reporter = Reporter(ctx.stdout)
        for error in exc.errors:
            reporter.error(str(error), title=exc.title)
        return EXIT_BAD_INPUT
    except RQFError as exc:
        Reporter(ctx.stdout).error(str(exc), title=exc.title)
        return EXIT_FAILED
