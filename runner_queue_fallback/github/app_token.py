"""A GitHub App's own installation token for this repository, minted and renewed within the run.

github-api.md 14. An installation token has its own quota (5,000 an hour and up), apart from the
repository's `GITHUB_TOKEN`, but expires one hour after it is minted (401), while a sequence may
run for hours and its post step after that. So the token is minted here, from the App's id and
private key, and renewed before its `expires_at` (less `REFRESH_MARGIN`) and after any 401:

- `AppCredentials.read` checks the inputs (`app-id`, `app-private-key`, `app-installation-id`)
  without sending anything; `secrets()` lists what the reporter masks (the key, line by line).
- `AppJwt` signs the App's JWT (RS256, PyJWT on `cryptography`): `iat` a minute in the past and
  `exp` nine minutes ahead, so a runner's clock a minute off either way still passes GitHub's
  checks; after a 401 it signs the next one on GitHub's clock (the last reply's `Date`).
- `AppTokenSource` is the `TokenSource` a `GitHubClient` takes instead of a token: it finds the
  installation on this repository (unless its id is given) and mints a token for this repository
  only, with only `APP_PERMISSIONS`; every token is handed to `on_token` (the reporter's mask)
  before it is sent.

PyJWT and cryptography are imported only when a JWT is signed or a key read: the action's steps
without App credentials never load them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, TypeVar

from runner_queue_fallback.core import timing
from runner_queue_fallback.core.clock import Clock
from runner_queue_fallback.core.errors import AppTokenUnavailable, GitHubError, InputError
from runner_queue_fallback.core.errors import Unauthorized as _Unauthorized
from runner_queue_fallback.core.inputs import APP_ID
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.github.installations import InstallationToken

if TYPE_CHECKING:
    import requests

__all__ = [
    "APP_PERMISSIONS",
    "JWT_BACKDATE",
    "JWT_LIFETIME",
    "REFRESH_MARGIN",
    "AppCredentials",
    "AppJwt",
    "AppTokenSource",
]

#: What the coordinator needs of the App: dispatch, read and cancel runs; read refs and files.
APP_PERMISSIONS: Final = {"actions": "write", "contents": "read"}
#: `iat` this many seconds before now: GitHub refuses an `iat` in its future (a clock ahead).
JWT_BACKDATE: Final = 60
#: `exp` this many seconds after now: GitHub refuses one more than 10 minutes ahead of its
#: clock, so a minute is left for a runner's clock behind GitHub's.
JWT_LIFETIME: Final = 540
#: A JWT with less than this left is signed anew.
JWT_RENEW: Final = 60
#: An installation token is minted anew this long before its `expires_at`: more than one
#: request's timeout and any clock difference, so no request is sent with a token about to lapse.
REFRESH_MARGIN: Final = 300.0

_T = TypeVar("_T")

_INSTALLATION_ID = re.compile(r"[1-9][0-9]{0,19}")
_PEM_LINE = re.compile(r"-----(BEGIN|END) [A-Z ]+-----")


class AppCredentials:
    """A GitHub App's id, its private key (never in a repr) and, when known, its installation."""

    __slots__ = ("_key", "_pem", "app_id", "installation_id")

    def __init__(self, app_id: str, pem: str, key: Any, installation_id: int | None) -> None:
        """Use `AppCredentials.read`, which checks the inputs."""
        self.app_id = app_id
        self._pem = pem
        self._key = key
        self.installation_id = installation_id

    def __repr__(self) -> str:
        """The App's id, never its key."""
        return f"AppCredentials(app_id={self.app_id!r}, installation_id={self.installation_id!r})"

    @classmethod
    def read(cls, app_id: str, private_key: str, installation_id: str = "") -> AppCredentials:
        """Check `app-id`, `app-private-key` and `app-installation-id` as given; nothing is sent.

        A key stored with a backslash and `n` for its line breaks (as some secret stores keep
        it) is read too.

        Raises:
            InputError: an input is missing or malformed (the key's value is never repeated).

        """
        app_id = app_id.strip()
        if not APP_ID.fullmatch(app_id):
            raise InputError(
                "app-id",
                "is not a GitHub App's ID or client ID",
                given=app_id,
                allowed="the App's numeric ID (its settings page, 'App ID') or its client ID (Iv...)",
            )
        pem = private_key.strip().replace("\\n", "\n")
        key = _load_key(pem)
        number = installation_id.strip()
        if number and not _INSTALLATION_ID.fullmatch(number):
            raise InputError(
                "app-installation-id",
                "is not an installation ID",
                given=number,
                allowed="a positive whole number, or empty to find the App's installation on "
                "this repository",
            )
        return cls(app_id, pem, key, int(number) if number else None)

    def secrets(self) -> list[str]:
        """What to mask before anything could print it: the key as given, and each of its lines.

        The runner matches a mask within one log line, so a multi-line key is masked line by line.
        """
        lines = [line.strip() for line in self._pem.splitlines()]
        body = [line for line in lines if line and not _PEM_LINE.fullmatch(line)]
        return [self._pem, *dict.fromkeys(body)]

    def sign(self, now: datetime) -> tuple[str, int]:
        """The App's JWT for GitHub's clock reading `now`, and its `exp` (Unix seconds)."""
        import jwt  # noqa: PLC0415 (only App credentials load PyJWT and cryptography)

        issued = int(now.timestamp())
        expires = issued + JWT_LIFETIME
        claims = {"iat": issued - JWT_BACKDATE, "exp": expires, "iss": self.app_id}
        return jwt.encode(claims, self._key, algorithm="RS256"), expires


