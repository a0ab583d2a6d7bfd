"""The scenario catalogue: named worlds with coordinator inputs and the outcome each must reach.

Each `*.yaml` file next to this module is one scenario:

```yaml
description: one line, shown by `simulate --list`
pilot: queue fallback          # which pilot case of the spec it stands for, if any
world: {pools: [...], timings: {...}, workload: {...}, faults: [...], events: [...]}
inputs: {runner-type: cpu, execution-timeout-minutes: 15}   # one coordinator ...
interrupt_at: 135              # SIGTERM to its main step at this virtual second (optional)
expect: {exit_code: 0, attempts: 2, served_by: linux-amd64-cpu8, outcomes: [...], log: [...]}
coordinators:                  # ... or several at once in one repository, each with its expect
  - {inputs: {...}, expect: {...}}
```

`world` is the simulator's `Scenario` mapping; the source ref, the parent run and the child
workflow are added when missing. Inputs not given default to the child `runner-worker.yml` on
`main` and the approved source `refs/pull/123/merge` at its current SHA.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from runner_queue_fallback.core.labels import same_labels
from runner_queue_fallback.core.yaml_errors import explain as explain_yaml_error
from runner_queue_fallback.fake_github.scenario import Scenario

__all__ = [
    "CATALOGUE_DIR",
    "DEFAULT_SCENARIO",
    "CatalogueEntry",
    "CatalogueError",
    "CoordinatorSpec",
    "Expectation",
    "Observed",
    "load_catalogue",
    "load_entry",
    "same_pool_text",
]

CATALOGUE_DIR = Path(__file__).resolve().parent
DEFAULT_SCENARIO = "fallback"


class CatalogueError(ValueError):
    """A scenario file that cannot be read, or a scenario name that does not exist."""


class Expectation(BaseModel):
    """How one coordinator must end."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    exit_code: int
    attempts: int
    served_by: str | None = None  # labels of the pool whose runner got the job
    outcomes: tuple[str, ...] | None = None  # a fragment of each attempt's outcome, in order
    log: tuple[str, ...] = ()  # fragments of the main and post step logs
    post_exit_code: int | None = None

    def describe(self) -> str:
        """One line: exit code, attempts and the pool whose runner took the job."""
        served = f", runner from {self.served_by}" if self.served_by else ", no runner acquired"
        plural = "s" if self.attempts != 1 else ""
        return f"exit {self.exit_code}, {self.attempts} attempt{plural}{served}"


class Observed(BaseModel):
    """What one simulated coordinator did, in the terms of `Expectation`."""

    model_config = ConfigDict(frozen=True)

    exit_code: int
    attempts: int
    served_by: str | None
    outcomes: tuple[str, ...]
    log: str
    post_exit_code: int | None

    def problems(self, expect: Expectation) -> list[str]:
        """Every way this differs from `expect` (empty when it ended as stated)."""
        found = []
        for name in ("exit_code", "attempts", "post_exit_code"):
            wanted = getattr(expect, name)
            if (name != "post_exit_code" or wanted is not None) and getattr(self, name) != wanted:
                found.append(f"{name}: expected {wanted!r}, got {getattr(self, name)!r}")
        if not same_pool_text(expect.served_by, self.served_by):
            found.append(f"served_by: expected {expect.served_by!r}, got {self.served_by!r}")
        if expect.outcomes is not None:
            matched = len(expect.outcomes) == len(self.outcomes) and all(
                want in got for want, got in zip(expect.outcomes, self.outcomes, strict=True)
            )
            if not matched:
                found.append(
                    f"outcomes: expected {list(expect.outcomes)}, got {list(self.outcomes)}"
                )
        found += [f"log: missing {text!r}" for text in expect.log if text not in self.log]
        return found


def _as_text(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class CoordinatorSpec(BaseModel):
    """One coordinator of a scenario: its inputs and how it must end."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    inputs: dict[str, str] = Field(default_factory=dict)
    expect: Expectation | None = None
    parent_run_id: int | None = None

    @field_validator("inputs", mode="before")
    @classmethod
    def _inputs_as_text(cls, value: object) -> object:
        """YAML numbers and booleans become the strings an action input always is."""
        if isinstance(value, Mapping):
            return {str(k): _as_text(v) for k, v in value.items()}
        return value


class CatalogueEntry(BaseModel):
    """One named scenario of the catalogue."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    name: str
    description: str
    pilot: str | None = None
    world: Scenario
    coordinators: tuple[CoordinatorSpec, ...]
    interrupt_at: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_or_many(cls, data: object) -> object:
        """`inputs` + `expect` at the top level are shorthand for a single coordinator."""
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        if "inputs" in data or "expect" in data:
            if "coordinators" in data:
                raise ValueError("give either inputs/expect or coordinators, not both")
            data["coordinators"] = [
                {"inputs": data.pop("inputs", {}), "expect": data.pop("expect", None)}
            ]
        world = data.get("world", {})
        if isinstance(world, Mapping):
            data["world"] = Scenario.from_mapping(
                {"name": data.get("name", "default"), **world}
                | {"description": data.get("description", "")}
            )
        return data

    @field_validator("interrupt_at")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise ValueError("interrupt_at must be a virtual second >= 0")
        return value

    @property
    def expected(self) -> str:
        """The stated outcome, one line (`; ` between coordinators)."""
        return "; ".join(
            c.expect.describe() if c.expect else "not stated" for c in self.coordinators
        )


def load_entry(path: Path) -> CatalogueEntry:
    """Read one scenario file; the file's stem is the scenario's name."""
    text = path.read_text(encoding="utf-8")
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:  # the parser's own text spans lines and names no file
        problem = explain_yaml_error(exc, text)
        raise CatalogueError(f"{path.name}: {problem.message} (fix: {problem.fix})") from None
    try:
        if not isinstance(data, Mapping):
            raise CatalogueError(f"{path.name}: a scenario is a YAML mapping")
        return CatalogueEntry.model_validate({**data, "name": path.stem})
    except (ValidationError, TypeError, ValueError) as exc:
        if isinstance(exc, CatalogueError):
            raise
        raise CatalogueError(f"{path.name}: {exc}") from exc


def load_catalogue(directory: Path = CATALOGUE_DIR) -> dict[str, CatalogueEntry]:
    """Every scenario in `directory`, by name, the default first and the rest sorted."""
    entries = {p.stem: load_entry(p) for p in sorted(directory.glob("*.yaml"))}
    if DEFAULT_SCENARIO in entries:
        entries = {DEFAULT_SCENARIO: entries[DEFAULT_SCENARIO], **entries}
    return entries


def same_pool_text(a: str | None, b: str | None) -> bool:
    """Whether two `served_by` names (comma-joined labels, or a group) are one pool.

    Labels compare as GitHub matches them, in any order and case (`core/labels.py`).
    """
    if a is None or b is None:
        return a is b
    return same_labels(a.split(","), b.split(","))
