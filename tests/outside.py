"""Outside text and odd replies for tests: rewrite what the fake GitHub answers, and check output.

`Tamper` wraps a fake's `handle` so a test (or a fuzz case) can change any reply the program
reads: a field of a run or a job, an error message, a header, a whole body. The fake stays a
model of GitHub; the tampering is the "odd server" or the attacker of the trust-boundary tests.

`runner_commands` reads stdout as the runner does and lists the workflow commands in it, so a
test can prove that none of them came from outside text (DESIGN.md invariant 9).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

from runner_queue_fallback.core.actions_io import Reporter
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import FakeGitHub

#: Planted in every outside string; a command whose name or head holds it came from outside.
MARKER = "rqfmark"
#: Outside text with every command syntax the runner knows, each carrying the marker.
PLANTS = (
    f"\n::{MARKER}::planted",
    f"\r::{MARKER}::planted",
    f"\n  \u00a0\u2003::{MARKER}::planted",
    f"\u2028::{MARKER}::planted",
    f"%0A::{MARKER}::planted",
    f"##[{MARKER}]planted",
    f"\n::stop-commands::{MARKER}",
    f"\n::add-mask::{MARKER}",
    f"[{MARKER}](https://evil.test/{MARKER}) ![{MARKER}](https://evil.test/{MARKER}.png)",
    f") [{MARKER}](https://evil.test/{MARKER}",
)
#: The workflow commands this project prints itself.
OUR_COMMANDS = frozenset({"add-mask", "error", "warning", "notice", "group", "endgroup"})

Rule = Callable[[str, str, Reply, FakeGitHub], Reply | None]


@dataclass
class Tamper:
    """Rewrites the fake's replies: each rule sees (method, path, reply, world) and may replace it."""

    world: FakeGitHub
    rules: list[Rule] = field(default_factory=list)
    fired: int = 0
    #: keep conditional requests (a 304 has no body to change; tampered replies lose their ETag)
    keep_304: bool = False

    def install(self) -> Tamper:
        """Wrap the world's `handle` (the adapters call it on the instance)."""
        real = self.world.handle

        def handle(method: str, path_and_query: str, headers: Any, body: bytes = b"") -> Reply:
            # Never 304: a rule must see (and may change) every body the client reads.
            if not self.keep_304:
                headers = {k: v for k, v in headers.items() if k.lower() != "if-none-match"}
            reply = real(method, path_and_query, headers, body)
            path = urlsplit(path_and_query).path
            for rule in self.rules:
                changed = rule(method.upper(), path, reply, self.world)
                if changed is not None:
                    self.fired += 1
                    reply = changed
            return reply

        self.world.handle = handle  # type: ignore[method-assign]  # the adapters call the instance
        return self


def json_body(reply: Reply) -> Any:
    """The reply's JSON, or None."""
    try:
        return json.loads(reply.body) if reply.body else None
    except ValueError:
        return None


def with_json(reply: Reply, body: Any) -> Reply:
    """The reply with a new JSON body (and no ETag: the body changed)."""
    headers = {k: v for k, v in reply.headers.items() if k.lower() != "etag"}
    return replace(reply, headers=headers, body=json.dumps(body).encode())


