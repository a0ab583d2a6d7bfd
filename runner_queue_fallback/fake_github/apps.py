"""GitHub Apps as the fake GitHub serves them: the App's JWT, its installations, their tokens.

github-api.md 14. An App authenticates with a JWT signed (RS256) by its private key: `iss` its id
(or client id), `iat` not in GitHub's future, `exp` in GitHub's future and at most 10 minutes
ahead of GitHub's clock. With it, `GET /repos/{owner}/{repo}/installation` finds the App's
installation on a repository and `POST /app/installations/{id}/access_tokens` mints a token,
narrowed to `repositories` and `permissions` when asked, that expires an hour later.

What GitHub answers when the JWT is refused (401), as its users report it (the messages are
GitHub's own, quoted in actions/create-github-app-token#153, octokit/auth-app.js#698,
sigmavirus24/github3.py#1050, probot/probot#967):

- a signature that is not the App's key, or an `iss` that names no App or another App:
  "A JSON web token could not be decoded";
- `exp` not in the future: "'Expiration time' claim ('exp') must be a numeric value representing
  the future time at which the assertion expires"; more than 10 minutes ahead: "... is too far in
  the future";
- `iat` in GitHub's future (a runner whose clock is ahead; `iat_leeway` seconds are allowed,
  none by default: microsoft/AL-Go#2289 found no tolerance worth counting on): "'Issued at' claim
  ('iat') must be an Integer representing the time that the assertion was issued".

Assumed where GitHub does not say: an expired installation token is answered 401 "Bad
credentials" on every endpoint; a JWT used on a repository endpoint, or a token that is no JWT
used on an App endpoint, is answered 401 (the decode message); a token is answered 404 on a
repository it does not cover and 403 "Resource not accessible by integration" where it lacks the
permission. The mint reply leaves out `repositories` (optional in the description). A refused
credential costs no quota.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from runner_queue_fallback.fake_github.model import fake_token
from runner_queue_fallback.fake_github.render import Renderer

__all__ = [
    "APP_QUOTA",
    "INSTALLATION_QUOTA",
    "JWT_MAX_AHEAD",
    "TOKEN_LIFETIME",
    "AppKeys",
    "FakeApp",
    "FakeApps",
    "FakeInstallation",
    "InstallationToken",
    "generate_app_keys",
    "installation_body",
    "needed_permission",
    "token_body",
]

#: An installation's quota unless told (github-api.md 14: at least 5,000 an hour).
INSTALLATION_QUOTA = 5000
#: The App's own quota for its JWT requests (not documented; set apart from its installations').
APP_QUOTA = 5000
#: How long an installation token lives (github-api.md 14: one hour).
TOKEN_LIFETIME = 3600.0
#: How far ahead of GitHub's clock a JWT's `exp` may be.
JWT_MAX_AHEAD = 600

DECODE_FAILED = "A JSON web token could not be decoded"
EXP_PAST = (
    "'Expiration time' claim ('exp') must be a numeric value representing the future time at "
    "which the assertion expires"
)
EXP_FAR = "'Expiration time' claim ('exp') is too far in the future"
IAT_FUTURE = (
    "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was "
    "issued"
)
BAD_CREDENTIALS = "Bad credentials"
NOT_ACCESSIBLE = "Resource not accessible by integration"
REPOS_NOT_ACCESSIBLE = (
    "There is at least one repository that does not exist or is not accessible to the parent "
    "installation."
)
PERMISSIONS_NOT_GRANTED = "The permissions requested are not granted to this installation."

Level = Literal["read", "write"]
_LEVELS = {"read": 1, "write": 2}
_ACCESS_TOKENS = re.compile(r"/app/installations/(?P<id>\d+)/access_tokens")
#: The permission each of the fake's repository endpoints needs (path below the repository).
_NEEDS = (
    (re.compile(r"/actions/runners(/.*)?"), "administration"),
    (re.compile(r"/actions/.*"), "actions"),
    (re.compile(r"/(git|compare|contents)/.*"), "contents"),
)


@dataclass(frozen=True)
class AppKeys:
    """An App's key pair as PEM text: the private key the App keeps, the public key GitHub holds."""

    private_pem: str
    public_pem: str


def generate_app_keys() -> AppKeys:
    """A new 2048-bit RSA key pair, as GitHub makes one for an App."""
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 (only Apps need it)
    from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: PLC0415 (only Apps need it)

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,  # GitHub's download: BEGIN RSA PRIVATE KEY
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return AppKeys(private.decode(), public.decode())


@dataclass
class FakeApp:
    """A GitHub App: its id, client id, slug and the public key GitHub checks its JWT with."""

    id: int
    slug: str
    client_id: str
    public_pem: str


