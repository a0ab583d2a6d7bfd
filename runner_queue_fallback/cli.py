"""Composition root: the only place that reads os.environ or builds the real clock and HTTP session.

`main` parses the command line, builds the `Context` (the real environment, clock and HTTP session,
unless a test or the simulator passes its own) and runs one subcommand. Every subcommand is one
line of `SUBCOMMANDS`, naming the module that implements it (`runner_queue_fallback.commands`);
only the chosen one is imported, so `coordinate --help` loads almost nothing and `guard` never
loads the simulator or lint. Known errors become `::error::` annotations and a non-zero exit code;
unexpected ones keep their traceback.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import importlib
import os
import random
import re
import sys
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn, TextIO

from runner_queue_fallback import __version__
from runner_queue_fallback.commands import EXIT_BAD_INPUT, EXIT_FAILED, Command, Context
from runner_queue_fallback.core.actions_io import Reporter, escape_log_line, escape_markdown
from runner_queue_fallback.core.clock import SystemClock
from runner_queue_fallback.core.errors import InputErrors, RQFError
from runner_queue_fallback.core.hand_off import STATE_ENV
from runner_queue_fallback.core.input_names import COORDINATOR_INPUTS, GUARD_INPUTS, TOKEN_VARIABLES

if TYPE_CHECKING:
    import requests

    from runner_queue_fallback.core.clock import Clock

__all__ = ["EXIT_READER_GONE", "SUBCOMMANDS", "Subcommand", "input_errors_summary", "main"]


class Subcommand(NamedTuple):
    """A subcommand: the module with its `run(args, ctx)`, and its line in `--help`."""

    module: str
    help: str
    #: the module also defines `add_arguments(parser)`; without flags, `--help` never imports it
    flags: bool = False
    #: the environment variables it reads, listed by its `--help` (kept here: `--help` is light)
    reads: tuple[str, ...] = ()
    #: `module:function` adding the flags of a heavy subcommand from a light module (default:
    #: the subcommand's own `add_arguments`)
    arguments: str = ""


_COMMANDS = "runner_queue_fallback.commands"

#: The coordinator's inputs as the runner passes them (hyphens kept), from the input tables.
_COORDINATOR_ENV = tuple(f"INPUT_{name.upper()}" for name in COORDINATOR_INPUTS)
_GUARD_ENV = tuple(f"INPUT_{name.upper()}" for name in GUARD_INPUTS)
#: What the runner tells every step: the run, the API, and the files for outputs and summary.
_RUN_ENV = ("GITHUB_REPOSITORY", "GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "GITHUB_API_URL")
_FILES_ENV = ("GITHUB_SERVER_URL", "GITHUB_OUTPUT", "GITHUB_STATE", "GITHUB_STEP_SUMMARY")
#: What tells the coordinator when its own job ends (its workflow file, the job's key, its runner).
_JOB_ENV = ("GITHUB_WORKFLOW_REF", "GITHUB_WORKFLOW_SHA", "GITHUB_JOB", "RUNNER_NAME")
#: Every subcommand, in the order `--help` lists them.
SUBCOMMANDS: dict[str, Subcommand] = {
    "plan": Subcommand(
        f"{_COMMANDS}.plan",
        "show the candidate pools, deadlines and the timeout the job needs",
        flags=True,
        reads=_COORDINATOR_ENV[:-1],
    ),
    "lint": Subcommand(
        f"{_COMMANDS}.lint",
        "check a coordinator workflow and its child against the spec's rules",
        flags=True,
    ),
    "coordinate": Subcommand(
        f"{_COMMANDS}.coordinate",
        "run the fallback sequence (the action's main step)",
        flags=True,
        arguments=f"{_COMMANDS}.flags:add_token_env_flag",
        reads=(*_COORDINATOR_ENV, "GITHUB_TOKEN", *_RUN_ENV, *_JOB_ENV, *_FILES_ENV),
    ),
    "cleanup": Subcommand(
        f"{_COMMANDS}.cleanup",
        "cancel and confirm a child left running (the post step)",
        reads=("INPUT_WORKFLOW", "INPUT_TOKEN", *STATE_ENV, *_RUN_ENV, *_FILES_ENV),
    ),
    "guard": Subcommand(
        f"{_COMMANDS}.guard",
        "the child's first step: check identity, parent and source",
        reads=(*_GUARD_ENV, *_RUN_ENV, *_FILES_ENV, "RUNNER_NAME"),
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
        reads=(*_COORDINATOR_ENV, "GITHUB_TOKEN", *_RUN_ENV, "GITHUB_STEP_SUMMARY"),
    ),
    "stats": Subcommand(
        f"{_COMMANDS}.stats",
        "measure each pool's queue waits from past children; recommend an order",
        flags=True,
        reads=(
            "GITHUB_TOKEN (or the variable --token-env names)",
            "GITHUB_REPOSITORY",
            "GITHUB_API_URL",
        ),
    ),
}


def _load(subcommand: Subcommand) -> ModuleType:
    return importlib.import_module(subcommand.module)


def _chosen(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line (the root's own options take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


#: argparse's message for a value outside `choices` (a command, or a flag's choice).
_INVALID_CHOICE = re.compile(
    r"invalid choice: '?(?P<given>[^' ]*)'? \(choose from (?P<options>.*)\)"
)


def _did_you_mean(given: str, options: Sequence[str]) -> str:
    """` (did you mean X?)` for the option closest to a typo, else nothing."""
    found = difflib.get_close_matches(given, options, n=1)
    return f" (did you mean {found[0]}?)" if found else ""


class _Parser(argparse.ArgumentParser):
    """argparse, whose error quotes the command line (which may hold anything) as one log line.

    It also says which command or choice a typo most likely meant, and keeps the parser of each
    subcommand, so that an unknown flag is reported with that subcommand's usage.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """The argparse parser (its own signature), plus the parsers of its subcommands by name."""
        super().__init__(*args, **kwargs)
        self.commands: dict[str, _Parser] = {}

    def error(self, message: str) -> NoReturn:
        """Print usage and the error, the arguments it quotes escaped, then exit 2."""
        choice = _INVALID_CHOICE.search(message)
        if choice is not None:
            options = [option.strip(" '") for option in choice["options"].split(",")]
            message += _did_you_mean(choice["given"], options)
        super().error(escape_log_line(message))

    def unknown(self, extra: Sequence[str]) -> NoReturn:
        """Refuse arguments this (sub)command does not take, naming the flag a typo meant.

        A flag's value is never repeated (it may be a secret: `--token abc`), and `--token`
        gets the way to give a token instead of the usage.
        """
        names = [arg.partition("=")[0] for arg in extra if arg.startswith("-")]
        if "--token" in names:
            self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {_TOKEN_FLAG}\n")
        flags = sorted(set(re.findall(r"(?<![\w-])--[a-z][\w-]*", self.format_help())))
        hints = [_did_you_mean(name, flags) for name in names if name.startswith("--")]
        self.error(f"unrecognized arguments: {' '.join(_without_values(extra))}{''.join(hints)}")


