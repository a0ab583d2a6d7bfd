"""Where the transport gets the token of each request: a fixed one, or one that is renewed.

The transport asks `TokenSource.token()` before every request and tells `refused(token)` of every
401 it gets: a source that mints its tokens (`github.app_token`) renews them before they expire
and after a refusal; `StaticToken` (the job's `GITHUB_TOKEN`, a personal token) never changes.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["StaticToken", "TokenSource"]


@runtime_checkable
class TokenSource(Protocol):
    """The credential of each request, asked for anew before each one is sent."""

    #: Whether a token refused (401) is followed by a fresh one: a dispatch GitHub refused
    #: with 401 created nothing, and is sent once more only then (`github.runs`).
    renews: bool

    def token(self) -> str:
        """The token to send now (a source that mints may send requests of its own first).

        Raises:
            GitHubError: no token can be had (a source that mints says why); nothing was sent.

        """

    def refused(self, token: str) -> None:
        """GitHub answered 401 to a request sent with `token`: do not hand it out again."""


class StaticToken:
    """One token for the whole run: the job's `GITHUB_TOKEN` or a token given as an input."""

    __slots__ = ("_token",)

    #: The one token: a 401 is final.
    renews = False

    def __init__(self, token: str) -> None:
        """Hand out `token` for every request."""
        self._token = token

    def __repr__(self) -> str:
        """Never the token."""
        return "StaticToken(***)"

    def token(self) -> str:
        """The one token."""
        return self._token

    def refused(self, token: str) -> None:
        """Nothing to renew: the caller reports the 401."""
        del token
