"""The fake's quota buckets (one per quota owner) and its GitHub Apps: JWT checks, installations,
installation tokens that expire after an hour."""

from __future__ import annotations

import json
from datetime import timedelta
from functools import cache
from typing import Any

import jwt
import pytest

from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github import FakeGitHub, Reply
from runner_queue_fallback.fake_github.apps import (
    BAD_CREDENTIALS,
    DECODE_FAILED,
    EXP_FAR,
    EXP_PAST,
    IAT_FUTURE,
    NOT_ACCESSIBLE,
    PERMISSIONS_NOT_GRANTED,
    REPOS_NOT_ACCESSIBLE,
    AppKeys,
    FakeApp,
    FakeInstallation,
    generate_app_keys,
)
from tests.test_sim_support import API_VERSION, AUTH, REPO, child_inputs, make_world

APP_ID = 31337
RUN = "/actions/runs/4242"
DISPATCH = "/actions/workflows/runner-worker.yml/dispatches"


@cache
def _keys(which: str) -> AppKeys:
    del which  # one key pair per name
    return generate_app_keys()


def keys(which: str = "app") -> AppKeys:
    return _keys(which)


def app_world(
    clock: FakeClock | None = None, *, quota: int = 5000, **install: Any
) -> tuple[FakeGitHub, FakeApp, FakeInstallation]:
    world = make_world(clock or FakeClock())
    app = world.add_app(APP_ID, keys().public_pem)
    installation = world.install_app(app, quota=quota, **install)
    return world, app, installation


def github_now(world: FakeGitHub) -> int:
    return int((world.render.epoch + timedelta(seconds=world.now())).timestamp())


def app_jwt(
    world: FakeGitHub, *, key: str = "app", iss: int | str = APP_ID, iat: int = -60, exp: int = 540
) -> str:
    now = github_now(world)
    claims = {"iat": now + iat, "exp": now + exp, "iss": str(iss)}
    return jwt.encode(claims, keys(key).private_pem, algorithm="RS256")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "X-GitHub-Api-Version": API_VERSION}


def mint(
    world: FakeGitHub, installation_id: int, token: str | None = None, body: Any = None
) -> Reply:
    path = f"/app/installations/{installation_id}/access_tokens"
    payload = b"" if body is None else json.dumps(body).encode()
    return world.handle("POST", path, bearer(token or app_jwt(world)), payload)


def minted(world: FakeGitHub, installation: FakeInstallation, **body: Any) -> str:
    reply = mint(world, installation.id, body=body or None)
    assert reply.status == 201, reply.body
    token: str = reply.json()["token"]
    return token


# -- one quota bucket per quota owner -----------------------------------------------------------


def test_each_quota_owner_has_its_own_bucket_and_limit():
    world, _, installation = app_world(quota=5000)
    world.add_user_token("personal-token", "mona", quota=4000)
    token = minted(world, installation)
    replies = {
        "repository": world.handle("GET", REPO + RUN, AUTH),
        "installation": world.handle("GET", REPO + RUN, bearer(token)),
        "user": world.handle("GET", REPO + RUN, bearer("personal-token")),
    }
    limits = {who: r.headers["X-RateLimit-Limit"] for who, r in replies.items()}
    assert limits == {"repository": "1000", "installation": "5000", "user": "4000"}
    assert {who: r.headers["X-RateLimit-Used"] for who, r in replies.items()} == {
        "repository": "1",
        "installation": "1",
        "user": "1",
    }
    assert [e.bucket for e in world.ledger[-3:]] == [
        "repository",
        installation.owner,
        "user:mona",
    ]
    # The lookup and the mint went on the App's own (JWT) bucket, never the repository's.
    assert world.quota_used() == 1
    assert world.quota_used(f"app:{APP_ID}") == 1


