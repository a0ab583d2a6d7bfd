"""Issue 49: the optional `runners-token` and `preflight`'s runner-group checks."""

from __future__ import annotations

from runner_queue_fallback.commands.flags import INPUT_HELP
from runner_queue_fallback.core.inputs import env_name
from tests.test_preflight import World

RUNNERS_TOKEN = "ghs_runnersreadonly0123456789abcdef"


def test_no_flag_takes_the_runners_token():
    """Like `token`, the runners token comes only from a variable, never a flag's value."""
    code, out = World().preflight("--runners-token", RUNNERS_TOKEN)
    assert code == 2, out
    assert "runners-token" not in INPUT_HELP


def test_a_blank_runners_token_env_names_the_input_and_sends_nothing():
    """`--runners-token-env NAME` with NAME unset: a clear error naming the input, no request."""
    world = World()
    code, out = world.preflight("--runners-token-env", "RQF_NOT_SET")
    assert code == 2, out
    assert "runners-token" in out, out
    assert "RQF_NOT_SET" in out, out
    assert world.github.ledger == []


def test_the_runners_token_is_masked_and_never_printed():
    """The runners token is registered as a secret before anything runs, and shown nowhere else."""
    world = World()
    world.inputs["runners-token"] = RUNNERS_TOKEN
    _, out = world.preflight()
    masks = [line for line in out.splitlines() if line.startswith("::add-mask::")]
    assert f"::add-mask::{RUNNERS_TOKEN}" in masks, out
    assert out.count(RUNNERS_TOKEN) == 1, out


def test_a_runners_token_with_a_space_is_refused_without_showing_it():
    """A malformed runners token fails the input check, names the input, hides the value."""
    world = World()
    world.inputs["runners-token"] = "ghs_abc def"
    code, out = world.preflight()
    assert code == 2, out
    assert "runners-token" in out
    assert "ghs_abc" not in out.replace("::add-mask::ghs_abc def", "")
    assert world.github.ledger == []
    assert env_name("runners-token") == "INPUT_RUNNERS-TOKEN"
