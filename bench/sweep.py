"""The load sweep: the realistic mix at fixed loads, every coordinator run as a job to its end.

    .venv/bin/python -m bench --load-sweep            # full: 88-264 lanes of ours, 4-12 of the baseline
    .venv/bin/python -m bench --load-sweep --quick    # small loads, short horizons, a 100-request quota

A lane runs two coordinators one after the other (the concurrency search's mix and harness,
`bench.run.mix_specs`), so N lanes is N coordinators at once and 2N in all. Each coordinator runs
as the runner runs its job (`bench.harness.JobLimits`): cancelled at the `timeout-minutes` that
`plan` computes for its inputs, then its post step, cut off 5 minutes after the job's
cancellation. The fake GitHub applies the primary quota and the documented secondary limits
(`runner_queue_fallback.sim.limits`). Every load runs twice: with ETags that hold while a resource
is unchanged, and with ETags that change on every read.

Per load, from the fake's ledger and run history (never from the coordinators' own counters):
coordinators that ended well, failed cleanly (no child of theirs non-terminal when their job
ended), failed leaving a child non-terminal at their job's end, children still non-terminal when
every job had ended, jobs ended by their timeout, admission waits, the worst deadline -> cancel
lateness, requests sent and counted, rate-limit replies, the peak counted in one quota window and
the peak secondary-limit points in one minute.
"""

from __future__ import annotations

import json
import platform
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness import (
    CoordinatorRecord,
    JobLimits,
    Trial,
    Variant,
    ledger_totals,
    simulate,
)
from bench.metrics import peak_window, precision
from bench.run import Settings, mix_specs
from runner_queue_fallback.sim import ETagPolicy, LedgerEntry, SecondaryLimits

__all__ = [
    "DEFAULT_SWEEP_OUT",
    "SweepSettings",
    "admission_waits",
    "load_figures",
    "peak_points_per_minute",
    "render_sweep",
    "run_load",
    "run_sweep",
    "write_sweep",
]

DEFAULT_SWEEP_OUT = Path(__file__).resolve().parent / "results" / "sweep.json"
ETAG_WORLDS: tuple[ETagPolicy, ...] = ("stable", "every-read")
POINTS_WINDOW = 60.0


@dataclass(frozen=True)
class SweepSettings:
    """The loads (lanes) of each coordinator, the mix's horizons, and the world."""

    quick: bool
    ours: tuple[int, ...] = (88, 132, 176, 264)
    baseline: tuple[int, ...] = (4, 6, 8, 12)
    mix: Settings = field(default_factory=lambda: Settings(quick=False))
    secondary: SecondaryLimits | None = field(default_factory=SecondaryLimits)
    jobs: JobLimits = field(default_factory=JobLimits)
    etag_worlds: tuple[ETagPolicy, ...] = ETAG_WORLDS

    @classmethod
    def make(cls, *, quick: bool, latency: float = 0.25) -> SweepSettings:
        """The full sweep, or the quick one (the quick bench's mix; loads scaled to its quota)."""
        mix = Settings.make(quick=quick, latency=latency, max_n=None)
        if not quick:
            return cls(quick=False, mix=mix)
        return cls(quick=True, ours=(4, 6, 8, 12), baseline=(1, 2), mix=mix)

    def loads(self) -> list[tuple[Variant, int]]:
        """Every (coordinator, lanes) pair of one table, ours first."""
        return [("ours", n) for n in self.ours] + [("baseline", n) for n in self.baseline]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "quick": self.quick,
            "ours": list(self.ours),
            "baseline": list(self.baseline),
            "mix": self.mix.__dict__ | {"ladder": list(self.mix.ladder)},
            "secondary": None if self.secondary is None else asdict(self.secondary),
            "jobs": asdict(self.jobs),
            "etag_worlds": list(self.etag_worlds),
        }


# -- figures of one load ----------------------------------------------------------------------


