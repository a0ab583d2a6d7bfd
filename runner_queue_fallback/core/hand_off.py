"""What the main step hands its post step through GITHUB_STATE: the only code that knows the keys.

The main step saves each value the moment the post step would need it (the step may die at any
point); the runner passes every key back to the post step as `STATE_<key>`, the last value saved
winning. The keys and how each value is written never change: the post step of a run that
started on an older version of the action reads what that version saved. In `core/` because the
composition root lists the keys in `cleanup --help`, and `--help` loads no `action/`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Protocol

__all__ = [
    "STATE_ENV",
    "HandOff",
    "StateFile",
    "save_api_version",
    "save_child",
    "save_copies",
    "save_dispatch",
    "save_followed_to_result",
    "save_job_url",
    "save_over",
    "save_refused",
]

#: Each field's GITHUB_STATE key, in the order `cleanup --help` lists them.
_KEYS = {
    "request_id": "request-id",
    "child_run_id": "child-run-id",
    "child_request_id": "child-request-id",
    "child_run_url": "child-run-url",
    "refused_request_id": "refused-request-id",
    "dispatched_at": "dispatched-at",
    "api_version": "api-version",
    "child_over": "child-over",
    "child_job_url": "child-job-url",
    "child_found_by_name": "child-found-by-name",
    "child_copies": "child-copies",
}
#: The environment variables the post step reads them from.
STATE_ENV = tuple(f"STATE_{key}" for key in _KEYS.values())


class StateFile(Protocol):
    """Where the main step saves (the reporter's GITHUB_STATE file)."""

    def save_state(self, name: str, value: str) -> None:
        """Append `name` = `value`; the post step reads it as STATE_<name>."""


@dataclass(frozen=True)
class HandOff:
    """The state as the post step receives it: text as saved, a key never saved reads as empty.

    The fields keep the saved text (the post step's rules strip it where they compare); the
    properties read the values whose form this module writes.
    """

    #: the request id of the last dispatch, saved before its POST
    request_id: str = ""
    #: the active child's run id, once known
    child_run_id: str = ""
    #: the request id that run was dispatched with
    child_request_id: str = ""
    #: the active child's run link
    child_run_url: str = ""
    #: the request id of a dispatch GitHub definitely refused (no run was created)
    refused_request_id: str = ""
    #: when the last dispatch was sent (ISO 8601, the runner's clock)
    dispatched_at: str = ""
    #: the API version the main step settled on
    api_version: str = ""
    #: the run id of a child the main step saw end
    child_over: str = ""
    #: the worker job's link, once seen
    child_job_url: str = ""
    #: the request id of a child found by run-name (other runs may bear it)
    child_found_by_name: str = ""
    #: comma-separated run ids bearing our request id besides the child
    child_copies: str = ""

    @classmethod
    def load(cls, environ: Mapping[str, str]) -> HandOff:
        """The state the runner passes the post step (`STATE_<key>`)."""
        return cls.from_saved(
            {
                name.removeprefix("STATE_"): value
                for name, value in environ.items()
                if name.startswith("STATE_")
            }
        )

    @classmethod
    def from_saved(cls, saved: Mapping[str, str]) -> HandOff:
        """The state from its saved keys (as a GITHUB_STATE file holds them)."""
        return cls(**{name: saved.get(key, "") for name, key in _KEYS.items()})

    @property
    def saved(self) -> dict[str, str]:
        """Every key with its text, as saved."""
        return {_KEYS[f.name]: getattr(self, f.name) for f in fields(self)}

    @property
    def child_run(self) -> int | None:
        """The active child's run id (None: not saved, or not a run id)."""
        return _run_id(self.child_run_id)

    @property
    def dispatched(self) -> datetime | None:
        """When the last dispatch was sent (None: not saved, or unreadable)."""
        try:
            return datetime.fromisoformat(self.dispatched_at)
        except ValueError:
            return None

    @property
    def copies(self) -> list[int]:
        """The saved run ids of the copies (an unreadable one is skipped)."""
        return [copy for copy in map(_run_id, self.child_copies.split(",")) if copy is not None]


def _run_id(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() else None


def _save(out: StateFile, **values: str) -> None:
    """Save each value under its field's key, in the order given."""
    for name, value in values.items():
        out.save_state(_KEYS[name], value)


def save_dispatch(
    out: StateFile, request_id: str, at: datetime, api_version: str, *, again: bool = False
) -> None:
    """Before a dispatch's POST: its request id, when, and the API version the post step speaks.

    `again`: the same request id goes once more after a refusal, which no longer stands.
    """
    _save(out, request_id=request_id, dispatched_at=at.isoformat(), api_version=api_version)
    if again:
        _save(out, refused_request_id="")


def save_refused(out: StateFile, request_id: str) -> None:
    """GitHub definitely refused the dispatch of `request_id`: no run was created."""
    _save(out, refused_request_id=request_id)


def save_api_version(out: StateFile, api_version: str) -> None:
    """The API version moved (a dispatch answered 204 may move it)."""
    _save(out, api_version=api_version)


def save_child(out: StateFile, run_id: int, request_id: str, url: str, *, by_name: bool) -> None:
    """The active child's run is known; its job link not yet.

    A run found `by_name` may not be the only one bearing the request id: the post step lists
    them again.
    """
    _save(
        out,
        child_run_id=str(run_id),
        child_request_id=request_id,
        child_run_url=url,
        child_job_url="",
        child_found_by_name=request_id if by_name else "",
    )


def save_copies(out: StateFile, run_ids: Iterable[int]) -> None:
    """Every run bearing our request id besides the child (all of them, each time)."""
    _save(out, child_copies=",".join(map(str, run_ids)))


def save_job_url(out: StateFile, url: str) -> None:
    """The worker job's link: the post step's link when its own reads show no job."""
    _save(out, child_job_url=url)


def save_over(out: StateFile, run_id: int) -> None:
    """The main step saw child `run_id` end: the post step has nothing to read or cancel."""
    _save(out, child_over=str(run_id))


def save_followed_to_result(out: StateFile) -> None:
    """The sequence followed its child to its result: no run bearing its run-name to list."""
    _save(out, child_found_by_name="")
