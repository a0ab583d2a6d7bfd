"""Figures from a trial's ledger: requests by phase and endpoint, per-hour rates, deadline precision."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bench.harness import QUOTA_WINDOW, ChildTimeline, CoordinatorRecord, Trial, ledger_totals
from runner_queue_fallback.fake_github import LedgerEntry

__all__ = [
    "ENDPOINTS",
    "PHASES",
    "Precision",
    "Usage",
    "classify",
    "peak_window",
    "precision",
    "summarize_past_limit",
    "usage",
]

#: The rule each request serves (spec "Behavior and limits").
PHASES = (
    "parent check + preflight + dispatch",  # parent grace; source ref, workflow file/ref; dispatch
    "startup window (15 s, then 5 s)",
    "queue polls (60 s) + deadline read",
    "cancel + confirm (5 s polls)",
    "execution polls (60 s)",
)
PREFLIGHT, STARTUP, QUEUE, CANCEL, EXECUTION = PHASES
ENDPOINTS = (
    "child run",
    "child jobs",
    "source ref",
    "parent run",
    "workflow file",
    "workflow ref",
    "dispatch POST",
    "cancel POST",
)


@dataclass
class Usage:
    """Requests of some coordinators: totals, by phase and endpoint, and per-hour rates."""

    coordinators: int
    sent: int
    counted: int
    not_modified: int
    rate_limited: int
    client_sent: int  # what the coordinators' own clients say they sent (a cross-check)
    client_not_modified: int
    seconds: float  # sum of the coordinators' durations
    queued_counted: int
    queued_sent: int
    queued_seconds: float
    executing_counted: int
    executing_sent: int
    executing_seconds: float
    by_phase: dict[str, dict[str, int]]
    by_endpoint: dict[str, dict[str, int]]

    @staticmethod
    def per_hour(count: int, seconds: float) -> float | None:
        """`count` over `seconds`, as a rate per hour (None without a window)."""
        return None if seconds <= 0 else count * 3600 / seconds

    def as_dict(self) -> dict[str, object]:
        """Everything, with the per-hour rates computed from the totals shown next to them."""
        return {
            "coordinators": self.coordinators,
            "sent": self.sent,
            "counted": self.counted,
            "not_modified": self.not_modified,
            "rate_limited": self.rate_limited,
            "client_sent": self.client_sent,
            "client_not_modified": self.client_not_modified,
            "seconds": self.seconds,
            "counted_per_hour": self.per_hour(self.counted, self.seconds),
            "sent_per_hour": self.per_hour(self.sent, self.seconds),
            "queued": {
                "counted": self.queued_counted,
                "sent": self.queued_sent,
                "seconds": self.queued_seconds,
                "counted_per_hour": self.per_hour(self.queued_counted, self.queued_seconds),
                "sent_per_minute": (
                    None
                    if self.queued_seconds <= 0
                    else self.queued_sent * 60 / self.queued_seconds
                ),
            },
            "executing": {
                "counted": self.executing_counted,
                "sent": self.executing_sent,
                "seconds": self.executing_seconds,
                "counted_per_hour": self.per_hour(self.executing_counted, self.executing_seconds),
            },
            "by_phase": self.by_phase,
            "by_endpoint": self.by_endpoint,
        }


def usage(records: Sequence[CoordinatorRecord]) -> Usage:
    """Add up the requests of `records`, classified by phase and endpoint."""
    phase_entries: dict[str, list[LedgerEntry]] = {p: [] for p in PHASES}
    endpoint_entries: dict[str, list[LedgerEntry]] = {e: [] for e in ENDPOINTS}
    queued_seconds = executing_seconds = 0.0
    for record in records:
        for entry, (phase, endpoint) in zip(record.entries, classify(record), strict=True):
            phase_entries[phase].append(entry)
            endpoint_entries[endpoint].append(entry)
        end = record.entries[-1].time if record.entries else record.ended_at
        for child in record.children:
            queue_end = child.queue_end
            if queue_end is not None and child.first_seen is not None:
                queued_seconds += queue_end.time - child.first_seen.time
            if child.allocation_seen is not None:
                executing_seconds += end - child.allocation_seen.time
    totals = ledger_totals(entry for record in records for entry in record.entries)
    by_phase = {phase: _bucket(entries) for phase, entries in phase_entries.items()}
    by_endpoint = {name: _bucket(entries) for name, entries in endpoint_entries.items()}
    return Usage(
        coordinators=len(records),
        sent=totals.sent,
        counted=totals.counted,
        not_modified=totals.not_modified,
        rate_limited=totals.rate_limited,
        client_sent=sum(r.client_stats["sent"] for r in records),
        client_not_modified=sum(r.client_stats["not_modified"] for r in records),
        seconds=sum(r.duration for r in records),
        queued_counted=by_phase[QUEUE]["counted"],
        queued_sent=by_phase[QUEUE]["sent"],
        queued_seconds=queued_seconds,
        executing_counted=by_phase[EXECUTION]["counted"],
        executing_sent=by_phase[EXECUTION]["sent"],
        executing_seconds=executing_seconds,
        by_phase=by_phase,
        by_endpoint=by_endpoint,
    )


def _bucket(entries: Sequence[LedgerEntry]) -> dict[str, int]:
    totals = ledger_totals(entries)
    return {"counted": totals.counted, "not_modified": totals.not_modified, "sent": totals.sent}


def classify(record: CoordinatorRecord) -> list[tuple[str, str]]:
    """The phase (the rule it serves) and the endpoint of each request of `record`, in order."""
    entries = record.entries
    return [_classify(record, entries, position) for position in range(len(entries))]


def _classify(
    record: CoordinatorRecord, entries: Sequence[LedgerEntry], position: int
) -> tuple[str, str]:
    entry = entries[position]
    endpoint = _endpoint(record, entry)
    if endpoint == "dispatch POST":
        return PREFLIGHT, endpoint
    child = _child_of(record, entry)
    if child is not None:
        if endpoint == "cancel POST":
            return CANCEL, endpoint
        anchor = entry
        following = entries[position + 1] if position + 1 < len(entries) else None
        if endpoint == "child run" and following is not None and following.path.endswith("/jobs"):
            anchor = following  # an observation is (run, jobs): the jobs read decides
        return _child_phase(child, anchor.seq), endpoint
    current = None
    for child in record.children:
        if child.dispatch_seq is not None and child.dispatch_seq < entry.seq:
            current = child
    if current is None:
        return PREFLIGHT, endpoint
    if current.confirmed is not None and entry.seq > current.confirmed.seq:
        return PREFLIGHT, endpoint  # the next candidate's preflight
    return _child_phase(current, entry.seq), endpoint


def _child_phase(child: ChildTimeline, seq: int) -> str:
    if child.first_seen is None or seq <= child.first_seen.seq:
        return STARTUP  # up to the first read that shows the job (queued or already allocated)
    if child.cancel is not None and seq > child.cancel.seq:
        return CANCEL
    if child.allocation_seen is not None and seq >= child.allocation_seen.seq:
        return EXECUTION
    return QUEUE


def _endpoint(record: CoordinatorRecord, entry: LedgerEntry) -> str:
    path = entry.path
    if entry.method == "POST":
        return "dispatch POST" if path.endswith("/dispatches") else "cancel POST"
    for marker, name in _READS:
        if marker in path:
            return name
    if path.endswith("/jobs"):
        return "child jobs"
    if path.endswith(f"/actions/runs/{record.parent_run_id}"):
        return "parent run"
    return "child run"


_READS = (
    ("/contents/", "workflow file"),
    ("/git/ref/heads/", "workflow ref"),
    ("/git/ref/tags/", "workflow ref"),
    ("/git/ref/", "source ref"),
)


def _child_of(record: CoordinatorRecord, entry: LedgerEntry) -> ChildTimeline | None:
    for child in record.children:
        base = child.base_path
        if entry.path == base or entry.path.startswith(base + "/"):
            return child
    return None


@dataclass
class Precision:
    """Deadline precision over every queue timeout of some coordinators."""

    cancel_lateness: list[float]  # deadline -> cancel POST
    cancel_to_confirm: list[float]  # cancel POST -> confirming read
    confirm_to_dispatch: list[float]  # confirming read -> next dispatch POST

    def as_dict(self) -> dict[str, object]:
        """Counts, maxima, means and the raw values."""
        return {
            name: _stats(values)
            for name, values in (
                ("cancel_after_deadline_s", self.cancel_lateness),
                ("cancel_to_confirmed_s", self.cancel_to_confirm),
                ("confirmed_to_next_dispatch_s", self.confirm_to_dispatch),
            )
        }


def precision(records: Iterable[CoordinatorRecord]) -> Precision:
    """Deadline -> cancel, cancel -> confirmation, confirmation -> next dispatch."""
    result = Precision([], [], [])
    for record in records:
        for index, child in enumerate(record.children):
            lateness = child.cancel_lateness
            if lateness is not None:
                result.cancel_lateness.append(lateness)
            if child.cancel is not None and child.confirmed is not None:
                result.cancel_to_confirm.append(child.confirmed.time - child.cancel.time)
                if index + 1 < len(record.children):
                    following = record.children[index + 1].dispatched_at
                    result.confirm_to_dispatch.append(following - child.confirmed.time)
    return result


def _stats(values: Sequence[float]) -> dict[str, object]:
    return {
        "count": len(values),
        "max": max(values) if values else None,
        "mean": statistics.fmean(values) if values else None,
        "min": min(values) if values else None,
        "values": [round(v, 3) for v in values],
    }


def peak_window(trial: Trial) -> int:
    """Counted requests in the fullest quota window, windows as the fake keeps them."""
    peak = used = 0
    start: float | None = None
    for entry in trial.ledger:
        if not entry.counted:
            continue
        if start is None or entry.time >= start + QUOTA_WINDOW:
            start, used = entry.time, 0
        used += 1
        peak = max(peak, used)
    return peak


def summarize_past_limit(trial: Trial) -> dict[str, object]:
    """What happened to coordinators past the limit: outcomes, errors, waits, leaks."""
    records = trial.records
    limited = [r for r in records if r.totals.rate_limited]
    errors = Counter(r.error_type or "none" for r in records if not r.success)
    failed_roles = Counter(r.role for r in records if not r.success)
    sample = next((r.error for r in records if r.error_type == "RateLimited"), None)
    if sample is None:
        sample = next((r.error for r in records if r.error), None)
    return {
        "coordinators": len(records),
        "ended_well": sum(1 for r in records if r.success),
        "failed": sum(1 for r in records if not r.success),
        "errors_by_type": dict(errors),
        "failed_by_role": dict(failed_roles),
        "rate_limited_replies": trial.rate_limited,
        "coordinators_rate_limited": len(limited),
        "recovered_after_rate_limit": sum(1 for r in limited if r.success),
        "failed_rate_limited": sum(1 for r in records if r.error_type == "RateLimited"),
        "retry_waits": sum(r.retries for r in records),
        "cleanup_unconfirmed": sum(1 for r in records if r.cleanup_confirmed is False),
        "children_outliving_coordinator": sum(r.orphans for r in records),
        "children_never_ended": trial.leaked_children,
        "peak_window_counted": peak_window(trial),
        "sample_error": None if sample is None else sample[:400],
        "error_samples": {
            kind: next(r.error for r in records if r.error_type == kind and r.error)[:400]
            for kind in errors
            if kind != "none"
        },
    }
