"""The `outcome` output a gate reads: one word on every exit path (issue 31, items 5 and 6).

One test per row of the issue's table, each driven through `cli.main` against the fake GitHub:
the word is read back from the GITHUB_OUTPUT file, every word but `success` fails the step, and
the same word leads the step summary's headline and the error annotation's title. Then the
honest headlines: no pool named when none gave a runner, an artifacts link only for a run that
executed, a child the cleanup confirmed cancelled shown as cancelled.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
from pathlib import Path

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.action.sequence import startup as startup_module
from runner_queue_fallback.action.summary import publish
from runner_queue_fallback.commands import coordinate as coordinate_module
from runner_queue_fallback.core.errors import Interrupted
from runner_queue_fallback.core.outcome import OUTCOMES, PHRASES
from runner_queue_fallback.fake_github import PoolSpec
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.model import Timings, Workload
from runner_queue_fallback.tools.simulate.capture import read_key_values
from runner_queue_fallback.tools.simulate.scenarios import CatalogueEntry, load_catalogue
from runner_queue_fallback.tools.simulate.steps import (
    PARENT_RUN_ID,
    SOURCE_REF,
    SimulationRun,
    coordinator_environ,
    run_coordinator,
    simulate_entry,
)
from tests.invariants import check_invariants, children, dispatch_posts
from tests.test_coordinator import FOREVER, Scenario
from tests.test_job_time import coordinator_yaml, job_scenario, short_quota
from tests.test_job_time import run as run_with_job

CATALOGUE = load_catalogue()
ARTIFACTS = "Artifacts of the worker run"
NEVER = 10_000.0


#: How the runner decodes a workflow command's property (`escape_property` in reverse).
_PROPERTY = {"%3A": ":", "%2C": ",", "%0D": "\r", "%0A": "\n", "%25": "%"}


def _error_titles(log: str) -> list[str]:
    """The titles of the `::error` annotations, in order, as the checks list shows them."""
    found = re.findall(r"^::error title=([^:]*)::", log, flags=re.MULTILINE)
    return [re.sub("%3A|%2C|%0D|%0A|%25", lambda m: _PROPERTY[m.group()], t) for t in found]


def ended_as(result: SimulationRun, word: str) -> SimulationRun:
    """The GITHUB_OUTPUT file says `word`; the step fails unless it is success; the headline and
    the first error annotation lead with the same word."""
    assert result.outputs["outcome"] == word, result.log
    assert (result.exit_code == 0) is (word == "success"), result.log
    assert result.summary.startswith(f"## {word}: "), result.summary[:200]
    titles = _error_titles(result.log)
    if word == "success":
        assert titles == []
    else:
        assert titles[0].startswith(f"{word}: "), titles
    return result


def _simulated(entry: CatalogueEntry) -> SimulationRun:
    sim = simulate_entry(entry, main=cli.main)
    (run,) = sim.runs
    check_invariants(sim.world, run, candidates=7)
    return run


# -- success, failure --------------------------------------------------------------------------


def test_success_when_the_worker_job_and_the_child_run_succeeded():
    result = ended_as(Scenario().pools([], FOREVER, FOREVER).run(), "success")
    assert result.summary.startswith(
        "## success: the worker succeeded on nv-cpu-general / linux-amd64-cpu16\n"
    )
    assert ARTIFACTS in result.summary


def test_failure_when_the_worker_ran_and_did_not_succeed():
    s = Scenario(workload=Workload(outcome="failure", duration=120.0)).pools([], [], [])
    result = ended_as(s.run(), "failure")
    assert _error_titles(result.log)[0] == f"failure: {PHRASES['failure']}"
    assert result.summary.startswith(
        "## failure: the worker ran on nv-cpu-general / linux-amd64-cpu16 and did not succeed\n"
    )
    assert ARTIFACTS in result.summary


def test_failure_when_a_worker_that_ran_outlived_its_execution_timeout():
    s = Scenario(workload=Workload(duration=3600)).pools([], [], [])
    s.inputs["execution-timeout-minutes"] = "5"
    result = ended_as(s.run(), "failure")
    assert "execution-timeout-minutes (5)" in result.log


# -- no-runner ---------------------------------------------------------------------------------


def test_no_runner_when_every_queue_deadline_passed_each_child_cancelled_and_proven():
    s = Scenario().pools(FOREVER, FOREVER, FOREVER)
    result = ended_as(s.run(), "no-runner")
    assert _error_titles(result.log)[0] == "no-runner: never got a runner"
    assert all(kid.conclusion == "cancelled" for kid in children(s.world))
    assert len(children(s.world)) == 3


def test_the_exhaustion_headline_names_no_pool_and_points_at_each_pools_wait():
    result = Scenario().pools(FOREVER, FOREVER, FOREVER).run()
    headline = result.summary.splitlines()[0]
    assert "linux-amd64" not in headline
    assert "nv-cpu-general" not in headline
    assert "no pool gave one before its queue deadline" in headline
    assert "each pool's wait is in the table" in headline
    assert result.summary.count("| 600 s |") == 3


def test_a_run_that_never_executed_has_no_artifacts_link():
    """Every child was cancelled in its queue: there is nothing of a worker run to download."""
    result = Scenario().pools(FOREVER, FOREVER, FOREVER).run()
    assert ARTIFACTS not in result.summary
    assert "#artifacts" not in result.summary


# -- cancelled ---------------------------------------------------------------------------------


def test_cancelled_when_the_runner_signals_the_coordinator():
    s = Scenario(timings=Timings(cancel_delay=3.0)).pools(FOREVER, [], [])
    result = ended_as(s.run(interrupt_at=215.0), "cancelled")
    assert _error_titles(result.log)[0] == "cancelled: the workflow run was cancelled"


def test_cancelled_when_the_parent_run_is_cancelled_while_the_child_waits():
    s = Scenario().pools(FOREVER, [], [])
    s.world.finish_parent(PARENT_RUN_ID, "cancelled", at=130.0)
    ended_as(s.run(), "cancelled")


def test_cancelled_when_the_parent_run_was_cancelled_before_the_first_dispatch():
    s = Scenario().pools(FOREVER, [], [])
    s.world.finish_parent(PARENT_RUN_ID, "cancelled")
    result = ended_as(s.run(), "cancelled")
    assert dispatch_posts(s.world) == []
    assert "conclusion 'cancelled'" in result.log


def test_a_child_the_cleanup_confirmed_cancelled_is_shown_cancelled_not_queued():
    s = Scenario(timings=Timings(cancel_delay=3.0)).pools(FOREVER, [], [])
    result = s.run(interrupt_at=215.0)
    [kid] = children(s.world)
    assert kid.conclusion == "cancelled"
    row = next(line for line in result.summary.splitlines() if line.startswith("| 1 |"))
    outcome = row.rsplit("|", 2)[1]
    assert "cancelled" in outcome, row
    assert "queued" not in outcome, row
    assert ARTIFACTS not in result.summary


# -- error: every other ending, with its message -----------------------------------------------


def test_error_for_an_input_error_before_any_request():
    s = Scenario().pools([], [], [])
    s.inputs["runner-type"] = "tpu"
    result = s.run(post_step=False)
    assert result.outputs["outcome"] == "error"
    assert result.exit_code == 2
    assert s.world.ledger == []
    assert result.summary.startswith("## error: invalid input")
    assert _error_titles(result.log) == ["error: Invalid input"]


def test_error_for_an_identity_mismatch():
    s = Scenario().pools(FOREVER, [], [])
    original = s.world.dispatch

    def dispatch_then_move(*args, **kwargs):
        s.world.change_workflow("runner-worker.yml", "main")
        return original(*args, **kwargs)

    s.world.dispatch = dispatch_then_move  # type: ignore[method-assign]  # a race injected here
    result = ended_as(s.run(), "error")
    assert "is not the run that was dispatched" in result.log
    assert _error_titles(result.log)[0] == "error: Fallback stopped"


def test_error_when_the_source_moved():
    s = Scenario().pools(FOREVER, [], [])
    s.world.move_ref(SOURCE_REF.removeprefix("refs/"), at=200.0)
    result = ended_as(s.run(), "error")
    assert "moved" in result.log


def test_error_when_the_source_moved_while_the_worker_ran():
    """A step started, yet the worker was stopped for its source, not for its own result."""
    s = Scenario(workload=Workload(duration=600)).pools([], [], [])
    s.world.move_ref(SOURCE_REF.removeprefix("refs/"), at=200.0)
    result = ended_as(s.run(), "error")
    assert "moved" in result.log


def test_error_for_the_race_of_a_runner_taken_during_the_cancel():
    s = Scenario(timings=Timings(cancel_delay=30.0)).pools([(0.0, 617.0)], [], [])
    result = ended_as(s.run(), "error")
    assert "race" in result.log


def test_error_when_the_proof_window_expired():
    s = Scenario(timings=Timings(cancel_delay=NEVER, force_cancel_delay=NEVER)).pools(
        FOREVER, [], []
    )
    result = ended_as(s.run(post_step=False), "error")
    assert "not confirmed within 2 minutes" in result.log


def test_error_when_admission_is_refused():
    s = Scenario().pools([], FOREVER, FOREVER)
    s.inputs["admission-timeout-minutes"] = "0"
    s.world.spend_quota(s.world.quota - 10)
    ended_as(s.run(), "error")
    assert dispatch_posts(s.world) == []


def test_error_for_a_job_too_short_for_the_candidate():
    """After a wait for the quota, the candidate would outlive the coordinator's own job."""
    s = job_scenario(coordinator_yaml("90"))
    short_quota(s)
    result = ended_as(run_with_job(s), "error")
    assert "timeout-minutes 90 of job `runner-check`" in result.log
    assert dispatch_posts(s.world) == []


