"""Runner types, their ordered pool candidates and queue policies, read from profiles/*.toml.

The pool lists are maintained data (the organisation's runner-group catalogue), not live
discovery: a profile says which pools to try and in what order, never whether one has capacity.
"""

from __future__ import annotations

import functools
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from runner_queue_fallback.core.errors import ProfileError

__all__ = [
    "HOSTED_POOL",
    "Candidate",
    "LabelInfo",
    "Profile",
    "default_profiles_dir",
    "load_profiles",
    "parse_label",
]

Family = Literal["cpu", "gpu"]
Labels = str | tuple[str, ...]

# CPU labels such as linux-amd64-cpu16; a trailing m marks a memory-optimised machine
_CPU_LABEL = re.compile(
    r"^(?P<os>[a-z][a-z0-9]*)-(?P<arch>amd64|arm64)-cpu(?P<cores>\d+)(?P<mem>m?)$"
)
# linux-amd64-gpu-h100-latest-1: os, arch, gpu model, driver track, GPU count
_GPU_LABEL = re.compile(
    r"^(?P<os>[a-z][a-z0-9]*)-(?P<arch>amd64|arm64)-gpu-(?P<model>[a-z0-9]+)"
    r"-(?P<driver>[a-z0-9.]+)-(?P<gpus>\d+)$"
)
MEMORY_GROUP = "nv-cpu-memory"


@dataclass(frozen=True)
class LabelInfo:
    """What an NVIDIA runner label says about the machine behind it."""

    os: str
    arch: str
    family: Family
    gpus: int
    memory_optimised: bool = False


def parse_label(label: str) -> LabelInfo | None:
    """Read OS, architecture, family and GPU count from a runner label, or None if unknown."""
    if match := _CPU_LABEL.match(label):
        return LabelInfo(match["os"], match["arch"], "cpu", 0, bool(match["mem"]))
    if match := _GPU_LABEL.match(label):
        return LabelInfo(match["os"], match["arch"], "gpu", int(match["gpus"]))
    return None


#: How logs, the summary and `plan` name the pool of a GitHub-hosted candidate (no group).
HOSTED_POOL = "GitHub-hosted"


@dataclass(frozen=True)
class Candidate:
    """One pool to try: where the child is sent and how long it may wait there for a runner.

    `hosted` (issue 33, a departure): a GitHub-hosted runner label as the last resort; it has no
    runner group, so the child's `runs-on` names the label alone.
    """

    group: str
    labels: Labels
    queue_minutes: float
    name: str = ""
    hosted: bool = False

    @property
    def queue_seconds(self) -> float:
        """The queue deadline in seconds."""
        return self.queue_minutes * 60

    def runner(self) -> dict[str, object]:
        """The `runs-on` mapping the child receives: group and labels only, never the deadline.

        A hosted candidate has no group: `{"labels": "ubuntu-24.04"}`.
        """
        labels = list(self.labels) if isinstance(self.labels, tuple) else self.labels
        if self.hosted:
            return {"labels": labels}
        return {"group": self.group, "labels": labels}

    def runner_json(self) -> str:
        """The child's `runner` input: compact JSON of `{group, labels}` (`{labels}` if hosted)."""
        return json.dumps(self.runner(), separators=(",", ":"))

    @property
    def pool_text(self) -> str:
        """`group / labels`, as logs and summaries name the pool (`GitHub-hosted / label`)."""
        return f"{HOSTED_POOL if self.hosted else self.group} / {self.label_text}"

    @property
    def label_text(self) -> str:
        """Labels as one readable string."""
        return self.labels if isinstance(self.labels, str) else ",".join(self.labels)


class _Policy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    queue_minutes: int = Field(alias="queue-minutes", ge=1, le=60)
    final_pool: str | None = Field(default=None, alias="final-pool")
    final_queue_minutes: int | None = Field(default=None, alias="final-queue-minutes", ge=1, le=60)

    @model_validator(mode="after")
    def _final_needs_both(self) -> _Policy:
        if (self.final_pool is None) != (self.final_queue_minutes is None):
            raise ValueError("final-pool and final-queue-minutes go together")
        return self