def test_a_spent_installation_leaves_the_repository_and_the_other_installations_untouched():
    world, app, first = app_world(quota=3)
    second = world.install_app(app, quota=3)
    one, two = minted(world, first), minted(world, second)
    world.spend_quota(3, first.owner)
    refused = world.handle("GET", REPO + RUN, bearer(one))
    assert refused.status == 403
    assert refused.json()["message"] == f"API rate limit exceeded for installation ID {first.id}."
    assert refused.headers["X-RateLimit-Remaining"] == "0"
    assert world.handle("GET", REPO + RUN, bearer(two)).status == 200
    assert world.handle("GET", REPO + RUN, AUTH).status == 200
    assert world.ledger[-3].limit == "primary"


def test_the_rate_limit_endpoint_reports_the_callers_own_bucket():
    world, _, installation = app_world(quota=5000)
    token = minted(world, installation)
    world.spend_quota(7, installation.owner)
    core = world.handle("GET", "/rate_limit", bearer(token)).json()["resources"]["core"]
    assert (core["limit"], core["used"]) == (5000, 7)
    core = world.handle("GET", "/rate_limit", AUTH).json()["resources"]["core"]
    assert (core["limit"], core["used"]) == (1000, 0)


def test_without_apps_or_users_every_token_spends_the_repositorys_bucket_as_before():
    world = make_world(FakeClock(), quota=1000)
    for token in ("coordinator-token", "guard-token", "anything"):
        world.handle("GET", REPO + RUN, bearer(token))
    assert world.quota_used() == 3
    assert world.buckets.keys() == {"repository"}
    assert {e.bucket for e in world.ledger} == {"repository"}


# -- the App's JWT ------------------------------------------------------------------------------


def test_a_valid_jwt_finds_the_installation_on_the_repository():
    world, app, installation = app_world()
    reply = world.handle("GET", REPO + "/installation", bearer(app_jwt(world)))
    assert reply.status == 200
    body = reply.json()
    assert (body["id"], body["app_id"], body["app_slug"]) == (installation.id, APP_ID, app.slug)
    assert body["repository_selection"] == "all"
    assert body["access_tokens_url"].endswith(f"/app/installations/{installation.id}/access_tokens")


def test_the_client_id_is_an_issuer_too():
    world, app, installation = app_world()
    assert mint(world, installation.id, app_jwt(world, iss=app.client_id)).status == 201


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"key": "other"}, DECODE_FAILED),
        ({"iss": APP_ID + 1}, DECODE_FAILED),
        ({"exp": 0}, EXP_PAST),
        ({"exp": -1, "iat": -600}, EXP_PAST),
        ({"exp": 601}, EXP_FAR),
        ({"iat": 1}, IAT_FUTURE),
    ],
)
def test_github_refuses_a_jwt_as_it_says_and_the_refusal_costs_nothing(change, message):
    world, _, installation = app_world()
    token = app_jwt(world, **change)
    for reply in (
        world.handle("GET", REPO + "/installation", bearer(token)),
        mint(world, installation.id, token),
    ):
        assert reply.status == 401
        assert reply.json()["message"] == message
    assert not any(e.counted for e in world.ledger)
    assert world.apps is not None
    assert world.apps.tokens == {}


def test_an_iat_at_githubs_second_or_within_the_leeway_passes():
    world, _, installation = app_world()
    assert mint(world, installation.id, app_jwt(world, iat=0)).status == 201
    assert world.apps is not None
    world.apps.iat_leeway = 30
    assert mint(world, installation.id, app_jwt(world, iat=30)).status == 201
    assert mint(world, installation.id, app_jwt(world, iat=31)).status == 401


def test_the_jwt_is_checked_on_githubs_clock_not_the_runners():
    """GitHub's clock two minutes behind the runner's: a JWT made on the runner's is refused."""
    clock = FakeClock()
    world = make_world(clock, clock_offset=-120.0)
    app = world.add_app(APP_ID, keys().public_pem)
    installation = world.install_app(app)
    runner_now = int(clock.now().timestamp())
    made_here = jwt.encode(
        {"iat": runner_now - 60, "exp": runner_now + 540, "iss": str(APP_ID)},
        keys().private_pem,
        algorithm="RS256",
    )
    refused = mint(world, installation.id, made_here)
    assert refused.status == 401
    assert refused.json()["message"] in {EXP_FAR, IAT_FUTURE}  # both are a minute out here
    assert mint(world, installation.id, app_jwt(world)).status == 201


