"""Why a started workload was cancelled by its own coordinator: a reason the spec gives, or none.

DESIGN.md invariant 11: no started workload is cancelled by its coordinator except for a reason
the specification gives: the execution timeout, a cancelled or re-run parent, a moved source under
`source-policy: current`, an identity change, the cancel/start race, a signal that is not the
job's own timeout. Three more follow from the spec's text and are counted as reasons here: GitHub
showing the child (or its job) too late for the 2-minute startup window ("Expiry ... cleans up"),
a dispatch without a clear reply ("an ambiguous response is recovered by the unique run-name for
cancellation"), and an API error ("API/contract errors stop the sequence and clean up the active
child").
Invariant 8 allows one loss besides losing the coordinator's runner: its job's
own timeout reached during a quota wait it warned of beforehand, naming the child. That one is
counted apart; every other cancel of a started workload without a reason is a loss.

Judged from what GitHub knew, never from the coordinator's account of itself: the fake's record
of each cancel request (`RunHistory.cancel_requests`: who sent it, and the child, its parent and
its source as they stood) and the ledger (the coordinator's reads before it). Only the harness
knows the rest: the coordinator's inputs, when a signal came, when its job ended. The one thing
read from the coordinator's log is whether it warned that its job would end in a quota wait (the
warning is what invariant 8 asks of it). The fake never changes a child's identity, so an
identity change is never a reason found here.

Used by the load sweep (bench/sweep.py) and by the fuzzers' invariant checks (tests/invariants.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from runner_queue_fallback.core import timing
from runner_queue_fallback.fake_github import CancelRequest, LedgerEntry, RunHistory

__all__ = [
    "AMBIGUOUS_DISPATCH",
    "API_ERROR",
    "EXECUTION_TIMEOUT",
    "JOB_END_WARNING",
    "PARENT",
    "RACE",
    "RACE_WINDOW_SECONDS",
    "REASONS",
    "SIGNAL",
    "SOURCE",
    "STARTUP_EXPIRY",
    "CancelContext",
    "StartedCancel",
    "started_cancels",
    "warned_of_job_end",
]

EXECUTION_TIMEOUT = "execution timeout"
PARENT = "parent cancelled or re-run"
SOURCE = "source moved under current"
RACE = "cancel/start race"
SIGNAL = "signal (not the job's timeout)"
#: Spec: the startup window's "Expiry reports the last API error or expected/actual fields and
#: cleans up": GitHub showed the run or its job too late (a spent quota is no such thing).
STARTUP_EXPIRY = "shown after the startup window"
#: Spec: "an ambiguous response is recovered by the unique run-name for cancellation": the
#: dispatch that created the child got no clear reply (lost, timed out, 408 or 5xx).
AMBIGUOUS_DISPATCH = "dispatch reply lost"
#: Spec "Behavior and limits": "API/contract errors stop the sequence and clean up the active
#: child". Only the fuzzers inject such errors; the sweep's world has none.
API_ERROR = "API error"
REASONS = (
    EXECUTION_TIMEOUT,
    PARENT,
    SOURCE,
    RACE,
    SIGNAL,
    STARTUP_EXPIRY,
    AMBIGUOUS_DISPATCH,
    API_ERROR,
)
#: A runner taken after the coordinator's last read of the child, that read at most this long
#: (plus 8 replies' latency) before the cancel: the fresh read at the deadline, the parent and
#: source checks, and the cancel with its two retries (5 s, 10 s). A cancel long after the last
#: read (a quota wait) is no race: the coordinator could have looked again.
RACE_WINDOW_SECONDS = 20.0


@dataclass(frozen=True)
class CancelContext:
    """What the harness knows of one coordinator, besides what GitHub saw."""

    client: int | None  # its ledger number (the main and the post step share its token)
    execution_seconds: float  # its `execution-timeout-minutes`, in seconds
    source_policy: str = "current"
    signalled_at: float | None = None  # a signal that is not its job's own timeout
    api_error_at: float | None = None  # the first non-rate-limit failure of its requests
    job_deadline: float | None = None  # its job's `timeout-minutes` reached
    latency: float = 0.0  # virtual seconds per reply
    log: str = ""  # what its main step printed (a warning that the job will end)
    listing_delay: float = 0.0  # a visible run is listed (found by run-name) this much later


@dataclass(frozen=True)
class StartedCancel:
    """A started workload cancelled by its coordinator: when, and the reasons the spec gives."""

    run_id: int
    at: float  # the coordinator's first accepted cancel request
    reasons: tuple[str, ...]
    job_timeout: bool  # requested at or after the job's own timeout
    warned: bool  # the coordinator had warned that its job would end, naming the child

    @property
    def warned_job_timeout(self) -> bool:
        """Invariant 8's one allowed loss: the job's end during a quota wait warned of."""
        return not self.reasons and self.job_timeout and self.warned

    @property
    def loss(self) -> bool:
        """No reason the specification gives, and not the warned job timeout."""
        return not self.reasons and not self.warned_job_timeout


def started_cancels(
    history: Iterable[RunHistory], ledger: Sequence[LedgerEntry], context: CancelContext
) -> list[StartedCancel]:
    """Every child whose workload started and which ended cancelled at its coordinator's request."""
    found = []
    for child in history:
        if child.conclusion != "cancelled" or child.workload_started_at is None:
            continue
        request = next((r for r in child.cancel_requests if r.client == context.client), None)
        if request is None:
            continue  # cancelled by someone else (a person, GitHub)
        past_deadline = context.job_deadline is not None and request.at >= context.job_deadline
        found.append(
            StartedCancel(
                run_id=child.run_id,
                at=request.at,
                reasons=_reasons(child, request, ledger, context),
                job_timeout=past_deadline,
                warned=past_deadline
                and warned_of_job_end(context.log, child.run_id, child.request_id),
            )
        )
    return found


