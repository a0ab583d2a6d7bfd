"""The load sweep: the realistic mix at fixed loads, every coordinator run as a job to its end.

Long (one measurement) because the sweep's loads, its loss and guard columns and their table are
read together.

    .venv/bin/python -m bench --load-sweep            # full: 88-264 lanes of ours, 4-12 of the baseline
    .venv/bin/python -m bench --load-sweep --quick    # small loads, short horizons, a 100-request quota
    .venv/bin/python -m bench --load-sweep --quota 250   # the same mix on 250 an hour: 22-66 lanes
    .venv/bin/python -m bench --load-sweep --quota 250 --lanes 44,66 --baseline-lanes= --etags stable
    .venv/bin/python -m bench --load-sweep --lanes 132 --baseline-lanes= --etags stable --guard-wait 0
    .venv/bin/python -m bench --load-sweep --lanes 132 --baseline-lanes= --etags stable \
        --guard-wait 60 --admission-minutes 120   # a fleet past its quota, as it is advised to
    .venv/bin/python -m bench --load-sweep --quota 1000 --coordinator-quota 5000 --lanes 264 \
        --baseline-lanes= --etags stable   # coordinators on a GitHub App's 5,000, guards on 1,000

A lane runs two coordinators one after the other (the concurrency search's mix and harness,
`bench.mix.mix_specs`), so N lanes is N coordinators at once and 2N in all. Each coordinator runs
as the runner runs its job (`bench.harness.JobLimits`): cancelled at the `timeout-minutes` that
`plan` computes for its inputs, then its post step, cut off 5 minutes after the job's
cancellation. The fake GitHub applies the primary quota and the documented secondary limits
(`runner_queue_fallback.fake_github.limits`). Each child runs the real guard as its first step, on the
same quota: when the quota is spent it waits for a reset within its `guard-quota-wait-minutes`
(`--guard-wait`; 0: none) and refuses the workload otherwise (it fails closed). Every load runs
twice: with ETags that hold while a resource is unchanged, and with ETags that change on every
read. `--quota N` runs the same sweep on a quota of N an hour, its loads scaled by N / 1,000
(N / 100 with `--quick`), so that each load is the same multiple of the saturating one.
`--coordinator-quota N` puts the coordinators (main and post steps) on a GitHub App
installation's bucket of N an hour, minting and renewing its tokens as the action does, while
`--quota` stays the repository's bucket that the guards spend.

Per load, from the fake's ledger and run history (never from the coordinators' own counters):
coordinators that ended well, failed cleanly (no child of theirs non-terminal when their job
ended), failed leaving a child non-terminal at their job's end, children still non-terminal when
every job had ended, jobs ended by their timeout, admission waits, the worst deadline -> cancel
lateness, requests sent and counted, rate-limit replies, the peak counted in one quota window and
the peak secondary-limit points in one minute; started workloads cancelled by their own
coordinator for no reason the specification gives (bench/losses.py), and apart from them those
cancelled at their job's timeout during a quota wait the coordinator had warned of; what the
guards sent, how many waited for a reset, how many refused for a spent quota, and of those how
many with the reset (read from the fake's ledger) within their wait; each role's job
`timeout-minutes`.
"""

from __future__ import annotations

import itertools
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
from bench.losses import REASONS
from bench.metrics import peak_window, precision
from bench.mix import Settings, mix_specs
from runner_queue_fallback.core.input_table import GUARD
from runner_queue_fallback.fake_github import ETagPolicy, LedgerEntry, SecondaryLimits
from runner_queue_fallback.fake_github.world import QUOTA_WINDOW

__all__ = [
    "DEFAULT_SWEEP_OUT",
    "SweepSettings",
    "admission_waits",
    "guard_figures",
    "held_behind",
    "load_figures",
    "peak_points_per_minute",
    "quota_resets",
    "render_sweep",
    "run_load",
    "run_sweep",
    "write_sweep",
]

