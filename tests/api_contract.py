"""GitHub's own API description as a test: check requests and replies against it.

`capture()` records every exchange the fake GitHub serves (`FakeGitHub.handle`, the one entry
point of every adapter), with the ledger's note of an injected fault. `check(exchange)` validates
it against each description of its server, committed by scripts/api_description.py in
tests/data/openapi: api.github.com in the API version the request asks for (2022-11-28 or
2026-03-10), or the oldest and newest GitHub Enterprise Server description for an older server.

Checked: the path (template match, path parameters), the query (no undocumented parameter,
documented ones valid), the headers (`X-GitHub-Api-Version`, authorization, content type), the
body (closed: a property the schema does not name is an error), the reply status and the reply
body (closed too: a field the view does not have, such as `has_downloads` on 2026-03-10, is an
error). Schemas are validated with openapi-schema-validator's `OAS30Validator` (the OpenAPI 3.0
dialect of JSON Schema: `nullable`, `int64`, `date-time`, on top of jsonschema).

What GitHub documents only in prose is a named exception (`EXCEPTIONS`), each with its source;
a finding it covers is kept and counted, never dropped.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, TypeVar
from unittest import mock
from urllib.parse import parse_qs, unquote, urlsplit

from jsonschema import _keywords  # type: ignore[import-untyped]  # no stubs; the stock `properties`
from jsonschema.validators import extend  # type: ignore[import-untyped]  # no stubs
from openapi_schema_validator import OAS30Validator, oas30_format_checker

from runner_queue_fallback.fake_github.reply import LedgerEntry, Reply
from runner_queue_fallback.fake_github.world import FakeGitHub

DATA = Path(__file__).resolve().parent / "data" / "openapi"
GITHUB_VERSIONS = ("2022-11-28", "2026-03-10")
#: Without `X-GitHub-Api-Version`, GitHub serves 2022-11-28 (github-api.md 1.1, [BLOG-0312]).
DEFAULT_VERSION = "2022-11-28"
METHODS = frozenset({"get", "post", "put", "patch", "delete", "head"})


@dataclass(frozen=True)
class Exchange:
    """One request the program sent and what the fake answered (status None: no reply)."""

    server: str  # "github.com" or "ghes" (the world serves no 2026-03-10)
    method: str
    path: str  # relative to the API root, still percent-encoded, no query
    query: str
    headers: Mapping[str, str]  # lower-case names
    body: bytes
    status: int | None
    reply_headers: Mapping[str, str]  # lower-case names
    reply_body: bytes
    fault: str | None = (
        None  # the fault the world injected (fake_github/faults.py), from its ledger
    )
    limit: str | None = None  # "primary" or "secondary": the rate limit that refused it

    @property
    def version(self) -> str:
        """The API version the request asks for."""
        return self.headers.get("x-github-api-version", DEFAULT_VERSION).strip()


@dataclass(frozen=True)
class Finding:
    """One way an exchange departs from a description; `exception` names a prose-only fact."""

    view: str
    part: str  # path, query, headers, body, status, reply
    message: str
    exception: str | None = None

    def __str__(self) -> str:
        tag = f" [exception: {self.exception}]" if self.exception else ""
        return f"{self.view}: {self.part}: {self.message}{tag}"


# ------------------------------------------------------------------------------ capture


def _exchange(
    world: FakeGitHub, request: tuple[str, str, Mapping[str, str], bytes], reply: Reply
) -> Exchange:
    method, path_and_query, headers, body = request
    split = urlsplit(path_and_query)
    prefix = urlsplit(world.api_url).path.rstrip("/")
    path = (
        split.path[len(prefix) :] if prefix and split.path.startswith(prefix + "/") else split.path
    )
    lowered = {k.lower(): v for k, v in reply.headers.items()}
    entry = _ledger_entry(world, lowered.get("x-github-request-id"))
    return Exchange(
        server="github.com" if "2026-03-10" in world.api_versions else "ghes",
        method=method.upper(),
        path=path,
        query=split.query,
        headers={k.lower(): v for k, v in headers.items()},
        body=body,
        status=None if reply.error else reply.status,
        reply_headers=lowered,
        reply_body=reply.body,
        fault=entry.fault if entry else None,
        limit=entry.limit if entry else None,
    )


def _ledger_entry(world: FakeGitHub, request_id: str | None) -> LedgerEntry | None:
    """The ledger's record of the request just served (by request id; else the last one)."""
    for entry in reversed(world.ledger[-50:]):
        if request_id is None or entry.request_id == request_id:
            return entry
    return None


