"""A GitHub-hosted runner as the last candidate (a departure): which labels fit a type.

The specification knows only self-hosted pools. A team may rather pay for a hosted CPU job than
fail the check: `{"hosted": "<label>"}` last in `runners`, or the `hosted-last-resort` input.
A hosted candidate has no runner group; only CPU runner types may use one, on Linux, of their
architecture (`-arm` labels for cpu-arm64). A larger runner's own name cannot be classified
offline: it is accepted with a warning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runner_queue_fallback.core.machine import parse_label
from runner_queue_fallback.core.profiles import Candidate, Profile

__all__ = [
    "BILLED_NOTE",
    "HOSTED_EXAMPLES",
    "HostedLabel",
    "classify",
    "hosted_candidate",
    "hosted_problem",
    "hosted_warning",
]

#: What `plan`, `lint` and the summary say of every hosted candidate.
BILLED_NOTE = (
    "a GitHub-hosted runner: its minutes are billed, it is outside the self-hosted runner "
    "groups and their 'selected workflows' restriction, and it has no access to the private "
    "network"
)
#: A hosted label for each CPU architecture, as errors suggest them.
HOSTED_EXAMPLES = {"amd64": "ubuntu-24.04", "arm64": "ubuntu-24.04-arm"}

# GitHub's standard hosted images: ubuntu-latest, ubuntu-24.04, ubuntu-22.04-arm, windows-2025,
# windows-11-arm, macos-15, macos-latest-large ... (docs.github.com, "GitHub-hosted runners").
_UBUNTU = re.compile(r"^ubuntu-(latest|\d{2}\.\d{2})(?P<arm>-arm)?$")
_OTHER_OS = re.compile(r"^(?P<os>windows|macos)-", re.IGNORECASE)
_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclass(frozen=True)
class HostedLabel:
    """What a hosted label says about its machine: OS and architecture."""

    os: str
    arch: str


def classify(label: str) -> HostedLabel | None:
    """The OS and architecture of a standard hosted label (any case), or None (a larger runner).

    GitHub matches labels regardless of case, so `Ubuntu-24.04-ARM` is the arm64 image.
    """
    label = label.lower()
    if match := _UBUNTU.match(label):
        return HostedLabel("linux", "arm64" if match["arm"] else "amd64")
    if match := _OTHER_OS.match(label):
        arm = label.lower().endswith("-arm") or label.lower().startswith("macos-")
        return HostedLabel(match["os"].lower(), "arm64" if arm else "amd64")
    return None


def hosted_problem(label: str, profile: Profile) -> str | None:
    """Why `label` cannot be this runner type's hosted last resort, or None if it can."""
    example = HOSTED_EXAMPLES.get(profile.arch, "ubuntu-24.04")
    if not _PLAIN.match(label):
        return f"needs one GitHub-hosted runner label such as {example} (got {label!r})"
    if profile.family != "cpu":
        return (
            f"names a GitHub-hosted runner, which is only for the CPU runner types (cpu, "
            f"cpu-amd64, cpu-arm64); runner-type {profile.runner_type!r} needs "
            f"{profile.gpus} GPU(s) and no fallback may drop them"
        )
    if label.casefold() == "self-hosted" or parse_label(label) is not None:
        return (
            f"names {label!r}, a self-hosted label; a hosted candidate names a GitHub-hosted "
            f"label such as {example} (a self-hosted pool takes group and labels)"
        )
    return _machine_problem(label, profile, example)


def _machine_problem(label: str, profile: Profile, example: str) -> str | None:
    """A standard image of another OS or architecture; a larger runner's name passes (warned)."""
    info = classify(label)
    if info is not None and info.os != "linux":
        return (
            f"names {label!r}, a {info.os} runner; the child's guard and Docker actions need "
            f"Linux: use {example}"
        )
    if info is not None and info.arch != profile.arch:
        return (
            f"names {label!r}, an {info.arch} runner, but runner-type {profile.runner_type!r} "
            f"needs {profile.arch} (architecture is kept): use {example}"
        )
    return None


def hosted_warning(label: str, profile: Profile) -> str | None:
    """A label the program cannot classify (a larger runner's own name) is taken on trust."""
    if classify(label) is not None:
        return None
    example = HOSTED_EXAMPLES.get(profile.arch, "ubuntu-24.04")
    return (
        f"hosted label {label!r} is not a standard image label (such as {example}): it is taken "
        f"as the name of a GitHub-hosted larger runner, which must be Linux {profile.arch} as "
        f"runner-type {profile.runner_type!r} needs; nothing offline can check that"
    )


def hosted_candidate(label: str, minutes: float) -> Candidate:
    """The hosted candidate: no group, the label alone, its own deadline."""
    return Candidate("", label, minutes, name="hosted", hosted=True)
