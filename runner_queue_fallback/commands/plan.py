"""`plan`: the candidate pools, their deadlines and the timeout the caller's job needs."""

from __future__ import annotations

import argparse
import json
import sys

from runner_queue_fallback.commands import EXIT_OK, Context
from runner_queue_fallback.commands.flags import add_input_flags, input_flags
from runner_queue_fallback.core.actions_io import escape_json, escape_log_line
from runner_queue_fallback.core.input_names import COORDINATOR_INPUTS, unknown_inputs
from runner_queue_fallback.core.inputs import env_name, read_pool_settings
from runner_queue_fallback.core.profiles import load_profiles
from runner_queue_fallback.workflow.plan import make_plan

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Input flags (a flag wins over INPUT_* in the environment) and --json."""
    add_input_flags(parser, "coordinator inputs (default: the INPUT_* environment variables)")
    parser.add_argument(
        "--json", action="store_true", help="print the plan as JSON (default: text)"
    )


def run(args: argparse.Namespace, ctx: Context) -> int:
    """Print the plan for the inputs in the environment and the flags."""
    environ = {**ctx.environ, **{env_name(k): v for k, v in input_flags(args).items()}}
    # warnings are annotations on stdout; beside --json they go to stderr, as plain lines
    for warning in unknown_inputs(environ, COORDINATOR_INPUTS):
        if args.json:
            print(f"warning: {escape_log_line(warning)}", file=sys.stderr)
        else:
            ctx.reporter().warning(warning, title="Unknown input")
    runners_token = bool(environ.get(env_name("runners-token"), "").strip())
    plan = make_plan(read_pool_settings(environ, load_profiles()), runners_token=runners_token)
    if args.json:
        print(escape_json(json.dumps(plan.as_dict(), indent=2)), file=ctx.stdout)
    else:  # the groups and labels are the `runners` input's: every line is one log line
        print("\n".join(map(escape_log_line, plan.render().split("\n"))), file=ctx.stdout)
    return EXIT_OK
