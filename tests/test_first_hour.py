"""What a newcomer meets first (issue 48): each message says what to do next.

The token is named where the user is and never taken from a flag or repeated; `preflight
--simulate` passes without a token or a network and fails with its fix; typos get the name they
meant; a number out of range says its range. One behaviour spans the command line, the inputs and
the README, so it has this file.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.tools.lint import lint_files

ROOT = Path(__file__).resolve().parent.parent
SECRET = "ghp_not-a-real-token-but-never-repeat-it"
POOLS = {"INPUT_RUNNER-TYPE": "cpu"}
#: Every input `preflight` and `coordinate` need, and the repository; no token anywhere.
WITHOUT_TOKEN = {
    "INPUT_WORKFLOW": "runner-worker.yml",
    "INPUT_WORKFLOW-REF": "main",
    "INPUT_SOURCE-REF": "refs/heads/main",
    "INPUT_SOURCE-SHA": "0" * 40,
    **POOLS,
    "GITHUB_REPOSITORY": "my-org/my-repo",
}


def run(argv: list[str], environ: dict[str, str] | None = None) -> tuple[int, str]:
    """The command line as a person runs it, stdout and stderr together."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = cli.main(argv, environ or {}, clock=FakeClock())
    return code, out.getvalue()


# -- 1. the token ------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["preflight", "coordinate"])
def test_a_missing_token_says_how_to_give_one(command, no_network):
    environ = {**WITHOUT_TOKEN, "GITHUB_RUN_ID": "1", "GITHUB_RUN_ATTEMPT": "1"}
    session, _ = no_network
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main([command], environ, clock=FakeClock(), session=session)
    text = out.getvalue()
    assert code == 2
    assert "input 'token' is required and was not supplied" in text
    assert "GITHUB_TOKEN" in text
    assert "--token-env NAME" in text
    assert "`with:`" in text


@pytest.mark.parametrize("given", [["--token", SECRET], [f"--token={SECRET}"]])
def test_a_token_flag_is_answered_with_the_fix_never_the_value(given):
    code, text = run(["preflight", *given])
    assert code == 2
    assert SECRET not in text
    assert "there is no --token flag" in text
    assert "--token-env NAME" in text
    assert "usage:" not in text


def test_an_unknown_flags_value_is_never_repeated():
    code, text = run(["plan", "--secret-thing", SECRET])
    assert code == 2
    assert SECRET not in text
    assert "--secret-thing ..." in text


def test_the_token_is_read_from_the_variable_token_env_names_then_input_then_github(
    no_network,
):
    """`--token-env` names it; without it INPUT_TOKEN, then GITHUB_TOKEN: no 'required' error."""
    session, _ = no_network
    base = WITHOUT_TOKEN
    for argv, extra in (
        (["preflight"], {"GITHUB_TOKEN": "x" * 40}),
        (["preflight", "--token-env", "MY_TOKEN"], {"MY_TOKEN": "x" * 40}),
    ):
        out = io.StringIO()
        # the token was taken: the next thing preflight does is ask GitHub (refused here)
        with contextlib.redirect_stdout(out), pytest.raises(AssertionError, match="network"):
            cli.main(argv, {**base, **extra}, clock=FakeClock(), session=session)
        assert "input 'token'" not in out.getvalue()
    code, text = run(["preflight", "--token-env", "MY_TOKEN"], base)
    assert code == 2
    assert "was to come from MY_TOKEN (--token-env), which is not set" in text


# -- 2. preflight, offline ---------------------------------------------------------------------


def test_preflight_simulate_passes_with_no_token_and_no_network():
    code, text = run(["preflight", "--simulate"])
    assert code == 0, text
    assert "preflight: 7 passed, 0 failed" in text


def test_preflight_simulate_with_a_missing_child_fails_with_its_fix():
    code, text = run(["preflight", "--simulate", "--workflow", "missing.yml"])
    assert code == 1
    assert (
        "FAIL        child workflow: the child workflow file .github/workflows/missing.yml" in text
    )
    assert "Fix: commit the child workflow" in text


# -- 5. near misses ----------------------------------------------------------------------------


def test_an_abbreviated_flag_is_a_typo_with_a_suggestion_not_taken():
    code, text = run(["plan", "--runner-typ", "cpu"])
    assert code == 2
    assert "did you mean --runner-type?" in text


def test_an_unknown_input_variable_beside_known_ones_is_warned_of():
    code, text = run(["plan"], {**POOLS, "INPUT_RUNNER-TYPES": "gpu"})
    assert code == 0
    assert "INPUT_RUNNER-TYPES is not an input of this action" in text
    assert "did you mean runner-type" in text


def test_a_candidate_key_near_a_known_one_is_suggested():
    runners = json.dumps([{"group": "g", "label": "linux-amd64-cpu16"}])
    code, text = run(["plan", "--runners", runners], POOLS)
    assert code == 2
    assert "did you mean 'labels' for 'label'?" in text


def test_a_json_string_where_a_number_is_needed_says_so():
    runners = json.dumps(
        [{"group": "g", "labels": "linux-amd64-cpu16", "queue-timeout-minutes": "5"}]
    )
    code, text = run(["plan", "--runners", runners], POOLS)
    assert code == 2
    assert "is a JSON string ('5'); write the number without quotes" in text


@pytest.mark.parametrize("name", ["execution-timeout-minutes", "admission-timeout-minutes"])
def test_a_negative_whole_number_is_out_of_range_not_of_the_wrong_kind(name):
    code, text = run(["plan", f"--{name}", "-5"], POOLS)
    assert code == 2
    assert f"input '{name}' is out of range" in text
    assert "whole number" not in text


def test_runners_allowed_template_shows_labels_as_a_list():
    code, text = run(["plan", "--runners", "[]"], POOLS)
    assert code == 2
    assert '"labels": ["...", ...]' in text


def test_lint_suggests_the_input_a_misspelt_one_meant(tmp_path):
    good = ROOT / "examples"
    text = (good / "runner-check.yml").read_text(encoding="utf-8")
    assert "execution-timeout-minutes:" in text
    (tmp_path / "runner-check.yml").write_text(
        text.replace("execution-timeout-minutes:", "execution-timout-minutes:"), encoding="utf-8"
    )
    (tmp_path / "runner-worker.yml").write_text(
        (good / "runner-worker.yml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (finding,) = [
        f for f in lint_files(tmp_path / "runner-check.yml").findings if f.rule == "RQF211"
    ]
    assert "did you mean `execution-timeout-minutes`?" in finding.fix


# -- 8. the README's first screen --------------------------------------------------------------


def test_the_readmes_first_80_lines_name_the_default_pools_and_point_to_runners():
    first = "\n".join((ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:80])
    assert "The default pools are the original action's catalogue" in first
    assert "`runners`" in first
    assert "[Your own pools](#your-own-pools)" in first


def test_the_readme_says_how_long_the_first_test_run_takes():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "the first run, set-up included: about 4 min" in text
