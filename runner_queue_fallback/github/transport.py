"""One HTTP exchange with GitHub: build the URL, send, parse, map an error reply, redact the token.

Its own module so that what crosses the wire is in one place: the headers every request carries
(token, API version, user agent, `If-None-Match` for a cached GET), the timeout, the conversion of
network failures and malformed bodies into `TransportError`, and of error replies into the
`GitHubAPIError` subclasses. It sends once; retries, deadlines and the quota's waits are
`github.calls`, the version's negotiation `github.versions`.

The token is kept in one private header dict and never appears in a message, log line or repr.
A `TokenSource` (`github.tokens`) instead is asked for the token of each request and told of each
401, so that a token that expires within the run is renewed; every token it handed out is redacted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, TypeVar
from urllib.parse import quote, urlencode

import requests
from pydantic import BaseModel, ValidationError

from runner_queue_fallback.core.clock import Clock
from runner_queue_fallback.core.errors import (
    Conflict,
    GitHubAPIError,
    GitHubError,
    NotFound,
    PermissionDenied,
    RateLimited,
    ServerError,
    TransportError,
    Unauthorized,
    Unprocessable,
)
from runner_queue_fallback.github.quota import RequestStats
from runner_queue_fallback.github.retry import classify_rate_limit
from runner_queue_fallback.github.tokens import TokenSource
from runner_queue_fallback.github.versions import (
    ApiVersionRefused,
    VersionNegotiation,
    refuses_version,
)

__all__ = ["USER_AGENT", "Cached", "Transport", "api_path", "request_id_note"]

USER_AGENT: Final = "runner-queue-fallback"

_MESSAGE_LIMIT = 300
#: An error body larger than this is not parsed for its message (GitHub's are a few hundred bytes).
_ERROR_BODY_LIMIT = 64 * 1024
_ModelT = TypeVar("_ModelT", bound=BaseModel)


def api_path(*segments: str | int) -> str:
    """The one place an API path is built: `/seg/seg/...`, each segment percent-encoded.

    Every character outside RFC 3986's unreserved set is encoded, `/` included, so a value is
    always exactly one segment; a value with several parts (a git ref, a file path) is passed
    as several segments. An empty segment, `.` or `..` is refused: percent-encoding keeps dots,
    and the HTTP stack would remove dot segments, so they could change which resource is read.

    Raises:
        GitHubError: a segment is empty, `.` or `..`.

    """
    parts = []
    for segment in segments:
        text = str(segment)
        if text in {"", ".", ".."}:
            raise GitHubError(
                f"refused to build an API path with the segment {text!r} "
                f"(from {'/'.join(str(s) for s in segments)!r}): it could change which resource "
                "is read"
            )
        parts.append(quote(text, safe=""))
    return "/" + "/".join(parts)


@dataclass(frozen=True, slots=True)
class Cached:
    """A GET body kept for conditional requests, with the `Link` header of a list page."""

    etag: str
    body: bytes
    link: str = ""


class Transport:
    """Send one request to one API URL with the token, and read what came back."""

    def __init__(
        self,
        session: requests.Session,
        api_url: str,
        token: str | TokenSource,
        clock: Clock,
        *,
        stats: RequestStats,
        versions: VersionNegotiation,
        timeout: float,
        conditional: bool,
    ) -> None:
        """Use `session` (whose own retries stay off); count each send in `stats`.

        `token`: the one token of every request, or the `TokenSource` asked before each.
        """
        self._session = session
        self.api_url = api_url.rstrip("/")
        self._source = None if isinstance(token, str) else token
        #: Every token sent so far (the one fixed token, or each one the source handed out).
        self._tokens: list[str] = [token] if isinstance(token, str) and token else []
        self._clock = clock
        self._stats = stats
        self._versions = versions
        self._timeout = timeout
        #: Whether GETs are conditional (ETag / If-None-Match) and their bodies kept.
        self.conditional = conditional
        self._headers: Final = {
            "Authorization": f"Bearer {token}" if isinstance(token, str) else "",
            "Accept": "application/vnd.github+json",
            "User-Agent": USER_AGENT,
        }
        self._cache: dict[str, Cached] = {}

    @property
    def renews(self) -> bool:
        """Whether a request refused with 401 would go out again with a fresh token."""
        return self._source is not None and self._source.renews

    def url(self, path: str, params: Mapping[str, str]) -> str:
        """The full URL of an API path; query values keep `/`, `:` readable."""
        query = f"?{urlencode(params, safe='/:')}" if params else ""
        return f"{self.api_url}{path}{query}"

    def cached(self, url: str) -> Cached | None:
        """The body kept for `url`, when GETs are conditional."""
        return self._cache.get(url) if self.conditional else None

    def keep(self, url: str, response: requests.Response, body: bytes, link: str = "") -> None:
        """Keep a 200 reply's body (and list page's `Link`) for the next conditional GET."""
        etag = response.headers.get("ETag")
        if self.conditional and response.status_code == 200 and etag:
            self._cache[url] = Cached(etag, body, link)

    def send(
        self,
        method: str,
        path: str,
        *,
        url: str | None = None,
        json: object = None,
        allow_redirects: bool = True,
        attempts: int = 1,
    ) -> requests.Response:
        """Send one HTTP request; transport failures become TransportError without headers."""
        url = url or self.url(path, {})
        headers = dict(self._headers)
        token = self._token_now()
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        headers["X-GitHub-Api-Version"] = self._versions.version
        cached = self.cached(url) if method == "GET" else None
        if cached is not None:
            headers["If-None-Match"] = cached.etag
        self._stats.sent += 1
        try:
            response = self._session.request(
                method,
                url,
                headers=headers,
                json=json,
                timeout=self._timeout,
                allow_redirects=allow_redirects,
            )
        except requests.Timeout as exc:
            detail = f"timed out after {self._timeout:g}s ({type(exc).__name__})"
            raise TransportError(method, path, detail, attempts=attempts) from None
        except requests.RequestException as exc:
            detail = self.redact(f"{type(exc).__name__}: {exc}")
            raise TransportError(method, path, detail, attempts=attempts) from None
        if token is not None and response.status_code == 401 and self._source is not None:
            self._source.refused(token)
        return response

    def _token_now(self) -> str | None:
        """The source's token for the request about to be sent (None: the one fixed token)."""
        if self._source is None:
            return None
        token = self._source.token()
        if token not in self._tokens:
            self._tokens.append(token)
        return token

    def parse(
        self, method: str, path: str, body: bytes, model: type[_ModelT], attempts: int
    ) -> _ModelT:
        """Parse a reply body; a body that is not the expected JSON is a transport error."""
        try:
            return model.model_validate_json(body)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "body"
            detail = (
                f"malformed reply: not the expected JSON ({exc.error_count()} problem(s); "
                f"{where}: {first['msg']})"
            )
            raise TransportError(method, path, detail, attempts=attempts) from None

    def api_error(
        self, method: str, path: str, response: requests.Response, *, attempts: int
    ) -> GitHubAPIError:
        """Turn an error reply into the matching GitHubAPIError subclass."""
        status = response.status_code
        message = self.message(response)
        request_id = response.headers.get("X-GitHub-Request-Id")
        limit = classify_rate_limit(status, response.headers, message, self._clock.now())
        if limit is not None:
            return RateLimited(
                method,
                path,
                status,
                message,
                kind=limit.kind.value,
                retry_after=limit.wait,
                request_id=request_id,
                attempts=attempts,
                basis=limit.basis,
            )
        version = self._versions.version
        if refuses_version(status, message, version):
            return ApiVersionRefused(
                method,
                path,
                status,
                message,
                version=version,
                request_id=request_id,
                attempts=attempts,
            )
        error_class: type[GitHubAPIError] = {
            401: Unauthorized,
            403: PermissionDenied,
            404: NotFound,
            408: ServerError,
            409: Conflict,
            422: Unprocessable,
        }.get(status, ServerError if status >= 500 else GitHubAPIError)
        return error_class(method, path, status, message, request_id=request_id, attempts=attempts)

    def message(self, response: requests.Response) -> str:
        """GitHub's error message of a reply, shortened, the token removed."""
        return self.redact(_message(response))

    def redact(self, text: str) -> str:
        """Remove every token sent from text that came from elsewhere (belt and braces)."""
        for token in self._tokens:
            text = text.replace(token, "***")
        return text


def request_id_note(response: requests.Response) -> str:
    """`, request id X` for a message, or nothing."""
    found = response.headers.get("X-GitHub-Request-Id")
    return f", request id {found}" if found else ""


def _message(response: requests.Response) -> str:
    """GitHub's error message from the JSON body, else the HTTP reason, shortened.

    A body that is too large, not UTF-8, not JSON or nested too deeply has no message: it is
    cut, never raised.
    """
    body: object = None
    content = response.content or b""
    if len(content) <= _ERROR_BODY_LIMIT:
        try:
            body = json.loads(content)
        except (ValueError, RecursionError):
            body = None
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        text = str(body["message"])
    else:
        reason = response.reason
        text = reason if isinstance(reason, str) else ""
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 3] + "..."
