"""`simulate --waits stats.json`: replay measured queue waits through the real coordinator.

Each replay builds a fresh fake GitHub whose pools make every new job wait a time drawn from that
pool's Kaplan-Meier curve (the probability the data leave beyond their last runner is a runner that
never comes), runs the real `coordinate` step on virtual time, and reads what happened from the
fake's history. The draws are seeded, so a replay is reproducible. Composition, like `simulate`.

A candidate finds its pool by its labels as a set (`core/labels.py`), in any order or case, in a
file of any version (up to 2 a pool's labels are one string, sorted and comma-joined). A pool the
history could not measure (`stats` writes no curve for it) or a group-only candidate has no
measured waits, and the error says why.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from runner_queue_fallback.core.actions_io import escape_json, escape_log_line
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.inputs import InputErrors, env_name, read_pool_settings
from runner_queue_fallback.core.labels import canonical
from runner_queue_fallback.core.main import Main
from runner_queue_fallback.core.profiles import Candidate, load_profiles
from runner_queue_fallback.fake_github.model import Workload
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.simulate.steps import (
    run_coordinator,
    standard_world,
    with_defaults,
)
from runner_queue_fallback.tools.stats.pools import candidate_text, labels_text, unmeasurable
from runner_queue_fallback.tools.stats.recommend import Step, evaluate
from runner_queue_fallback.tools.stats.report import SCHEMA, SCHEMA_VERSIONS
from runner_queue_fallback.tools.stats.survival import Survival

__all__ = ["Measured", "ReplayResult", "load_curves", "replay", "run"]

EXIT_OK, EXIT_BAD_INPUT = 0, 2
MAX_REPLAYS = 2000
#: Workload minutes in a replay: long enough to be seen executing, short to keep replays quick.
WORKLOAD_SECONDS = 60.0


class ReplayError(Exception):
    """A bad --waits file or flag: one message naming it."""


@dataclass(frozen=True)
class ReplayResult:
    """The same figures `stats` reports, from replays of one configuration."""

    replays: int
    seed: int
    to_runner: tuple[float, ...]  # seconds from the first dispatch to a runner, per success
    endings: Mapping[str, int]
    candidates_used: Mapping[int, int]

    @property
    def exhausted(self) -> float:
        """Share of replays in which every queue timed out."""
        return self.endings.get("exhausted", 0) / self.replays if self.replays else 0.0

    def spread(self) -> dict[str, float | None]:
        """Mean, median and 90th percentile (over every replay; None if under 90% got one)."""
        ordered = sorted(self.to_runner)
        if not ordered:
            return {"mean": None, "median": None, "p90": None}
        rank = int(0.9 * self.replays + 0.999999) - 1
        return {
            "mean": statistics.fmean(ordered),
            "median": statistics.median(ordered),
            "p90": ordered[rank] if rank < len(ordered) else None,
        }


@dataclass(frozen=True)
class Measured:
    """One pool of a `stats --json` file: its labels as written, its group, its curve or why not."""

    labels: tuple[str, ...]
    group: str  # "" when the file names none
    curve: Survival | None  # None: the history could not measure it
    refused: str | None


def load_curves(path: Path) -> dict[str, Measured]:
    """Each pool by its label set (`canonical`), from a `stats --json` file of SCHEMA_VERSIONS."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReplayError(f"--waits {path}: not a readable JSON file ({exc})") from None
    except RecursionError:  # nesting deeper than Python's stack: an input error, no traceback
        raise ReplayError(f"--waits {path}: JSON too deeply nested to read") from None
    if (
        not isinstance(data, dict)
        or data.get("schema") != SCHEMA
        or type(data.get("version")) is not int  # `true` equals 1 in Python
        or data.get("version") not in SCHEMA_VERSIONS
    ):
        *first, last = (str(v) for v in SCHEMA_VERSIONS)
        versions = f"{', '.join(first)} or {last}"
        raise ReplayError(
            f"--waits {path}: not `stats --json` output (schema {SCHEMA} version {versions})"
        )
    try:
        pools = [_measured(pool, data["version"]) for pool in data["pools"]]
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        raise ReplayError(f"--waits {path}: malformed pool entry ({exc})") from None
    return {canonical(pool.labels): pool for pool in pools}


