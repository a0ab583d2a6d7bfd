"""Adapters that put the fake GitHub behind `requests`, `responses` and a loopback HTTP server."""

from __future__ import annotations

import functools
import json as _json
import re
import threading
from collections.abc import Mapping
from datetime import timedelta
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import requests
from requests.adapters import BaseAdapter
from requests.structures import CaseInsensitiveDict

from runner_queue_fallback.fake_github.reply import Reply

if TYPE_CHECKING:
    import responses

__all__ = ["DirectSession", "LoopbackServer", "SimAdapter", "make_session", "register"]

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")


class Handler(Protocol):
    """Anything with the fake's one entry point and an API root."""

    api_url: str

    def handle(
        self, method: str, path_and_query: str, headers: Mapping[str, str], body: bytes = b""
    ) -> Reply:
        """Serve one request."""


def _relative(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _body(raw: object) -> bytes:
    if raw is None:
        return b""
    if isinstance(raw, str):
        return raw.encode()
    if isinstance(raw, bytes):
        return raw
    raise TypeError(f"the fake GitHub cannot read a streamed body ({type(raw).__name__})")


class SimAdapter(BaseAdapter):
    """A `requests` transport that hands every request to the fake instead of the network."""

    def __init__(self, world: Handler) -> None:
        """Serve requests with `world.handle`."""
        super().__init__()
        self.world = world

    def send(  # noqa: PLR0917 (requests' adapter signature)
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: float | tuple[float, float] | tuple[float, None] | None = None,
        verify: bool | str = True,
        cert: bytes | str | tuple[bytes | str, bytes | str] | None = None,
        proxies: Mapping[str, str] | None = None,
    ) -> requests.Response:
        """Serve `request`; raise ReadTimeout/ConnectionError when the fake gives no reply."""
        del stream, timeout, verify, cert, proxies
        url = request.url or ""
        reply = self.world.handle(
            request.method or "GET", _relative(url), dict(request.headers), _body(request.body)
        )
        return _response(reply, url, request)

    def close(self) -> None:
        """Nothing to release."""


def _response(reply: Reply, url: str, request: requests.PreparedRequest) -> requests.Response:
    """The fake's reply as requests builds one, or the exception requests would raise."""
    _raise_for_no_reply(reply, url, request)
    response = requests.Response()
    response.status_code = reply.status
    response.headers = CaseInsensitiveDict(reply.headers)
    response._content = reply.body  # noqa: SLF001 (how requests' own adapters fill a Response)
    response.url = url
    response.request = request
    response.reason = _reason(reply.status)
    response.encoding = "utf-8"
    return response


def _light_response(reply: Reply, url: str, request: requests.PreparedRequest) -> requests.Response:
    """`_response` without requests' cookie jar (two thirds of the cost of a `Response()`).

    For `DirectSession` only, whose replies never reach requests' session machinery: nothing
    reads a cookie from the fake, and `cookies` is an empty jar shared by these responses.
    """
    _raise_for_no_reply(reply, url, request)
    response = requests.Response.__new__(requests.Response)
    response.__dict__.update(  # what Response() sets, filled at once
        _content=reply.body,
        _content_consumed=False,
        _next=None,
        status_code=reply.status,
        headers=CaseInsensitiveDict(reply.headers),
        raw=None,
        url=url,
        encoding="utf-8",
        history=[],
        reason=_reason(reply.status),
        cookies=_NO_COOKIES,
        elapsed=_NO_TIME,
        request=request,
    )
    return response


def _raise_for_no_reply(reply: Reply, url: str, request: requests.PreparedRequest) -> None:
    """The exception requests would raise when the fake gives no reply."""
    if reply.error == "timeout":
        raise requests.exceptions.ReadTimeout(f"simulated timeout: {url}", request=request)
    if reply.error == "connection":
        raise requests.exceptions.ConnectionError(f"simulated drop: {url}", request=request)


class DirectSession(requests.Session):
    """A session that hands the fake each request as the client sends it, skipping `prepare`.

    For runs by the thousand (the fuzzers): requests' preparation of a request (cookies, URL
    parsing, header checks, environment) costs more than the fake's reply. Only what our client
    sends is supported: a full URL, headers, an optional JSON body; the fake never redirects.
    Everything else goes through `make_session`, which keeps requests' whole path under test.
    """

    def __init__(self, world: Handler) -> None:
        """Serve every request with `world.handle` (looked up per request, so wrappers apply)."""
        super().__init__()
        self.world = world
        #: requests' default headers, read once: our client sends its own with each request
        self._base = {str(k): str(v) for k, v in self.headers.items()}

    def request(  # type: ignore[override]  # the keywords our client passes, not requests' all
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        json: object = None,
        **ignored: object,
    ) -> requests.Response:
        """Serve one request; `timeout` and `allow_redirects` do not apply to an in-process fake."""
        if set(ignored) - {"timeout", "allow_redirects"}:
            raise TypeError(f"DirectSession does not support {sorted(ignored)}")
        sent = self._base | dict(headers or {})
        body = b""
        if json is not None:
            body = _json.dumps(json, allow_nan=False).encode()
            sent["Content-Type"] = "application/json"
        request = requests.PreparedRequest.__new__(requests.PreparedRequest)
        request.__dict__.update(  # what PreparedRequest() sets, filled at once
            method=method.upper(),
            url=url,
            headers=CaseInsensitiveDict(sent),
            _cookies=None,
            body=body or None,
            hooks={"response": []},
            _body_position=None,
        )
        reply = self.world.handle(method.upper(), _relative(url), sent, body)
        return _light_response(reply, url, request)


_NO_COOKIES = requests.cookies.RequestsCookieJar()
_NO_TIME = timedelta(0)


@functools.cache
def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def make_session(world: Handler) -> requests.Session:
    """A session with the fake mounted on `world.api_url`."""
    session = requests.Session()
    # The fake is in-process: no proxy, netrc or CA bundle from the environment applies to it, and
    # reading them costs more than the fake's own reply (requests scans os.environ per request).
    session.trust_env = False
    session.mount(world.api_url.rstrip("/") + "/", SimAdapter(world))
    return session


def register(world: Handler, rsps: responses.RequestsMock) -> None:
    """Plug the fake into `responses` as one callback per HTTP method under `api_url`."""

    def callback(request: requests.PreparedRequest) -> Any:
        url = request.url or ""
        reply = world.handle(
            request.method or "GET", _relative(url), dict(request.headers), _body(request.body)
        )
        if reply.error == "timeout":
            return requests.exceptions.ReadTimeout(f"simulated timeout: {url}", request=request)
        if reply.error == "connection":
            return requests.exceptions.ConnectionError(f"simulated drop: {url}", request=request)
        return reply.status, dict(reply.headers), reply.body

    pattern = re.compile(re.escape(world.api_url.rstrip("/")) + r"/.*")
    for method in METHODS:
        rsps.add_callback(method, pattern, callback=callback)


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    world: Handler

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        reply = self.world.handle(self.command, self.path, dict(self.headers.items()), body)
        if reply.error is not None:  # no reply at all: drop the connection
            self.close_connection = True
            return
        self.log_request(reply.status)
        self.send_response_only(reply.status)  # the fake's own `Date`, on its clock, not the host's
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if reply.status != 204:  # a 204 carries no Content-Length (RFC 9110 §8.6)
            self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        if reply.body and self.command != "HEAD":
            self.wfile.write(reply.body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _serve  # noqa: N815 (http.server names)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's signature)
        """Stay quiet: the fake's ledger records every request."""


class LoopbackServer:
    """`ThreadingHTTPServer` on 127.0.0.1 with an ephemeral port, serving the fake in a thread."""

    def __init__(self, world: Handler) -> None:
        """Prepare to serve `world`; `with` starts and stops the server."""
        handler = type("SimRequestHandler", (_RequestHandler,), {"world": world})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        """The base URL, e.g. `http://127.0.0.1:54321`."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> str:
        """Start serving; return the base URL."""
        self._thread.start()
        return self.url

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
