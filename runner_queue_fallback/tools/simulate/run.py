"""The `simulate` command: watch the real coordinator, post step and guard on a virtual clock.

A scenario comes from the catalogue (`tools/simulate/scenarios/*.yaml`), or is built from the
command's flags: one free pool per resolved candidate unless `--busy` says otherwise. What it
prints (the step log, the post step, each worker's guard step, the step summary, the outputs and a
timeline of what really happened to every child run) is `output.py`'s.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, TextIO

from runner_queue_fallback.core.actions_io import escape_json, escape_log_line
from runner_queue_fallback.core.clock import FakeClock, SystemClock
from runner_queue_fallback.core.inputs import env_name, read_coordinator_inputs
from runner_queue_fallback.core.inputs import read_pool_settings as _read_pool_settings
from runner_queue_fallback.core.labels import canonical, label_names, same_labels
from runner_queue_fallback.core.main import Main
from runner_queue_fallback.core.profiles import HOSTED_POOL, load_profiles
from runner_queue_fallback.fake_github.model import Timings, Workload
from runner_queue_fallback.fake_github.scenario import PoolSpec, Scenario
from runner_queue_fallback.tools.simulate.output import as_json, label_text, render
from runner_queue_fallback.tools.simulate.scenarios import (
    DEFAULT_SCENARIO,
    CatalogueEntry,
    CatalogueError,
    CoordinatorSpec,
    load_catalogue,
)
from runner_queue_fallback.tools.simulate.scenarios.predict import TooClose, Unpredictable, predict
from runner_queue_fallback.tools.simulate.steps import (
    PARENT_RUN_ID,
    SOURCE_REF,
    TOKEN,
    coordinator_environ,
    simulate_entry,
    step_files_dir,
    with_defaults,
)

__all__ = ["SimulateError", "entry_from_flags", "parse_busy", "preflight_on_the_fake", "run"]

EXIT_OK = 0
EXIT_UNEXPECTED = 1
EXIT_BAD_INPUT = 2

_DURATION = re.compile(r"^(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>s|m|min|h)?$")
_UNIT_SECONDS = {"s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, None: 60.0}


class SimulateError(Exception):
    """A bad flag or scenario name: one message naming it; exit 2, no traceback."""


# ----------------------------------------------------------------------------- entry point


def run(args: argparse.Namespace, inputs: Mapping[str, str], out: TextIO, *, main: Main) -> int:
    """Run `simulate` with parsed `args` and the coordinator inputs given as flags.

    The action's steps run through `main`, the composition root. A bad input (InputErrors) is
    reported by the command line as for plan and coordinate.
    """
    if getattr(args, "waits", None):
        from runner_queue_fallback.tools.simulate import replay  # noqa: PLC0415  # only for --waits

        return replay.run(args, inputs, out, main=main)
    if getattr(args, "write_history", None):
        from runner_queue_fallback.tools.simulate import fleet  # noqa: PLC0415  # only for --write-history

        return fleet.run(args, out)
    try:
        if args.list:
            _print_list(out, as_json=args.json)
            return EXIT_OK
        chosen, stated = _choose(args, inputs)
        for spec in chosen.coordinators:
            _validate_inputs(spec.inputs)
        entry, close = _with_expectation(chosen, stated, _flags(args, inputs))
    except (SimulateError, CatalogueError) as exc:
        print(escape_log_line(f"simulate: error: {exc}"), file=out)
        return EXIT_BAD_INPUT
    # Every run has an expectation (the catalogue's, or one recomputed), or is too close to call.
    stated = close is None
    started = SystemClock().monotonic()
    sim = simulate_entry(entry, main=main)
    wall = SystemClock().monotonic() - started
    problems = [
        sim.observed(r).problems(c.expect) if c.expect else []
        for r, c in zip(sim.runs, entry.coordinators, strict=True)
    ]
    if args.json:
        document = as_json(sim, entry, problems, stated=stated, close=close)
        print(escape_json(json.dumps(document, indent=2)), file=out)
    else:  # each rendered line is one log line, whatever a flag's value holds
        lines = render(sim, entry, problems, stated=stated, wall=wall, close=close)
        print("\n".join(escape_log_line(line) for line in lines), file=out)
    return EXIT_UNEXPECTED if any(problems) else EXIT_OK


def _print_list(out: TextIO, *, as_json: bool = False) -> None:
    catalogue = load_catalogue()
    if as_json:
        listing = [
            {
                "name": name,
                "description": entry.description,
                "default": name == DEFAULT_SCENARIO,
                "pilot": entry.pilot,
                "expected": entry.expected,
            }
            for name, entry in catalogue.items()
        ]
        print(json.dumps(listing, indent=2), file=out)
        return
    width = max(len(name) for name in catalogue)
    for name, entry in catalogue.items():
        default = " (default)" if name == DEFAULT_SCENARIO else ""
        pilot = f" [pilot: {entry.pilot}]" if entry.pilot else ""
        print(f"{name.ljust(width)}  {entry.description}{default}{pilot}", file=out)
        print(f"{''.ljust(width)}  expected: {entry.expected}", file=out)


def _choose(args: argparse.Namespace, inputs: Mapping[str, str]) -> tuple[CatalogueEntry, bool]:
    """The entry to run, and whether its stated expectation still applies (no overrides)."""
    busy = [parse_busy(text) for text in args.busy or ()]
    workload = _workload(args)
    if args.scenario is None and inputs:
        return entry_from_flags(inputs, busy, workload), False
    catalogue = load_catalogue()
    name = args.scenario or DEFAULT_SCENARIO
    if name not in catalogue:
        raise SimulateError(
            f"unknown scenario {name!r}; `simulate --list` shows: {', '.join(catalogue)}"
        )
    entry = catalogue[name]
    if not (inputs or busy or workload):
        return entry, True
    coordinators = tuple(
        spec.model_copy(update={"inputs": {**spec.inputs, **inputs}}) for spec in entry.coordinators
    )
    world = _with_busy(entry.world, busy)
    if workload is not None:
        world = replace(world, workload=workload(world.workload))
    return entry.model_copy(update={"coordinators": coordinators, "world": world}), False


#: Inputs that choose the candidate pools: a catalogue scenario's story is written for its own.
_POOL_INPUTS = ("runner-type", "runners", "queue-policy", "queue-timeout-minutes")


def _flags(args: argparse.Namespace, inputs: Mapping[str, str]) -> list[str]:
    """The flags that change a scenario, as the user spelled them."""
    flags = [f"--{name}" for name in inputs]
    flags += ["--busy"] if args.busy else []
    flags += ["--workload-outcome"] if args.workload_outcome is not None else []
    return flags + (["--workload-minutes"] if args.workload_minutes is not None else [])


def _with_expectation(
    entry: CatalogueEntry, stated: bool, flags: list[str]
) -> tuple[CatalogueEntry, TooClose | None]:
    """A catalogue entry as stated, or one whose story and expectation are worked out anew.

    Flags that change a catalogue scenario's pools are refused: its story is about its pools.
    An outcome too close to call runs without an expectation (`TooClose`: what it turns on).
    """
    if stated:
        return entry, None
    custom = entry.name == "custom"
    pool_flags = [f for f in flags if f.removeprefix("--") in _POOL_INPUTS]
    if not custom and pool_flags:
        raise SimulateError(
            f"scenario {entry.name!r} is written for its own pools; {', '.join(pool_flags)} "
            "would change them and its story. Simulate your own inputs without a scenario name "
            f"(e.g. `simulate {' '.join(pool_flags)} ...`), or drop {', '.join(pool_flags)}"
        )
    if len(entry.coordinators) != 1 or entry.interrupt_at is not None:
        raise SimulateError(
            f"scenario {entry.name!r} cannot be recomputed with {', '.join(flags)}: it has "
            "several coordinators or a cancellation; run it without flags"
        )
    [spec] = entry.coordinators
    settings = _read_pool_settings(
        {env_name(k): v for k, v in spec.inputs.items()}, load_profiles()
    )
    title = "Your inputs" if custom else f"changed by {', '.join(flags)}"
    try:
        found = predict(entry.world, settings.candidates, settings.execution_timeout_minutes)
    except TooClose as close:
        unstated = (spec.model_copy(update={"expect": None}),)
        story = f"{title}: {close.story}."
        return entry.model_copy(update={"description": story, "coordinators": unstated}), close
    except Unpredictable as exc:
        what = "your inputs" if custom else f"scenario {entry.name!r} with {', '.join(flags)}"
        raise SimulateError(f"the outcome of {what} cannot be stated in advance: {exc}") from None
    stated_now = (spec.model_copy(update={"expect": found.expect}),)
    story = f"{title}: {found.story}."
    return entry.model_copy(update={"description": story, "coordinators": stated_now}), None


def parse_busy(text: str) -> tuple[str, float]:
    """Read `POOL=40m` (also `90s`, `1.5h`, a bare number of minutes, or `always`)."""
    pool, sep, duration = text.partition("=")
    value = duration.strip().lower()
    if not sep or not pool.strip() or not value:
        raise SimulateError(
            f"--busy expects POOL=DURATION, e.g. linux-amd64-gpu-h100-latest-1=40m or "
            f"linux-amd64-cpu16=always; got {text!r}"
        )
    if value in {"always", "forever", "inf"}:
        return pool.strip(), math.inf
    match = _DURATION.match(value)
    if match is None:
        raise SimulateError(
            f"--busy {text!r}: the duration must be like 40m, 90s, 1.5h, 40 (minutes) or always"
        )
    return pool.strip(), float(match["n"]) * _UNIT_SECONDS[match["unit"]]


def _workload(args: argparse.Namespace) -> Any:
    """A function from the world's workload to the one the flags ask for, or None."""
    outcome, minutes = args.workload_outcome, args.workload_minutes
    if outcome is None and minutes is None:
        return None
    if minutes is not None and not (math.isfinite(minutes) and minutes > 0):
        raise SimulateError(f"--workload-minutes must be a number of minutes > 0, got {minutes:g}")

    def apply(base: Workload) -> Workload:
        return Workload(
            outcome=outcome or base.outcome,
            duration=base.duration if minutes is None else minutes * 60.0,
        )

    return apply