@contextlib.contextmanager
def capture() -> Iterator[list[Exchange]]:
    """Record every exchange any fake GitHub serves while the block runs (what it served,
    before a test's `Tamper` rewrites it)."""
    exchanges: list[Exchange] = []
    real = FakeGitHub.handle

    def handle(
        self: FakeGitHub,
        method: str,
        path_and_query: str,
        headers: Mapping[str, str],
        body: bytes = b"",
    ) -> Reply:
        reply = real(self, method, path_and_query, headers, body)
        exchanges.append(_exchange(self, (method, path_and_query, dict(headers), body), reply))
        return reply

    with mock.patch.object(FakeGitHub, "handle", handle):
        yield exchanges


# -------------------------------------------------------------------------------- views


@dataclass(frozen=True)
class Operation:
    """One operation of a view, with its path template compiled and its parameters resolved."""

    method: str
    template: str
    pattern: re.Pattern[str]
    parameters: tuple[dict[str, Any], ...]
    spec: dict[str, Any]


@dataclass
class View:
    """One committed description: its operations, ready to match and validate."""

    name: str
    version: str
    provenance: dict[str, Any]  # `x-provenance`: package, version, file, digests, changes applied
    document: dict[str, Any]  # `$ref`s resolved, objects closed
    operations: list[Operation] = field(default_factory=list)

    def find(self, method: str, path: str) -> tuple[Operation, dict[str, str]] | None:
        """The operation serving `method path`, with its path parameters (decoded)."""
        for operation in self.operations:
            if operation.method != method.lower():
                continue
            match = operation.pattern.fullmatch(path)
            if match:
                return operation, {k: unquote(v) for k, v in match.groupdict().items()}
        return None


def deref(document: dict[str, Any]) -> dict[str, Any]:
    """The document with every local `$ref` replaced by its target (shared, not copied)."""
    done: dict[str, Any] = {}

    def target(ref: str) -> Any:
        if ref not in done:
            node: Any = document
            for part in ref.removeprefix("#/").split("/"):
                node = node[part.replace("~1", "/").replace("~0", "~")]
            done[ref] = {} if isinstance(node, dict) else node
            if isinstance(node, dict):
                done[ref].update(walk(node))
        return done[ref]

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                return target(node["$ref"])
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    resolved: dict[str, Any] = walk(document)
    return resolved


def _pattern(template: str, parameters: tuple[dict[str, Any], ...]) -> re.Pattern[str]:
    """A template as a regex: `{name}` is one segment, or several for `x-multi-segment`."""
    multi = {p["name"] for p in parameters if p.get("in") == "path" and p.get("x-multi-segment")}
    text = ""
    for literal, name in re.findall(r"([^{]*)(?:\{([^}]+)\})?", template):
        text += re.escape(literal)
        if name:
            text += f"(?P<{name}>{'.+' if name in multi else '[^/]+'})"
    return re.compile(text)


@cache
def load_view(name: str) -> View:
    """A committed description (tests/data/openapi/<name>.json), dereferenced."""
    raw = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    provenance = raw["x-provenance"]
    view = View(name, provenance["api_version"], provenance, _closed(deref(raw)))
    document = view.document
    for template, item in document["paths"].items():
        shared = tuple(item.get("parameters", ()))
        for method, spec in item.items():
            if method not in METHODS:
                continue
            parameters = shared + tuple(spec.get("parameters", ()))
            view.operations.append(
                Operation(method, template, _pattern(template, parameters), parameters, spec)
            )
    return view


def view_names() -> list[str]:
    """Every committed description, by name."""
    return sorted(path.stem for path in DATA.glob("*.json"))


def ghes_views() -> list[str]:
    """The GitHub Enterprise Server descriptions committed (the oldest and newest shipped)."""
    return [name for name in view_names() if name.startswith("ghes-")]


