"""A GitHub App's endpoints: its installation on a repository, and minting an installation token.

github-api.md 14. Both are authenticated with the App's JWT (a client whose `TokenSource` is
`github.app_token.AppJwt`), never with an installation token. Reads and the mint go through
`github.calls` with the specification's retries (a mint that is sent twice only mints two tokens).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from pydantic import BaseModel, ConfigDict, SecretStr

from runner_queue_fallback.github.calls import Calls
from runner_queue_fallback.github.transport import api_path

__all__ = ["AppEndpoints", "Installation", "InstallationToken"]


class _Reply(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class Installation(_Reply):
    """`GET /repos/{owner}/{repo}/installation`: the App's installation that reaches it."""

    id: int
    app_id: int
    app_slug: str
    repository_selection: str
    permissions: dict[str, str]


class InstallationToken(_Reply):
    """A minted token (kept secret in every repr) and when it expires."""

    token: SecretStr
    expires_at: datetime
    permissions: dict[str, str] = {}
    repository_selection: str | None = None


class AppEndpoints:
    """The App's endpoints, through `calls` (a client authenticated with the App's JWT)."""

    def __init__(self, calls: Calls, repository: str) -> None:
        """Send through `calls`; `repository` is `owner/name`."""
        self._calls, self._repository = calls, repository

    def repository_installation(self, *, deadline: float | None = None) -> Installation:
        """The App's installation on this repository (404: the App is not installed on it)."""
        owner, _, name = self._repository.partition("/")
        path = api_path("repos", owner, name, "installation")
        return self._calls.get(path, {}, Installation, deadline, cacheable=False)

    def create_token(
        self,
        installation_id: int,
        *,
        repositories: Sequence[str],
        permissions: Mapping[str, str],
        deadline: float | None = None,
    ) -> InstallationToken:
        """Mint a token of `installation_id` for `repositories` (names) with `permissions`."""
        calls = self._calls
        path = api_path("app", "installations", installation_id, "access_tokens")
        body = {"repositories": list(repositories), "permissions": dict(permissions)}

        def attempt(number: int) -> InstallationToken:
            url = calls.transport.url(path, {})
            response = calls.send("POST", path, url=url, json=body, attempts=number)
            if response.status_code != 201:
                raise calls.api_error("POST", path, response, attempts=number)
            return calls.transport.parse("POST", path, response.content, InstallationToken, number)

        return calls.retrying("POST", path, deadline, attempt)
