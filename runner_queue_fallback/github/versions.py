"""How a server says it lacks a REST API version, and the one place a run moves to the older one.

The versions themselves, as the `api-version` input spells them, are `core/api_versions.py`'s.
2026-03-10 is the contract the action prefers: a dispatch answers 200 with the new run's id.
2022-11-28 is what older GitHub Enterprise Server releases serve: a dispatch answers `204 No
Content`, and the run is found by its unique run-name. With `auto` (the `api-version` input's
default) the client asks for 2026-03-10 and moves to 2022-11-28 when the server refuses it on the
first request, or answers a dispatch with 204 (`VersionNegotiation` does this, in one place).

Ref: https://docs.github.com/rest/about-the-rest-api/api-versions
"""

from __future__ import annotations

from collections.abc import Callable

from runner_queue_fallback.core.api_versions import API_VERSION_CHOICES, AUTO, NEWER, OLDER
from runner_queue_fallback.core.errors import GitHubAPIError

__all__ = ["ApiVersionRefused", "VersionNegotiation", "refuses_version"]


def refuses_version(status: int, message: str, version: str) -> bool:
    """Whether an error reply says that the server does not serve `version`.

    github.com answers `400` with "API version '...' is not a supported version."; what GitHub
    Enterprise Server says is not known offline, so any 400 whose message mentions the version
    (the word, or the date asked for) counts. The caller only asks this of the reply that decides
    the version (the first) or to explain a refusal, so a 400 of another kind is not misread.
    """
    text = message.lower()
    return status == 400 and ("version" in text or version in text)


class ApiVersionRefused(GitHubAPIError):
    """400: the server does not serve the API version that the `api-version` input pins."""

    title = "API version refused"

    def __init__(
        self,
        method: str,
        path: str,
        status: int,
        message: str,
        *,
        version: str,
        request_id: str | None = None,
        attempts: int = 1,
    ) -> None:
        """Name the version asked for, the input that set it, and the fix."""
        self.version = version
        self.hint = (
            f"The server does not serve REST API version {version}, which the input "
            f"'api-version' asks for. Set api-version to auto (the "
            f"default: the first request tells which version the server has) or to "
            f"{OLDER if version == NEWER else NEWER}"
        )
        super().__init__(method, path, status, message, request_id=request_id, attempts=attempts)


class VersionNegotiation:
    """The version every request asks for now; with `auto`, the one place it may move, once.

    Kept free of the HTTP library (the reply's status and message are handed in) so that this
    module stays light for the input rules.
    """

    def __init__(self, setting: str, log: Callable[[str], None] | None) -> None:
        """Start from the `api-version` input's value: `auto`, 2026-03-10 or 2022-11-28."""
        if setting not in API_VERSION_CHOICES:
            raise ValueError(f"api_version must be one of {API_VERSION_CHOICES}, got {setting!r}")
        #: The API version every request asks for now; with `auto` it may move to 2022-11-28 once.
        self.version: str = NEWER if setting == AUTO else setting
        self._auto = setting == AUTO
        #: Whether no reply has settled the version yet (only with `auto`).
        self.detecting = self._auto
        self._log = log

    @property
    def older_contract(self) -> bool:
        """Whether this run speaks 2022-11-28: a dispatch reply carries no run id."""
        return self.version == OLDER

    @property
    def may_move(self) -> bool:
        """Whether a reply may still move this run to 2022-11-28."""
        return self._auto and self.version == NEWER

    def refused_first(
        self, method: str, path: str, status: int, message: Callable[[], str]
    ) -> bool:
        """With `auto`, the first reply that says something settles the version.

        True when it refused 2026-03-10: the caller sends the same request again as 2022-11-28.
        Rate limits, 408 and 5xx say nothing about the version and leave it open; a dispatch
        POST is never sent again (the dispatch settles the version with a read first).
        `message`: the reply's error message, redacted, read only when the status says something.
        """
        if status in {403, 408, 429} or status >= 500:
            return False
        self.detecting = False
        text = message()
        if not refuses_version(status, text, self.version) or path.endswith("/dispatches"):
            return False
        self.use_older(
            f"the server refused API version {NEWER} on the first request ({method} {path} -> "
            f"{status}: {text})"
        )
        return True

    def use_older(self, reason: str) -> None:
        """Move this run to 2022-11-28, once, and say so in the log."""
        self.version = OLDER
        self.detecting = False
        if self._log is not None:
            self._log(
                f"API version: {reason}. This run uses {OLDER} from now on: a dispatch reply "
                "carries no run id, so each child is found by its run-name"
            )