DEFAULT_SWEEP_OUT = Path(__file__).resolve().parent / "results" / "sweep.json"
ETAG_WORLDS: tuple[ETagPolicy, ...] = ("stable", "every-read")
#: The guards' `guard-quota-wait-minutes` when the sweep sets none: the input's default.
DEFAULT_GUARD_WAIT = int(GUARD["guard-quota-wait-minutes"].default or 0)
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
    guards: bool = True  # each child runs the real guard, on the repository's quota
    #: the coordinators on a GitHub App installation's bucket of this many an hour (None: on the
    #: repository's, `mix.quota`, with the guards)
    coordinator_quota: int | None = None
    #: the guards' `guard-quota-wait-minutes` (None: the input's default; 0: no wait, as before)
    guard_wait: int | None = None

    @classmethod
    def make(cls, *, quick: bool, latency: float = 0.25, quota: int | None = None) -> SweepSettings:
        """The full sweep, or the quick one; on `quota`, the loads scaled to it.

        The loads are multiples of the saturating one at the mix's own quota (1,000; quick: 100):
        on a quota of N each is scaled by N over that, so 250 an hour runs 22-66 lanes of ours.
        """
        mix = Settings.make(quick=quick, latency=latency, max_n=None)
        base = (
            cls(quick=False, mix=mix)
            if not quick
            else cls(quick=True, ours=(4, 6, 8, 12), baseline=(1, 2), mix=mix)
        )
        if quota is None or quota == mix.quota:
            return base
        scale = quota / mix.quota
        return replace(
            base,
            ours=scaled(base.ours, scale),
            baseline=scaled(base.baseline, scale),
            mix=replace(mix, quota=quota),
        )

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
            "guards": self.guards,
            "coordinator_quota": self.coordinator_quota,
            "guard_wait": self.guard_wait,
        }


def scaled(loads: Sequence[int], scale: float) -> tuple[int, ...]:
    """Each load times `scale`, rounded (at least 1 lane), without repeats, in order."""
    out: list[int] = []
    for load in loads:
        lanes = max(1, round(load * scale))
        if lanes not in out:
            out.append(lanes)
    return tuple(out)


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
        "peak_counted_by_bucket": peak_by_bucket(trial.ledger),
        "peak_points_per_minute": peak_points_per_minute(trial.ledger),
        "errors_by_type": _counts(r.error_type or "none" for r in records if not r.success),
        "error_samples": error_samples(records),
        **started_cancel_figures(records),
        **guard_figures(trial),
        "job_timeout_minutes": job_timeouts(records),
        "virtual_hours": trial.virtual_seconds / 3600,
        "cpu_seconds": trial.cpu_seconds,
    }


def error_samples(records: Sequence[CoordinatorRecord]) -> dict[str, list[dict[str, Any]]]:
    """A few failures of each kind: when the coordinator ended, its role, its error's start."""
    samples: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if record.success or record.error_type is None:
            continue
        kept = samples.setdefault(record.error_type, [])
        if len(kept) < SAMPLES:
            kept.append(
                {
                    "coordinator": record.index,
                    "role": record.role,
                    "ended_at_s": round(record.ended_at, 1),
                    "children": len(record.children),
                    "error": (record.error or "")[:300],
                }
            )
    return samples


def started_cancel_figures(records: Sequence[CoordinatorRecord]) -> dict[str, Any]:
    """Started workloads cancelled by their own coordinator: without a reason, warned, by reason."""
    cancels = [(r, c) for r in records for c in r.started_cancels]
    by_reason = {reason: sum(1 for _, c in cancels if reason in c.reasons) for reason in REASONS}
    return {
        "started_cancelled": len(cancels),
        "started_cancelled_without_reason": sum(1 for _, c in cancels if c.loss),
        "started_cancelled_at_warned_job_timeout": sum(
            1 for _, c in cancels if c.warned_job_timeout
        ),
        "started_cancelled_by_reason": by_reason,
        "started_cancelled_without_reason_samples": [
            {
                "coordinator": r.index,
                "role": r.role,
                "run_id": c.run_id,
                "cancelled_at_s": round(c.at, 1),
                "started_at_s": round(r.started_at, 1),
                "job_timeout": c.job_timeout,
                "error": None if r.error is None else r.error[:300],
            }
            for r, c in cancels
            if c.loss
        ][:SAMPLES],
    }


