"""`lint`: check a consumer's coordinator workflow and its child (the rules live in `tools/lint/`)."""

from __future__ import annotations

import argparse

from runner_queue_fallback.commands import Context
from runner_queue_fallback.tools import lint

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The files to check, --dir, --format and --rules."""
    lint.add_arguments(parser)


def run(args: argparse.Namespace, ctx: Context) -> int:
    """Lint the files named in `args`: 1 if any error was found, 2 for a usage problem."""
    return lint.run(args, ctx.stdout)