def test_a_jwt_is_no_token_for_the_repository_and_a_token_is_no_jwt():
    world, _, installation = app_world()
    reply = world.handle("GET", REPO + RUN, bearer(app_jwt(world)))
    assert (reply.status, reply.json()["message"]) == (401, BAD_CREDENTIALS)
    token = minted(world, installation)
    reply = mint(world, installation.id, token)
    assert (reply.status, reply.json()["message"]) == (401, DECODE_FAILED)


def test_an_app_not_installed_on_the_repository_is_not_found():
    world, _, _ = app_world(repositories=("another-repo",))
    reply = world.handle("GET", REPO + "/installation", bearer(app_jwt(world)))
    assert reply.status == 404


# -- minting and using installation tokens --------------------------------------------------------


def test_a_minted_token_reads_and_dispatches_and_expires_after_sixty_virtual_minutes():
    clock = FakeClock()
    world, _, installation = app_world(clock)
    reply = mint(world, installation.id)
    assert reply.status == 201
    body = reply.json()
    assert set(body) == {"token", "expires_at", "permissions", "repository_selection"}
    assert body["expires_at"] == (clock.now() + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert body["token"].startswith("ghs_")
    token = body["token"]
    payload = json.dumps({"ref": "main", "inputs": child_inputs()}).encode()
    sent = world.handle("POST", REPO + DISPATCH, bearer(token), payload)
    assert sent.status == 200
    clock.advance(3599.0)
    assert world.handle("GET", REPO + RUN, bearer(token)).status == 200
    clock.advance(1.0)
    expired = world.handle("GET", REPO + RUN, bearer(token))
    assert (expired.status, expired.json()["message"]) == (401, BAD_CREDENTIALS)
    assert not world.ledger[-1].counted


def test_a_token_narrowed_to_this_repository_and_permissions_is_held_to_them():
    world, _, installation = app_world()
    token = minted(world, installation, repositories=["octo-repo"], permissions={"actions": "read"})
    assert world.handle("GET", REPO + RUN, bearer(token)).status == 200
    payload = json.dumps({"ref": "main", "inputs": child_inputs()}).encode()
    refused = world.handle("POST", REPO + DISPATCH, bearer(token), payload)
    assert (refused.status, refused.json()["message"]) == (403, NOT_ACCESSIBLE)
    assert world.handle("GET", REPO + "/git/ref/heads/main", bearer(token)).status == 403
    elsewhere = minted(world, installation, repositories=["octo-repo"])
    assert world.handle("GET", REPO + "/git/ref/heads/main", bearer(elsewhere)).status == 200


def test_a_token_for_another_repository_cannot_see_this_one():
    world, _, installation = app_world(repositories=("octo-repo", "other"))
    token = minted(world, installation, repositories=["other"])
    assert world.handle("GET", REPO + RUN, bearer(token)).status == 404


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"repositories": ["not-installed"]}, 422, REPOS_NOT_ACCESSIBLE),
        ({"permissions": {"administration": "read"}}, 422, PERMISSIONS_NOT_GRANTED),
        ({"permissions": {"contents": "write"}}, 422, PERMISSIONS_NOT_GRANTED),
    ],
)
def test_a_mint_asking_beyond_the_installation_is_refused(body, status, message):
    world, _, installation = app_world(repositories=("octo-repo",))
    reply = mint(world, installation.id, body=body)
    assert (reply.status, reply.json()["message"]) == (status, message)


def test_a_mint_for_an_installation_of_another_app_is_not_found():
    world, _, installation = app_world()
    other = world.add_app(APP_ID + 1, keys("other").public_pem)
    token = app_jwt(world, key="other", iss=other.id)
    assert mint(world, installation.id, token).status == 404
    assert mint(world, 999, app_jwt(world)).status == 404
