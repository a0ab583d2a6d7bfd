"""Composition root: the only place that reads os.environ, builds a requests.Session or a SystemClock.

Subcommands: plan (and, as they land, coordinate, cleanup, guard, simulate, lint). Known errors
become `::error::` annotations and a non-zero exit code; unexpected ones keep their traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import requests

from runner_queue_fallback import __version__
from runner_queue_fallback.clock import Clock, SystemClock
from runner_queue_fallback.errors import RQFError
from runner_queue_fallback.inputs import (
    COORDINATOR_INPUTS,
    InputErrors,
    env_name,
    read_pool_settings,
)
from runner_queue_fallback.plan import make_plan
from runner_queue_fallback.profiles import load_profiles
from runner_queue_fallback.report import Reporter

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
    return parser


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
