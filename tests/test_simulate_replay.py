"""`simulate --waits` (`tools/simulate/replay.py`): measured waits read from a file.

A file that cannot be read as the waits is an input error naming the flag, never a traceback:
here, JSON nested 100,000 deep.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.core.clock import FakeClock

#: JSON nested far deeper than Python's stack.
DEEP_JSON = "[" * 100_000 + "]" * 100_000


def run_main(argv: list[str], environ: dict[str, str] | None = None) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(argv, environ or {}, clock=FakeClock())
    return code, out.getvalue()


@pytest.mark.found_by("review", issue=26)
def test_deep_waits_json_is_an_input_error(tmp_path: Path):
    """`simulate --waits` on JSON nested 100,000 deep.

    Before: RecursionError, a traceback. After: exit 2, the flag named, no traceback.
    """
    waits = tmp_path / "stats.json"
    waits.write_text(DEEP_JSON)
    code, out = run_main(["simulate", "--waits", str(waits), "--runner-type", "cpu"])
    assert code == 2, out
    assert "--waits" in out
    assert "too deeply nested" in out
    assert "Traceback" not in out