def test_error_for_a_run_github_never_gave_a_job():
    result = ended_as(_simulated(CATALOGUE["zombie-run"]), "error")
    assert "GitHub never created its worker job" in result.log


def test_error_for_a_job_assigned_and_requeued_that_started_no_step_before_its_timeout():
    """A runner was seen (no fallback), no step ever ran: no worker ran, so it is no failure."""
    entry = CATALOGUE["requeue-visible"]
    pools = (
        PoolSpec(group="nv-cpu-general", labels="linux-amd64-cpu16", busy=((60.0, 3000.0),)),
        PoolSpec(group="nv-cpu-general", labels="linux-amd64-cpu8"),
    )
    (spec,) = entry.coordinators
    entry = entry.model_copy(
        update={
            "world": dataclasses.replace(entry.world, pools=pools),
            "coordinators": (
                spec.model_copy(
                    update={"inputs": {**spec.inputs, "execution-timeout-minutes": "3"}}
                ),
            ),
        }
    )
    result = ended_as(_simulated(entry), "error")
    assert "did not finish within execution-timeout-minutes (3)" in result.log
    assert _error_titles(result.log)[0] == "error: Execution timeout"
    assert ARTIFACTS not in result.summary


def test_error_for_an_api_error():
    refused = Fault(kind="status", status=403, method="POST", path=r"/dispatches$")
    s = Scenario(faults=[refused]).pools([], [], [])
    result = ended_as(s.run(), "error")
    assert _error_titles(result.log)[0] == "error: GitHub API error"