def views_for(exchange: Exchange) -> list[str]:
    """The descriptions an exchange must conform to."""
    if exchange.server == "ghes":
        return ghes_views()
    version = exchange.version if exchange.version in GITHUB_VERSIONS else DEFAULT_VERSION
    return [f"api.github.com-{version}"]


# ----------------------------------------------------------------------------- schemas


def _closed(schema: Any, seen: dict[int, Any] | None = None) -> Any:
    """A copy in which an object schema with `properties` and no `additionalProperties` is
    closed: the program may send, and the fake may serve, only what the description names."""
    seen = {} if seen is None else seen
    if id(schema) in seen:
        return seen[id(schema)]
    if isinstance(schema, list):
        return [_closed(item, seen) for item in schema]
    if not isinstance(schema, dict):
        return schema
    copy: dict[str, Any] = {}
    seen[id(schema)] = copy
    copy.update({k: _closed(v, seen) for k, v in schema.items()})
    if "properties" in copy and "additionalProperties" not in copy and "allOf" not in copy:
        copy["additionalProperties"] = False
    return copy


_Memo = TypeVar("_Memo", set[Any], dict[Any, Any])
#: `properties` maps (by id: the views are cached, so they live on) and the JSON of an object
#: that conformed to them. A run's nested repositories and users repeat in every poll; checking
#: each once keeps 200 fuzzed runs within a few seconds.
_CONFORMING: set[tuple[int, str]] = set()
_MEMO_FROM = 8  # properties: smaller objects are checked again, at once


def _memo_properties(
    validator: Any, properties: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[Any]:
    """jsonschema's `properties`, skipped for an object already found to conform."""
    if len(properties) < _MEMO_FROM or not isinstance(instance, dict):
        yield from _keywords.properties(validator, properties, instance, schema)
        return
    key = (id(properties), json.dumps(instance, sort_keys=True))
    if key in _CONFORMING:
        return
    errors = list(_keywords.properties(validator, properties, instance, schema))
    if not errors:
        _bounded(_CONFORMING).add(key)
    yield from errors


def _bounded(memo: _Memo) -> _Memo:
    """`memo`, emptied when full: a memo of one worker's whole session would grow without end."""
    if len(memo) > _MEMO_SIZE:
        memo.clear()
    return memo


_MEMO_SIZE = 4096
_Validator = extend(OAS30Validator, {"properties": _memo_properties})
_VALIDATORS: dict[int, tuple[Any, Any]] = {}


def schema_errors(view: View, schema: Any, instance: Any) -> list[str]:
    """Why `instance` does not conform to `schema`, a schema of `view` (empty: it does).

    The view's components ride along at the root (not a keyword, so not validated) for a
    `discriminator`, whose mapping names components by `#/components/schemas/...`.
    """
    cached = _VALIDATORS.get(id(schema))
    if cached is None:
        root = {**schema, "components": view.document["components"]}
        validator = _Validator(root, format_checker=oas30_format_checker)
        cached = _VALIDATORS[id(schema)] = (schema, validator)  # keep `schema` alive for its id
    errors = cached[1].iter_errors(instance)
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors]


def _coerce(schema: dict[str, Any], text: str) -> Any:
    """A query or path value as the parameter's schema types it."""
    kind = schema.get("type")
    try:
        if kind == "integer":
            return int(text)
        if kind == "number":
            return float(text)
    except ValueError:
        return text
    if kind == "boolean":
        return {"true": True, "false": False}.get(text, text)
    return text


# ------------------------------------------------------------------------------ checking


def check_request(view: View, exchange: Exchange) -> tuple[Operation | None, list[Finding]]:
    """The operation the request is, and how it departs from `view`."""
    found = view.find(exchange.method, exchange.path)
    if found is None:
        message = f"{exchange.method} {exchange.path} matches no operation"
        return None, [Finding(view.name, "path", message)]
    operation, path_values = found
    where = f"{exchange.method} {operation.template}"
    findings = [
        Finding(view.name, part, f"{where}: {m}")
        for part, m in _parameters(view, operation, exchange, path_values)
    ]
    findings += [Finding(view.name, "headers", f"{where}: {m}") for m in _headers(view, exchange)]
    findings += [
        Finding(view.name, "body", f"{where}: {m}")
        for m in _request_body(view, operation, exchange)
    ]
    return operation, findings