@dataclass
class FakeInstallation:
    """One installation of an App on an account; `repositories` None: all of the account's."""

    id: int
    app: FakeApp
    account: str
    target_type: Literal["Organization", "User"]
    repositories: tuple[str, ...] | None
    permissions: dict[str, str]
    quota: int = INSTALLATION_QUOTA

    @property
    def owner(self) -> str:
        """Its quota bucket's owner name."""
        return f"installation:{self.id}"

    def covers(self, repository: str) -> bool:
        """Whether the installation reaches `owner/name`."""
        owner, _, name = repository.partition("/")
        if owner.lower() != self.account.lower():
            return False
        return self.repositories is None or name.lower() in {r.lower() for r in self.repositories}


@dataclass(frozen=True)
class InstallationToken:
    """A minted token: its installation, when it expires (virtual seconds), what it may do."""

    installation: FakeInstallation
    expires_at: float
    repositories: tuple[str, ...] | None  # None: every repository of the installation
    permissions: Mapping[str, str]

    def covers(self, repository: str) -> bool:
        """Whether the token reaches `owner/name`."""
        if not self.installation.covers(repository):
            return False
        name = repository.partition("/")[2].lower()
        return self.repositories is None or name in {r.lower() for r in self.repositories}

    def allows(self, permission: str, level: Level) -> bool:
        """Whether the token holds `permission` at `level` or above."""
        held = self.permissions.get(permission)
        return held is not None and _LEVELS.get(held, 0) >= _LEVELS[level]


def needed_permission(method: str, rest: str) -> tuple[str, Level] | None:
    """The permission a request to a repository endpoint needs (`rest`: the path below it)."""
    for pattern, permission in _NEEDS:
        if pattern.fullmatch(rest):
            return permission, "read" if method in {"GET", "HEAD"} else "write"
    return None


@dataclass
class FakeApps:
    """The Apps GitHub knows, their installations and every token minted from them."""

    apps: dict[int, FakeApp] = field(default_factory=dict)
    installations: dict[int, FakeInstallation] = field(default_factory=dict)
    tokens: dict[str, InstallationToken] = field(default_factory=dict)
    #: Seconds a JWT's `iat` may be ahead of GitHub's clock.
    iat_leeway: float = 0.0
    #: Told of each token minted (a bench attributes an App's tokens to the step that minted them).
    on_mint: Callable[[str], None] | None = None
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(4_200_001))
    _minted: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def add_app(self, app_id: int, public_pem: str, *, slug: str = "rqf-coordinator") -> FakeApp:
        """Register an App (its client id is made from its id)."""
        app = FakeApp(app_id, slug, f"Iv23li{app_id:012d}", public_pem)
        self.apps[app_id] = app
        return app

    def install(
        self,
        app: FakeApp,
        account: str,
        *,
        target_type: Literal["Organization", "User"] = "Organization",
        repositories: tuple[str, ...] | None = None,
        permissions: Mapping[str, str] | None = None,
        quota: int = INSTALLATION_QUOTA,
    ) -> FakeInstallation:
        """Install `app` on `account` (all its repositories unless `repositories` names some)."""
        granted = dict(permissions or {"actions": "write", "contents": "read", "metadata": "read"})
        installation = FakeInstallation(
            next(self._ids), app, account, target_type, repositories, granted, quota
        )
        self.installations[installation.id] = installation
        return installation

    # -- credentials ---------------------------------------------------------------------------

    def app_named(self, token: str) -> FakeApp | None:
        """The App a JWT's `iss` names (read without checking the signature), or None."""
        import jwt  # noqa: PLC0415 (loaded only where Apps are: 0.1 s of imports)

        try:
            claims = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return None
        issuer = str(claims.get("iss", ""))
        for app in self.apps.values():
            if issuer in {str(app.id), app.client_id}:
                return app
        return None

    def verify(self, token: str, github_now: float) -> tuple[FakeApp | None, str]:  # noqa: PLR0911 (one return per refusal GitHub gives)
        """The App whose JWT `token` is, checked as GitHub checks it; else None and its message.

        `github_now`: GitHub's clock, in Unix seconds.
        """
        import jwt  # noqa: PLC0415 (loaded only where Apps are: 0.1 s of imports)

        app = self.app_named(token)
        if app is None:
            return None, DECODE_FAILED
        try:
            header = jwt.get_unverified_header(token)
            claims = jwt.decode(
                token,
                app.public_pem,
                algorithms=["RS256"],
                options={"verify_exp": False, "verify_iat": False, "verify_nbf": False},
            )
        except jwt.PyJWTError:
            return None, DECODE_FAILED
        if header.get("alg") != "RS256":
            return None, DECODE_FAILED
        exp, iat = claims.get("exp"), claims.get("iat")
        if not isinstance(exp, int) or exp <= github_now:
            return None, EXP_PAST
        if exp > github_now + JWT_MAX_AHEAD:
            return None, EXP_FAR
        if not isinstance(iat, int) or iat > github_now + self.iat_leeway:
            return None, IAT_FUTURE
        return app, ""

    def minted(self, token: str) -> InstallationToken | None:
        """The installation token `token` is, or None."""
        return self.tokens.get(token)

    def refuse_token(
        self, token: str, method: str, path: str, repository: str, now: float
    ) -> tuple[int, str] | None:
        """GitHub's refusal (status, message) of an installation token, or None: it may go on.

        None too for a token that is no installation token; `now` is in virtual seconds.
        """
        minted = self.tokens.get(token)
        if minted is None:
            return None
        if now >= minted.expires_at:
            return 401, BAD_CREDENTIALS
        prefix = f"/repos/{repository}".lower()
        if not path.lower().startswith(prefix + "/"):
            return None
        if not minted.covers(repository):
            return 404, "Not Found"
        needed = needed_permission(method, path[len(prefix) :])
        if needed is not None and not minted.allows(*needed):
            return 403, NOT_ACCESSIBLE
        return None

    # -- endpoints -----------------------------------------------------------------------------

    def is_app_endpoint(self, method: str, path: str, repository: str) -> bool:
        """Whether `method path` is one of the App's JWT endpoints."""
        if method == "GET" and path.lower() == f"/repos/{repository}/installation".lower():
            return True
        return method == "POST" and _ACCESS_TOKENS.fullmatch(path) is not None

    def installation_of(self, app: FakeApp, repository: str) -> FakeInstallation | None:
        """The installation of `app` that reaches `repository`, or None."""
        return next(
            (i for i in self.installations.values() if i.app is app and i.covers(repository)),
            None,
        )

    def mint(self, app: FakeApp, path: str, body: bytes, now: float) -> tuple[int, str]:
        """Mint a token: 201 and its text (kept in `tokens`), or GitHub's refusal and message.

        `now` is in virtual seconds; the token expires `TOKEN_LIFETIME` later.
        """
        match = _ACCESS_TOKENS.fullmatch(path)
        installation = None if match is None else self.installations.get(int(match["id"]))
        if installation is None or installation.app is not app:
            return 404, "Not Found"
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            return 400, "Problems parsing JSON"
        if not isinstance(data, dict):
            return 400, "Problems parsing JSON"
        repositories = data.get("repositories")
        if repositories is not None:
            wanted = tuple(str(name) for name in repositories)
            account = installation.account
            if not all(installation.covers(f"{account}/{name}") for name in wanted):
                return 422, REPOS_NOT_ACCESSIBLE
            repositories = wanted
        asked = data.get("permissions")
        permissions = dict(installation.permissions)
        if asked is not None:
            if not isinstance(asked, dict) or not _within(asked, installation.permissions):
                return 422, PERMISSIONS_NOT_GRANTED
            permissions = {str(k): str(v) for k, v in asked.items()}
        label = f"app{app.id}_inst{installation.id}_{next(self._minted)}"
        text = fake_token(label)
        self.tokens[text] = InstallationToken(
            installation, now + TOKEN_LIFETIME, repositories, permissions
        )
        if self.on_mint is not None:
            self.on_mint(text)
        return 201, text