def test_error_for_an_unexpected_exception_in_the_sequence(monkeypatch):
    def broken(*_args, **_kwargs):
        raise RuntimeError("startup exploded")

    monkeypatch.setattr(startup_module, "wait_for_startup", broken)
    s = Scenario().pools([], [], [])
    result = run_coordinator(s.world, s.clock, s.inputs, main=cli.main, post_step=False)
    ended_as(result, "error")
    assert _error_titles(result.log)[0] == "error: Unexpected error"


# -- before the sequence: the word is set however the step ends -------------------------------


@pytest.mark.parametrize(
    ("raised", "word"),
    [
        (RuntimeError("profiles exploded"), "error"),
        (Interrupted("SIGTERM"), "cancelled"),
        (KeyboardInterrupt(), "cancelled"),
    ],
    ids=["unexpected-exception", "signal", "keyboard-interrupt"],
)
def test_an_exception_before_the_sequence_still_sets_the_outcome(
    tmp_path: Path, monkeypatch, raised: BaseException, word: str
):
    """Nothing of ours caught it (its traceback stays), but the gate still reads a word."""

    def broken() -> None:
        raise raised

    monkeypatch.setattr(coordinate_module, "load_profiles", broken)
    s = Scenario().pools([], [], [])
    environ = coordinator_environ(s.world, s.inputs, tmp_path)
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(type(raised)):
        cli.main(["coordinate"], environ, clock=s.clock, session=s.world.session())
    assert read_key_values(tmp_path / "output") == {"outcome": word}
    assert s.world.ledger == []


def test_the_outcome_is_written_once_when_publishing_fails(tmp_path: Path, monkeypatch):
    """A bug after the result's outputs were written does not add a second, different word."""

    def publish_then_fail(result, reporter):
        publish(result, reporter)
        raise RuntimeError("after publishing")

    monkeypatch.setattr(coordinate_module, "publish", publish_then_fail)
    s = Scenario().pools([], FOREVER, FOREVER)
    environ = coordinator_environ(s.world, s.inputs, tmp_path)
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(RuntimeError):
        cli.main(["coordinate"], environ, clock=s.clock, session=s.world.session())
    text = (tmp_path / "output").read_text(encoding="utf-8")
    assert text.count("outcome<<") == 1
    assert read_key_values(tmp_path / "output")["outcome"] == "success"


def test_every_word_has_a_phrase_and_the_action_and_the_docs_list_every_word():
    action = (Path(__file__).resolve().parent.parent / "action.yml").read_text(encoding="utf-8")
    description = next(line for line in action.splitlines() if "How the step ended" in line)
    docs = (Path(__file__).resolve().parent.parent / "docs" / "how-it-works.md").read_text(
        encoding="utf-8"
    )
    assert set(PHRASES) == set(OUTCOMES)
    for word in OUTCOMES:
        assert f"{word} (" in description, word
        assert f"| `{word}` |" in docs, word