def _parameters(
    view: View, operation: Operation, exchange: Exchange, path_values: Mapping[str, str]
) -> Iterator[tuple[str, str]]:
    query = {k: v[-1] for k, v in parse_qs(exchange.query, keep_blank_values=True).items()}
    given = {"path": dict(path_values), "query": query}
    declared = {(p["in"], p["name"]) for p in operation.parameters}
    for name in sorted(query):
        if ("query", name) not in declared:
            yield "query", f"undocumented query parameter {name!r}"
    for parameter in operation.parameters:
        place, name = parameter["in"], parameter["name"]
        values = given.get(place, {})
        if name not in values:
            if parameter.get("required"):
                yield place, f"required {place} parameter {name!r} missing"
            continue
        schema = parameter.get("schema", {})
        for error in schema_errors(view, schema, _coerce(schema, values[name])):
            yield place, f"{place} parameter {name}={values[name]!r}: {error}"


def _headers(view: View, exchange: Exchange) -> Iterator[str]:
    """What GitHub's docs require of every request (the description has no header for these)."""
    sent = exchange.headers.get("x-github-api-version")
    if sent is None:
        yield "no X-GitHub-Api-Version header (the server would choose 2022-11-28)"
    elif sent != view.version:
        yield f"X-GitHub-Api-Version {sent!r}: this server describes {view.version} only"
    if not exchange.headers.get("authorization", "").startswith(("Bearer ", "token ")):
        yield "no Authorization header"


def _request_body(view: View, operation: Operation, exchange: Exchange) -> Iterator[str]:
    body = operation.spec.get("requestBody")
    if body is None:
        if exchange.body:
            yield "a body, where the operation takes none"
        return
    if not exchange.body:
        if body.get("required"):
            yield "no body, where one is required"
        return
    kind = exchange.headers.get("content-type", "").split(";")[0].strip()
    if kind not in body.get("content", {}):
        yield f"Content-Type {kind!r} is not one of {sorted(body.get('content', {}))}"
        return
    try:
        data = json.loads(exchange.body)
    except ValueError:
        yield "the body is not JSON"
        return
    for error in schema_errors(view, body["content"][kind].get("schema", {}), data):
        yield f"body {error}"


def check_reply(view: View, operation: Operation, exchange: Exchange) -> list[Finding]:
    """How the reply departs from the operation's responses in `view`."""
    if exchange.status is None:
        return []  # no reply reached the client: nothing to check
    where = f"{exchange.method} {operation.template} -> {exchange.status}"
    responses = operation.spec.get("responses", {})
    response = responses.get(str(exchange.status), responses.get("default"))
    if response is None:
        listed = ", ".join(sorted(responses))
        return [Finding(view.name, "status", f"{where}: status not documented (only {listed})")]
    return [
        Finding(view.name, "reply", f"{where}: {m}") for m in _reply_body(view, response, exchange)
    ]


def _reply_body(view: View, response: Mapping[str, Any], exchange: Exchange) -> Iterator[str]:
    content = response.get("content", {})
    if not content:
        if exchange.reply_body:
            yield "a body, where the response has none"
        return
    kind = exchange.reply_headers.get("content-type", "").split(";")[0].strip()
    if kind not in content:
        yield f"Content-Type {kind!r} is not one of {sorted(content)}"
        return
    try:
        data = json.loads(exchange.reply_body)
    except ValueError:
        yield "the body is not JSON"
        return
    schema = content[kind].get("schema", {})
    yield from (f"body {e}" for e in schema_errors(view, schema, data))


#: What a check reads of an exchange: equal keys give equal findings (a poll repeats itself).
_HEADERS_READ = ("x-github-api-version", "content-type", "if-none-match", "if-modified-since")
_REPLY_HEADERS_READ = ("content-type", "x-ratelimit-remaining")
_FINDINGS: dict[tuple[object, ...], tuple[Finding, ...]] = {}


