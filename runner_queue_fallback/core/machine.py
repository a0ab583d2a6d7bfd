"""What a candidate's machine is (OS, architecture, GPU count), from what the candidate says.

The fallback rules (never mix CPU and GPU, never drop GPUs, never switch architecture, one OS) are
stated on these facts, so that any team's labels can carry them. Three sources, which must agree:

- the candidate's own declaration, `"os"`, `"arch"` and `"gpus"` (the coordinator's policy only:
  the child never sees it);
- a label in the original's scheme (`linux-amd64-cpu16`, `linux-arm64-gpu-l4-latest-1`), any case;
- GitHub's default self-hosted labels (`Linux`, `Windows`, `macOS`; `X64`, `ARM64`), any case.

A GPU count is never guessed from a name such as `l40s-4gpu` or `h100.8`: a wrong guess would send a
job needing four GPUs to a machine with one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from runner_queue_fallback.core.labels import Labels, label_names

__all__ = [
    "ARCHES",
    "MAX_GPUS",
    "MEMORY_GROUP",
    "OSES",
    "Family",
    "LabelInfo",
    "Machine",
    "MachineProblem",
    "RunnerNeeds",
    "other_os_note",
    "parse_label",
    "read_machine",
]

Family = Literal["cpu", "gpu"]
OSES = ("linux", "macos", "windows")
ARCHES = ("amd64", "arm64")
MAX_GPUS = 8
MEMORY_GROUP = "nv-cpu-memory"

# CPU labels such as linux-amd64-cpu16; a trailing m marks a memory-optimised machine
_CPU_LABEL = re.compile(
    r"^(?P<os>[a-z][a-z0-9]*)-(?P<arch>amd64|arm64)-cpu(?P<cores>\d+)(?P<mem>m?)$"
)
# linux-amd64-gpu-h100-latest-1: os, arch, gpu model, driver track, GPU count
_GPU_LABEL = re.compile(
    r"^(?P<os>[a-z][a-z0-9]*)-(?P<arch>amd64|arm64)-gpu-(?P<model>[a-z0-9]+)"
    r"-(?P<driver>[a-z0-9.]+)-(?P<gpus>\d+)$"
)
# GitHub's default labels of a self-hosted runner (docs.github.com, "Using self-hosted runners
# in a workflow"), case-folded
_DEFAULT_OS = {"linux": "linux", "windows": "windows", "macos": "macos"}
_DEFAULT_ARCH = {"x64": "amd64", "arm64": "arm64"}
_NO_ARCH = "arm"  # GitHub's label of a 32-bit ARM runner
# a GPU model's name, for the example label of a missing GPU count: a6000, h100, l40s, rtx4090
_MODEL = re.compile(r"^[a-z]+\d[a-z0-9]*$")


@dataclass(frozen=True)
class LabelInfo:
    """What a label in the original's scheme says about the machine behind it."""

    os: str
    arch: str
    family: Family
    gpus: int
    memory_optimised: bool = False


def parse_label(label: str) -> LabelInfo | None:
    """Read OS, architecture, family and GPU count from a scheme label (any case), or None."""
    name = label.lower()
    if match := _CPU_LABEL.match(name):
        return LabelInfo(match["os"], match["arch"], "cpu", 0, bool(match["mem"]))
    if match := _GPU_LABEL.match(name):
        return LabelInfo(match["os"], match["arch"], "gpu", int(match["gpus"]))
    return None


@dataclass(frozen=True)
class Machine:
    """The facts the fallback rules are stated on."""

    os: str
    arch: str
    gpus: int
    memory_optimised: bool = False

    @property
    def family(self) -> Family:
        """`gpu` for a machine with a GPU, else `cpu`."""
        return "gpu" if self.gpus else "cpu"


@dataclass(frozen=True)
class RunnerNeeds:
    """What a runner type asks of every candidate, and how an example label for it looks."""

    runner_type: str
    family: Family
    arch: str
    gpus: int


class MachineProblem(ValueError):
    """The candidate's facts are missing, unsupported or contradict each other."""


@dataclass(frozen=True)
class _Fact:
    value: str | int
    source: str  # how the user gave it: `"os": "linux"`, or `label 'Linux'`


_FACT_NAMES = {"os": "OS", "arch": "architecture", "gpus": "GPU count"}


def read_machine(declared: Mapping[str, object], labels: Labels, needs: RunnerNeeds) -> Machine:
    """The candidate's machine from its declaration and labels; MachineProblem if it cannot."""
    facts: dict[str, list[_Fact]] = {"os": [], "arch": [], "gpus": []}
    _declared(declared, facts)
    memory = _from_labels(labels, facts)
    known = {name: _agreed(name, found) for name, found in facts.items()}
    if known["gpus"] is None and needs.family == "cpu":
        known["gpus"] = 0  # a CPU type's candidate with no GPU fact is a CPU machine
    missing = [name for name, value in known.items() if value is None]
    if missing:
        raise MachineProblem(_missing(missing, labels, needs))
    return Machine(str(known["os"]), str(known["arch"]), int(known["gpus"] or 0), memory)


