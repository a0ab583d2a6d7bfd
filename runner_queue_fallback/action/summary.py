"""What a person reads after the sequence: the step summary, the outputs, the closing log lines."""

from __future__ import annotations

import json

from runner_queue_fallback.action.attempts import Attempt, Result, outcome_of
from runner_queue_fallback.action.pool_access import skipped_entry
from runner_queue_fallback.action.timeline import timeline
from runner_queue_fallback.core.actions_io import Reporter, escape_markdown, markdown_link
from runner_queue_fallback.core.api_versions import OLDER
from runner_queue_fallback.core.hosted import BILLED_NOTE
from runner_queue_fallback.core.outcome import (
    ERROR,
    FAILURE,
    NO_POOL,
    NO_RUNNER,
    PHRASES,
    SUCCESS,
    title,
)
from runner_queue_fallback.core.profiles import Candidate

__all__ = [
    "LINK_SEPARATOR",
    "NEVER_HAD_A_RUNNER",
    "NOT_TRIED",
    "WORKER_LINK",
    "attempts_json",
    "headline",
    "log_link",
    "outputs",
    "publish",
    "summary_markdown",
    "timeline",
    "worker_link",
]


#: The label of the link to the worker's log (the spec's words), and its qualifiers.
WORKER_LINK = "View worker job logs here"
RUN_LINK_ONLY = "run link: the job link is not available"
NEVER_HAD_A_RUNNER = "never had a runner"
#: What separates a log line from the link at its end.
LINK_SEPARATOR = " \u2014 "
#: The summary's mark for a candidate of the plan that was never dispatched.
NOT_TRIED = "not tried"
#: The headline of an outcome whose worker ran: where it ran.
_WHERE_IT_RAN = {
    SUCCESS: "the worker succeeded on {pool}",
    FAILURE: "the worker ran on {pool} and did not succeed",
}


def worker_link(attempt: Attempt | None) -> tuple[str, str] | None:
    """The 'View worker job logs here' link: the job itself, or the run labelled as a fallback.

    A child that never had a runner (cancelled at its deadline, or every queue exhausted) is
    labelled so: its job page shows no log of a workload.
    """
    if attempt is None:
        return None
    qualifiers = [] if attempt.job_url else [RUN_LINK_ONLY]
    if attempt.allocated_at is None:
        qualifiers.append(NEVER_HAD_A_RUNNER)
    label = f"{WORKER_LINK} ({'; '.join(qualifiers)})" if qualifiers else WORKER_LINK
    url = attempt.job_url or attempt.run_url
    return (label, url) if url else None


def log_link(label: str, url: str) -> str:
    """A link at the end of a log line, after a separator (the Reporter escapes the line)."""
    return f"{LINK_SEPARATOR}{label}: {url}"


def attempts_json(result: Result) -> str:
    """One entry per dispatch (pool, run id, observed queue wait, outcome), and per skip, in order."""
    entries = [
        skipped_entry(a.candidate, a.skip)
        if a.skip is not None
        else {
            "attempt": a.number,
            "group": a.candidate.runner().get("group"),  # none: hosted, or any group
            "labels": a.candidate.runner().get("labels"),  # none: any runner of the group
            "hosted": a.candidate.hosted,
            "queue-timeout-minutes": a.candidate.queue_minutes,
            "run-id": a.run_id,
            "run-url": a.run_url,
            "queued-seconds": None if a.queued_seconds is None else round(a.queued_seconds, 1),
            "outcome": a.outcome,
        }
        for a in result.attempts
        if a.sent or a.skip is not None
    ]
    return json.dumps(entries, separators=(",", ":"))


def outputs(result: Result) -> dict[str, str]:
    """The action outputs: they identify the last dispatch."""
    last = result.last
    dispatched = len(result.dispatched)
    return {
        "outcome": outcome_of(result),
        "run-id": str(last.run_id) if last and last.run_id else "",
        "run-url": (last.run_url or "") if last else "",
        "runner": last.candidate.runner_json() if last else "",
        "attempts": str(dispatched),
        "attempts-json": attempts_json(result),
    }