def _within(asked: Mapping[str, Any], granted: Mapping[str, str]) -> bool:
    """Whether every permission asked for is granted at that level or above."""
    for name, level in asked.items():
        held = granted.get(name)
        if level not in _LEVELS or held is None or _LEVELS[held] < _LEVELS[str(level)]:
            return False
    return True


def installation_body(installation: FakeInstallation, render: Renderer) -> dict[str, Any]:
    """`GET /repos/{owner}/{repo}/installation`: the `installation` schema."""
    app, number = installation.app, installation.id
    account = render.repo()["owner"] | {"type": installation.target_type}
    settings = "organizations/" + installation.account if account["type"] == "Organization" else ""
    return {
        "id": number,
        "account": account,
        "repository_selection": "all" if installation.repositories is None else "selected",
        "access_tokens_url": f"{render.api_url}/app/installations/{number}/access_tokens",
        "repositories_url": f"{render.api_url}/installation/repositories",
        "html_url": f"{render.server_url}/{settings or 'settings'}/installations/{number}",
        "app_id": app.id,
        "client_id": app.client_id,
        "app_slug": app.slug,
        "target_id": account["id"],
        "target_type": installation.target_type,
        "permissions": dict(installation.permissions),
        "events": [],
        "created_at": render.time(0),
        "updated_at": render.time(0),
        "single_file_name": None,
        "has_multiple_single_files": False,
        "single_file_paths": [],
        "suspended_by": None,
        "suspended_at": None,
    }


def token_body(text: str, token: InstallationToken, render: Renderer) -> dict[str, Any]:
    """`POST /app/installations/{id}/access_tokens`: the `installation-token` schema."""
    return {
        "token": text,
        "expires_at": render.time(token.expires_at),
        "permissions": dict(token.permissions),
        "repository_selection": "all" if token.repositories is None else "selected",
    }