#: The answer to `--token VALUE`: no flag takes a token (shell history, process lists).
_TOKEN_FLAG = (
    "there is no --token flag: a token on the command line lands in shell history and process "
    f"lists. Export it as {' or '.join(TOKEN_VARIABLES)}, or name the variable that holds it with "
    "--token-env NAME"
)


def _without_values(extra: Sequence[str]) -> list[str]:
    """The unknown arguments with every flag's value left out (`--x=v`, or `--x v`)."""
    shown: list[str] = []
    after_flag = False
    for arg in extra:
        if arg.startswith("-"):
            name, equals, _ = arg.partition("=")
            shown.append(f"{name}=..." if equals else name)
            after_flag = not equals
        elif after_flag:
            shown.append("...")
            after_flag = False
        else:
            shown.append(arg)
    return shown


@functools.cache
def _build_parser(chosen: str | None) -> _Parser:
    """Every subcommand by name and help; the flags of the chosen one only.

    Built once per subcommand: argparse looks up a translation catalogue (a dozen `stat` calls)
    for every help string, which made building it cost more than a simulated run's requests.
    """
    parser = _Parser(
        prog="runner-queue-fallback",
        allow_abbrev=False,
        description="Run a one-job child workflow on the first runner pool that gives it a runner.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, subcommand in SUBCOMMANDS.items():
        sub = commands.add_parser(
            name,
            help=subcommand.help,
            description=subcommand.help,
            epilog=_reads(subcommand),
            formatter_class=argparse.RawDescriptionHelpFormatter,
            allow_abbrev=False,  # `--runner-typ` is a typo to name, not `--runner-type`
        )
        parser.commands[name] = sub
        if name == chosen and subcommand.flags:
            module, _, function = (subcommand.arguments or subcommand.module).partition(":")
            getattr(importlib.import_module(module), function or "add_arguments")(sub)
    return parser


def _parse(arguments: Sequence[str]) -> argparse.Namespace:
    """The parsed command line; an unknown argument is refused by the subcommand it follows."""
    parser = _build_parser(_chosen(arguments))
    args, extra = parser.parse_known_args(arguments)
    if extra:
        parser.commands[args.command].unknown(extra)
    return args


def _reads(subcommand: Subcommand) -> str:
    """The `--help` epilog: the environment variables the subcommand reads, one a line."""
    if not subcommand.reads:
        return "environment variables read: none"
    return "environment variables read:\n" + "\n".join(f"  {name}" for name in subcommand.reads)


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


def input_errors_summary(command: str, exc: InputErrors) -> str:
    """The short step summary of a run stopped by its inputs: each problem, and no request.

    Its headline leads with `error`, the coordinator's `outcome` of a run stopped so.
    """
    headline = f"error: invalid input (runner-queue-fallback {escape_markdown(command)})"
    lines = [f"## {headline}", ""]
    lines += [f"- {escape_markdown(str(error))}" for error in exc.errors]
    lines += ["", "No request was sent to GitHub. Correct the inputs and run again.", ""]
    return "\n".join(lines)


#: The exit code when stdout's reader left early (`simulate --json | head -c 100`): what a shell
#: reports for a writer killed by SIGPIPE (128 + 13). 1 and 2 already mean a failed run or input.
EXIT_READER_GONE = 141


def _reader_gone(stdout: TextIO) -> int:
    """Stop quietly when the reader of stdout has gone, without a BrokenPipeError traceback.

    Python's own recipe (the `signal` module's notes on SIGPIPE): point the stdout descriptor at
    devnull, so that the interpreter's flush at exit has nowhere left to fail.
    """
    try:
        descriptor = stdout.fileno()
    except (AttributeError, OSError, ValueError):  # an in-memory stream: no descriptor to mend
        return EXIT_READER_GONE
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, descriptor)
    os.close(devnull)
    return EXIT_READER_GONE


def main(
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    clock: Clock | None = None,
    session: requests.Session | None = None,
) -> int:
    """Run one subcommand and return its exit code (141, quietly, if stdout's reader left)."""
    try:
        code = _main(argv, environ, clock=clock, session=session)
        sys.stdout.flush()  # a reader that left is met here, not by the interpreter's exit
    except BrokenPipeError:
        return _reader_gone(sys.stdout)
    return code


def _main(
    argv: Sequence[str] | None,
    environ: Mapping[str, str] | None,
    *,
    clock: Clock | None,
    session: requests.Session | None,
) -> int:
    """`main` for one command line: parse it, build the context, run the subcommand."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    try:
        args = _parse(arguments)
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
        reporter = ctx.reporter()
        for error in exc.errors:
            reporter.error(str(error), title=exc.title)
        reporter.summary(input_errors_summary(args.command, exc))
        return EXIT_BAD_INPUT
    except RQFError as exc:
        Reporter(ctx.stdout).error(str(exc), title=exc.title)
        return EXIT_FAILED
