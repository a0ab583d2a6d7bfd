"""What a person reads after the sequence: the step summary, the outputs, the closing log lines."""

from __future__ import annotations

import json

from runner_queue_fallback.attempts import Attempt, Result
from runner_queue_fallback.github.versions import OLDER
from runner_queue_fallback.report import Reporter, escape_markdown, markdown_link

__all__ = ["attempts_json", "outputs", "publish", "summary_markdown", "worker_link"]


def worker_link(attempt: Attempt | None) -> tuple[str, str] | None:
    """The 'View worker job logs here' link: the job itself, or the run labelled as a fallback."""
    if attempt is None:
        return None
    if attempt.job_url:
        return ("View worker job logs here", attempt.job_url)
    if attempt.run_url:
        return (
            "View worker job logs here (run link: the job link is not available)",
            attempt.run_url,
        )
    return None


def attempts_json(result: Result) -> str:
    """One entry per dispatch: pool, run id, observed queue wait and outcome."""
    entries = [
        {
            "attempt": a.number,
            "group": a.candidate.group,
            "labels": a.candidate.runner()["labels"],
            "queue-timeout-minutes": a.candidate.queue_minutes,
            "run-id": a.run_id,
            "run-url": a.run_url,
            "queued-seconds": None if a.queued_seconds is None else round(a.queued_seconds, 1),
            "outcome": a.outcome,
        }
        for a in result.dispatched
    ]
    return json.dumps(entries, separators=(",", ":"))


def outputs(result: Result) -> dict[str, str]:
    """The action outputs: they identify the last dispatch."""
    last = result.last
    dispatched = len(result.dispatched)
    return {
        "run-id": str(last.run_id) if last and last.run_id else "",
        "run-url": (last.run_url or "") if last else "",
        "runner": last.candidate.runner_json() if last else "",
        "attempts": str(dispatched),
        "attempts-json": attempts_json(result),
    }


def summary_markdown(result: Result, server_url: str = "https://github.com") -> str:
    """The step summary in GitHub Markdown; every string from the API is escaped.

    URLs from GitHub's replies link only when they are https on `server_url`'s host
    (GITHUB_SERVER_URL); any other is shown as code.
    """
    last = result.last
    pool = last.candidate.pool_text if last else "no pool"
    title = "succeeded" if result.success else "failed"
    lines = [f"## Runner queue fallback {title} ({escape_markdown(pool)})", ""]
    lines += [
        "| # | pool | queue deadline | observed wait | child run | outcome |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for a in result.attempts:
        wait = "-" if a.queued_seconds is None else f"{a.queued_seconds:.0f} s"
        child = (
            markdown_link(str(a.run_id), a.run_url, server_url) if a.run_id and a.run_url else "-"
        )
        pool = escape_markdown(a.candidate.pool_text)
        lines.append(
            f"| {a.number} | {pool} | {a.candidate.queue_minutes:g} min | {wait} | {child} "
            f"| {escape_markdown(a.outcome)} |"
        )
    lines.append("")
    lines += _api_version_line(result)
    if result.error is not None:
        lines += [f"**Error:** {escape_markdown(str(result.error))}", ""]
    if result.race:
        lines += [
            "**The child acquired a runner while it was being cancelled.** It was not run again.",
            "",
        ]
    if result.cleanup is not None:
        lines += [f"**Cleanup:** {escape_markdown(result.cleanup.describe())}", ""]
    link = worker_link(last)
    if link is not None:
        lines += [markdown_link(link[0], link[1], server_url), ""]
    if last is not None and last.run_url:
        artifacts = f"{last.run_url}#artifacts"
        lines += [markdown_link("Artifacts of the worker run", artifacts, server_url), ""]
    return "\n".join(lines) + "\n"


def _api_version_line(result: Result) -> list[str]:
    """Which REST API version the run used; on the older one, how each child was found."""
    if not result.api_version:
        return []
    line = f"GitHub REST API version: {escape_markdown(result.api_version)}"
    if result.api_version == OLDER:
        line += " (the dispatch reply names no run: each child was found by its run-name)"
    return [line, ""]


def publish(result: Result, reporter: Reporter) -> None:
    """Set the outputs, write the summary, and close the log with the result and the worker link."""
    for name, value in outputs(result).items():
        reporter.set_output(name, value)
    reporter.summary(summary_markdown(result, reporter.server_url))
    link = worker_link(result.last)
    suffix = f" {link[0]}: {link[1]}" if link else ""
    if result.success:
        reporter.log(f"The worker succeeded.{suffix}")
        return
    error = result.error
    reporter.error(
        f"{error}{suffix}", title=error.title if error else "Runner queue fallback failed"
    )
    if result.cleanup is not None:
        line = f"{result.cleanup.describe()}{suffix}"
        if result.cleanup.confirmed:
            reporter.log(line)
        else:
            reporter.error(line, title="Cleanup not confirmed")