def error_reply(status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
    """An error reply as GitHub sends it, with `message` verbatim."""
    body = {
        "message": message,
        "documentation_url": "https://docs.github.com/rest",
        "status": status,
    }
    return Reply(
        status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(body).encode()
    )


RUN_PATH = re.compile(r"/actions/runs/(\d+)$")
JOBS_PATH = re.compile(r"/actions/runs/(\d+)/attempts/\d+/jobs$")


def child_run_id(path: str, world: FakeGitHub) -> int | None:
    """The child run a run or jobs path reads (None for the parent or anything else)."""
    match = RUN_PATH.search(path) or JOBS_PATH.search(path)
    if match is None:
        return None
    run_id = int(match.group(1))
    return run_id if run_id in world.history else None


# ------------------------------------------------------------------------ reading stdout


@dataclass(frozen=True)
class Command:
    """One workflow command the runner would execute: its name and the text of its head."""

    name: str
    head: str
    line: str


def runner_commands(text: str) -> list[Command]:
    """Every command the runner would read in `text`: `::name ...::` lines and `##[name]`."""
    found = []
    for line in re.split(r"\r\n|\r|\n", text):
        trimmed = line.strip()  # .NET Trim: Unicode whitespace
        if trimmed.startswith("::"):
            end = trimmed.find("::", 2)
            head = trimmed[2:end] if end != -1 else trimmed[2:]
            found.append(Command(head.split(" ", 1)[0].lower(), head, line))
        index = line.find("##[")
        if index != -1:
            rest = line[index + 3 :]
            head = rest.split("]", 1)[0]
            found.append(Command(head.split(" ", 1)[0].lower(), head, line))
    return found


def commands_from_outside(text: str) -> list[Command]:
    """Commands the runner would read that outside text made (or that we never print)."""
    return [
        command
        for command in runner_commands(text)
        if command.name not in OUR_COMMANDS
        or MARKER in command.head
        or (command.name == "add-mask" and MARKER in command.line)
    ]


_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_LINK_TARGET = re.compile(r"\]\(\s*<?([^)>\s]*)")
_BARE_URL = re.compile(r"(?i)\b(?:[a-z][a-z0-9+.-]*://|www\.)[^\s<>]+")


def foreign_links(markdown: str, server_url: str) -> list[str]:
    """Links and images in `markdown` that point off `server_url`'s https host.

    Code spans are text, never links; backslash-escaped characters are text too. What remains
    is read for link targets `](...)` and for bare URLs GitHub would autolink.
    """
    text = _CODE_SPAN.sub("", markdown)
    text = re.sub(r"\\.", "", text)
    server = urlsplit(server_url).netloc.lower()
    targets = _LINK_TARGET.findall(text) + _BARE_URL.findall(text)
    return [
        url
        for url in targets
        if not (urlsplit(url).scheme == "https" and urlsplit(url).netloc.lower() == server)
    ]


@dataclass
class StdoutWatch:
    """Every write the Reporter made, split into what `log` wrote and what its commands wrote."""

    logged: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        """Lines the runner would read as a command that outside text made.

        A plain log line (which may hold any outside text) must never be read as a command, on
        any physical line it turns into; a command we print must stay one line, and its head
        (name and properties) must not hold the marker.
        """
        found = [
            f"log line read as a command: {command.line!r}"
            for text in self.logged
            for command in runner_commands(text)
        ]
        for text in self.commands:
            lines = re.split(r"\r\n|\r|\n", text)
            if len(lines) > 1:
                found.append(f"a command split into lines: {text!r}")
            found += [
                f"command from outside text: {command.line!r}"
                for command in runner_commands(text)
                if command.name not in OUR_COMMANDS or MARKER in command.head
            ]
        return found


@contextlib.contextmanager
def watch_stdout() -> Iterator[StdoutWatch]:
    """Record what every Reporter writes, telling plain log lines from its own commands."""
    watch = StdoutWatch()
    local = threading.local()
    real_log, real_write = Reporter.log, Reporter._write  # the test's probe

    def log(self: Reporter, line: str) -> None:
        local.in_log = True
        try:
            real_log(self, line)
        finally:
            local.in_log = False

    def write(self: Reporter, line: str) -> None:
        (watch.logged if getattr(local, "in_log", False) else watch.commands).append(line)
        real_write(self, line)

    with mock.patch.object(Reporter, "log", log), mock.patch.object(Reporter, "_write", write):
        yield watch


# -------------------------------------------------------------- rules for the fuzz tests


def plant_rule(plant: str) -> Rule:
    """Add `plant` to every outside string the program may print: GitHub's error `message`,
    the request id header, the dispatch reply's `html_url`, a run's workflow name and branch,
    a job's runner and step names."""
    planted: dict[tuple[int, bytes], bytes | None] = {}  # a body polled again is planted once

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        del method, path, world
        headers = dict(reply.headers)
        for key in list(headers):
            if key.lower() == "x-github-request-id":
                headers[key] = f"{headers[key]}{plant}"
        seen = (reply.status, reply.body)
        if seen not in planted:
            planted[seen] = _planted_body(reply, plant)
        body = planted[seen]
        if body is not None:
            headers["Content-Type"] = "application/json"
            return Reply(reply.status, headers, body, reply.error)
        return Reply(reply.status, headers, reply.body, reply.error)

    return rule


def _planted_body(reply: Reply, plant: str) -> bytes | None:
    """The JSON body with `plant` added to its outside strings; None if it is not an object."""
    body = json_body(reply)
    if not isinstance(body, dict):
        return None
    if reply.status >= 400 and isinstance(body.get("message"), str):
        body["message"] += plant
    if isinstance(body.get("html_url"), str) and "workflow_run_id" in body:
        body["html_url"] += plant
    if "display_title" in body:
        body["name"] = f"{body.get('name') or ''}{plant}"
        body["head_branch"] = f"{body.get('head_branch') or ''}{plant}"
    for job in body.get("jobs") or []:
        if job.get("runner_name"):
            job["runner_name"] += plant
        for step in job.get("steps") or []:
            step["name"] += plant
    return json.dumps(body).encode()


def lag_rule(reads: int) -> Rule:
    """A completed child run shows a null conclusion for its first `reads` reads."""
    seen: dict[int, int] = {}

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        run_id = child_run_id(path, world) if method == "GET" else None
        body = json_body(reply) if run_id is not None else None
        if run_id is None or not isinstance(body, dict):
            return None
        if body.get("status") != "completed" or body.get("conclusion") is None:
            return None
        seen[run_id] = seen.get(run_id, 0) + 1
        return with_json(reply, {**body, "conclusion": None}) if seen[run_id] <= reads else None

    return rule


def odd_header_rule(value: str) -> Rule:
    """Every rate-limit header GitHub sends carries `value` instead."""

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        del method, path, world
        names = {"retry-after", "x-ratelimit-reset", "x-ratelimit-remaining"}
        if not any(key.lower() in names for key in reply.headers):
            return None
        headers = {k: value if k.lower() in names else v for k, v in reply.headers.items()}
        return replace(reply, headers=headers)

    return rule