def _measured(pool: Mapping[str, Any], version: int) -> Measured:
    """One pool entry; TypeError, KeyError or ValueError when it is not one."""
    labels = pool["labels"]
    if version < 3:  # version 3 made a pool's labels a list
        names = tuple(str(labels).split(",")) if labels else ()
    elif isinstance(labels, list) and all(isinstance(name, str) for name in labels):
        names = tuple(labels)
    else:
        raise TypeError("labels must be a list of strings")
    curve = None if pool["curve"] is None else Survival.from_json(pool["curve"])
    refused = pool.get("refused")
    return Measured(
        names, str(pool.get("group") or ""), curve, None if refused is None else str(refused)
    )


def replay(
    curves: Mapping[str, Survival],
    candidates: Sequence[Candidate],
    inputs: Mapping[str, str],
    *,
    replays: int,
    seed: int,
    main: Main,
) -> ReplayResult:
    """Run the coordinator `replays` times with waits drawn from `curves` (seeded)."""
    rng = random.Random(seed)
    to_runner: list[float] = []
    endings: Counter[str] = Counter()
    used: Counter[int] = Counter()
    for _ in range(replays):
        clock = FakeClock()
        world = FakeGitHub(clock, workload=Workload(duration=WORKLOAD_SECONDS))
        standard_world(clock, world)
        for candidate in {(c.group, canonical(c.labels)): c for c in candidates}.values():
            curve = curves[canonical(candidate.labels)]
            world.add_pool(candidate.group, candidate.labels, wait=_sampler(curve, rng))
        run_coordinator(world, clock, with_defaults(world, inputs), post_step=False, main=main)
        world.catch_up()
        children = sorted(world.history.values(), key=lambda h: h.dispatched_at)
        used[len(children)] += 1
        served = [h for h in children if h.allocated_at is not None]
        if (
            served
            and served[-1].conclusion == "cancelled"
            and served[-1].workload_started_at is None
        ):
            endings["race"] += 1
        elif served:
            endings["runner"] += 1
            to_runner.append(served[-1].allocated_at - children[0].dispatched_at)  # type: ignore[operator]  # filtered just above
        elif children and all(h.conclusion == "cancelled" for h in children):
            endings["exhausted"] += 1
        else:
            endings["other"] += 1
    return ReplayResult(replays, seed, tuple(to_runner), dict(endings), dict(used))


def _sampler(curve: Survival, rng: random.Random) -> Any:
    return lambda: curve.sample(rng)


def run(args: argparse.Namespace, inputs: Mapping[str, str], out: TextIO, *, main: Main) -> int:
    """`simulate --waits FILE [--replays N] [--seed N]` with the coordinator inputs as flags."""
    try:
        replays, seed = (
            _count(args.replays, "--replays", 1, MAX_REPLAYS),
            _count(args.seed, "--seed", 0, 2**31),
        )
        loaded = load_curves(Path(args.waits))
        settings = read_pool_settings({env_name(k): v for k, v in inputs.items()}, load_profiles())
        _check_pools(args.waits, settings.candidates, loaded)
    except ReplayError as exc:
        print(escape_log_line(f"simulate: error: {exc}"), file=out)
        return EXIT_BAD_INPUT
    except InputErrors as exc:
        for error in exc.errors:
            print(escape_log_line(f"simulate: error: {error}"), file=out)
        return EXIT_BAD_INPUT
    curves = {key: pool.curve for key, pool in loaded.items() if pool.curve is not None}
    result = replay(curves, settings.candidates, inputs, replays=replays, seed=seed, main=main)
    steps = [Step.of(c, c.queue_minutes) for c in settings.candidates]
    predicted = evaluate(steps, curves)
    document = _as_json(result, predicted, steps)
    if args.json:
        print(escape_json(json.dumps(document, indent=2)), file=out)
    else:  # the labels come from the --waits file: each line is one log line
        print("\n".join(escape_log_line(line) for line in _text(document)), file=out)
    return EXIT_OK


