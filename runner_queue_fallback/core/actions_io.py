"""GitHub Actions I/O: workflow commands, outputs, saved state and the step summary.

Everything goes to injected streams and paths; nothing here reads os.environ.
Ref: https://docs.github.com/actions/reference/workflows-and-actions/workflow-commands

Outside text (anything GitHub answered, anything a dispatcher chose) reaches a person through
one escaping path, kept here (DESIGN.md invariant 9):

- `escape_log_line`: every log line, so outside text can never start a line, begin a workflow
  command (`::name::`, even after leading whitespace) or carry the legacy `##[name]` syntax;
- `escape_data` / `escape_property`: the message and properties of our own commands;
- `escape_json`: JSON a command prints (`--json`), where `##[` inside a string is escaped;
- `escape_markdown` and `markdown_link`: the step summary, where outside text cannot become
  Markdown structure, a link or an image, and a URL links only to the server's own host;
- `escape_mermaid`: a label in the summary's Mermaid chart, where only a whitelist of characters
  is kept, so outside text cannot end the label, the line or the code block.
"""

from __future__ import annotations

import html
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

__all__ = [
    "COORDINATOR_OUTPUTS",
    "Reporter",
    "escape_data",
    "escape_json",
    "escape_log_line",
    "escape_markdown",
    "escape_mermaid",
    "escape_property",
    "markdown_code",
    "markdown_link",
]

#: The outputs the coordinator sets, as spelled in action.yml.
COORDINATOR_OUTPUTS = ("outcome", "run-id", "run-url", "runner", "attempts", "attempts-json")


