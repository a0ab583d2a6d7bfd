"""The `simulate` command: watch the real coordinator, post step and guard on a virtual clock.

A scenario comes from the catalogue (`runner_queue_fallback/scenarios/*.yaml`), or is built from the
command's flags: one free pool per resolved candidate unless `--busy` says otherwise. The output is
what a person would see in the Actions UI, rendered for a terminal and stamped with virtual time:
the step log, the post step, each worker's guard step, the step summary, the outputs and a
timeline of what really happened to every child run (from the fake GitHub, not from our logs).

Long (603 lines) because the command, its catalogue entries and the story it prints from one run;
issue 34 splits the rendering out.
"""

from __future__ import annotations

import argparse
import html
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, TextIO

from runner_queue_fallback.clock import SystemClock
from runner_queue_fallback.commands import Main
from runner_queue_fallback.inputs import env_name, read_coordinator_inputs
from runner_queue_fallback.inputs import read_pool_settings as _read_pool_settings
from runner_queue_fallback.profiles import HOSTED_POOL, load_profiles
from runner_queue_fallback.report import escape_json, escape_log_line
from runner_queue_fallback.scenarios import (
    DEFAULT_SCENARIO,
    CatalogueEntry,
    CatalogueError,
    CoordinatorSpec,
    Expectation,
    load_catalogue,
)
from runner_queue_fallback.scenarios.predict import TooClose, Unpredictable, predict
from runner_queue_fallback.sim.model import RunHistory, Timings, Workload
from runner_queue_fallback.sim.scenario import PoolSpec, Scenario
from runner_queue_fallback.simulation import (
    PARENT_RUN_ID,
    SOURCE_REF,
    TOKEN,
    Simulated,
    SimulationRun,
    simulate_entry,
)

__all__ = ["SimulateError", "entry_from_flags", "ledger_summary", "parse_busy", "run"]

EXIT_OK = 0
EXIT_UNEXPECTED = 1
EXIT_BAD_INPUT = 2