#: How many examples of each kind of loss the JSON keeps.
SAMPLES = 5
#: What a guard prints when it refuses because the quota is spent (it fails closed and says so).
_GUARD_REFUSED = "REFUSED the workload"
_QUOTA_WORDS = re.compile(r"rate limit|quota", re.IGNORECASE)
#: The line of a guard's refusal (its annotation), which names what ended it.
_REFUSAL_LINE = re.compile(r"^::error title=Guard refused the workload::.*$", re.MULTILINE)


def refused_for_spent_quota(log: str) -> bool:
    """Whether a guard's refusal names the spent primary quota (a secondary limit has no reset).

    Read from the refusal's own line: an earlier line may quote a secondary limit that a retry
    got past, and every rate-limit error carries a fix that mentions the quota.
    """
    found = _REFUSAL_LINE.search(log)
    line = found.group(0) if found else log
    return bool(_QUOTA_WORDS.search(line)) and "secondary rate limit" not in line.lower()


#: The notice a guard prints before it waits for a spent quota's reset.
_GUARD_WAITS = "title=Guard waiting for API quota::"


def guard_figures(trial: Trial) -> dict[str, Any]:
    """The guards' steps: how many ran, waited, refused, refused for a spent quota; what they sent.

    `guards_waited`: guards that waited for a spent quota's reset, by their own notice or held:
    the fake runs one guard at a time, so a guard that starts while another waits for the reset
    is run after that one, past the reset (it would have met the spent quota and waited for the
    same reset). `guards_refused_quota_within_wait`: refusals for a spent quota whose reset, as
    the fake's ledger has it (not as the guard said), came within the guard's
    `guard-quota-wait-minutes`.
    """
    logs = ["\n".join(line for _, line in g.lines) for g in trial.guard_logs]
    refused = [log for log in logs if _GUARD_REFUSED in log]
    entries = [e for e in trial.ledger if e.client is not None and e.client == trial.guard_client]
    totals = ledger_totals(entries)
    wait = DEFAULT_GUARD_WAIT if trial.guard_wait is None else trial.guard_wait
    resets = quota_resets(trial.ledger)
    started = {h.run_id: h.started_at for h in trial.history}
    waits = [_wait_of(g.lines) for g in trial.guard_logs]
    spans = [span for span in waits if span is not None]
    waited = [
        span is not None or held_behind(spans, started.get(g.run_id), g.lines)
        for g, span in zip(trial.guard_logs, waits, strict=True)
    ]
    near = [
        g
        for g, log in zip(trial.guard_logs, logs, strict=True)
        if _GUARD_REFUSED in log
        and refused_for_spent_quota(log)
        and g.lines
        and _reset_within(resets, g.lines[-1][0], wait * 60.0)
    ]
    return {
        "guards": len(logs),
        "guards_waited": sum(waited),
        "guards_waited_own": sum(1 for log in logs if _GUARD_WAITS in log),
        "guards_refused": len(refused),
        "guards_refused_quota": sum(1 for log in refused if refused_for_spent_quota(log)),
        "guards_refused_quota_within_wait": len(near),
        "guard_wait_minutes": wait,
        "guard_sent": totals.sent,
        "guard_counted": totals.counted,
        "guard_counted_per_guard": totals.counted / len(logs) if logs else None,
        "guard_rate_limited": totals.rate_limited,
    }


def quota_resets(ledger: Sequence[LedgerEntry]) -> list[float]:
    """The end of each quota window, as the fake counts them.

    A window opens at the first counted request after the last one closed, and lasts an hour.
    """
    ends: list[float] = []
    for entry in ledger:
        if entry.counted and (not ends or entry.time >= ends[-1]):
            ends.append(entry.time + QUOTA_WINDOW)
    return ends


