"""What a coordinator will do for given inputs, and the `timeout-minutes` its job needs."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from runner_queue_fallback.core import timing
from runner_queue_fallback.core.actions_io import escape_log_line
from runner_queue_fallback.core.hosted import BILLED_NOTE, hosted_warning
from runner_queue_fallback.core.inputs import PoolSettings
from runner_queue_fallback.core.labels import label_names
from runner_queue_fallback.core.machine import other_os_note
from runner_queue_fallback.core.profiles import ANY_GROUP, ANY_LABELS, HOSTED_POOL, Candidate

__all__ = ["SKIPS_UNUSABLE_POOLS", "Plan", "make_plan", "short_deadline_reason"]

#: What `runners-token` changes in a sequence (departure 21): said by `plan` when it is given.
SKIPS_UNUSABLE_POOLS = (
    "runners-token is set: before each dispatch the coordinator reads the candidate's runner "
    "group and the organisation's self-hosted-runner policy, and skips at once a pool proven "
    "unable to serve this workflow (group not found, repository not granted, workflow not "
    "admitted, policy off), so it costs no queue deadline; the minimum timeout still counts "
    "every deadline"
)


def short_deadline_reason() -> str:
    """Why a queue deadline under 2 minutes may misfire (`lint` RQF218 and `plan` say it)."""
    return (
        f"allowed (the minimum is {timing.QUEUE_MINUTES_MIN}), but GitHub's broker offers a queued "
        f"job to idle self-hosted runners only after about {timing.BROKER_DELAY_SECONDS:.0f} s, "
        f"and re-queues a job whose assigned runner does not pick it up within "
        f"{timing.REQUEUE_SECONDS:.0f} s: a runner may still be on its way when the deadline "
        "cancels the child, and the next pool is tried for nothing (deadlines under about 90 s "
        f"were seen to misfire); give each candidate {timing.SHORT_QUEUE_MINUTES} minutes or more"
    )


@dataclass(frozen=True)
class Plan:
    """The resolved candidates and the time budget they add up to.

    `runners_token`: whether `runners-token` is given (its pools proven unusable are skipped).
    """

    settings: PoolSettings
    runners_token: bool = False

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        """The pools in the order they are tried."""
        return self.settings.candidates

    @property
    def queue_minutes(self) -> float:
        """The longest total time spent waiting in queues: every deadline, one after another."""
        return sum(c.queue_minutes for c in self.candidates)

    @property
    def overhead_minutes(self) -> float:
        """Startup and cancellation windows per candidate, plus the parent grace."""
        return (
            len(self.candidates) * timing.PER_CANDIDATE_OVERHEAD_MINUTES
            + timing.PARENT_GRACE_MINUTES
        )

    @property
    def timeout_minutes(self) -> int:
        """The least `timeout-minutes` the coordinator job needs: queues + one execution + overhead."""
        total = self.queue_minutes + self.settings.execution_timeout_minutes + self.overhead_minutes
        return math.ceil(total)

    @property
    def quota_extra_minutes(self) -> float:
        """What a short API quota may add, outside `timeout_minutes`: admission and one reset.

        The admission waits (`admission-timeout-minutes`, plus one random spread) come before a
        dispatch; one wait for a spent quota to reset may come once a child exists. Neither is
        in the minimum timeout, which stays what the spec computes. A quota spent again after
        its reset is left out: see `request_wait_max_minutes` (README, departure 1).
        """
        admission = self.settings.admission_timeout_minutes
        spread = timing.ADMISSION_SPREAD_SECONDS / 60 if admission else 0.0
        return admission + spread + timing.QUOTA_WINDOW_SECONDS / 60

    @property
    def advised_timeout_minutes(self) -> int:
        """The job's `timeout-minutes` to give: the minimum, and room for the quota's extra."""
        return self.timeout_minutes + math.ceil(self.quota_extra_minutes)

    @property
    def request_wait_max_minutes(self) -> float:
        """The longest one request waits once a child exists, when every reset is spent at once.

        Up to `timing.PATIENT_RATE_LIMIT_WAITS` waits after refusals, and one more before it is
        sent when the reply before said the quota was spent; each reset is believed up to
        `timing.RESET_WAIT_MAX_SECONDS` away. `quota_extra_minutes` leaves this out.
        """
        resets = timing.PATIENT_RATE_LIMIT_WAITS + 1
        return resets * timing.RESET_WAIT_MAX_SECONDS / 60

    @property
    def short_deadlines(self) -> tuple[tuple[int, Candidate], ...]:
        """The candidates (by number) whose queue deadline is under 2 minutes."""
        return tuple(
            (n, c)
            for n, c in enumerate(self.candidates, start=1)
            if c.queue_minutes < timing.SHORT_QUEUE_MINUTES
        )

    @property
    def warnings(self) -> list[str]:
        """What may go wrong with these valid inputs: short deadlines, another OS, a hosted label."""
        short = self.short_deadline_warning
        return [*([short] if short else []), *self.os_warnings, *self.hosted_warnings]

    @property
    def short_deadline_warning(self) -> str | None:
        """The candidates whose queue deadline is under 2 minutes, and why that may misfire."""
        if not self.short_deadlines:
            return None
        which = ", ".join(
            f"candidate {n} ({c.pool_text}, {_fmt(c.queue_minutes)} min)"
            for n, c in self.short_deadlines
        )
        return (
            f"queue deadline under {timing.SHORT_QUEUE_MINUTES} min for {which}: "
            + short_deadline_reason()
        )

    @property
    def os_warnings(self) -> list[str]:
        """Candidates on macOS or Windows: which guard form can run there (one OS per sequence)."""
        machines = [c.machine for c in self.candidates if c.machine is not None]
        note = other_os_note(machines[0].os) if machines else None
        return [] if note is None else [note]

    @property
    def hosted_warnings(self) -> list[str]:
        """The hosted candidate's label taken on trust, if the program cannot classify it."""
        profile = self.settings.profile
        return [
            text
            for c in self.candidates
            if c.hosted and (text := hosted_warning(c.label_text, profile)) is not None
        ]

    @property
    def hosted_notes(self) -> list[str]:
        """What a hosted candidate costs: billed minutes, no runner group, no private network."""
        return [
            f"candidate {n} ({c.pool_text}, {_fmt(c.queue_minutes)} min queue deadline) is "
            f"{BILLED_NOTE}; it is tried only after every self-hosted deadline"
            for n, c in enumerate(self.candidates, start=1)
            if c.hosted
        ]

    @property
    def notes(self) -> list[str]:
        """What to know of these inputs that is no warning: a hosted candidate, the skipping."""
        return [*self.hosted_notes, *([SKIPS_UNUSABLE_POOLS] if self.runners_token else [])]

    @property
    def fits_hosted_runner(self) -> bool:
        """Whether the coordinator fits in a GitHub-hosted runner's job time limit."""
        return self.timeout_minutes <= timing.HOSTED_JOB_LIMIT_MINUTES

    def as_dict(self) -> dict[str, object]:
        """The plan as JSON-ready data."""
        return {
            "runner-type": self.settings.runner_type,
            "queue-policy": self.settings.queue_policy,
            "runners-override": self.settings.overridden,
            "candidates": [_candidate_entry(n, c) for n, c in enumerate(self.candidates, start=1)],
            "queue-budget-minutes": self.queue_minutes,
            "execution-timeout-minutes": self.settings.execution_timeout_minutes,
            "overhead-minutes": self.overhead_minutes,
            "timeout-minutes": self.timeout_minutes,
            "admission-timeout-minutes": self.settings.admission_timeout_minutes,
            "quota-extra-minutes": self.quota_extra_minutes,
            "request-quota-wait-max-minutes": self.request_wait_max_minutes,
            "fits-hosted-runner": self.fits_hosted_runner,
            "warnings": self.warnings,
            "notes": self.notes,
        }

    def render(self) -> str:
        """The plan as a table a person reads in a terminal or a log.

        Each candidate's pool is its group and labels as written: a list of labels as the JSON
        list the child receives. A profile's pools have names too (CPU16): the `pool` column
        shows them, and is left out for a `runners` list, whose pools have none.
        """
        named = all(c.name for c in self.candidates)
        rows = [("#", *(["pool"] if named else []), "group", "labels", "queue deadline")]
        rows += [  # a group or label is any text the `runners` input gives: one cell, one line
            (
                str(n),
                *([c.name] if named else []),
                f"({HOSTED_POOL})" if c.hosted else escape_log_line(c.group or ANY_GROUP),
                escape_log_line(_labels_as_written(c)),
                f"{_fmt(c.queue_minutes)} min",
            )
            for n, c in enumerate(self.candidates, start=1)
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = [
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows
        ]
        s = self.settings
        lines += [
            "",
            (
                f"runner-type {s.runner_type}, queue-policy {s.queue_policy}"
                + (", explicit runners list" if s.overridden else "")
            ),
            f"queue budget:      {_fmt(self.queue_minutes)} min (every deadline, in turn)",
            f"execution timeout: {s.execution_timeout_minutes} min",
            (
                f"overhead:          {_fmt(self.overhead_minutes)} min ({len(self.candidates)} x 4 min"
                " startup + cancellation windows, 2 min parent grace)"
            ),
            f"coordinator job needs timeout-minutes >= {self.timeout_minutes}",
            (
                f"possible extra:    up to {_fmt(self.quota_extra_minutes)} min when the "
                f"repository's API quota runs short (admission-timeout-minutes "
                f"{s.admission_timeout_minutes} + spread, one quota reset of 60 min); not "
                "included above"
            ),
            (
                "                   left out: a quota spent again at every reset, when one request "
                f"may wait up to {timing.PATIENT_RATE_LIMIT_WAITS + 1} resets "
                f"({_fmt(self.request_wait_max_minutes)} min) before its error is reported"
            ),
        ]
        lines += [f"note: {escape_log_line(text)}" for text in self.notes]
        lines += [f"warning: {escape_log_line(text)}" for text in self.warnings]
        if not self.fits_hosted_runner:
            lines.append(
                f"note: over the {timing.HOSTED_JOB_LIMIT_MINUTES}-minute limit of a job on a "
                "GitHub-hosted runner; run the coordinator on a self-hosted runner outside the "
                "pools, or shorten the queues or the execution timeout"
            )
        return "\n".join(lines)


def make_plan(settings: PoolSettings, *, runners_token: bool = False) -> Plan:
    """Plan a sequence for validated pool settings (`runners_token`: that input is given)."""
    return Plan(settings, runners_token)


def _fmt(minutes: float) -> str:
    return str(int(minutes)) if minutes == int(minutes) else f"{minutes:g}"


def _labels_as_written(candidate: Candidate) -> str:
    """One label as it is, several as the JSON list the child receives; none: any labels."""
    if not label_names(candidate.labels):
        return ANY_LABELS
    if isinstance(candidate.labels, str):
        return candidate.labels
    return json.dumps(list(candidate.labels), ensure_ascii=False)


def _candidate_entry(number: int, candidate: Candidate) -> dict[str, object]:
    """A candidate in `plan --json`: a self-hosted one without a group or labels shows null."""
    written = candidate.runner()
    if not candidate.hosted:  # a hosted one has no group, as since issue 33
        written = {"group": None, "labels": None, **written}
    return {
        "order": number,
        "pool": candidate.name,
        **written,
        "hosted": candidate.hosted,
        "queue-timeout-minutes": candidate.queue_minutes,
    }