def _load_key(pem: str) -> Any:
    """The RSA private key in `pem` (an App's key is RSA: RS256)."""
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey  # noqa: PLC0415 (see `sign`)
    from cryptography.hazmat.primitives.serialization import load_pem_private_key  # noqa: PLC0415 (see `sign`)

    problem = "is not a PEM private key"
    if pem:
        try:
            key = load_pem_private_key(pem.encode(), password=None)
        except (ValueError, TypeError):
            key = None
        else:
            problem = "is a private key, but not RSA"
        if isinstance(key, RSAPrivateKey):
            return key
    else:
        problem = "is empty"
    raise InputError(
        "app-private-key",
        f"{problem} (its value is not shown)",
        allowed="the App's private key as GitHub downloads it (-----BEGIN RSA PRIVATE KEY-----), "
        "passed from a secret: ${{ secrets.APP_PRIVATE_KEY }}",
    )


class AppJwt:
    """The App's JWT as a `TokenSource`: signed anew before it expires and after a 401."""

    #: A refused JWT is signed anew (on GitHub's clock), but the request is sent once more by
    #: `AppTokenSource._with_fresh_jwt`, not by the transport: a mint is no dispatch to repeat.
    renews = False

    def __init__(self, credentials: AppCredentials, clock: Clock) -> None:
        """Sign with `credentials` on `clock` (corrected by `learn_server_date` after a 401)."""
        self._credentials = credentials
        self._clock = clock
        self._jwt: tuple[str, int] | None = None  # the JWT and its `exp`
        self._offset = timedelta(0)  # GitHub's clock minus ours, once a refusal taught it
        self._refused_at: datetime | None = None  # our clock at the last 401, not yet learnt from
        #: GitHub's clock at its last reply (the App client's `server_date`), read after a 401.
        self.server_date: Callable[[], datetime | None] = lambda: None

    def __repr__(self) -> str:
        """Never the JWT."""
        return f"AppJwt(app_id={self._credentials.app_id!r})"

    def token(self) -> str:
        """The current JWT, signed anew when less than `JWT_RENEW` seconds of it are left."""
        said = self.server_date() if self._refused_at is not None else None
        if said is not None and self._refused_at is not None:  # the refusal's own `Date`
            self._offset = said - self._refused_at
        self._refused_at = None
        now = self._clock.now() + self._offset
        if self._jwt is None or now.timestamp() >= self._jwt[1] - JWT_RENEW:
            self._jwt = self._credentials.sign(now)
        return self._jwt[0]

    def refused(self, token: str) -> None:
        """A 401: the next JWT is signed anew, on GitHub's clock as the refusal's `Date` says it."""
        if self._jwt is not None and self._jwt[0] == token:
            self._jwt = None
            self._refused_at = self._clock.now()