def _reasons(
    child: RunHistory,
    request: CancelRequest,
    ledger: Sequence[LedgerEntry],
    context: CancelContext,
) -> tuple[str, ...]:
    reasons = []
    allocated = child.allocated_at
    if allocated is not None and request.at >= allocated + context.execution_seconds - 1e-6:
        reasons.append(EXECUTION_TIMEOUT)
    if not request.parent_active:
        reasons.append(PARENT)
    if request.source_moved and context.source_policy == "current":
        reasons.append(SOURCE)
    if _race(child, request, ledger, context):
        reasons.append(RACE)
    if context.signalled_at is not None and request.at >= context.signalled_at:
        reasons.append(SIGNAL)
    if _shown_late(child, context):
        reasons.append(STARTUP_EXPIRY)
    if _ambiguous_dispatch(child, ledger, context):
        reasons.append(AMBIGUOUS_DISPATCH)
    if context.api_error_at is not None and context.api_error_at <= request.at:
        reasons.append(API_ERROR)
    return tuple(reasons)


def _ambiguous_dispatch(
    child: RunHistory, ledger: Sequence[LedgerEntry], context: CancelContext
) -> bool:
    """The dispatch POST that created the child (served as it was created) had no clear reply."""
    return any(
        e.client == context.client
        and e.method == "POST"
        and e.path.endswith("/dispatches")
        and abs(e.time - child.dispatched_at) < 1e-6
        and (e.fault == "lost_reply" or e.status is None or e.status == 408 or e.status >= 500)
        for e in ledger
    )


def _shown_late(child: RunHistory, context: CancelContext) -> bool:
    """GitHub showed the run (or listed it, or its job) after the window's last 5 s poll."""
    shown = max(child.job_queued_at, child.first_visible_at + context.listing_delay)
    last_poll = timing.STARTUP_WINDOW_SECONDS - timing.STARTUP_POLL_SECONDS - 2 * context.latency
    return shown > child.dispatched_at + last_poll


def _race(
    child: RunHistory,
    request: CancelRequest,
    ledger: Sequence[LedgerEntry],
    context: CancelContext,
) -> bool:
    """The runner came during the cancellation, or just after the read the cancel acted on."""
    if not request.allocated:
        return True
    allocated = child.allocated_at
    base = f"/actions/runs/{child.run_id}"
    reads = [
        e.time
        for e in ledger
        if e.client == context.client
        and e.method == "GET"
        and e.status in {200, 304}
        and (e.path.endswith(base) or f"{base}/" in e.path)
        and e.time <= request.at
    ]
    if not reads or allocated is None:
        return False
    window = RACE_WINDOW_SECONDS + 8 * context.latency
    return reads[-1] < allocated and request.at - reads[-1] <= window


#: The warning the coordinator prints before a quota wait that its job's end will cut short.
JOB_END_WARNING = "::warning title=Job ends during a quota wait::"


def warned_of_job_end(log: str, run_id: int, request_id: str = "") -> bool:
    """Whether the coordinator warned that its job ends in a quota wait, naming the child.

    The child is named by its run id, or (a dispatch whose reply was lost) by its run-name.
    """
    names = [re.compile(rf"\b{run_id}\b")]
    if request_id:
        names.append(re.compile(re.escape(request_id)))
    lines = (line for line in log.splitlines() if line.startswith(JOB_END_WARNING))
    return any(name.search(line) for line in lines for name in names)
