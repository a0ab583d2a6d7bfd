"""One flag per coordinator input (not the token), for `plan` and `simulate`."""

from __future__ import annotations

import argparse

from runner_queue_fallback.core.inputs import COORDINATOR_INPUTS
from runner_queue_fallback.core.profiles import describe_runner_types, load_profiles

__all__ = ["INPUT_HELP", "add_input_flags", "input_flags"]

_PREFIX = "input:"

_NEEDED = "(preflight needs it; default: none)"
#: Each input flag's help: what it takes, the allowed values and the default (as in action.yml;
#: a test compares the defaults).
INPUT_HELP = {
    "workflow": f"child workflow file name, e.g. runner-worker.yml {_NEEDED}",
    "workflow-ref": f"branch or tag holding the child workflow, e.g. main {_NEEDED}",
    "source-ref": f"full ref: refs/heads/..., refs/tags/..., refs/pull/N/merge {_NEEDED}",
    "source-sha": f"full 40-hex SHA that source-ref must point at {_NEEDED}",
    "runner-type": f"{describe_runner_types(load_profiles())} (required; no default)",
    "queue-policy": "standard or extended (default: standard)",
    "queue-timeout-minutes": (
        "1 to 60: the queue deadline of every candidate without its own (default: the policy's)"
    ),
    "execution-timeout-minutes": "whole minutes, 1 to 4320 (default: 180)",
    "admission-timeout-minutes": "0 to 360; 0 fails at once on a low API quota (default: 60)",
    "runners": (
        'JSON array of 1 to 7 {"group", "labels", "queue-timeout-minutes", "os", "arch", "gpus"} '
        "objects (group, labels or both) replacing the profile's list, optionally ending with "
        'one {"hosted": "ubuntu-24.04"} (default: the profile)'
    ),
    "hosted-last-resort": (
        "a GitHub-hosted Linux label tried after every profile pool, CPU types only, not with "
        "--runners (default: none)"
    ),
    "workload": "JSON object forwarded to the child, never secrets (default: {})",
    "source-policy": "current or pinned-after-start (default: current)",
    "api-version": "auto, 2026-03-10 or 2022-11-28 (default: auto)",
}


def add_input_flags(parser: argparse.ArgumentParser, title: str) -> None:
    """Add `--workflow`, `--runner-type` and the other inputs as a group titled `title`."""
    group = parser.add_argument_group(title)
    for name in COORDINATOR_INPUTS:
        if name != "token":
            group.add_argument(
                f"--{name}", dest=f"{_PREFIX}{name}", metavar="VALUE", help=INPUT_HELP[name]
            )


def input_flags(args: argparse.Namespace) -> dict[str, str]:
    """The inputs given as flags, by input name (as spelled in action.yml)."""
    return {
        key.removeprefix(_PREFIX): value
        for key, value in vars(args).items()
        if key.startswith(_PREFIX) and value is not None
    }