def _key(view_name: str, exchange: Exchange) -> tuple[object, ...]:
    authorization = exchange.headers.get("authorization", "").split(" ", 1)[0]
    return (
        view_name,
        exchange.server,
        exchange.method,
        exchange.path,
        exchange.query,
        tuple(exchange.headers.get(name) for name in _HEADERS_READ),
        authorization,
        exchange.body,
        exchange.status,
        tuple(exchange.reply_headers.get(name) for name in _REPLY_HEADERS_READ),
        exchange.reply_body,
        exchange.fault,
        exchange.limit,
    )


def _check_one(view_name: str, exchange: Exchange) -> tuple[Finding, ...]:
    key = _key(view_name, exchange)
    if key not in _FINDINGS:
        view = load_view(view_name)
        operation, findings = check_request(view, exchange)
        if operation is not None:
            findings += check_reply(view, operation, exchange)
        _bounded(_FINDINGS)[key] = tuple(_excepted(exchange, finding) for finding in findings)
    return _FINDINGS[key]


def check(exchange: Exchange, views: list[str] | None = None) -> list[Finding]:
    """Every finding on `exchange` in each of its descriptions, exceptions named."""
    return [f for name in views or views_for(exchange) for f in _check_one(name, exchange)]


# ---------------------------------------------------------------------------- exceptions


@dataclass(frozen=True)
class ProseFact:
    """Something GitHub documents only in prose, which its description does not show."""

    name: str
    source: str
    applies: Callable[[Exchange, Finding], bool]


_RANGE_DATE = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z"


def _created_range(exchange: Exchange, finding: Finding) -> bool:
    query = {k: v[-1] for k, v in parse_qs(exchange.query).items()}
    value = query.get("created", "")
    syntax = re.fullmatch(rf"(?:>=|<=|>|<){_RANGE_DATE}|{_RANGE_DATE}\.\.{_RANGE_DATE}", value)
    return (
        finding.part == "query"
        and f"created={value!r}" in finding.message
        and "is not a 'date-time'" in finding.message
        and syntax is not None
    )


def _not_modified(exchange: Exchange, finding: Finding) -> bool:
    conditional = "if-none-match" in exchange.headers or "if-modified-since" in exchange.headers
    return finding.part == "status" and exchange.status == 304 and conditional


def _rate_limited(exchange: Exchange, finding: Finding) -> bool:
    if finding.part not in {"status", "reply"} or exchange.status not in {403, 429}:
        return False
    spent = exchange.reply_headers.get("x-ratelimit-remaining") == "0"
    secondary = b"secondary rate limit" in exchange.reply_body
    return spent or secondary


def _version_refused(exchange: Exchange, finding: Finding) -> bool:
    refused = exchange.status == 400 and b"is not a supported version" in exchange.reply_body
    about_version = finding.part == "status" or "X-GitHub-Api-Version" in finding.message
    return refused and about_version


def _queued_conclusion(exchange: Exchange, finding: Finding) -> bool:
    """`job.conclusion` is `nullable` with an enum that lacks null (OpenAPI 3.0.3 refuses null)."""
    pattern = r"body (jobs/\d+/)?conclusion: None is not one of"
    return finding.part == "reply" and re.search(pattern, finding.message) is not None


def _not_found(exchange: Exchange, finding: Finding) -> bool:
    return (
        finding.part == "status"
        and exchange.status == 404
        and b'"Not Found"' in exchange.reply_body
    )


def _token_refused(exchange: Exchange, finding: Finding) -> bool:
    """A token without the permission (403), on an endpoint that omits it (401: bad-credentials)."""
    refused = (exchange.status, _message(exchange)) == (
        403,
        "Resource not accessible by integration",
    )
    return refused and finding.part == "status"


def _not_on_this_release(exchange: Exchange, finding: Finding) -> bool:
    """An endpoint newer than this GHES release: it matches no operation of this release's view,
    one of another release's, and was answered 404."""
    found = exchange.status == 404 and _message(exchange) == "Not Found"
    if finding.part != "path" or exchange.server != "ghes" or not found:
        return False
    return any(load_view(name).find(exchange.method, exchange.path) for name in ghes_views())


def _message(exchange: Exchange) -> str | None:
    try:
        body = json.loads(exchange.reply_body)
    except ValueError:
        return None
    return body.get("message") if isinstance(body, dict) else None