class _Pool(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    group: str = Field(min_length=1)
    labels: str = Field(min_length=1)


class Profile(BaseModel):
    """A runner type: its pools in order and its two queue policies."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    runner_type: str = Field(alias="runner-type")
    aliases: tuple[str, ...] = ()
    family: Family
    arch: Literal["amd64", "arm64"]
    gpus: int = Field(ge=0, le=8)
    policy: dict[Literal["standard", "extended"], _Policy]
    pools: tuple[_Pool, ...] = Field(min_length=1, max_length=6)

    @model_validator(mode="after")
    def _consistent(self) -> Profile:
        if set(self.policy) != {"standard", "extended"}:
            raise ValueError("needs [policy.standard] and [policy.extended]")
        names = {pool.name for pool in self.pools}
        for pool in self.pools:
            info = parse_label(pool.labels)
            if info is None or (info.family, info.arch, info.gpus) != (
                self.family,
                self.arch,
                self.gpus,
            ):
                raise ValueError(f"pool {pool.name!r}: label {pool.labels!r} does not fit the type")
        for name, policy in self.policy.items():
            if policy.final_pool is not None and policy.final_pool not in names:
                raise ValueError(f"policy {name}: final-pool {policy.final_pool!r} is not a pool")
        return self

    def default_queue_minutes(self, policy: str) -> int:
        """The queue deadline of a candidate that sets none, under `policy`."""
        return self.policy[policy].queue_minutes  # type: ignore[index]  # policy is validated upstream

    def candidates(self, policy: str, queue_minutes: float | None) -> tuple[Candidate, ...]:
        """The default candidate list: every pool in order, plus the extended final re-wait."""
        deadline = (
            queue_minutes if queue_minutes is not None else self.default_queue_minutes(policy)
        )
        found = [Candidate(p.group, p.labels, deadline, p.name) for p in self.pools]
        rule = self.policy[policy]  # type: ignore[index]  # policy is validated upstream
        if rule.final_pool is not None and rule.final_queue_minutes is not None:
            pool = next(p for p in self.pools if p.name == rule.final_pool)
            found.append(Candidate(pool.group, pool.labels, rule.final_queue_minutes, pool.name))
        return tuple(found)


def default_profiles_dir() -> Path:
    """Where the shipped profiles are: inside the wheel, else at the repository root."""
    package = Path(__file__).resolve().parent.parent  # this module is in the package's core/
    packaged = package / "profiles"
    return packaged if packaged.is_dir() else package.parent / "profiles"


def load_profiles(directory: Path | None = None) -> Mapping[str, Profile]:
    """Load every profile file, keyed by runner type and by each alias."""
    directory = directory or default_profiles_dir()
    found: dict[str, Profile] = {}
    for path in sorted(directory.glob("*.toml")):
        profile = _load_one(path)
        for key in (profile.runner_type, *profile.aliases):
            if key in found:
                raise ProfileError(f"{path.name}: runner type or alias {key!r} is defined twice")
            found[key] = profile
    if not found:
        raise ProfileError(f"no profile files (*.toml) in {directory}")
    return found


def _load_one(path: Path) -> Profile:
    return _parse(path.name, path.stem, path.read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=64)
def _parse(name: str, stem: str, text: str) -> Profile:
    """One profile file's text, validated; kept by content, as the fuzzers load them per run."""
    try:
        profile = Profile.model_validate(tomllib.loads(text))
    except (tomllib.TOMLDecodeError, ValidationError) as exc:
        raise ProfileError(f"{name}: {exc}") from exc
    if profile.runner_type != stem:
        raise ProfileError(f"{name}: runner-type {profile.runner_type!r} must match the file name")
    return profile