def _wait_of(lines: Sequence[tuple[float, str]]) -> tuple[float, float] | None:
    """When a guard's own wait for the reset began and ended (its notice, its next line)."""
    for (at, line), after in itertools.pairwise(lines):
        if _GUARD_WAITS in line:
            return at, after[0]
    return None


def held_behind(
    waits: Sequence[tuple[float, float]],
    started: float | None,
    lines: Sequence[tuple[float, str]],
) -> bool:
    """Whether a guard started during another's wait for the reset and first printed after it."""
    if started is None or not lines:
        return False
    first = lines[0][0]
    return any(begun <= started < ended <= first for begun, ended in waits)


def _reset_within(resets: Sequence[float], at: float, seconds: float) -> bool:
    """Whether the window open at `at` resets within `seconds` of it (and a 1 s margin)."""
    ahead = [end for end in resets if end - QUOTA_WINDOW <= at < end]
    return bool(ahead) and ahead[0] - at <= seconds + 1.0


def job_timeouts(records: Sequence[CoordinatorRecord]) -> dict[str, list[float]]:
    """Each role's job `timeout-minutes` (what `plan` computes plus its possible extra)."""
    found: dict[str, set[float]] = {}
    for record in records:
        if record.job is not None:
            found.setdefault(record.role, set()).add(record.job.timeout_minutes)
    return {role: sorted(values) for role, values in found.items()}


#: The warning the coordinator prints each time it waits for API quota before a dispatch.
_ADMISSION_LINE = re.compile(r"^::warning title=Waiting for API quota::", re.MULTILINE)


def _admission(mix: Mapping[str, Any]) -> str:
    """The coordinators' admission-timeout-minutes in the header, when the sweep set it."""
    minutes = mix.get("admission_minutes")
    return "" if minutes is None else f", admission-timeout-minutes {minutes}"


def admission_waits(record: CoordinatorRecord) -> int | None:
    """How often the coordinator waited for admission before a dispatch: its warnings about it."""
    return 0 if not record.log else len(_ADMISSION_LINE.findall(record.log))


def peak_by_bucket(ledger: Sequence[LedgerEntry]) -> dict[str, int]:
    """The most counted in one quota window of each bucket (repository, an App's installation)."""
    peaks: dict[str, int] = {}
    windows: dict[str, tuple[float, int]] = {}  # bucket -> (its window's start, counted in it)
    for entry in ledger:
        if not entry.counted:
            continue
        start, used = windows.get(entry.bucket, (-QUOTA_WINDOW, 0))
        if entry.time >= start + QUOTA_WINDOW:
            start, used = entry.time, 0
        windows[entry.bucket] = (start, used + 1)
        peaks[entry.bucket] = max(peaks.get(entry.bucket, 0), used + 1)
    return peaks


