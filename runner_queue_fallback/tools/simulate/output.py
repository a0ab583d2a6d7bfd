"""What `simulate` prints: what a person would see in the Actions UI, for a terminal, on virtual time.

The step log, the post step, each worker's guard step, the step summary, the outputs and a
timeline of what really happened to every child run (from the fake GitHub, not from our logs), as
text or as JSON.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from runner_queue_fallback.core.actions_io import escape_log_line
from runner_queue_fallback.core.profiles import HOSTED_POOL
from runner_queue_fallback.fake_github.model import RunHistory
from runner_queue_fallback.fake_github.scenario import PoolSpec
from runner_queue_fallback.tools.simulate.scenarios import (
    CatalogueEntry,
    CoordinatorSpec,
    Expectation,
    same_pool_text,
)
from runner_queue_fallback.tools.simulate.scenarios.predict import TooClose
from runner_queue_fallback.tools.simulate.steps import (
    Simulated,
    SimulationRun,
)

__all__ = [
    "as_json",
    "label_text",
    "ledger_summary",
    "render",
    "render_log",
    "render_summary",
    "stamp",
    "which_way",
]

_COMMAND = re.compile(r"^::(?P<name>[a-z-]+)(?: (?P<props>[^:]*))?::(?P<message>.*)$")
_NUMBER = re.compile(r"/\d+(?=/|$)")
_LINK = re.compile(r"\[(?P<text>[^\]]*)\]\((?P<url>[^)]*)\)")


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
    elif same_pool_text(observed.served_by, close.pool):
        side = f"{close.pool} freed its runner before its queue deadline"
    else:
        side = f"the queue deadline came first: {close.pool}'s child was cancelled"
    return f"{side}; {ended}"


# -------------------------------------------------------------------------- building worlds


def label_text(pool: PoolSpec) -> str:
    """A pool's labels as the `runners` input spells them."""
    return pool.labels if isinstance(pool.labels, str) else ",".join(pool.labels)


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
    lines = _header(sim, entry, stated=stated, close=close)
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


def _header(
    sim: Simulated, entry: CatalogueEntry, *, stated: bool, close: TooClose | None
) -> list[str]:
    """The scenario, what is expected of it, and the coordinator job's timeout it was given."""
    lines = [f"Scenario {entry.name}: {entry.description}"]
    if stated:
        lines.append(f"Expected: {entry.expected}")
    elif close is not None:
        lines.append("Expected: cannot be stated in advance, the outcome depends on the timing")
    if sim.job_timeout_minutes is not None:
        lines.append(
            f"Coordinator job: timeout-minutes {sim.job_timeout_minutes}, as `plan` advises for "
            "these inputs (its minimum and the API quota's possible extra)"
        )
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
    return f"{pool.group} / {label_text(pool)}: {runners}, {busy}"


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
