"""`preflight`: every read the coordinator makes before a dispatch, and no POST of any kind."""

from __future__ import annotations

import argparse

from runner_queue_fallback.commands import EXIT_FAILED, EXIT_OK, Context
from runner_queue_fallback.commands.flags import (
    add_input_flags,
    add_runners_token_env_flag,
    add_token_env_flag,
    input_flags,
    warn_unknown_inputs,
    with_runners_token,
    with_token,
)
from runner_queue_fallback.core.input_names import COORDINATOR_INPUTS, SECRET_INPUTS
from runner_queue_fallback.core.inputs import env_name, read_coordinator_inputs, read_run_context
from runner_queue_fallback.core.profiles import load_profiles
from runner_queue_fallback.tools import preflight

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Input flags (a flag wins over INPUT_*) and --repository."""
    parser.description = (
        "Check a set-up without dispatching: the inputs as `coordinate` reads them (flags or "
        "INPUT_*; the token from the variable --token-env names, else INPUT_TOKEN, else "
        "GITHUB_TOKEN; the optional runners-token from --runners-token-env, else "
        "INPUT_RUNNERS-TOKEN), GITHUB_REPOSITORY (or --repository) and, "
        "when set, GITHUB_RUN_ID for the parent run. Exit 0 when every check passes, 1 when "
        "one fails, 2 on bad input."
    )
    add_input_flags(parser, "coordinator inputs (default: the INPUT_* environment variables)")
    parser.add_argument("--repository", metavar="OWNER/NAME", help="default: GITHUB_REPOSITORY")
    add_token_env_flag(parser)
    add_runners_token_env_flag(parser)
    parser.add_argument(
        "--simulate",
        nargs="?",
        const="",
        metavar="SCENARIO",
        help=(
            "run every check against the bundled fake GitHub (its child workflow "
            "runner-worker.yml on main, a live parent run): no token, no network; with a "
            "SCENARIO of `simulate --list`, its world and inputs (and its runner groups, read "
            "with a stand-in runners-token)"
        ),
    )


def run(args: argparse.Namespace, ctx: Context) -> int:
    """Every read of the coordinator before a dispatch; no POST."""
    if args.simulate is not None:
        from runner_queue_fallback.tools.simulate.run import (  # noqa: PLC0415  # only for --simulate
            preflight_on_the_fake,
        )

        scenario = args.simulate or None
        return preflight_on_the_fake(input_flags(args), main=ctx.main, scenario=scenario)
    environ = with_runners_token(with_token(ctx.environ, args.token_env), args.runners_token_env)
    environ.update({env_name(k): v for k, v in input_flags(args).items()})
    if args.repository:
        environ["GITHUB_REPOSITORY"] = args.repository
    reporter = ctx.reporter()
    for secret in SECRET_INPUTS:  # before anything can fail
        reporter.mask(environ.get(env_name(secret), "").strip())
    warn_unknown_inputs(environ, COORDINATOR_INPUTS, reporter)
    inputs = read_coordinator_inputs(environ, load_profiles())
    in_a_run = bool(environ.get("GITHUB_RUN_ID", "").strip())
    context = read_run_context(environ, in_a_run=in_a_run)
    clock = ctx.clock_factory()
    token = inputs.token.get_secret_value()
    client = ctx.client(context, token, clock, reporter, inputs.api_version)
    runners_client = ctx.runners_client(context, inputs, clock, reporter)
    passed = preflight.run(
        inputs, context, client, reporter, in_a_run=in_a_run, runners_client=runners_client
    )
    return EXIT_OK if passed else EXIT_FAILED
