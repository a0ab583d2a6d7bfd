"""`preflight`: every read the coordinator makes before a dispatch, and no POST of any kind."""

from __future__ import annotations

import argparse

from runner_queue_fallback.commands import EXIT_FAILED, EXIT_OK, Context
from runner_queue_fallback.commands.flags import add_input_flags, input_flags
from runner_queue_fallback.core.inputs import env_name, read_coordinator_inputs, read_run_context
from runner_queue_fallback.core.profiles import load_profiles
from runner_queue_fallback.tools import preflight

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Input flags (a flag wins over INPUT_*) and --repository."""
    parser.description = (
        "Check a set-up without dispatching: the inputs as `coordinate` reads them (flags or "
        "INPUT_*; the token only as INPUT_TOKEN), GITHUB_REPOSITORY (or --repository) and, "
        "when set, GITHUB_RUN_ID for the parent run. Exit 0 when every check passes, 1 when "
        "one fails, 2 on bad input."
    )
    add_input_flags(parser, "coordinator inputs (default: the INPUT_* environment variables)")
    parser.add_argument("--repository", metavar="OWNER/NAME", help="default: GITHUB_REPOSITORY")


def run(args: argparse.Namespace, ctx: Context) -> int:
    """Every read of the coordinator before a dispatch; no POST."""
    environ = {**ctx.environ, **{env_name(k): v for k, v in input_flags(args).items()}}
    if args.repository:
        environ["GITHUB_REPOSITORY"] = args.repository
    reporter = ctx.reporter()
    reporter.mask(environ.get(env_name("token"), "").strip())  # before anything can fail
    inputs = read_coordinator_inputs(environ, load_profiles())
    in_a_run = bool(environ.get("GITHUB_RUN_ID", "").strip())
    context = read_run_context(environ, in_a_run=in_a_run)
    clock = ctx.clock_factory()
    token = inputs.token.get_secret_value()
    client = ctx.client(context, token, clock, reporter, inputs.api_version)
    passed = preflight.run(inputs, context, client, reporter, in_a_run=in_a_run)
    return EXIT_OK if passed else EXIT_FAILED
