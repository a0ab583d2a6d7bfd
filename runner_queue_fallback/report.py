"""GitHub Actions I/O: workflow commands, outputs, saved state and the step summary.

Everything goes to injected streams and paths; nothing here reads os.environ.
Ref: https://docs.github.com/actions/reference/workflows-and-actions/workflow-commands
"""

from __future__ import annotations

import html
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

__all__ = ["COORDINATOR_OUTPUTS", "Reporter", "escape_data", "escape_markdown", "escape_property"]

#: The outputs the coordinator sets, as spelled in action.yml.
COORDINATOR_OUTPUTS = ("run-id", "run-url", "runner", "attempts", "attempts-json")


def escape_data(text: str) -> str:
    """Escape a workflow-command message (as the runner's ActionCommand expects)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a workflow-command property value."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def escape_markdown(text: str) -> str:
    """Make a string from the API safe inside a Markdown table cell."""
    return html.escape(text, quote=False).replace("|", "\\|").replace("\n", " ")


class Reporter:
    """Writes what the runner reads: log lines and commands on stdout, files for the rest."""

    def __init__(
        self,
        stream: TextIO,
        *,
        output_path: Path | None = None,
        state_path: Path | None = None,
        summary_path: Path | None = None,
    ) -> None:
        """Use `stream` for the log; the paths come from GITHUB_OUTPUT, _STATE, _STEP_SUMMARY."""
        self.stream = stream
        self.output_path = output_path
        self.state_path = state_path
        self.summary_path = summary_path
        self.outputs: dict[str, str] = {}
        self._secrets: list[str] = []

    def mask(self, secret: str) -> None:
        """Register a secret with the runner before anything could print it, and scrub it here."""
        if secret and secret not in self._secrets:
            print(f"::add-mask::{escape_data(secret)}", file=self.stream, flush=True)
            self._secrets.append(secret)

    def log(self, line: str) -> None:
        """Print one log line."""
        self._write(line)

    def command(self, name: str, message: str, **props: str) -> None:
        """Emit `::name k=v,...::message`."""
        rendered = ",".join(
            f"{key}={escape_property(value)}" for key, value in props.items() if value
        )
        head = f"::{name} {rendered}" if rendered else f"::{name}"
        self._write(f"{head}::{escape_data(message)}")

    def error(self, message: str, *, title: str = "") -> None:
        """An error annotation: one line in the run's summary page."""
        self.command("error", message, title=title)

    def warning(self, message: str, *, title: str = "") -> None:
        """A warning annotation."""
        self.command("warning", message, title=title)

    def notice(self, message: str, *, title: str = "") -> None:
        """A notice annotation."""
        self.command("notice", message, title=title)

    @contextmanager
    def group(self, title: str) -> Iterator[None]:
        """A collapsible group in the log."""
        self._write(f"::group::{escape_data(title)}")
        try:
            yield
        finally:
            self._write("::endgroup::")

    def set_output(self, name: str, value: str) -> None:
        """Set a step output (kept in `outputs` too, for tests and the simulator)."""
        self.outputs[name] = value
        _append_key_value(self.output_path, name, value)

    def save_state(self, name: str, value: str) -> None:
        """Save state for the post step, which reads it as STATE_<name>."""
        _append_key_value(self.state_path, name, value)

    def summary(self, markdown: str) -> None:
        """Append Markdown to the step summary."""
        if self.summary_path is not None:
            with self.summary_path.open("a", encoding="utf-8") as file:
                file.write(self._scrub(markdown))

    def _write(self, line: str) -> None:
        print(self._scrub(line), file=self.stream, flush=True)

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


def _append_key_value(path: Path | None, name: str, value: str) -> None:
    """Append `name<<delimiter` / value / delimiter, the form that allows any value."""
    if path is None:
        return
    delimiter = f"ghadelimiter_{uuid.uuid4()}"
    if delimiter in value:  # pragma: no cover - a random uuid cannot be guessed by the API
        raise ValueError("value contains the delimiter")
    with path.open("a", encoding="utf-8") as file:
        file.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