def load_figures(trial: Trial) -> dict[str, Any]:
    """What happened at one load: outcomes, leftovers, waits, lateness, requests, peaks."""
    records = trial.records
    left = [r for r in records if r.children_left]
    # a cancel before the deadline is an error's cleanup, not a deadline kept late
    cancels = precision(records).cancel_lateness
    lateness = [late for late in cancels if late >= 0]
    totals = ledger_totals(e for r in records for e in r.entries)
    limits = [e.limit for r in records for e in r.entries if e.limit]
    waits = [admission_waits(r) for r in records]
    return {
        "coordinators": len(records),
        "ended_well": sum(1 for r in records if r.success and not r.children_left),
        "failed_clean": sum(1 for r in records if not r.success and not r.children_left),
        "failed_child_left": sum(1 for r in records if not r.success and r.children_left),
        "ended_well_child_left": sum(1 for r in records if r.success and r.children_left),
        "children": sum(len(r.children) for r in records),
        "children_left_at_exit": sum(r.children_left for r in left),
        "children_non_terminal_at_end": trial.leaked_children,
        "job_timeouts": sum(1 for r in records if r.job is not None and r.job.timed_out),
        "post_steps_cut_off": sum(
            1 for r in records if r.job is not None and r.job.post_exit_code is None
        ),
        "post_steps_failed": sum(
            1 for r in records if r.job is not None and r.job.post_exit_code not in {0, None}
        ),
        "admission_waits": None if None in waits else sum(w or 0 for w in waits),
        "worst_deadline_lateness_s": max(lateness) if lateness else None,
        "deadlines_measured": len(lateness),
        "cancels_before_deadline": len(cancels) - len(lateness),
        "sent": totals.sent,
        "counted": totals.counted,
        "not_modified": totals.not_modified,
        "quota_reads": totals.quota_reads,
        "primary_limited": limits.count("primary"),
        "secondary_limited": limits.count("secondary"),
        "peak_counted_in_quota_window": peak_window(trial),
        "peak_points_per_minute": peak_points_per_minute(trial.ledger),
        "errors_by_type": _counts(r.error_type or "none" for r in records if not r.success),
        "virtual_hours": trial.virtual_seconds / 3600,
        "cpu_seconds": trial.cpu_seconds,
    }


#: The warning the coordinator prints each time it waits for API quota before a dispatch.
_ADMISSION_LINE = re.compile(r"^::warning title=Waiting for API quota::", re.MULTILINE)


def admission_waits(record: CoordinatorRecord) -> int | None:
    """How often the coordinator waited for admission before a dispatch: its warnings about it."""
    return 0 if not record.log else len(_ADMISSION_LINE.findall(record.log))


def peak_points_per_minute(ledger: Sequence[LedgerEntry]) -> int:
    """The most secondary-limit points the fake charged in any 60 s (a window at each request)."""
    peak = total = 0
    start = 0
    for entry in ledger:
        total += entry.points
        while ledger[start].time <= entry.time - POINTS_WINDOW:
            total -= ledger[start].points
            start += 1
        peak = max(peak, total)
    return peak