#: What ends a line for the runner (.NET ReadLine: CR, LF) or for a viewer of the log (every
#: separator `str.splitlines` knows); each is shown as a visible escape instead.
_LINE_BREAKS = {
    "\r": "\\r",
    "\n": "\\n",
    "\v": "\\v",
    "\f": "\\f",
    "\x1c": "\\x1c",
    "\x1d": "\\x1d",
    "\x1e": "\\x1e",
    "\x85": "\\x85",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_LINE_BREAK = re.compile("[" + "".join(_LINE_BREAKS) + "]")
#: The runner's legacy command syntax, which it looks for anywhere in a line.
_LEGACY_COMMAND = "##["
#: A zero-width joiner would hide the change; a space keeps it visible and breaks the syntax.
_LEGACY_NEUTRAL = "## ["


def escape_log_line(text: str) -> str:
    r"""Outside text made safe as (part of) one plain log line: it can never be read as a command.

    - CR, LF and every other line separator are shown as visible escapes (`\n`), so the text
      cannot start a line of its own;
    - a line that would begin with `::` once leading whitespace is trimmed (the runner trims
      Unicode whitespace too) gets a backslash in front, so it is no workflow command;
    - `##[`, the runner's legacy syntax, is broken up wherever it appears.

    Applied to every line the Reporter logs, whatever its source; use it (or `escape_data` in a
    command's message) for any other text that goes to stdout.
    """
    text = _LINE_BREAK.sub(lambda match: _LINE_BREAKS[match.group()], text)
    text = text.replace(_LEGACY_COMMAND, _LEGACY_NEUTRAL)
    if _trim_start(text).startswith("::"):
        text = "\\" + text
    return text


def _trim_start(text: str) -> str:
    """`text` without what the runner trims at its start (.NET `char.IsWhiteSpace`, zero width)."""
    index = 0
    while index < len(text) and (text[index].isspace() or text[index] in "\u180e\u200b\ufeff"):
        index += 1
    return text[index:]


def escape_data(text: str) -> str:
    """Escape a workflow-command message (as the runner's ActionCommand expects).

    `%`, CR and LF are percent-encoded (the runner decodes them into the annotation, where they
    are text); the other line separators and `##[` are neutralised as in `escape_log_line`.
    """
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return escape_log_line(text) if _needs_log_escape(text) else text


def _needs_log_escape(text: str) -> bool:
    return _LEGACY_COMMAND in text or _LINE_BREAK.search(text) is not None


def escape_property(text: str) -> str:
    """Escape a workflow-command property value."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


#: Line separators JSON leaves raw in a string when written with `ensure_ascii=False`.
_JSON_RAW_BREAK = re.compile("[\x85\u2028\u2029]")


def escape_json(text: str) -> str:
    r"""JSON text (`json.dumps`, indented or not) made safe to print; it reads back the same.

    No line of JSON starts with `::` (each starts with a bracket, a quote, a digit or a literal),
    and `json.dumps` writes CR, LF and the other control characters inside a string as escapes.
    What is left is `##[`, which the runner looks for anywhere in a line and which can stand only
    inside a string: it is written `##\u005b`; and the separators JSON may leave raw (`\x85`,
    `\u2028`, `\u2029`) are written as `\uXXXX` escapes too.
    """
    text = _JSON_RAW_BREAK.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
    return text.replace(_LEGACY_COMMAND, "##\\u005b")


#: Characters that make inline Markdown structure: links and images (`[`, `]`), emphasis,
#: strikethrough, code, table cells and escapes. `<` and `&` are HTML entities first.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
#: What GitHub's Markdown turns into a link by itself (GFM autolinks): shown as code instead.
_AUTOLINK = re.compile(r"(?i)\b(?:[a-z][a-z0-9+.-]*://|www\.)\S+|[\w.+-]+@[\w-]+\.[\w.-]+")


def escape_markdown(text: str) -> str:
    """Outside text made safe as plain text in the step summary (a paragraph or a table cell).

    HTML becomes entities, Markdown punctuation is backslash-escaped (so `[text](url)` and
    `![](url)` stay text, never a link or an image), anything GitHub would autolink (a URL,
    `www.`, an e-mail address) is shown as inline code, and line breaks become spaces, so the
    text cannot leave its table cell or start a block of its own. Links are made only by
    `markdown_link`.
    """
    text = _LINE_BREAK.sub(" ", text)
    if not _may_autolink(text):
        return _escape_inline(text)
    parts: list[str] = []
    start = 0
    for match in _AUTOLINK.finditer(text):
        parts += [_escape_inline(text[start : match.start()]), markdown_code(match.group())]
        start = match.end()
    parts.append(_escape_inline(text[start:]))
    return "".join(parts)


def _may_autolink(text: str) -> bool:
    """Whether `_AUTOLINK` can match at all: it needs `://`, `www.` or `@`.

    Asked first, since its search takes time quadratic in a long run of word characters, such
    as a token to mask.
    """
    return "@" in text or "://" in text or "www." in text.lower()


def _escape_inline(text: str) -> str:
    return _MARKDOWN_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))


def markdown_code(text: str) -> str:
    """Outside text shown verbatim as inline code in the step summary (never a link)."""
    text = _LINE_BREAK.sub(" ", text).replace("|", "\\|")  # GFM: a pipe ends a cell, even in code
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown_link(label: str, url: str, server_url: str) -> str:
    """A link in the step summary, only to `https://` on the server's own host; else code.

    `label` is outside text too and is escaped. A URL from GitHub's reply that points anywhere
    else (another host, another scheme, characters that would end the link) is shown as inline
    code after the label, so a reader sees it but cannot follow it by a click.
    """
    text = escape_markdown(label)
    if _is_server_url(url, server_url):
        return f"[{text}](<{url}>)"
    return f"{text}: {markdown_code(url)}"


def _is_server_url(url: str, server_url: str) -> bool:
    """Whether `url` is an https URL on `server_url`'s host, with nothing that breaks a link."""
    if any(ch.isspace() or ch in "<>()[]|\\`\"'" or ord(ch) < 32 for ch in url):
        return False
    try:
        target, server = urlsplit(url), urlsplit(server_url)
    except ValueError:
        return False
    return (
        target.scheme == "https"
        and bool(target.hostname)
        and target.netloc.lower() == server.netloc.lower()
        and not target.username
    )


#: What a Mermaid label keeps: letters, digits, space and punctuation without meaning in a gantt
#: line. `:` (ends a task name), `#` and `;` (entity codes, statement ends), `%` (comments),
#: `,` (task metadata), backticks (the Markdown fence), quotes, brackets and `<>&` (HTML) are not.
_MERMAID_KEEP = re.compile(r"[^A-Za-z0-9 ._/()+=@-]")
#: A label longer than this is cut (with `...`): the chart stays readable.
MERMAID_LABEL_LIMIT = 80


def escape_mermaid(text: str) -> str:
    """Outside text made safe as one label of a Mermaid chart in the step summary.

    Every character outside a small whitelist (ASCII letters, digits, space, `._/()+=@-`)
    becomes `_`, so a label can never end its task (`:`), write an entity (`#`, `;`), start a
    comment (`%%`), break its line or close the code block (a backtick). Runs of spaces become
    one; an empty result is `_`.
    """
    text = " ".join(_MERMAID_KEEP.sub("_", _LINE_BREAK.sub(" ", text)).split())
    if len(text) > MERMAID_LABEL_LIMIT:
        text = text[: MERMAID_LABEL_LIMIT - 3] + "..."
    return text or "_"


class Reporter:
    """Writes what the runner reads: log lines and commands on stdout, files for the rest."""

    def __init__(
        self,
        stream: TextIO,
        *,
        output_path: Path | None = None,
        state_path: Path | None = None,
        summary_path: Path | None = None,
        server_url: str = "https://github.com",
    ) -> None:
        """Use `stream` for the log; the paths come from GITHUB_OUTPUT, _STATE, _STEP_SUMMARY.

        `server_url` (GITHUB_SERVER_URL) is the only host the step summary links to.
        """
        self.stream = stream
        self.server_url = server_url
        self.output_path = output_path
        self.state_path = state_path
        self.summary_path = summary_path
        self.outputs: dict[str, str] = {}
        self._secrets: list[str] = []

    def mask(self, secret: str) -> None:
        """Register a secret with the runner before anything could print it, and scrub it here.

        Its escaped forms are scrubbed too: outside text is escaped before it is written, and a
        token of the 2026 format (`.`, `_`, `-`) comes out of `escape_markdown` with a backslash
        before each `_`, which neither the raw scrub nor the runner's mask would find.
        """
        if secret and secret not in self._secrets:
            print(f"::add-mask::{escape_data(secret)}", file=self.stream, flush=True)
            self._secrets.append(secret)
            forms = (escape_markdown(secret), escape_data(secret), escape_log_line(secret))
            self._secrets += [form for form in dict.fromkeys(forms) if form != secret]

    def log(self, line: str) -> None:
        """Print one plain log line; whatever it holds, it is never read as a workflow command."""
        self._write(escape_log_line(line))

    def link(self, label: str, url: str) -> str:
        """Markdown for a link to `url` in the step summary (code unless on the server's host)."""
        return markdown_link(label, url, self.server_url)

    def command(self, name: str, message: str, **props: str) -> None:
        """Emit `::name k=v,...::message`."""
        rendered = ",".join(
            f"{key}={escape_property(value)}" for key, value in props.items() if value
        )
        head = f"::{name} {rendered}" if rendered else f"::{name}"
        self._write(f"{head}::{escape_data(self._scrub(message))}")

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