_DURATION = re.compile(r"^(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>s|m|min|h)?$")
_UNIT_SECONDS = {"s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, None: 60.0}
_COMMAND = re.compile(r"^::(?P<name>[a-z-]+)(?: (?P<props>[^:]*))?::(?P<message>.*)$")
_NUMBER = re.compile(r"/\d+(?=/|$)")
_LINK = re.compile(r"\[(?P<text>[^\]]*)\]\((?P<url>[^)]*)\)")


class SimulateError(Exception):
    """A bad flag or scenario name: one message naming it; exit 2, no traceback."""


# ----------------------------------------------------------------------------- entry point


def run(args: argparse.Namespace, inputs: Mapping[str, str], out: TextIO, *, main: Main) -> int:
    """Run `simulate` with parsed `args` and the coordinator inputs given as flags.

    The action's steps run through `main`, the composition root. A bad input (InputErrors) is
    reported by the command line as for plan and coordinate.
    """
    if getattr(args, "waits", None):
        from runner_queue_fallback.stats import replay  # noqa: PLC0415  # only for --waits

        return replay.run(args, inputs, out, main=main)
    if getattr(args, "write_history", None):
        from runner_queue_fallback.stats import fleet  # noqa: PLC0415  # only for --write-history

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


def which_way(sim: Simulated, run: SimulationRun, close: TooClose) -> str:
    """How a run too close to call went: the side of the hinge it fell on, and its end."""
    observed = sim.observed(run)
    ended = Expectation(
        exit_code=observed.exit_code, attempts=observed.attempts, served_by=observed.served_by
    ).describe()
    if close.pool is None:
        timed_out = any("execution timeout" in o for o in observed.outcomes)
        side = f"the workload {'was cut off at' if timed_out else 'ended within'} its timeout"
    elif any("race" in o for o in observed.outcomes):
        side = f"{close.pool} freed its runner just as its child was being cancelled (the race)"
    elif observed.served_by == close.pool:
        side = f"{close.pool} freed its runner before its queue deadline"
    else:
        side = f"the queue deadline came first: {close.pool}'s child was cancelled"
    return f"{side}; {ended}"


# -------------------------------------------------------------------------- building worlds


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
        matches = [i for i, p in enumerate(pools) if name in _pool_names(p)]
        if not matches:
            known = ", ".join(_label_text(p) for p in pools)
            raise SimulateError(
                f"--busy {name!r}: no pool has these labels; the pools are: {known}"
            )
        for index in matches:
            pools[index] = replace(pools[index], busy=((0.0, seconds),) if seconds > 0 else ())
    return replace(world, pools=tuple(pools))


def _pool_names(pool: PoolSpec) -> set[str]:
    labels = _label_text(pool)
    return {labels, f"{pool.group}/{labels}", f"{pool.group} / {labels}"}


def _label_text(pool: PoolSpec) -> str:
    return pool.labels if isinstance(pool.labels, str) else ",".join(pool.labels)


def entry_from_flags(
    inputs: Mapping[str, str], busy: Iterable[tuple[str, float]], workload: Any = None
) -> CatalogueEntry:
    """A world with one pool per resolved candidate, free unless `busy` names it."""
    settings = _read_pool_settings({env_name(k): v for k, v in inputs.items()}, load_profiles())
    pools: dict[tuple[str, str], PoolSpec] = {}
    for candidate in settings.candidates:
        pools.setdefault(
            (candidate.group, candidate.label_text),
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


def stamp(seconds: float) -> str:
    """Virtual seconds as `[HH:MM:SS]`."""
    whole = int(seconds)
    return f"[{whole // 3600:02d}:{whole // 60 % 60:02d}:{whole % 60:02d}]"


def render_log(lines: Iterable[tuple[float, str]]) -> list[str]:
    """Workflow-command lines as the Actions UI shows them: groups, annotations, no masks."""
    rendered, indent = [], ""
    for at, line in lines:
        match = _COMMAND.match(line)
        if match is None:
            rendered.append(f"{stamp(at)} {indent}{line}")
            continue
        name, message = match["name"], _unescape(match["message"])
        if name in {"add-mask", "debug", "save-state", "set-output"}:
            continue
        if name == "endgroup":
            indent = ""
            continue
        if name == "group":
            rendered.append(f"{stamp(at)} > {message}")
            indent = "  "
            continue
        title = _title(match["props"] or "")
        head = f"{name.upper() if name == 'error' else name}{f' ({title})' if title else ''}: "
        # Our annotations are one line each: a line break in one came from a value, and stays
        # visible (`\n`) on the annotation's own line.
        rendered.append(escape_log_line(f"{stamp(at)} {indent}{head}{message}"))
    return rendered


def _unescape(text: str) -> str:
    return (
        text.replace("%0D", "\r")
        .replace("%0A", "\n")
        .replace("%3A", ":")
        .replace("%2C", ",")
        .replace("%25", "%")
    )


def _title(props: str) -> str:
    for prop in props.split(","):
        key, _, value = prop.partition("=")
        if key.strip() == "title":
            return _unescape(value)
    return ""


def render_summary(markdown: str) -> list[str]:
    """The step summary's Markdown as plain text: headings, aligned tables, links spelled out."""
    rendered: list[str] = []
    table: list[list[str]] = []
    for line in [*markdown.splitlines(), ""]:
        if line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
            if not all(set(c) <= {"-", ":"} for c in cells):
                table.append([_plain(_LINK.sub(r"\g<text>", c)) for c in cells])
            continue
        if table:
            rendered += _align(table)
            table = []
        if line.startswith("#"):
            title = _plain(line.lstrip("#").strip())
            rendered += [title, "-" * len(title)]
        elif line.strip():
            rendered.append(_plain(_LINK.sub(_spell_link, line)))
    return rendered


def _spell_link(match: re.Match[str]) -> str:
    text, url = match["text"], match["url"]
    return url if text == url else f"{text}: {url}"


def _plain(text: str) -> str:
    return html.unescape(text.replace("**", "").replace("\\|", "|"))


def _align(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) if i < len(row) else 0 for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip() for row in rows
    ]
    return [lines[0], "  ".join("-" * w for w in widths), *lines[1:]]


def render_timeline(sim: Simulated, run: SimulationRun, entry: CatalogueEntry) -> list[str]:
    """What really happened, child by child, from the fake GitHub's history (not our log)."""
    lines = [f"{stamp(at)} {what}" for at, what in _world_events(entry)]
    guards = {g.run_id: g for g in sim.guards}
    for number, child in enumerate(sim.children(run), start=1):
        group = child.pool[0] or HOSTED_POOL if child.pool else ""  # no group: hosted
        pool = f"{group} / {','.join(child.pool[1])}" if child.pool else "no pool"
        lines.append(f"candidate {number}: {pool}, child run {child.run_id}")
        events = _child_events(child, guards.get(child.run_id) is not None)
        lines += [f"  {stamp(at)} {what}" for at, what in sorted(events, key=lambda e: e[0])]
    return lines or ["(nothing was dispatched)"]


def _world_events(entry: CatalogueEntry) -> list[tuple[float, str]]:
    events = [
        (e.at, f"repository: {e.kind.replace('_', ' ')} {e.ref or ''}".rstrip())
        for e in entry.world.events
    ]
    if entry.interrupt_at is not None:
        events.append((entry.interrupt_at, "runner: SIGTERM to the coordinator's main step"))
    return sorted(events)


def _child_events(child: RunHistory, guarded: bool) -> list[tuple[float, str]]:
    events = [(child.dispatched_at, "dispatched")]
    if math.isfinite(child.job_queued_at):
        events.append((child.job_queued_at, "worker job queued"))
    else:  # a run GitHub never gives a job (`Platform.zombies`)
        events.append((child.dispatched_at, "GitHub never creates its worker job"))
    optional = [
        (child.cancel_requested_at, "cancel requested"),
        (child.allocated_at, f"runner allocated: {child.runner}"),
        (child.started_at, "guard step started" + ("" if guarded else " (no guard hook)")),
    ]
    if child.guard_passed is False:
        optional.append((child.completed_at, "guard refused: the workload never starts"))
    optional.append((child.workload_started_at, "guard passed, workload started"))
    events += [(at, what) for at, what in optional if at is not None]
    if child.completed_at is not None:
        evidence = "" if child.allocated_at is not None else " (no runner, no step)"
        events.append((child.completed_at, f"concluded: {child.conclusion}{evidence}"))
    else:
        events.append((math.inf, "still running when the simulation ended"))
    return [(at if math.isfinite(at) else child.dispatched_at, what) for at, what in events]


def render(
    sim: Simulated,
    entry: CatalogueEntry,
    problems: list[list[str]],
    *,
    stated: bool,
    wall: float,
    close: TooClose | None = None,
) -> list[str]:
    """The whole text report; `close`: the outcome was too close to call, so none was stated."""
    lines = [f"Scenario {entry.name}: {entry.description}"]
    if stated:
        lines.append(f"Expected: {entry.expected}")
    elif close is not None:
        lines.append("Expected: cannot be stated in advance, the outcome depends on the timing")
    lines += _section("Pools") + [_describe_pool(p) for p in entry.world.pools]
    many = len(sim.runs) > 1
    for index, run in enumerate(sim.runs):
        who = f"Coordinator {index + 1} (parent run {run.parent_run_id}): " if many else ""

        def title(name: str, who: str = who) -> list[str]:
            return _section(f"{who}{name}" if who else name[0].upper() + name[1:])

        lines += title("main step log") + render_log(run.log_lines)
        lines += title("post step log") + render_log(run.post_log_lines)
        for child in sim.children(run):
            for guard in (g for g in sim.guards if g.run_id == child.run_id):
                lines += _section(f"Child run {child.run_id}: guard step log")
                lines += render_log(guard.lines)
        lines += title("step summary") + render_summary(run.summary)
        lines += title("outputs") + [f"{k}: {v}" for k, v in run.outputs.items()]
        lines += title("timeline (virtual time)") + render_timeline(sim, run, entry)
    lines += _section("Result")
    for index, run in enumerate(sim.runs):
        who = f"coordinator {index + 1}: " if many else ""
        lines.append(f"{who}exit code {run.exit_code}, post step exit code {run.post_exit_code}")
        if stated:
            lines += _verdict(problems[index], entry.coordinators[index])
        elif close is not None:
            lines.append(f"  the timing decided: {which_way(sim, run, close)}")
    ledger = ledger_summary(sim)
    lines.append(
        f"Repository API requests (coordinators and guards): {ledger['sent']} sent, "
        f"{ledger['counted']} counted, {ledger['not-modified']} answered 304"
    )
    lines.append(f"Simulated {stamp(sim.virtual_seconds)[1:-1]} of virtual time in {wall:.2f} s")
    return lines


def _verdict(problems: list[str], spec: CoordinatorSpec) -> list[str]:
    """How one coordinator ended against what was stated for it."""
    if problems:
        return [f"  NOT AS EXPECTED: {p}" for p in problems]
    return [f"  as expected: {spec.expect.describe() if spec.expect else 'nothing stated'}"]


def _section(title: str) -> list[str]:
    return ["", f"== {title} =="]


def _describe_pool(pool: PoolSpec) -> str:
    spans = [
        f"{stamp(start)[1:-1]} to {'the end' if math.isinf(end) else stamp(end)[1:-1]}"
        for start, end in pool.busy
    ]
    busy = f"no free runner {', '.join(spans)}" if spans else "free"
    runners = f"{pool.runners} runner{'s' if pool.runners != 1 else ''}"
    return f"{pool.group} / {_label_text(pool)}: {runners}, {busy}"


# ----------------------------------------------------------------------------------- JSON


def ledger_summary(sim: Simulated) -> dict[str, Any]:
    """The fake GitHub's request ledger, summed: sent, counted, 304s, faults and per path."""
    ledger = sim.world.ledger
    prefix = f"/repos/{sim.world.repository}"
    by_path = Counter(
        f"{e.method} {_NUMBER.sub('/{n}', e.path.removeprefix(prefix))}" for e in ledger
    )
    return {
        "sent": len(ledger),
        "counted": sum(1 for e in ledger if e.counted),
        "not-modified": sum(1 for e in ledger if e.status == 304),
        "faults": sum(1 for e in ledger if e.fault),
        "by-path": dict(sorted(by_path.items())),
    }


def as_json(
    sim: Simulated,
    entry: CatalogueEntry,
    problems: list[list[str]],
    *,
    stated: bool,
    close: TooClose | None = None,
) -> dict[str, Any]:
    """Attempts, outputs and exit codes of each coordinator, and the ledger summary.

    `timing`: for an outcome too close to call, what it turned on and which way it went.
    """
    coordinators = []
    for run, spec, found in zip(sim.runs, entry.coordinators, problems, strict=True):
        observed = sim.observed(run)
        coordinators.append(
            {
                "parent-run-id": run.parent_run_id,
                "exit-code": run.exit_code,
                "post-exit-code": run.post_exit_code,
                "served-by": observed.served_by,
                "attempts": json.loads(run.outputs.get("attempts-json") or "[]"),
                "outputs": run.outputs,
                "expected": spec.expect.describe() if stated and spec.expect else None,
                "as-expected": (not found) if stated and spec.expect else None,
                "problems": found,
                "timing": None
                if close is None
                else {"depends-on": close.hinge, "went": which_way(sim, run, close)},
            }
        )
    return {
        "scenario": entry.name,
        "description": entry.description,
        "virtual-seconds": sim.virtual_seconds,
        "coordinators": coordinators,
        "ledger": ledger_summary(sim),
    }