def _with_busy(world: Scenario, busy: Iterable[tuple[str, float]]) -> Scenario:
    pools = list(world.pools)
    for name, seconds in busy:
        matches = [i for i, p in enumerate(pools) if _names_pool(name, p)]
        if not matches:
            known = ", ".join(label_text(p) or p.group for p in pools)
            raise SimulateError(
                f"--busy {name!r}: no pool has these labels; the pools are: {known}"
            )
        for index in matches:
            pools[index] = replace(pools[index], busy=((0.0, seconds),) if seconds > 0 else ())
    return replace(world, pools=tuple(pools))


def _names_pool(name: str, pool: PoolSpec) -> bool:
    """Whether `--busy` names this pool.

    By its labels in any order and case, as `group/labels` (or `group / labels`), or by its
    group alone when it has no labels.
    """
    group, _, labels = name.rpartition("/") if "/" in name else ("", "", name)
    group, labels = group.strip(), labels.strip()
    if group and group != pool.group:
        return False
    if not label_names(pool.labels):
        return labels in {"", pool.group} and bool(group or labels)
    return bool(labels) and same_labels(labels.split(","), pool.labels)


def entry_from_flags(
    inputs: Mapping[str, str], busy: Iterable[tuple[str, float]], workload: Any = None
) -> CatalogueEntry:
    """A world with one pool per resolved candidate, free unless `busy` names it."""
    settings = _read_pool_settings({env_name(k): v for k, v in inputs.items()}, load_profiles())
    pools: dict[tuple[str, str], PoolSpec] = {}
    for candidate in settings.candidates:
        pools.setdefault(
            (candidate.group, canonical(candidate.labels)),
            PoolSpec(
                group=HOSTED_POOL if candidate.hosted else candidate.group,
                labels=candidate.labels,
                hosted=candidate.hosted,
            ),
        )
    world = Scenario(
        name="custom",
        pools=tuple(pools.values()),
        timings=Timings(timeout_minutes=settings.execution_timeout_minutes),
        parent=None,
    )
    world = _with_busy(world, busy)
    if workload is not None:
        world = replace(world, workload=workload(world.workload))
    return CatalogueEntry(
        name="custom",
        description="Your inputs; one pool per candidate, free unless --busy says otherwise.",
        world=world,
        coordinators=(CoordinatorSpec(inputs=dict(inputs), parent_run_id=PARENT_RUN_ID),),
    )