def _declared(declared: Mapping[str, object], facts: dict[str, list[_Fact]]) -> None:
    for name, allowed in (("os", OSES), ("arch", ARCHES)):
        if name not in declared:
            continue
        value = declared[name]
        if not isinstance(value, str) or value not in allowed:
            raise MachineProblem(f'"{name}" must be one of {", ".join(allowed)} (got {value!r})')
        facts[name].append(_Fact(value, f'"{name}": "{value}"'))
    if "gpus" in declared:
        gpus = declared["gpus"]
        if isinstance(gpus, bool) or not isinstance(gpus, int) or not 0 <= gpus <= MAX_GPUS:
            raise MachineProblem(
                f'"gpus" must be a whole number from 0 to {MAX_GPUS} (got {gpus!r})'
            )
        facts["gpus"].append(_Fact(gpus, f'"gpus": {gpus}'))


def _from_labels(labels: Labels, facts: dict[str, list[_Fact]]) -> bool:
    """Add what the labels say; True when a scheme label marks a memory-optimised machine."""
    memory = False
    for label in label_names(labels):
        source = f"label {label!r}"
        folded = label.casefold()
        if folded == _NO_ARCH:
            raise MachineProblem(
                f"label {label!r} is GitHub's 32-bit ARM label: no supported architecture "
                f"({' or '.join(ARCHES)})"
            )
        if info := parse_label(label):
            facts["os"].append(_Fact(info.os, source))
            facts["arch"].append(_Fact(info.arch, source))
            facts["gpus"].append(_Fact(info.gpus, source))
            memory = memory or info.memory_optimised
        if folded in _DEFAULT_OS:
            facts["os"].append(_Fact(_DEFAULT_OS[folded], source))
        if folded in _DEFAULT_ARCH:
            facts["arch"].append(_Fact(_DEFAULT_ARCH[folded], source))
    return memory


def _agreed(name: str, found: list[_Fact]) -> str | int | None:
    """The one value every source gives, or a problem naming two that differ."""
    for fact in found[1:]:
        if fact.value != found[0].value:
            first = found[0]
            raise MachineProblem(
                f"its {_FACT_NAMES[name]} is given twice and differs: {first.source} says "
                f"{first.value}, {fact.source} says {fact.value}"
            )
    return found[0].value if found else None


def _missing(missing: list[str], labels: Labels, needs: RunnerNeeds) -> str:
    """Name each missing fact and both ways to give it."""
    os_name = "linux"
    declare = _and([_declaration(name, needs) for name in missing])
    what = _and([_FACT_NAMES[name] for name in missing])
    example = _example_label(os_name, labels, needs)
    defaults = [
        default
        for name, default in (("os", "Linux"), ("arch", _default_arch(needs.arch)))
        if name in missing
    ]
    plural = "s" if len(defaults) > 1 else ""
    also = f" (or GitHub's default label{plural} {' and '.join(defaults)})" if defaults else ""
    return f"{what} unknown; add {declare} to it, or a label such as {example}{also}"


def _and(parts: list[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return " and ".join(parts) if len(parts) < 3 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def _declaration(name: str, needs: RunnerNeeds) -> str:
    if name == "gpus":
        return f'"gpus": {needs.gpus}'
    return f'"{name}": "{"linux" if name == "os" else needs.arch}"'


def _default_arch(arch: str) -> str:
    return next(label.upper() for label, value in _DEFAULT_ARCH.items() if value == arch)


def _example_label(os_name: str, labels: Labels, needs: RunnerNeeds) -> str:
    """A scheme label for the runner type, with the GPU model the labels seem to name."""
    if needs.family == "cpu":
        return f"{os_name}-{needs.arch}-cpu16"
    models = [
        name.casefold()
        for name in label_names(labels)
        if _MODEL.match(name.casefold()) and name.casefold() not in _DEFAULT_ARCH
    ]
    model = models[-1] if models else "l4"
    return f"{os_name}-{needs.arch}-gpu-{model}-latest-{needs.gpus}"


def other_os_note(os_name: str) -> str | None:
    """What a sequence on another OS than Linux means for the guard (`plan` and `lint` warn)."""
    if os_name == "linux":
        return None
    shown = {"macos": "macOS", "windows": "Windows"}.get(os_name, os_name)
    shell = " (through Git Bash)" if os_name == "windows" else ""
    return (
        f"the candidates run on {shown}: the Docker guard (guard/docker) needs Linux runners, so "
        f"only the composite guard can run there{shell}, and it has not been tried on {shown} "
        "yet; until it passes there, the child's workload has no tested gate. The trust model "
        "is otherwise the same: restrict the runner group to the child workflow"
    )
