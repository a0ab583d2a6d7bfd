"""Composition root: the only place that reads os.environ, builds a requests.Session or a SystemClock.

`main` parses the command line, builds the `Context` (the real environment, clock and HTTP session,
unless a test or the simulator passes its own) and runs one subcommand. Every subcommand is one
line of `SUBCOMMANDS`, naming the module that implements it (`runner_queue_fallback.commands`);
only the chosen one is imported, so `coordinate --help` loads almost nothing and `guard` never
loads the simulator or lint. Known errors become `::error::` annotations and a non-zero exit code;
unexpected ones keep their traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import random
import sys
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, NamedTuple

from runner_queue_fallback import __version__
from runner_queue_fallback.clock import SystemClock
from runner_queue_fallback.commands import EXIT_BAD_INPUT, EXIT_FAILED, Command, Context
from runner_queue_fallback.errors import InputErrors, RQFError
from runner_queue_fallback.report import Reporter

if TYPE_CHECKING:
    import requests

    from runner_queue_fallback.clock import Clock

__all__ = ["SUBCOMMANDS", "Subcommand", "main"]


class Subcommand(NamedTuple):
    """A subcommand: the module with its `run(args, ctx)`, and its line in `--help`."""

    module: str
    help: str
    #: the module also defines `add_arguments(parser)`; without flags, `--help` never imports it
    flags: bool = False


_COMMANDS = "runner_queue_fallback.commands"

#: Every subcommand, in the order `--help` lists them.
SUBCOMMANDS: dict[str, Subcommand] = {
    "plan": Subcommand(
        f"{_COMMANDS}.plan",
        "show the candidate pools, deadlines and the timeout the job needs",
        flags=True,
    ),
    "lint": Subcommand(
        f"{_COMMANDS}.lint",
        "check a coordinator workflow and its child against the spec's rules",
        flags=True,
    ),
    "coordinate": Subcommand(
        f"{_COMMANDS}.coordinate", "run the fallback sequence (the action's main step)"
    ),
    "cleanup": Subcommand(
        f"{_COMMANDS}.cleanup", "cancel and confirm a child left running (the post step)"
    ),
    "guard": Subcommand(
        f"{_COMMANDS}.guard", "the child's first step: check identity, parent and source"
    ),
    "simulate": Subcommand(
        f"{_COMMANDS}.simulate",
        "run the real coordinator, post step and guard against a fake GitHub, on virtual time",
        flags=True,
    ),
    "preflight": Subcommand(
        f"{_COMMANDS}.preflight",
        "every read the coordinator makes before dispatching (token, refs, child file), no POST",
        flags=True,
    ),
    "stats": Subcommand(
        f"{_COMMANDS}.stats",
        "measure each pool's queue waits from past children; recommend an order",
        flags=True,
    ),
}


def _load(subcommand: Subcommand) -> ModuleType:
    return importlib.import_module(subcommand.module)


def _chosen(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line (the root's own options take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def _build_parser(chosen: str | None) -> argparse.ArgumentParser:
    """Every subcommand by name and help; the flags of the chosen one only."""
    parser = argparse.ArgumentParser(
        prog="runner-queue-fallback",
        description="Run a one-job child workflow on the first runner pool that gives it a runner.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, subcommand in SUBCOMMANDS.items():
        sub = commands.add_parser(name, help=subcommand.help, description=subcommand.help)
        if name == chosen and subcommand.flags:
            _load(subcommand).add_arguments(sub)
    return parser


def _new_session() -> requests.Session:
    import requests  # noqa: PLC0415  # only a subcommand that talks to GitHub pays for loading it

    return requests.Session()


def _spread_source(environ: Mapping[str, str] | None, *, simulated: bool) -> random.Random:
    """The random source that spreads admission waits across a fleet (not a secret).

    On a real runner it is seeded by the OS, so coordinators of one run (a matrix) differ too.
    With an injected clock (a simulation or a test) it is seeded by the run's identity, so every
    run of a simulation is the same and each coordinator of a simulated fleet differs.
    """
    if not simulated or environ is None:
        return random.Random()  # seeded by the OS; spreading waits needs no secrecy
    identity = "/".join(
        environ.get(name, "")
        for name in ("GITHUB_REPOSITORY", "GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "GITHUB_JOB")
    )
    return random.Random(identity)  # reproducible by design


def main(
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    clock: Clock | None = None,
    session: requests.Session | None = None,
) -> int:
    """Run one subcommand and return its exit code."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    parser = _build_parser(_chosen(arguments))
    try:
        args = parser.parse_args(arguments)
    except SystemExit as exc:  # argparse exits on --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    ctx = Context(
        environ=dict(os.environ) if environ is None else environ,
        clock_factory=(lambda: clock) if clock is not None else SystemClock,
        session_factory=(lambda: session) if session is not None else _new_session,
        main=main,
        rng=_spread_source(environ, simulated=clock is not None),
    )
    command: Command = _load(SUBCOMMANDS[args.command]).run
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
