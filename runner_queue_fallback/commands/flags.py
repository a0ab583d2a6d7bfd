"""One flag per coordinator input (not the token), for `plan` and `simulate`."""

from __future__ import annotations

import argparse

from runner_queue_fallback.inputs import COORDINATOR_INPUTS

__all__ = ["add_input_flags", "input_flags"]

_PREFIX = "input:"


def add_input_flags(parser: argparse.ArgumentParser, title: str) -> None:
    """Add `--workflow`, `--runner-type` and the other inputs as a group titled `title`."""
    group = parser.add_argument_group(title)
    for name in COORDINATOR_INPUTS:
        if name != "token":
            group.add_argument(f"--{name}", dest=f"{_PREFIX}{name}", metavar="VALUE")


def input_flags(args: argparse.Namespace) -> dict[str, str]:
    """The inputs given as flags, by input name (as spelled in action.yml)."""
    return {
        key.removeprefix(_PREFIX): value
        for key, value in vars(args).items()
        if key.startswith(_PREFIX) and value is not None
    }