class AppTokenSource:
    """The App's installation token for one repository, minted and renewed as it is asked for.

    A `TokenSource`: give it to `GitHubClient` as its `token`. Its own requests (the installation
    lookup, each mint) go through a second client on the App's JWT, on the same session.
    """

    #: A refused token is followed by a newly minted one.
    renews = True

    def __init__(
        self,
        session: requests.Session,
        api_url: str,
        repository: str,
        credentials: AppCredentials,
        clock: Clock,
        *,
        api_version: str = "auto",
        on_token: Callable[[str], None] | None = None,
        log: Callable[[str], None] | None = None,
        margin: float = REFRESH_MARGIN,
        timeout: float = timing.REQUEST_TIMEOUT_SECONDS,
    ) -> None:
        """Mint for `repository` (`owner/name`) through `session` against `api_url`.

        `on_token` is handed each new token before it is used (the reporter's `mask`); `log` is
        told when one is minted (never the token).
        """
        self._repository = repository
        self._credentials = credentials
        self._clock = clock
        self._on_token = on_token
        self._log = log
        self._margin = margin
        self._jwt = AppJwt(credentials, clock)
        self.app_client = GitHubClient(
            session,
            api_url,
            repository,
            self._jwt,
            clock,
            timeout=timeout,
            conditional=False,
            log=log,
            api_version=api_version,
        )
        self._jwt.server_date = self.app_client.server_date
        self._installation_id = credentials.installation_id
        self._current: InstallationToken | None = None
        #: How many tokens were minted (the first, then each renewal).
        self.minted = 0

    def __repr__(self) -> str:
        """Never a token."""
        return f"AppTokenSource(repository={self._repository!r}, minted={self.minted})"

    @property
    def expires_at(self) -> datetime | None:
        """When the current token expires (None before the first mint)."""
        return None if self._current is None else self._current.expires_at

    def token(self) -> str:
        """The current token; a new one when none is held or it expires within the margin.

        Raises:
            AppTokenUnavailable: no token could be minted (the reason and its fix); nothing
                else was sent.

        """
        current = self._current
        renew_at = None if current is None else current.expires_at - timedelta(seconds=self._margin)
        if current is None or renew_at is None or self._clock.now() >= renew_at:
            current = self._current = self._mint()
        return current.token.get_secret_value()

    def refused(self, token: str) -> None:
        """A 401 to `token`: the next request gets a newly minted token."""
        if self._current is not None and self._current.token.get_secret_value() == token:
            self._current = None

    def installation_id(self) -> int:
        """The App's installation on this repository: given, else looked up once (JWT)."""
        if self._installation_id is None:
            found = self._with_fresh_jwt(self.app_client.app_endpoints.repository_installation)
            self._installation_id = found.id
        return self._installation_id

    def _mint(self) -> InstallationToken:
        try:
            installation = self.installation_id()
            name = self._repository.partition("/")[2]
            minted = self._with_fresh_jwt(
                lambda: self.app_client.app_endpoints.create_token(
                    installation, repositories=[name], permissions=APP_PERMISSIONS
                )
            )
        except GitHubError as exc:
            raise AppTokenUnavailable(
                self._credentials.app_id, self._repository, self._installation_id, exc
            ) from None
        self.minted += 1
        if self._on_token is not None:
            self._on_token(minted.token.get_secret_value())
        if self._log is not None:
            self._log(
                f"GitHub App {self._credentials.app_id}: minted an installation token for "
                f"{self._repository} (installation {installation}), valid until "
                f"{minted.expires_at:%H:%M:%SZ}"
            )
        return minted

    def _with_fresh_jwt(self, call: Callable[[], _T]) -> _T:
        """`call()`, sent once more with a JWT signed anew when GitHub refused the first (401)."""
        try:
            return call()
        except _Unauthorized:
            return call()
