"""`simulate`: the action's steps against the embedded fake GitHub, on virtual time."""

from __future__ import annotations

import argparse

from runner_queue_fallback.commands import Context
from runner_queue_fallback.commands.flags import add_input_flags, input_flags
from runner_queue_fallback.tools.simulate import run as simulate

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """A scenario name or --list, --json, --busy, the workload, and input flags."""
    parser.description = (
        "Run a scenario of the catalogue (default: fallback), or your own inputs against one "
        "free pool per candidate. Exit 0 when it ran (and ended as a catalogue scenario "
        "states), 1 when a catalogue scenario did not end as stated, 2 on a bad flag."
    )
    parser.add_argument(
        "scenario", nargs="?", metavar="SCENARIO", help="a name from --list (default: fallback)"
    )
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print attempts, outputs and request ledger as JSON (default: text)",
    )
    parser.add_argument(
        "--busy",
        action="append",
        metavar="POOL=DURATION",
        help="no free runner in POOL (its labels) for the first DURATION of the run (40m, 90s, 1h, "
        "always); repeatable",
    )
    parser.add_argument(
        "--workload-outcome",
        choices=("success", "failure"),
        help="how the worker's workload ends: success or failure (default: the scenario's)",
    )
    parser.add_argument(
        "--workload-minutes",
        type=float,
        metavar="MINUTES",
        help="how long the workload runs, in minutes (default: the scenario's)",
    )
    parser.add_argument(
        "--waits", metavar="STATS_JSON", help="replay waits from `stats --json` (default: none)"
    )
    parser.add_argument("--replays", metavar="N", help="with --waits: runs (default 200)")
    parser.add_argument(
        "--seed", metavar="N", help="with --waits or --write-history: random seed (default 1)"
    )
    parser.add_argument(
        "--write-history",
        metavar="FILE",
        help="write a simulated fleet's 14 days as a history file for `stats --history`",
    )
    add_input_flags(parser, "coordinator inputs (INPUT_* variables are not read here)")


def run(args: argparse.Namespace, ctx: Context) -> int:
    """Simulate on virtual time; the environment is ignored, the inputs come from flags only.

    The steps run through `ctx.main`, the composition root itself, as the runner would start them.
    """
    return simulate.run(args, input_flags(args), ctx.stdout, main=ctx.main)
