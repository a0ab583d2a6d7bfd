"""Serve the fake GitHub on 127.0.0.1 for scripts/guard-act, with one dispatched child waiting.

Usage: python scripts/guard_act_fake.py pass|refuse ENV_FILE INPUT_FILE

Builds a repository with the child workflow, a source branch and an active parent run, dispatches
a child as the coordinator would, and writes what a runner would give the child's guard step:
ENV_FILE gets the GITHUB_* variables (act --env-file), INPUT_FILE the dispatch inputs (one
NAME=VALUE a line, for act --input). `refuse` moves the source branch after the dispatch, so the
guard must refuse ("source ref"). The server runs on real time (SystemClock) until stdin closes or SIGTERM.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from types import FrameType

from runner_queue_fallback.core.clock import SystemClock
from runner_queue_fallback.fake_github import DispatchRefused, FakeGitHub

PARENT_ID = 4242
SOURCE_REF = "refs/heads/feature"
REQUEST_ID = "rqf-4242-1-1-0a0c7000"  # a well-formed request id (the guard refuses any other)


def main(argv: list[str]) -> int:
    """Build the world, write the env and input files, serve until told to stop."""
    if len(argv) != 3 or argv[0] not in {"pass", "refuse"}:
        print(__doc__, file=sys.stderr)
        return 2
    mode, env_file, input_file = argv
    world = FakeGitHub(SystemClock())
    world.add_workflow()
    approved = world.add_ref("heads/feature")
    world.add_parent_run(PARENT_ID)
    inputs = {
        "request-id": REQUEST_ID,
        "parent-run-id": str(PARENT_ID),
        "parent-run-attempt": "1",
        "source-ref": SOURCE_REF,
        "source-sha": approved,
        "runner": json.dumps({"group": "nv-cpu-general", "labels": "linux-amd64-cpu16"}),
        "workload": "{}",
    }
    run = world.dispatch("runner-worker.yml", "main", inputs)
    if isinstance(run, DispatchRefused):
        print(f"the fake refused the dispatch: {run}", file=sys.stderr)
        return 1
    if mode == "refuse":
        world.move_ref("heads/feature")
    signal.signal(signal.SIGTERM, _stop)
    with world.serve() as url:
        env = {
            "GITHUB_API_URL": url,
            "GITHUB_REPOSITORY": world.repository,
            "GITHUB_RUN_ID": str(run.id),
            "GITHUB_RUN_ATTEMPT": "1",
        }
        Path(env_file).write_text("".join(f"{k}={v}\n" for k, v in env.items()), encoding="utf-8")
        Path(input_file).write_text(
            "".join(f"{k}={v}\n" for k, v in inputs.items() if k != "runner"), encoding="utf-8"
        )
        print(f"fake GitHub at {url}: child run {run.id} ({mode})", flush=True)
        sys.stdin.read()  # serve until scripts/guard-act closes our stdin
    return 0


def _stop(_signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
