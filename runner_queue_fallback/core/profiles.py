"""Runner types, their ordered pool candidates and queue policies, read from profiles/*.toml.

The pool lists are maintained data (the organisation's runner-group catalogue), not live
discovery: a profile says which pools to try and in what order, never whether one has capacity.
"""

from __future__ import annotations

import functools
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from runner_queue_fallback.core.errors import ProfileError
from runner_queue_fallback.core.labels import Labels, label_names
from runner_queue_fallback.core.machine import Family, Machine, RunnerNeeds, parse_label

__all__ = [
    "ANY_GROUP",
    "ANY_LABELS",
    "HOSTED_POOL",
    "Candidate",
    "Profile",
    "default_profiles_dir",
    "describe_runner_types",
    "load_profiles",
]


#: How logs, the summary and `plan` name the pool of a GitHub-hosted candidate (no group).
HOSTED_POOL = "GitHub-hosted"


#: How the summary and `plan` name a candidate without a group, or without labels.
ANY_GROUP = "any group"
ANY_LABELS = "any labels in the group"


@dataclass(frozen=True)
class Candidate:
    """One pool to try: where the child is sent and how long it may wait there for a runner.

    A candidate is a group, labels, or both, as `runs-on` allows ("" and (): not given).
    `machine`: what it runs on (OS, architecture, GPU count), the coordinator's policy only.
    `hosted` (a departure): a GitHub-hosted runner label as the last resort; it has no
    runner group, so the child's `runs-on` names the label alone.
    """

    group: str
    labels: Labels
    queue_minutes: float
    name: str = ""
    hosted: bool = False
    machine: Machine | None = None

    @property
    def queue_seconds(self) -> float:
        """The queue deadline in seconds."""
        return self.queue_minutes * 60

    def runner(self) -> dict[str, object]:
        """The `runs-on` mapping the child receives: group and/or labels, as written; no policy.

        A hosted candidate has no group: `{"labels": "ubuntu-24.04"}`.
        """
        found: dict[str, object] = {}
        if self.group and not self.hosted:
            found["group"] = self.group
        if label_names(self.labels):
            found["labels"] = list(self.labels) if isinstance(self.labels, tuple) else self.labels
        return found

    def runner_json(self) -> str:
        """The child's `runner` input: compact JSON of `{group, labels}` (`{labels}` if hosted)."""
        return json.dumps(self.runner(), separators=(",", ":"))

    @property
    def pool_text(self) -> str:
        """`group / labels`, as logs and summaries name the pool (`GitHub-hosted / label`)."""
        group = HOSTED_POOL if self.hosted else (self.group or ANY_GROUP)
        return f"{group} / {self.label_text or ANY_LABELS}"

    @property
    def label_text(self) -> str:
        """Labels as one readable string ("" when the candidate gives none)."""
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
    #: none: a type without default pools, for which `runners` is required
    pools: tuple[_Pool, ...] = Field(default=(), max_length=6)

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

    @property
    def needs(self) -> RunnerNeeds:
        """What every candidate of this type must be."""
        return RunnerNeeds(self.runner_type, self.family, self.arch, self.gpus)

    def default_queue_minutes(self, policy: str) -> int:
        """The queue deadline of a candidate that sets none, under `policy`."""
        return self.policy[policy].queue_minutes  # type: ignore[index]  # policy is validated upstream

    def candidates(self, policy: str, queue_minutes: float | None) -> tuple[Candidate, ...]:
        """The default candidate list: every pool in order, plus the extended final re-wait."""
        deadline = (
            queue_minutes if queue_minutes is not None else self.default_queue_minutes(policy)
        )
        found = [_pool_candidate(p, deadline) for p in self.pools]
        rule = self.policy[policy]  # type: ignore[index]  # policy is validated upstream
        if rule.final_pool is not None and rule.final_queue_minutes is not None:
            pool = next(p for p in self.pools if p.name == rule.final_pool)
            found.append(_pool_candidate(pool, rule.final_queue_minutes))
        return tuple(found)


def _pool_candidate(pool: _Pool, minutes: float) -> Candidate:
    info = parse_label(pool.labels)
    machine = None if info is None else Machine(info.os, info.arch, info.gpus)
    return Candidate(pool.group, pool.labels, minutes, pool.name, machine=machine)


def describe_runner_types(profiles: Mapping[str, Profile]) -> str:
    """Every runner type, an alias first with its type in brackets, as help and action.yml say.

    Types that differ only by their GPU count (`gpu-amd64-<N>gpu`) are named once, with the range.
    """
    types = sorted({p.runner_type: p for p in profiles.values()}.values(), key=_type_order)
    named: list[str] = []
    counts: dict[str, list[int]] = {}
    for profile in types:
        if profile.gpus > 1:
            counts.setdefault(f"gpu-{profile.arch}-<N>gpu", []).append(profile.gpus)
        else:
            names = (*profile.aliases, profile.runner_type)
            named.append(f"{names[0]} ({names[1]})" if len(names) == 2 else " or ".join(names))
    ranges: dict[tuple[int, int], list[str]] = {}
    for name, found in counts.items():
        ranges.setdefault((min(found), max(found)), []).append(name)
    wide = [
        f"{' and '.join(names)} for N GPUs on one worker, N from {low} to {high}"
        for (low, high), names in ranges.items()
    ]
    return "; ".join([", ".join(named), *wide])


def _type_order(profile: Profile) -> tuple[str, int, str]:
    return (profile.family, profile.gpus, profile.runner_type)


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