def _validate_inputs(inputs: Mapping[str, str]) -> None:
    """Every input rule, before anything runs, with placeholders for what the world supplies."""
    placeholders = {
        "workflow": "runner-worker.yml",
        "workflow-ref": "main",
        "source-ref": SOURCE_REF,
        "source-sha": "0" * 40,
        "token": TOKEN,
    }
    environ = {env_name(k): v for k, v in {**placeholders, **inputs}.items()}
    read_coordinator_inputs(environ, load_profiles())


# ------------------------------------------------------------------------------ rendering


def preflight_on_the_fake(
    flags: Mapping[str, str], *, main: Main, scenario: str | None = None, out: TextIO | None = None
) -> int:
    """`preflight --simulate [SCENARIO]`: every check against the bundled fake GitHub.

    Without a scenario the world is the one `simulate` builds from the same inputs (one free pool
    per candidate, the child workflow `runner-worker.yml` on `main`, the source at its SHA, a
    live parent run); with one, that scenario's world and its (first) coordinator's inputs, the
    flags on top. The token is the fake's own, and where the world has runner groups so is the
    `runners-token` (a stand-in its organisation accepts): no token and no network are needed.
    """
    inputs = {"workflow": "runner-worker.yml", "workflow-ref": "main", "runner-type": "cpu"}
    clock = FakeClock()
    if scenario is None:
        inputs |= flags
        world = entry_from_flags(inputs, ()).world.build(clock)
    else:
        catalogue = load_catalogue()
        if scenario not in catalogue:
            known = ", ".join(catalogue)
            message = (
                f"preflight: error: unknown scenario {scenario!r}; `simulate --list` shows: {known}"
            )
            print(escape_log_line(message), file=out)
            return EXIT_BAD_INPUT
        entry = catalogue[scenario]
        inputs |= {**entry.coordinators[0].inputs, **flags}
        world = entry.world.build(clock)  # with runner groups, `with_defaults` adds the token
    if PARENT_RUN_ID not in world.runs:
        world.add_parent_run(PARENT_RUN_ID)
    with step_files_dir(None) as files:
        environ = coordinator_environ(world, with_defaults(world, inputs), files)
        return main(["preflight"], environ, clock=clock, session=world.session())
