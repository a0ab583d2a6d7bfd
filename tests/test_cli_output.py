"""The command line's output boundary: a reader that leaves early, and durations a person reads."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.action.guard import GuardResult
from runner_queue_fallback.core.clock import elapsed


def _run_with_reader_gone(*argv: str) -> tuple[int, str]:
    """Start the CLI on a real pipe whose reader closes before the first byte is written."""
    proc = subprocess.Popen(  # noqa: S603  # this interpreter, fixed arguments
        [sys.executable, "-m", "runner_queue_fallback", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    proc.stdout.close()  # the reader is gone, as `| head -c 100` is once it has its bytes
    err = proc.stderr.read().decode()
    proc.stderr.close()
    return proc.wait(timeout=60), err


@pytest.mark.parametrize(
    "argv", [("simulate", "--json"), ("plan", "--runner-type", "cpu")], ids=" ".join
)
def test_a_reader_that_leaves_gets_no_traceback_and_the_sigpipe_exit_code(argv: tuple[str, ...]):
    """Exit 141 (what a shell reports for a writer killed by SIGPIPE), and stderr stays quiet."""
    code, err = _run_with_reader_gone(*argv)
    assert "Traceback" not in err
    assert "BrokenPipeError" not in err
    assert code == cli.EXIT_READER_GONE == 141


def test_simulate_json_piped_to_head_prints_no_traceback():
    """`simulate --json | head -c 100`: the first 100 bytes, and no traceback whoever ends first."""
    producer = subprocess.Popen(
        [sys.executable, "-m", "runner_queue_fallback", "simulate", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert producer.stdout is not None
    assert producer.stderr is not None
    head = subprocess.run(
        ["head", "-c", "100"],  # noqa: S607  # head from PATH, as a person's shell finds it
        stdin=producer.stdout,
        capture_output=True,
        check=True,
        timeout=60,
    )
    producer.stdout.close()
    err = producer.stderr.read().decode()
    producer.stderr.close()
    code = producer.wait(timeout=60)
    assert head.stdout.startswith(b'{\n  "scenario": "fallback"')
    assert len(head.stdout) == 100
    assert "Traceback" not in err
    assert code in {0, cli.EXIT_READER_GONE}


class _GoneReader(io.StringIO):
    """stdout whose reader has left: every write fails as a closed pipe does."""

    def write(self, _text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_broken_pipe_in_any_subcommand_ends_quietly_in_process():
    """Without a descriptor to point at devnull (an in-memory stream), still exit 141."""
    with contextlib.redirect_stdout(_GoneReader()):
        code = cli.main(["simulate", "--list"], {})
    assert code == cli.EXIT_READER_GONE


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(7.5881e-05, "0s"), (0.34, "0.3s"), (1.0, "1s"), (1.25, "1.2s"), (3600.0, "3600s")],
)
def test_elapsed_times_are_rounded_to_tenths_never_an_exponent(seconds: float, text: str):
    assert elapsed(seconds) == text


def test_the_guards_elapsed_time_prints_without_an_exponent():
    """A guard that took 76 microseconds (a fast loopback) reads `0s`, not `7.5881e-05s`."""
    [headline] = GuardResult([], None, 7.5881e-05).log_lines()
    assert headline.endswith("(0s)")
    assert "e-" not in headline