def _counts(values: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


# -- the sweep --------------------------------------------------------------------------------


def run_load(settings: SweepSettings, coordinator: Variant, lanes: int, etags: ETagPolicy) -> Trial:
    """One load: `lanes` lanes of the mix, each coordinator run as a job."""
    specs = [replace(spec, seed=index) for index, spec in enumerate(mix_specs(lanes, settings.mix))]
    return simulate(
        coordinator,
        specs,
        quota=settings.mix.quota,
        latency=settings.mix.latency,
        etags=etags,
        secondary=settings.secondary,
        jobs=settings.jobs,
    )


def run_sweep(settings: SweepSettings, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every load in every ETag world; the results as plain JSON-able data."""
    tables: dict[str, list[dict[str, Any]]] = {}
    started = time.perf_counter()
    for etags in settings.etag_worlds:
        rows = tables.setdefault(etags, [])
        for coordinator, lanes in settings.loads():
            wall = time.perf_counter()
            trial = run_load(settings, coordinator, lanes, etags)
            figures = load_figures(trial)
            row = {"coordinator": coordinator, "lanes": lanes, "etags": etags} | figures
            row["wall_seconds"] = time.perf_counter() - wall
            rows.append(row)
            log(
                f"  ETags {etags:10} {coordinator:8} {lanes:4d} lanes: "
                f"{row['ended_well']}/{row['coordinators']} ended well, "
                f"{row['failed_child_left']} left a child, "
                f"{row['children_non_terminal_at_end']} children left at the end "
                f"({row['wall_seconds']:.0f} s)"
            )
    return {
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "settings": settings.as_dict(),
        "wall_seconds": time.perf_counter() - started,
        "tables": tables,
    }


# -- the tables -------------------------------------------------------------------------------

#: (heading, width, key or function of a row): the columns of each table.
_COLUMNS: tuple[tuple[str, int, Callable[[Mapping[str, Any]], Any]], ...] = (
    ("coordinator", 12, lambda r: r["coordinator"]),
    ("lanes", 6, lambda r: r["lanes"]),
    ("runs", 5, lambda r: r["coordinators"]),
    ("well", 5, lambda r: r["ended_well"]),
    ("clean", 6, lambda r: r["failed_clean"]),
    ("+child", 7, lambda r: r["failed_child_left"] + r["ended_well_child_left"]),
    ("left@end", 9, lambda r: r["children_non_terminal_at_end"]),
    ("t/o", 4, lambda r: r["job_timeouts"]),
    ("adm", 4, lambda r: r["admission_waits"]),
    ("late s", 8, lambda r: r["worst_deadline_lateness_s"]),
    ("sent", 7, lambda r: r["sent"]),
    ("counted", 8, lambda r: r["counted"]),
    ("403/429 p+s", 12, lambda r: f"{r['primary_limited']}+{r['secondary_limited']}"),
    ("peak/h", 7, lambda r: r["peak_counted_in_quota_window"]),
    ("pts/min", 8, lambda r: r["peak_points_per_minute"]),
)
_LEGEND = (
    "runs: coordinators (lanes x 2); well: ended well; clean: failed with no child left; "
    "+child: a child of theirs non-terminal when their job ended (post step included); "
    "left@end: children non-terminal after every job ended; t/o: jobs ended by their timeout; "
    "adm: admission waits; late s: worst queue deadline -> cancel POST; sent/counted: requests "
    "(counted: against the primary quota); 403/429 p+s: refusals by the primary quota + the "
    "secondary limits; peak/h: most counted in one quota window; pts/min: most secondary-limit "
    "points in one minute"
)


def render_sweep(results: Mapping[str, Any]) -> str:
    """One table per ETag world, a row per load."""
    settings = results["settings"]
    mix = settings["mix"]
    secondary = settings["secondary"]
    limits = (
        "secondary limits off"
        if secondary is None
        else f"secondary limits {secondary['points_per_minute']} points/min, "
        f"{secondary['concurrent']} concurrent"
    )
    mode = "QUICK (short horizons, quota 100/h)" if settings["quick"] else "full"
    lines = [
        (
            f"runner-queue-fallback load sweep: {mode}; mix {mix['mix']}, quota {mix['quota']}/h, "
            f"{limits}, {mix['latency']:g} s per reply; job timeout as `plan` computes, post step "
            f"cut off {settings['jobs']['post_step_seconds']:g} s after the job's cancellation"
        ),
    ]
    head = "".join(f"{name:>{width}}" for name, width, _ in _COLUMNS)
    for etags, rows in results["tables"].items():
        title = {
            "stable": "ETags hold while a resource is unchanged",
            "every-read": "ETags change on every read (no 304s)",
        }.get(etags, etags)
        lines += ["", f"{title}:", head, "-" * len(head)]
        lines.extend(
            "".join(f"{_cell(get(row)):>{width}}" for _, width, get in _COLUMNS) for row in rows
        )
    lines += ["", _LEGEND, f"wall time {results['wall_seconds']:.0f} s"]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def write_sweep(results: Mapping[str, Any], out: Path) -> None:
    """Write the results as JSON."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
