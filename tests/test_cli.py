"""The composition root: exit codes, help, and how runner signals become a clean interruption."""

from __future__ import annotations

import os
import signal

import pytest

from runner_queue_fallback import __version__
from runner_queue_fallback.cli import main
from runner_queue_fallback.commands.coordinate import signals_interrupt
from runner_queue_fallback.core.errors import Interrupted


def test_help_and_version_exit_zero(capsys: pytest.CaptureFixture[str]):
    assert main(["--help"], {}) == 0
    assert "coordinate" in capsys.readouterr().out
    assert main(["--version"], {}) == 0
    assert __version__ in capsys.readouterr().out


def test_unknown_command_is_a_usage_error():
    assert main(["dispatch-everything"], {}) == 2


def test_the_first_signal_interrupts_and_the_second_cannot_break_the_cleanup():
    """The runner sends SIGINT, then SIGTERM 7.5 s later, while the first one's cleanup runs."""
    with signals_interrupt():
        with pytest.raises(Interrupted) as first:
            os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)  # arrives during the cleanup: no second interruption
    assert first.value.signal_name == "SIGINT"
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_once_settled_a_signal_no_longer_interrupts():
    """While the outputs are written a late signal must not cut them short."""
    with signals_interrupt() as settle:
        settle()
        os.kill(os.getpid(), signal.SIGTERM)  # no exception


def test_handlers_are_restored_after_the_step():
    before = signal.getsignal(signal.SIGINT)
    with signals_interrupt():
        assert signal.getsignal(signal.SIGINT) is not before
    assert signal.getsignal(signal.SIGINT) is before


# -- typos: the subcommand's usage, "did you mean", the range ---------------------------------


def test_an_unknown_flag_is_reported_with_its_subcommands_usage(capsys: pytest.CaptureFixture[str]):
    """`plan --bogus`: plan's usage and plan's name, not the top-level usage."""
    assert main(["plan", "--bogus"], {}) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: runner-queue-fallback plan "), err
    assert "--runner-type VALUE" in err
    assert "runner-queue-fallback plan: error: unrecognized arguments: --bogus" in err


def test_a_misspelt_flag_names_the_flag_it_meant(capsys: pytest.CaptureFixture[str]):
    assert main(["preflight", "--runer-type", "cpu"], {}) == 2
    err = capsys.readouterr().err
    assert "runner-queue-fallback preflight: error:" in err
    assert "(did you mean --runner-type?)" in err


def test_a_misspelt_command_gets_did_you_mean(capsys: pytest.CaptureFixture[str]):
    assert main(["plna"], {}) == 2
    assert "(did you mean plan?)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "typo", "meant"),
    [
        ("runner-type", "gpuu", "gpu"),
        ("runner-type", "GPU-amd64", "gpu-amd64"),
        ("queue-policy", "extnded", "extended"),
        ("source-policy", "pinned", "pinned-after-start"),
        ("api-version", "2022-11-2", "2022-11-28"),
    ],
)
def test_a_misspelt_input_gets_did_you_mean(
    capsys: pytest.CaptureFixture[str], name: str, typo: str, meant: str
):
    """As a flag and as an action input (INPUT_*): the value it most likely meant is named."""
    flags = ["--runner-type", "cpu"] if name != "runner-type" else []
    assert main(["plan", *flags, f"--{name}", typo], {}) == 2
    assert f"got '{typo}' (did you mean {meant}?)" in capsys.readouterr().out
    environ = {"INPUT_RUNNER-TYPE": "cpu", f"INPUT_{name.upper()}": typo}
    assert main(["plan"], environ) == 2
    assert f"(did you mean {meant}?)" in capsys.readouterr().out


def test_a_value_nothing_like_an_option_gets_no_guess(capsys: pytest.CaptureFixture[str]):
    assert main(["plan", "--runner-type", "quantum"], {}) == 2
    out = capsys.readouterr().out
    assert "got 'quantum'; allowed: cpu" in out
    assert "did you mean" not in out


@pytest.mark.parametrize(
    ("name", "value", "allowed"),
    [
        ("queue-timeout-minutes", "90", "1 to 60"),
        ("queue-timeout-minutes", "0", "1 to 60"),
        ("execution-timeout-minutes", "5000", "1 to 4320"),
        ("admission-timeout-minutes", "400", "0 (do not wait) to 360"),
    ],
)
def test_an_out_of_range_number_says_the_range(
    capsys: pytest.CaptureFixture[str], name: str, value: str, allowed: str
):
    """`queue-timeout-minutes: 90` is a number: the message says the range, as flag and as input."""
    expected = f"input '{name}' is out of range; got '{value}'; allowed: {allowed}"
    assert main(["plan", "--runner-type", "cpu", f"--{name}", value], {}) == 2
    assert expected in capsys.readouterr().out
    assert main(["plan"], {"INPUT_RUNNER-TYPE": "cpu", f"INPUT_{name.upper()}": value}) == 2
    assert expected in capsys.readouterr().out


def test_a_number_that_is_not_a_number_still_says_what_it_must_be(
    capsys: pytest.CaptureFixture[str],
):
    assert main(["plan", "--runner-type", "cpu", "--queue-timeout-minutes", "ten"], {}) == 2
    assert "must be a number of minutes; got 'ten'; allowed: 1 to 60" in capsys.readouterr().out
