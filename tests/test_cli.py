"""The composition root: exit codes, help, and how runner signals become a clean interruption."""

from __future__ import annotations

import os
import signal

import pytest

from runner_queue_fallback import __version__
from runner_queue_fallback.cli import main
from runner_queue_fallback.commands.coordinate import signals_interrupt
from runner_queue_fallback.errors import Interrupted


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