def _peaks(row: Mapping[str, Any]) -> str:
    """`peak/h`: one figure on one bucket; with an App, the installation's then the repository's."""
    by_bucket: dict[str, int] = row.get("peak_counted_by_bucket") or {}
    if len(by_bucket) <= 1:
        return str(row["peak_counted_in_quota_window"])
    app = max((v for k, v in by_bucket.items() if k.startswith("installation:")), default=0)
    return f"{app}/{by_bucket.get('repository', 0)}"


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
        guards=settings.guards,
        coordinator_quota=settings.coordinator_quota,
        guard_wait=settings.guard_wait,
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
                f"{row['children_non_terminal_at_end']} children left at the end, "
                f"{row['started_cancelled_without_reason']} started workloads cancelled "
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
    ("lost", 5, lambda r: r["started_cancelled_without_reason"]),
    ("t/o!", 5, lambda r: r["started_cancelled_at_warned_job_timeout"]),
    ("t/o", 4, lambda r: r["job_timeouts"]),
    ("adm", 4, lambda r: r["admission_waits"]),
    ("late s", 8, lambda r: r["worst_deadline_lateness_s"]),
    ("sent", 7, lambda r: r["sent"]),
    ("counted", 8, lambda r: r["counted"]),
    ("403/429 p+s", 12, lambda r: f"{r['primary_limited']}+{r['secondary_limited']}"),
    ("peak/h", 11, _peaks),
    ("pts/min", 8, lambda r: r["peak_points_per_minute"]),
    ("guard cnt", 10, lambda r: r["guard_counted"]),
    ("cnt/g", 6, lambda r: r.get("guard_counted_per_guard")),
    ("g-wait", 7, lambda r: r.get("guards_waited")),
    ("g-quota", 8, lambda r: r["guards_refused_quota"]),
    ("g-near", 7, lambda r: r.get("guards_refused_quota_within_wait")),
)
_LEGEND = (
    "runs: coordinators (lanes x 2); well: ended well; clean: failed with no child left; "
    "+child: a child of theirs non-terminal when their job ended (post step included); "
    "left@end: children non-terminal after every job ended; lost: started workloads cancelled "
    "by their own coordinator other than for a reason the specification gives (execution "
    "timeout, cancelled or re-run parent, moved source under current, identity change, the "
    "cancel/start race, a signal that is not the job's own timeout); t/o!: started workloads "
    "cancelled at their job's timeout during a quota wait warned of, naming the child (apart: "
    "the one loss invariant 8 allows); t/o: jobs ended by their timeout; "
    "adm: admission waits; late s: worst queue deadline -> cancel POST; sent/counted: requests "
    "(counted: against the primary quota); 403/429 p+s: refusals by the primary quota + the "
    "secondary limits; peak/h: most counted in one quota window (with an App: the installation's "
    "/ the repository's); pts/min: most secondary-limit "
    "points in one minute; guard cnt: the guards' counted requests (own run, parent, run "
    "search, source, own job), on the same quota; cnt/g: per guard; g-wait: guards that waited "
    "for a spent quota's reset (guard-quota-wait-minutes), then ran every check again (or, the "
    "fake running one guard at a time, were held past the reset behind one that did); g-quota: "
    "guards that refused the workload because the quota was spent (a guard fails closed, and "
    "says so); g-near: of those, the ones whose reset (from the fake's ledger) came within "
    "their wait"
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
    mode = "QUICK (short horizons)" if settings["quick"] else "full"
    guards = "no guard requests"
    if settings.get("guards"):
        wait = settings.get("guard_wait")
        wait = DEFAULT_GUARD_WAIT if wait is None else wait
        guards = f"real guards on the quota (guard-quota-wait-minutes {wait})"
    app = settings.get("coordinator_quota")
    where = (
        f"coordinators on a GitHub App installation's {app}/h, guards on the repository's "
        f"{mix['quota']}/h"
        if app
        else f"quota {mix['quota']}/h"
    )
    lines = [
        (
            f"runner-queue-fallback load sweep: {mode}; mix {mix['mix']}, {where}, "
            f"{limits}, {mix['latency']:g} s per reply, {guards}{_admission(mix)}; post step cut off "
            f"{settings['jobs']['post_step_seconds']:g} s after the job's cancellation"
        ),
        _job_timeout_line(results),
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


def _job_timeout_line(results: Mapping[str, Any]) -> str:
    """The jobs' `timeout-minutes` by role, as the first row of each coordinator kind ran them."""
    jobs = results["settings"]["jobs"]
    how = (
        f"{jobs['timeout_minutes']:g} for every job"
        if jobs.get("timeout_minutes") is not None
        else "`plan`'s minimum + its possible extra"
        + (f" + {jobs['timeout_margin_minutes']:g}" if jobs.get("timeout_margin_minutes") else "")
    )
    seen: dict[str, list[float]] = {}
    for rows in results["tables"].values():
        for row in rows:
            for role, minutes in row.get("job_timeout_minutes", {}).items():
                seen.setdefault(f"{row['coordinator']} {role}", minutes)
    parts = [f"{name} {'/'.join(f'{m:g}' for m in minutes)}" for name, minutes in seen.items()]
    return f"job timeout-minutes ({how}): " + (", ".join(parts) or "none ran")


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
