"""The history file: the children one `stats` reading found, saved and read back offline.

One format, versioned (`docs/history-schema.json` describes it): `stats --save-history` writes
what it fetched from GitHub, `simulate --write-history` what it read from a simulated fleet, and
`stats --history` reads either back without a request. Version 2 records a job's labels as a list,
as GitHub lists them; version 1 (still read) recorded them sorted and comma-joined. The file is
user-given input: anything that is not exactly the format (bad JSON, nesting deeper than Python
reads, a wrong type, an unknown key, a file over `MAX_BYTES`) is a `HistoryFileError` naming the
flag and the file, and quoting at most `_QUOTE` characters of a bad value; the caller prints it
through the escaping path.
Every number and time is range checked before any arithmetic (a 400-digit wait, a time that
leaves Python's years once in UTC, a runner before its dispatch): an input error, not a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from runner_queue_fallback.core.request_id import parse
from runner_queue_fallback.tools.stats.history import Child, Ending, History
from runner_queue_fallback.tools.stats.survival import Observation

__all__ = [
    "HISTORY_SCHEMA",
    "HISTORY_VERSION",
    "HISTORY_VERSIONS",
    "QUEUE_DURATION",
    "HistoryFileError",
    "SavedHistory",
    "load",
    "save",
]

HISTORY_SCHEMA = "runner-queue-fallback/history"
#: Bump on any change a reader could notice; `docs/history-schema.json` describes each version.
HISTORY_VERSION = 2
#: The versions `load` reads: 1 wrote a job's labels as one string, sorted and comma-joined.
HISTORY_VERSIONS = (1, 2)
#: Labels one job may list in a file (GitHub states no limit; a `runs-on` has a handful).
MAX_LABELS = 100
#: OpenTelemetry's name for a job's queue wait (its GitHub receiver, github-api.md 12), seconds.
QUEUE_DURATION = "cicd.pipeline.run.queue.duration"
#: A reading of 10,000 children is about 3 MB; anything far larger is not one of ours.
MAX_BYTES = 64 * 1024 * 1024
_QUOTE = 60
#: The times a file may hold: far past GitHub's, and far inside Python's years 1 to 9999 (a time
#: outside them, once moved to UTC, overflows).
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(3000, 1, 1, tzinfo=UTC)
#: A wait lies between two such times; a count or id fits GitHub's 64-bit integers.
MAX_SECONDS = (LATEST - EARLIEST).total_seconds()
MAX_COUNT = 2**63 - 1
_READING = (
    "runs_in_window",
    "runs_examined",
    "runs_not_ours",
    "carried_forward",
    "queued_with_steps",
    "windows",
)
_CHILD_KEYS = frozenset(
    {
        "run_id",
        "request_id",
        "labels",
        "group",
        "dispatched_at",
        "runner_at",
        "ending",
        "conclusion",
        QUEUE_DURATION,
        "censored",
    }
)
_T = TypeVar("_T")


class HistoryFileError(Exception):
    """A history file that cannot be read: one message naming the flag, the file and the spot."""


@dataclass(frozen=True)
class SavedHistory:
    """A reading as the file holds it: where, when, from what, and the children."""

    repository: str
    workflow: str
    since: datetime
    until: datetime
    source: str  # "github" or "simulate"
    history: History


# ---------------------------------------------------------------------------------- writing


def save(path: Path, saved: SavedHistory) -> None:
    """Write `saved` to `path` (OSError if it cannot be written)."""
    h = saved.history
    document = {
        "schema": HISTORY_SCHEMA,
        "version": HISTORY_VERSION,
        "source": saved.source,
        "repository": saved.repository,
        "workflow": saved.workflow,
        "window": {"since": _iso(saved.since), "until": _iso(saved.until)},
        "reading": {
            "runs_in_window": h.in_window,
            "runs_examined": h.examined,
            "runs_not_ours": h.not_ours,
            "carried_forward": h.carried_forward,
            "queued_with_steps": h.queued_with_steps,
            "windows": h.windows,
            "stopped": h.stopped,
        },
        "children": [_child_json(c) for c in h.children],
    }
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")


def _child_json(child: Child) -> dict[str, Any]:
    return {
        "run_id": child.run_id,
        "request_id": str(child.request),
        "labels": list(child.labels),
        "group": child.group,
        "dispatched_at": _iso(child.dispatched),
        "runner_at": None if child.runner_at is None else _iso(child.runner_at),
        "ending": child.ending.value,
        "conclusion": child.conclusion,
        QUEUE_DURATION: None if child.wait is None else child.wait.seconds,
        "censored": child.wait is not None and not child.wait.event,
    }


# ---------------------------------------------------------------------------------- reading


def load(path: Path, flag: str = "--history") -> SavedHistory:
    """Read a history file back; HistoryFileError for anything but the documented format."""
    where = f"{flag} {path}"
    try:
        if path.stat().st_size > MAX_BYTES:
            raise HistoryFileError(f"{where}: larger than {MAX_BYTES // 2**20} MB")
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise HistoryFileError(f"{where}: not a readable JSON file ({exc})") from None
    except RecursionError:  # nesting deeper than Python's stack: an input error, no traceback
        raise HistoryFileError(f"{where}: JSON too deeply nested to read") from None
    try:
        return _document(data)
    except _Bad as bad:
        raise HistoryFileError(f"{where}: {bad}") from None


class _Bad(Exception):
    """One misfit, with the spot it is at (`children[3].ending: ...`)."""


def _document(data: object) -> SavedHistory:
    top = _object(
        data,
        "the file",
        {"schema", "version", "source", "repository", "workflow", "window", "reading", "children"},
    )
    version = top.get("version")
    if (
        top.get("schema") != HISTORY_SCHEMA
        or type(version) is not int  # `true` equals 1 in Python
        or version not in HISTORY_VERSIONS
    ):
        versions = " or ".join(str(v) for v in HISTORY_VERSIONS)
        raise _Bad(f"not a history file (schema {HISTORY_SCHEMA} version {versions})")
    window = _object(top.get("window"), "window", {"since", "until"})
    since, until = (
        _time(window.get("since"), "window.since"),
        _time(window.get("until"), "window.until"),
    )
    if since > until:
        raise _Bad("window.since is after window.until")
    history = _reading(top.get("reading"))
    children = _field(top, "children", list, "children")
    history.children = [_child(item, f"children[{n}]", version) for n, item in enumerate(children)]
    return SavedHistory(
        repository=_text(top.get("repository"), "repository"),
        workflow=_text(top.get("workflow"), "workflow"),
        since=since,
        until=until,
        source=_choice(top.get("source"), "source", ("github", "simulate")),
        history=history,
    )


def _reading(data: object) -> History:
    reading = _object(data, "reading", {*_READING, "stopped"})
    counts = {key: _count(reading.get(key), f"reading.{key}") for key in _READING}
    stopped = reading.get("stopped")
    return History(
        in_window=counts["runs_in_window"],
        examined=counts["runs_examined"],
        not_ours=counts["runs_not_ours"],
        carried_forward=counts["carried_forward"],
        queued_with_steps=counts["queued_with_steps"],
        windows=counts["windows"],
        stopped=None if stopped is None else _text(stopped, "reading.stopped"),
    )


def _child(data: object, at: str, version: int) -> Child:
    item = _object(data, at, _CHILD_KEYS)
    request = parse(_text(item.get("request_id"), f"{at}.request_id"))
    if request is None:
        raise _Bad(f"{at}.request_id: not a request id (rqf-<run>-<attempt>-<n>-<8 hex>[-<time>])")
    duration = item.get(QUEUE_DURATION)
    censored = _field(item, "censored", bool, f"{at}.censored")
    wait = (
        None
        if duration is None
        else Observation(_seconds(duration, f"{at}.{QUEUE_DURATION}"), event=not censored)
    )
    group, conclusion, runner = item.get("group"), item.get("conclusion"), item.get("runner_at")
    dispatched = _time(item.get("dispatched_at"), f"{at}.dispatched_at")
    runner_at = None if runner is None else _time(runner, f"{at}.runner_at")
    if runner_at is not None and runner_at < dispatched:
        raise _Bad(f"{at}.runner_at: before {at}.dispatched_at, got {_shown(runner)}")
    return Child(
        run_id=_count(item.get("run_id"), f"{at}.run_id"),
        request=request,
        labels=_labels(item.get("labels"), f"{at}.labels", version),
        group=None if group is None else _text(group, f"{at}.group"),
        dispatched=dispatched,
        wait=wait,
        runner_at=runner_at,
        ending=Ending(_choice(item.get("ending"), f"{at}.ending", tuple(e.value for e in Ending))),
        conclusion=None if conclusion is None else _text(conclusion, f"{at}.conclusion"),
    )


def _labels(value: object, at: str, version: int) -> tuple[str, ...]:
    """A job's labels: a list of strings; in version 1 one string, sorted and comma-joined."""
    if version == 1:
        text = _text(value, at)
        return tuple(text.split(",")) if text else ()
    if not isinstance(value, list) or len(value) > MAX_LABELS:
        raise _Bad(f"{at}: must be a list of at most {MAX_LABELS} labels, got {_shown(value)}")
    return tuple(_text(name, f"{at}[{n}]") for n, name in enumerate(value))