def _check_pools(
    path: str, candidates: Sequence[Candidate], loaded: Mapping[str, Measured]
) -> None:
    """Every candidate's pool measured in the file, matched by label set; else why not."""
    missing = {}
    for c in candidates:
        pool = loaded.get(canonical(c.labels))
        why = unmeasurable(c, pool.group if pool else "")
        if why is None and pool is not None and pool.curve is None:
            why = pool.refused
        if why is not None or pool is None or pool.curve is None:
            missing[candidate_text(c.group, c.labels)] = "" if why is None else f" ({why})"
    if missing:
        measured = [labels_text(p.labels) for p in loaded.values() if p.curve is not None]
        raise ReplayError(
            f"--waits {path}: no measured waits for "
            + ", ".join(f"{name}{why}" for name, why in sorted(missing.items()))
            + f"; it has: {', '.join(measured) or 'no pools'}"
        )


def _count(raw: str | None, flag: str, low: int, high: int) -> int:
    if raw is None:
        return {"--replays": 200, "--seed": 1}[flag]
    if not raw.strip().isdigit() or not low <= int(raw) <= high:
        raise ReplayError(f"{flag} must be a whole number from {low} to {high}, got {raw!r}")
    return int(raw)


def _as_json(result: ReplayResult, predicted: Any, steps: Sequence[Step]) -> dict[str, Any]:
    return {
        "runners": [s.runner() for s in steps],
        "replays": result.replays,
        "seed": result.seed,
        "replayed": {**result.spread(), "exhausted": result.exhausted},
        "endings": dict(result.endings),
        "candidates_used": {str(k): v for k, v in sorted(result.candidates_used.items())},
        "predicted": None
        if predicted is None
        else {
            "mean": predicted.mean_seconds,
            "p90": predicted.p90_seconds,
            "exhausted": predicted.exhausted,
        },
    }


def _entry_text(entry: Mapping[str, Any]) -> str:
    """A `runners` entry for a person to read: its labels, the hosted label, or its group."""
    if "hosted" in entry:
        return str(entry["hosted"])
    if "labels" in entry:
        return labels_text(tuple(entry["labels"]))
    return candidate_text(str(entry["group"]), ())


def _text(doc: Mapping[str, Any]) -> list[str]:
    def minutes(value: float | None) -> str:
        return "not reached" if value is None else f"{value / 60:.1f} min"

    order = " -> ".join(f"{_entry_text(s)} {s['queue-timeout-minutes']:g}m" for s in doc["runners"])
    got = doc["replayed"]
    lines = [
        f"Replay of {order}: {doc['replays']} coordinator runs on sampled waits (seed {doc['seed']})",
        (
            f"  replayed:  mean {minutes(got['mean'])}, median {minutes(got['median'])}, "
            f"p90 {minutes(got['p90'])}, exhausted {100 * got['exhausted']:.1f}%"
        ),
    ]
    if (want := doc["predicted"]) is not None:
        lines.append(
            f"  predicted: mean {minutes(want['mean'])}, p90 {minutes(want['p90'])}, "
            f"exhausted {100 * want['exhausted']:.1f}% (from the curves, pools independent)"
        )
    lines.append(
        "  endings: "
        + ", ".join(f"{k} {v}" for k, v in sorted(doc["endings"].items()))
        + "; candidates used: "
        + ", ".join(f"{k}: {v}" for k, v in doc["candidates_used"].items())
    )
    return lines