#: What GitHub says when it refuses a credential (an expired or revoked token, an App's JWT).
_REFUSED_CREDENTIAL = re.compile(
    rb'"message": "(Bad credentials|A JSON web token could not be decoded|'
    rb"'(Expiration time|Issued at)' claim [^\"]*)\""
)


def _bad_credentials(exchange: Exchange, finding: Finding) -> bool:
    return (
        finding.part == "status"
        and exchange.status == 401
        and _REFUSED_CREDENTIAL.search(exchange.reply_body) is not None
    )


def _injected(exchange: Exchange, finding: Finding) -> bool:
    return exchange.fault is not None and finding.part in {"status", "reply"}


#: Each prose-only fact with where GitHub says it (sections of shared/reference/github-api.md).
EXCEPTIONS: tuple[ProseFact, ...] = (
    ProseFact(
        "created-range-syntax",
        "the `created` parameter's own description (search syntax for dates); github-api.md 12 "
        "(schema `date-time` refuses `>=...` and `a..b`)",
        _created_range,
    ),
    ProseFact(
        "not-modified-304",
        "github-api.md 6, [BP] docs.github.com/rest/using-the-rest-api/best-practices-for-using-"
        "the-rest-api: a conditional request answers 304 when unchanged",
        _not_modified,
    ),
    ProseFact(
        "rate-limit-403-429",
        "github-api.md 6, [RL] docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-"
        "api: primary and secondary limits answer 403 or 429",
        _rate_limited,
    ),
    ProseFact(
        "unsupported-version-400",
        "github-api.md 1.1, [TS] docs.github.com/rest/using-the-rest-api/troubleshooting-the-rest-"
        "api: an API version the server does not have answers 400",
        _version_refused,
    ),
    ProseFact(
        "queued-job-conclusion-null",
        "github-api.md 3 ([OA26] `conclusion` is nullable, null until completed; [WH-JOB]); "
        "OpenAPI 3.0.3 needs null in the enum, which GitHub's schema leaves out",
        _queued_conclusion,
    ),
    ProseFact(
        "not-found-404",
        "github-api.md 6, [TS]: a resource that does not exist (or is not visible yet, right "
        "after a dispatch) answers 404 on every endpoint",
        _not_found,
    ),
    ProseFact(
        "token-refused-403",
        "github-api.md 13 and 14, [TS]: a token without the permission answers 403 `Resource not "
        "accessible by integration` on every endpoint (the runner-group reads list only 200)",
        _token_refused,
    ),
    ProseFact(
        "not-on-this-release-404",
        "the descriptions themselves: ghes-3.17 has no `/orgs/{org}/actions/permissions/"
        "self-hosted-runners` (ghes-3.19 has it); a release without an endpoint answers 404 "
        "(github-api.md 13, [TS])",
        _not_on_this_release,
    ),
    ProseFact(
        "bad-credentials-401",
        "github-api.md 14 and [TS]: a token that expired (an installation token after an hour) "
        "or an App JWT GitHub refuses answers 401 on every endpoint, with its message",
        _bad_credentials,
    ),
    ProseFact(
        "injected-fault",
        "the world's fault plan (runner_queue_fallback/fake_github/faults.py): 5xx, 408, 401, 403, broken "
        "JSON and lost replies, which [TS] describes and the description does not list",
        _injected,
    ),
)


def _excepted(exchange: Exchange, finding: Finding) -> Finding:
    for fact in EXCEPTIONS:
        if fact.applies(exchange, finding):
            return Finding(finding.view, finding.part, finding.message, fact.name)
    return finding


# ------------------------------------------------------------------------------ reporting


@dataclass
class Report:
    """Findings over many exchanges: violations, and prose-only facts by name."""

    exchanges: int = 0
    operations: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    excepted: Counter[str] = field(default_factory=Counter)

    def add(self, exchanges: list[Exchange]) -> Report:
        """Check `exchanges` and keep what was found."""
        for exchange in exchanges:
            self.exchanges += 1
            for name in views_for(exchange):
                found = load_view(name).find(exchange.method, exchange.path)
                if found:
                    self.operations[f"{name} {exchange.method} {found[0].template}"] += 1
            for finding in check(exchange):
                if finding.exception is None:
                    self.violations.append(str(finding))
                else:
                    self.excepted[finding.exception] += 1
        return self
