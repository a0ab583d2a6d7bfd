"""The App's installation token in the client layer: minted for this repository only, renewed
before it expires and after a 401, a JWT GitHub refuses said with its fix, and the private key and
tokens never printed."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from functools import cache
from typing import Any

import pytest

from runner_queue_fallback.core.actions_io import Reporter
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.errors import AppTokenUnavailable, InputError, Unauthorized
from runner_queue_fallback.fake_github import FakeGitHub, Fault
from runner_queue_fallback.fake_github.apps import (
    DECODE_FAILED,
    AppKeys,
    FakeInstallation,
    generate_app_keys,
)
from runner_queue_fallback.github.app_token import (
    APP_PERMISSIONS,
    JWT_BACKDATE,
    JWT_LIFETIME,
    REFRESH_MARGIN,
    AppCredentials,
    AppTokenSource,
)
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.github.tokens import StaticToken, TokenSource
from tests.test_sim_support import child_inputs, make_world

APP_ID = "31337"
PARENT = 4242
MINT = "/app/installations/{}/access_tokens"


@cache
def _keys(which: str) -> AppKeys:
    del which  # one key pair per name
    return generate_app_keys()


def keys(which: str = "app") -> AppKeys:
    return _keys(which)


def app_world(
    clock: FakeClock, *, key: str = "app", **world: Any
) -> tuple[FakeGitHub, FakeInstallation]:
    fake = make_world(clock, **world)
    app = fake.add_app(int(APP_ID), keys(key).public_pem)
    return fake, fake.install_app(app)


def source(
    world: FakeGitHub,
    clock: FakeClock,
    *,
    key: str = "app",
    installation: str = "",
    **options: Any,
) -> AppTokenSource:
    credentials = AppCredentials.read(APP_ID, keys(key).private_pem, installation)
    return AppTokenSource(
        world.session(), world.api_url, world.repository, credentials, clock, **options
    )


def client(world: FakeGitHub, clock: FakeClock, token: str | TokenSource) -> GitHubClient:
    return GitHubClient(world.session(), world.api_url, world.repository, token, clock)


def mints(world: FakeGitHub) -> list[float]:
    return [e.time for e in world.ledger if e.path.endswith("/access_tokens") and e.status == 201]


# -- minting ------------------------------------------------------------------------------------


def test_the_token_is_minted_for_this_repository_only_with_only_the_permissions_needed():
    clock = FakeClock()
    world, installation = app_world(clock)
    tokens = source(world, clock)
    reads = client(world, clock, tokens)
    assert reads.get_run(PARENT).id == PARENT
    lookup, mint, read = world.ledger
    assert (lookup.method, lookup.path, lookup.status) == (
        "GET",
        f"/repos/{world.repository}/installation",
        200,
    )
    assert (mint.path, mint.status) == (MINT.format(installation.id), 201)
    assert {lookup.bucket, mint.bucket} == {f"app:{APP_ID}"}  # the JWT's requests
    assert read.bucket == installation.owner  # the reads spend the installation's quota
    assert world.quota_used() == 0  # and never the repository's
    assert world.apps is not None
    (held,) = world.apps.tokens.values()
    assert held.repositories == ("octo-repo",)
    assert dict(held.permissions) == APP_PERMISSIONS == {"actions": "write", "contents": "read"}
    assert tokens.expires_at == clock.now() + timedelta(hours=1)
    assert tokens.minted == 1


def test_a_given_installation_id_is_used_without_a_lookup():
    clock = FakeClock()
    world, installation = app_world(clock)
    tokens = source(world, clock, installation=str(installation.id))
    client(world, clock, tokens).get_run(PARENT)
    assert [e.path for e in world.ledger][:1] == [MINT.format(installation.id)]


def test_the_jwt_is_a_minute_in_the_past_and_nine_minutes_ahead_signed_rs256():
    import jwt  # noqa: PLC0415 (read the claims as GitHub would)

    clock = FakeClock()
    credentials = AppCredentials.read(APP_ID, keys().private_pem)
    token, expires = credentials.sign(clock.now())
    claims = jwt.decode(
        token, keys().public_pem, algorithms=["RS256"], options={"verify_exp": False}
    )
    now = int(clock.now().timestamp())
    assert claims == {"iat": now - JWT_BACKDATE, "exp": now + JWT_LIFETIME, "iss": APP_ID}
    assert expires == now + 540
    assert jwt.get_unverified_header(token)["alg"] == "RS256"


def test_the_dispatch_goes_out_with_the_apps_token():
    clock = FakeClock()
    world, installation = app_world(clock)
    sent = client(world, clock, source(world, clock))
    result = sent.dispatch_workflow("runner-worker.yml", "main", child_inputs())
    assert result is not None
    assert result.workflow_run_id in world.runs
    assert world.ledger[-1].bucket == installation.owner


# -- renewal ------------------------------------------------------------------------------------


def test_the_token_is_renewed_before_it_expires_and_not_sooner():
    clock = FakeClock()
    world, _ = app_world(clock)
    reads = client(world, clock, source(world, clock))
    reads.get_run(PARENT)
    renew_at = 3600.0 - REFRESH_MARGIN
    clock.advance(renew_at - 1.0)
    reads.get_run(PARENT)
    assert len(mints(world)) == 1
    clock.advance(1.0)
    reads.get_run(PARENT)
    assert mints(world) == [0.0, renew_at]
    # Four hours of reads, one a minute: never a 401, a token every 55 minutes.
    for _ in range(240):
        clock.advance(60.0)
        reads.get_run(PARENT)
    assert not [e for e in world.ledger if e.status == 401]
    assert len(mints(world)) == 2 + 240 // 55


def test_a_401_mints_anew_and_the_read_goes_once_more_with_the_fresh_token():
    clock = FakeClock()
    # No renewal ahead, and the runner's clock half a minute behind GitHub's: the token lapses
    # while the runner still thinks it valid.
    world, _ = app_world(clock, clock_offset=30.0)
    tokens = source(world, clock, margin=0.0)
    reads = client(world, clock, tokens)
    reads.get_run(PARENT)
    clock.advance(3600.0)
    assert reads.get_run(PARENT).id == PARENT  # the 401, a mint, the read again
    statuses = [e.status for e in world.ledger if e.path.endswith(f"/runs/{PARENT}")]
    assert statuses == [200, 401, 304]  # the body kept: a conditional read
    assert len(mints(world)) == 2
    # A token GitHub revoked before its time (here: an injected 401) is renewed too, once.
    world.inject(Fault(kind="unauthorized", path=f"/actions/runs/{PARENT}$", count=1))
    reads.get_run(PARENT)
    assert len(mints(world)) == 3
    assert tokens.minted == 3
    # A second 401 in a row is final: the credential itself is refused.
    world.inject(Fault(kind="unauthorized", path=f"/actions/runs/{PARENT}$", count=2))
    with pytest.raises(Unauthorized):
        reads.get_run(PARENT)
    assert tokens.minted == 4


def test_a_static_token_is_not_renewed_and_sent_as_before():
    clock = FakeClock()
    world = make_world(clock)
    fixed = StaticToken("coordinator-token")
    assert isinstance(fixed, TokenSource)
    reads = client(world, clock, fixed)
    reads.get_run(PARENT)
    fixed.refused("coordinator-token")
    reads.get_run(PARENT)
    assert world.client_number("coordinator-token") == 0
    assert {e.client for e in world.ledger} == {0}
    assert "coordinator-token" not in repr(fixed)


def test_githubs_clock_behind_the_runners_is_learnt_from_its_refusal():
    """GitHub two minutes behind: the first JWT is refused, the second is signed on its clock."""
    clock = FakeClock()
    world, _ = app_world(clock, clock_offset=-120.0)
    client(world, clock, source(world, clock)).get_run(PARENT)
    statuses = [e.status for e in world.ledger]
    assert statuses == [401, 200, 201, 200]


# -- refusals -----------------------------------------------------------------------------------


def test_a_jwt_signed_with_another_key_is_refused_and_nothing_is_dispatched():
    clock = FakeClock()
    world, _ = app_world(clock)
    sent = client(world, clock, source(world, clock, key="other"))
    with pytest.raises(AppTokenUnavailable) as raised:
        sent.dispatch_workflow("runner-worker.yml", "main", child_inputs())
    message = str(raised.value)
    assert DECODE_FAILED in message
    assert "`app-private-key` must be a private key of the App that `app-id` names" in message
    assert not [e for e in world.ledger if e.path.endswith("/dispatches")]
    assert [e.status for e in world.ledger] == [401, 401]  # the lookup, and once more re-signed
    assert world.runs.keys() == {PARENT}


def test_an_app_not_installed_here_says_to_install_it_or_name_the_installation():
    clock = FakeClock()
    world = make_world(clock)
    app = world.add_app(int(APP_ID), keys().public_pem)
    world.install_app(app, repositories=("elsewhere",))
    with pytest.raises(AppTokenUnavailable, match="install the App on octo-org/octo-repo"):
        client(world, clock, source(world, clock)).get_run(PARENT)


@pytest.mark.parametrize(
    ("app_id", "key", "installation", "named"),
    [
        ("", None, "", "app-id"),
        ("12ab", None, "", "app-id"),
        (APP_ID, "", "", "app-private-key"),
        (
            APP_ID,
            "-----BEGIN RSA PRIVATE KEY-----\nnot a key\n-----END RSA PRIVATE KEY-----",
            "",
            "app-private-key",
        ),
        (APP_ID, None, "0", "app-installation-id"),
        (APP_ID, None, "12x", "app-installation-id"),
    ],
)
def test_malformed_credentials_name_the_input_and_never_repeat_the_key(
    app_id, key, installation, named
):
    pem = keys().private_pem if key is None else key
    with pytest.raises(InputError) as raised:
        AppCredentials.read(app_id, pem, installation)
    assert raised.value.name == named
    assert "not a key" not in str(raised.value)
    assert keys().private_pem.splitlines()[1] not in str(raised.value)


def test_a_key_stored_with_escaped_line_breaks_is_read():
    escaped = keys().private_pem.strip().replace("\n", "\\n")
    credentials = AppCredentials.read(APP_ID, escaped, "77")
    assert credentials.installation_id == 77
    assert credentials.secrets()[0] == keys().private_pem.strip()


# -- secrets never printed ----------------------------------------------------------------------


def test_the_private_key_and_every_token_are_masked_and_never_printed():
    clock = FakeClock()
    world, _ = app_world(clock, clock_offset=30.0)
    stream = io.StringIO()
    reporter = Reporter(stream)
    credentials = AppCredentials.read(APP_ID, keys().private_pem)
    for secret in credentials.secrets():
        reporter.mask(secret)
    masked_at: dict[str, int] = {}  # each token: how many requests had been sent when masked

    def mask(token: str) -> None:
        masked_at[token] = len(world.ledger)
        reporter.mask(token)

    tokens = AppTokenSource(
        world.session(),
        world.api_url,
        world.repository,
        credentials,
        clock,
        on_token=mask,
        log=reporter.log,
        margin=0.0,
    )
    reads = client(world, clock, tokens)
    reads.get_run(PARENT)
    clock.advance(3600.0)
    reads.get_run(PARENT)  # a 401, then once more with a fresh token
    world.inject(Fault(kind="unauthorized", path=f"/actions/runs/{PARENT}$", count=2))
    with pytest.raises(Unauthorized) as refused:
        reads.get_run(PARENT)
    reporter.error(str(refused.value))
    for thing in (credentials, tokens, tokens.app_client, tokens._current):
        reporter.log(repr(thing))
    assert world.apps is not None
    minted = list(world.apps.tokens)
    assert len(minted) == 3
    output = stream.getvalue()
    masked = [line for line in output.splitlines() if line.startswith("::add-mask::")]
    printed = "\n".join(line for line in output.splitlines() if line not in masked)
    body = [line for line in keys().private_pem.splitlines() if "PRIVATE KEY" not in line]
    assert len(masked) == 1 + len(body) + 3  # the key, each of its lines, each token
    for secret in [keys().private_pem.strip(), *body, *minted]:
        assert secret not in printed
    assert "minted an installation token for octo-org/octo-repo" in printed
    # Each token is masked before the first request that carries it is sent.
    assert masked_at.keys() == set(minted)
    for token, sent_before in masked_at.items():
        client_number = world.client_number(token)
        first = next(i for i, e in enumerate(world.ledger) if e.client == client_number)
        assert first >= sent_before


def test_a_transport_error_never_repeats_a_token_the_source_handed_out():
    clock = FakeClock()
    world, _ = app_world(clock)
    tokens = source(world, clock)
    reads = client(world, clock, tokens)
    reads.get_run(PARENT)
    assert world.apps is not None
    (token,) = world.apps.tokens
    assert reads._transport.redact(f"echo {token} back") == "echo *** back"
    assert token not in json.dumps(repr(tokens))