# --------------------------------------------------------------------------- typed readers


def _object(data: object, at: str, keys: set[str] | frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(data, dict):
        raise _Bad(f"{at}: must be an object, got {_shown(data)}")
    missing, unknown = sorted(keys - data.keys()), sorted(set(data) - keys)
    if missing:
        raise _Bad(f"{at}: missing {', '.join(missing)}")
    if unknown:
        raise _Bad(f"{at}: unknown key {_shown(unknown[0])}")
    return data


def _field(data: Mapping[str, Any], key: str, kind: type[_T], at: str) -> _T:
    value = data.get(key)
    if not isinstance(value, kind):
        raise _Bad(f"{at}: must be {kind.__name__}, got {_shown(value)}")
    return value


def _text(value: object, at: str, limit: int = 1000) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise _Bad(f"{at}: must be a string of at most {limit} characters, got {_shown(value)}")
    return value


def _count(value: object, at: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise _Bad(f"{at}: must be a whole number from 0 to {MAX_COUNT}, got {_shown(value)}")
    return value


def _seconds(value: object, at: str) -> float:
    # Compared, never converted, first: a 400-digit int has no float (OverflowError); NaN and
    # infinity fail the comparison.
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= MAX_SECONDS
    ):
        raise _Bad(f"{at}: must be seconds, from 0 to {MAX_SECONDS:.0f}, got {_shown(value)}")
    return float(value)


def _choice(value: object, at: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise _Bad(f"{at}: must be one of {', '.join(allowed)}, got {_shown(value)}")
    return str(value)


def _time(value: object, at: str) -> datetime:
    text = _text(value, at, limit=40)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise _Bad(f"{at}: must be a UTC time like 2026-11-02T09:00:00Z, got {_shown(value)}")
    # Compared before astimezone: 0001-01-01T00:00:00+14:00 in UTC is before year 1 (OverflowError).
    if not EARLIEST <= parsed < LATEST:
        years = f"{EARLIEST.year} to {LATEST.year - 1}"
        raise _Bad(f"{at}: must be a time from {years} (UTC), got {_shown(value)}")
    return parsed.astimezone(UTC)


def _shown(value: object) -> str:
    text = repr(value) if not isinstance(value, dict | list) else type(value).__name__
    return text if len(text) <= _QUOTE else text[: _QUOTE - 3] + "..."


def _iso(at: datetime) -> str:
    """UTC, `Z`, with the fraction of a second when there is one (a report reads back the same)."""
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")
