"""`stats`: each pool's queue waits from past children, and a recommended order."""

from __future__ import annotations

import argparse

from runner_queue_fallback.commands import Context
from runner_queue_fallback.tools.stats import run as command

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The workflow, the window, the bounds and the output formats."""
    command.add_arguments(parser)


def run(args: argparse.Namespace, ctx: Context) -> int:
    """Read the history, estimate, recommend, print."""
    return command.run(args, ctx.environ, ctx.clock_factory(), ctx.session_factory, ctx.stdout)