def summary_markdown(result: Result, server_url: str = "https://github.com") -> str:
    """The step summary in GitHub Markdown; every string from the API is escaped.

    URLs from GitHub's replies link only when they are https on `server_url`'s host
    (GITHUB_SERVER_URL); any other is shown as code. Every candidate of the plan has a row; the
    ones never dispatched are marked "not tried".
    """
    last = result.last
    lines = [f"## {headline(result)}", ""]
    lines += [
        "| # | pool | queue deadline | observed wait | child run | outcome |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    tried = {a.number: a for a in result.attempts}
    for number, candidate in enumerate(_plan(result), start=1):
        a = tried.get(number)
        wait = "-" if a is None or a.queued_seconds is None else f"{a.queued_seconds:.0f} s"
        child = (
            markdown_link(str(a.run_id), a.run_url, server_url)
            if a is not None and a.run_id and a.run_url
            else "-"
        )
        outcome = a.outcome if a is not None else NOT_TRIED
        lines.append(
            f"| {number} | {escape_markdown(candidate.pool_text)} | "
            f"{candidate.queue_minutes:g} min | {wait} | {child} | {escape_markdown(outcome)} |"
        )
    lines.append("")
    lines += _skipped_lines(result)
    lines += _hosted_line(result)
    lines += _api_version_line(result)
    if result.error is not None:
        lines += [f"**Error:** {escape_markdown(str(result.error))}", ""]
    if result.race:
        lines += [
            "**The child acquired a runner while it was being cancelled.** It was not run again.",
            "",
        ]
    lines += _requeues(result)
    if result.cleanup is not None:
        lines += [f"**Cleanup:** {escape_markdown(result.cleanup.describe())}", ""]
    for other in result.other_cleanups:  # copies bearing the child's request id
        lines += [
            f"**Cleanup of a run with the same run-name:** {escape_markdown(other.describe())}",
            "",
        ]
    link = worker_link(last)
    if link is not None:
        lines += [markdown_link(link[0], link[1], server_url), ""]
    if last is not None and last.run_url and last.step_started:  # only a run that executed
        artifacts = f"{last.run_url}#artifacts"
        lines += [markdown_link("Artifacts of the worker run", artifacts, server_url), ""]
    lines += timeline(result)
    return "\n".join(lines) + "\n"


def headline(result: Result) -> str:
    """The summary's headline (Markdown): the outcome word, then what it means here.

    The pool is named only where a worker ran; after every queue is exhausted none is at fault,
    and each one's wait is in the table below.
    """
    word = outcome_of(result)
    last = result.last
    if word == NO_RUNNER:
        return (
            f"{word}: {PHRASES[word]}; no pool gave one before its queue deadline "
            "(each pool's wait is in the table)"
        )
    if word == NO_POOL:
        return (
            f"{word}: {PHRASES[word]}; every candidate was skipped, none dispatched (each one's "
            "reason and fix is below the table)"
        )
    if word == ERROR:
        return escape_markdown(title(word, result.error))
    if word not in _WHERE_IT_RAN or last is None:
        return f"{word}: {PHRASES[word]}"
    return f"{word}: {_WHERE_IT_RAN[word].format(pool=escape_markdown(last.candidate.pool_text))}"


def _skipped_lines(result: Result) -> list[str]:
    """Each candidate skipped before its dispatch (`runners-token`): its reason and its fix."""
    lines = [
        f"**Skipped:** candidate {a.number} ({escape_markdown(a.candidate.pool_text)}), "
        f"{a.skip.reason}: {escape_markdown(a.skip.detail)}"
        for a in result.attempts
        if a.skip is not None
    ]
    return lines + ([""] if lines else [])


def _hosted_line(result: Result) -> list[str]:
    """A dispatched hosted candidate is marked: its minutes are billed."""
    hosted = [a for a in result.dispatched if a.candidate.hosted]
    return [
        f"**GitHub-hosted:** candidate {a.number} "
        f"({escape_markdown(a.candidate.label_text)}) went to {BILLED_NOTE}."
        for a in hosted
    ] + ([""] if hosted else [])


def _requeues(result: Result) -> list[str]:
    """A line for each job GitHub re-queued after a runner was seen on it: why no fallback."""
    lines = []
    for a in result.attempts:
        if not a.requeued_from:
            continue
        runners = ", then ".join(escape_markdown(name) for name in a.requeued_from)
        line = (
            f"**Re-queued by GitHub:** the worker job of child {a.run_id} was assigned to runner "
            f"{runners} and re-queued by GitHub (the runner did not pick it up). A runner was "
            f"seen, so candidate {a.number} could no longer fall back: the job was followed to "
            "its result or its execution timeout, counted from the first allocation seen."
        )
        lines += [line, ""]
    return lines


def _api_version_line(result: Result) -> list[str]:
    """Which REST API version the run used; on the older one, how each child was found."""
    if not result.api_version:
        return []
    line = f"GitHub REST API version: {escape_markdown(result.api_version)}"
    if result.api_version == OLDER:
        line += " (the dispatch reply names no run: each child was found by its run-name)"
    return [line, ""]


def _plan(result: Result) -> list[Candidate]:
    """The candidates of the plan; without them (a ledger built by hand), those attempted."""
    return result.candidates or [a.candidate for a in result.attempts]


def publish(result: Result, reporter: Reporter) -> None:
    """Set the outputs, write the summary, and close the log with the result and the worker link."""
    for name, value in outputs(result).items():
        reporter.set_output(name, value)
    reporter.summary(summary_markdown(result, reporter.server_url))
    link = worker_link(result.last)
    suffix = log_link(*link) if link else ""
    if result.success:
        reporter.log(f"The worker succeeded.{suffix}")
        return
    error = result.error
    reporter.error(f"{error or PHRASES[ERROR]}{suffix}", title=title(outcome_of(result), error))
    if result.cleanup is not None:
        line = f"{result.cleanup.describe()}{suffix}"
        if result.cleanup.confirmed:
            reporter.log(line)
        else:
            reporter.error(line, title="Cleanup not confirmed")
    for other in result.other_cleanups:  # copies bearing the child's request id: no link
        if other.confirmed:
            reporter.log(other.describe())
        else:
            reporter.error(other.describe(), title="Cleanup not confirmed")
