"""The REST API versions the action speaks, and how a server says it lacks one.

2026-03-10 is the contract the action prefers: a dispatch answers 200 with the new run's id.
2022-11-28 is what older GitHub Enterprise Server releases serve: a dispatch answers `204 No
Content`, and the run is found by its unique run-name. With `auto` (the `api-version` input's
default) the client asks for 2026-03-10 and moves to 2022-11-28 when the server refuses it on the
first request, or answers a dispatch with 204 (`GitHubClient` does this in one place).

Ref: https://docs.github.com/rest/about-the-rest-api/api-versions
"""

from __future__ import annotations

from typing import Final, Literal

from runner_queue_fallback.errors import GitHubAPIError

__all__ = [
    "API_VERSION_CHOICES",
    "AUTO",
    "NEWER",
    "OLDER",
    "ApiVersionRefused",
    "ApiVersionSetting",
    "refuses_version",
]

#: The contract whose dispatch reply carries the run id.
NEWER: Final = "2026-03-10"
#: The contract of older servers: a dispatch answers 204 without the run.
OLDER: Final = "2022-11-28"
AUTO: Final = "auto"
#: The values of the `api-version` input, as action.yml lists them.
API_VERSION_CHOICES: Final = (AUTO, NEWER, OLDER)

ApiVersionSetting = Literal["auto", "2026-03-10", "2022-11-28"]


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
