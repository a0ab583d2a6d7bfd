"""Preflight: the child file checked before any dispatch, the `preflight` command, and the messages
that name the input and the fix."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.action.sequence import admission as quota
from runner_queue_fallback.action.sequence.child_workflow import child_findings, is_blocking
from runner_queue_fallback.core import errors
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.errors import (
    FIX_CHILD_FILE,
    FIX_CHILD_PERMISSIONS,
    FIX_COORDINATOR_PERMISSIONS,
    FIX_CREDENTIALS,
    FIX_WORKFLOW_REF,
)
from runner_queue_fallback.core.inputs import CHILD_INPUTS, env_name
from runner_queue_fallback.fake_github.faults import Fault, FaultPlan
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.preflight import DEPENDENT, LOW_QUOTA, UNVERIFIABLE_PERMISSION
from runner_queue_fallback.tools.simulate.steps import (
    PARENT_RUN_ID,
    SOURCE_REF,
    TOKEN,
    SimulationRun,
    run_coordinator,
)
from runner_queue_fallback.workflow.model import Finding
from tests.outside import Tamper, json_body, with_json

ROOT = Path(__file__).resolve().parent.parent
WORKER = ".github/workflows/runner-worker.yml"


class World:
    """A repository with the source ref, the parent run and one CPU16 pool; the child is up to the test."""

    def __init__(self, *, faults: tuple[Fault, ...] = ()) -> None:
        self.clock = FakeClock()
        self.github = FakeGitHub(self.clock, faults=FaultPlan(list(faults)))
        self.sha = self.github.add_ref(SOURCE_REF.removeprefix("refs/"))
        self.github.add_parent_run(PARENT_RUN_ID)
        self.github.add_pool("nv-cpu-general", "linux-amd64-cpu16", runners=1)
        self.inputs = {
            "workflow": "runner-worker.yml",
            "workflow-ref": "main",
            "source-ref": SOURCE_REF,
            "source-sha": self.sha,
            "runner-type": "cpu",
            "runners": '[{"group":"nv-cpu-general","labels":"linux-amd64-cpu16"}]',
            "execution-timeout-minutes": "15",
        }

    def coordinate(self) -> SimulationRun:
        return run_coordinator(self.github, self.clock, self.inputs, main=cli.main)

    def preflight(self, *flags: str, run_id: bool = True, token: str = TOKEN) -> tuple[int, str]:
        environ = {env_name(k): v for k, v in self.inputs.items()}
        environ |= {
            env_name("token"): token,
            "GITHUB_REPOSITORY": self.github.repository,
            "GITHUB_API_URL": self.github.api_url,
        }
        if run_id:
            environ |= {"GITHUB_RUN_ID": str(PARENT_RUN_ID), "GITHUB_RUN_ATTEMPT": "1"}
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = cli.main(
                ["preflight", *flags], environ, clock=self.clock, session=self.github.session()
            )
        return code, out.getvalue()

    def posts(self) -> list[str]:
        return [e.path for e in self.github.ledger if e.method != "GET"]

    def dispatches(self) -> list[str]:
        return [p for p in self.posts() if p.endswith("/dispatches")]


def _one_line(text: str) -> str:
    """The log with annotation escapes undone, so a message can be searched whole."""
    return text.replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")


# -- 1. the coordinator checks the child before its first dispatch ----------------------------


@pytest.mark.parametrize(
    ("child", "rule", "named"),
    [
        pytest.param({"inputs": CHILD_INPUTS[:-1]}, "RQF302", "`workload`", id="missing-workload"),
        pytest.param(
            {"inputs": (*CHILD_INPUTS, "extra"), "required": (*CHILD_INPUTS, "extra")},
            "RQF302",
            "`extra`",
            id="extra-required-input",
        ),
        pytest.param(
            {"dispatchable": False}, "RQF101", "`workflow_dispatch`", id="no-workflow-dispatch"
        ),
    ],
)
def test_a_broken_child_stops_the_coordinator_before_any_dispatch(child, rule, named):
    """Missing or extra required input, or no workflow_dispatch: exit 1, no POST, rule and input named."""
    world = World()
    world.github.add_workflow("runner-worker.yml", "main", **child)
    result = world.coordinate()
    assert result.exit_code == 1
    assert world.dispatches() == []
    assert world.posts() == []
    text = _one_line(result.log)
    assert f"{WORKER}:" in text
    assert rule in text
    assert named in text
    assert "nothing was dispatched" in text
    assert "fix:" in text


def test_the_message_gives_the_line_in_the_child_file():
    """The finding points at the line of the offending input in the child file."""
    world = World()
    world.github.add_workflow("runner-worker.yml", "main", inputs=CHILD_INPUTS[:-1])
    result = world.coordinate()
    assert re.search(rf"{re.escape(WORKER)}:5: RQF302 error", _one_line(result.log))


def test_a_conforming_child_sees_no_change():
    """The fake's default child and the example child: no warning, one dispatch, success."""
    world = World()
    world.github.add_workflow("runner-worker.yml", "main")
    result = world.coordinate()
    assert result.exit_code == 0
    assert len(world.dispatches()) == 1
    assert "::warning" not in result.log
    example = (ROOT / "examples" / "runner-worker.yml").read_text(encoding="utf-8")
    assert child_findings(WORKER, example) == []


def test_findings_that_do_not_block_are_warnings_and_the_dispatch_goes_ahead():
    """No timeout-minutes (RQF116) does not make the dispatch fail: a warning annotation."""
    world = World()
    world.github.add_workflow("runner-worker.yml", "main")
    text = world.github.commits[world.github.refs["heads/main"]][WORKER].content
    world.github.add_workflow(
        "runner-worker.yml", "main", content=text.replace("    timeout-minutes: 180\n", "")
    )
    result = world.coordinate()
    assert result.exit_code == 0
    assert len(world.dispatches()) == 1
    assert re.search(
        r"::warning file=\.github/workflows/runner-worker\.yml,line=\d+,title=RQF116", result.log
    )


@pytest.mark.parametrize(
    ("rule", "message", "blocks"),
    [
        ("RQF101", "the child is not `workflow_dispatch`; x", True),
        ("RQF101", "the child also runs on `push`; x", False),
        ("RQF103", "`run-name` must be ...", True),
        ("RQF104", "the child has 2 jobs", True),
        ("RQF105", "the job id is `build`", True),
        ("RQF112", "the guard is step 2", True),
        ("RQF302", "the child does not declare `workload`", True),
        ("RQF116", "no timeout", False),
        ("RQF117", "write permissions", False),
    ],
)
def test_which_rules_block(rule, message, blocks):
    """The rules whose breach makes the dispatch fail or unsafe block; the rest warn."""
    assert is_blocking(Finding(WORKER, 1, rule, "error", message, "fix")) is blocks


def test_the_child_file_costs_no_extra_request():
    """Blob SHA and content come from one contents request: the start costs what it did."""
    world = World()
    world.github.add_workflow("runner-worker.yml", "main")
    world.coordinate()
    contents = [e for e in world.github.ledger if "/contents/" in e.path]
    assert len(contents) == 1


# -- 3. messages that name the input and the fix ----------------------------------------------


def test_a_missing_child_file_names_workflow_and_workflow_ref():
    """404 on the child file: both inputs with their values, the path looked up, the fix."""
    world = World()
    world.github.add_workflow("runner-worker.yml", "main")
    world.inputs["workflow"] = "runner_worker.yml"
    result = world.coordinate()
    assert result.exit_code == 1
    assert world.posts() == []
    text = _one_line(result.log)
    assert ".github/workflows/runner_worker.yml" in text
    assert "input `workflow` is 'runner_worker.yml'" in text
    assert "input `workflow-ref` is 'main'" in text
    assert FIX_CHILD_FILE in text


def test_a_workflow_ref_that_is_neither_branch_nor_tag_says_both_were_looked_for():
    """`mian`: both refs/heads/mian and refs/tags/mian are named, and the fix."""
    world = World()
    world.github.add_workflow("runner-worker.yml", "main")
    world.inputs["workflow-ref"] = "mian"
    result = world.coordinate()
    assert result.exit_code == 1
    text = _one_line(result.log)
    assert "refs/heads/mian and refs/tags/mian" in text
    assert "neither a branch nor a tag" in text
    assert FIX_WORKFLOW_REF in text


def test_a_tag_as_workflow_ref_still_works():
    """The branch lookup's 404 is not an error when the tag exists."""
    world = World()
    world.github.add_workflow("runner-worker.yml", "main")
    world.github.add_ref("tags/v1", world.github.refs["heads/main"])
    world.inputs["workflow-ref"] = "v1"
    assert world.coordinate().exit_code == 0


def test_401_says_the_token_is_invalid_not_the_permissions():
    """Bad credentials: the fix is a valid token, not the permissions block."""
    world = World(faults=(Fault(kind="unauthorized"),))
    world.github.add_workflow("runner-worker.yml", "main")
    result = world.coordinate()
    text = _one_line(result.log)
    assert FIX_CREDENTIALS in text
    assert FIX_COORDINATOR_PERMISSIONS not in text


def test_403_for_the_coordinator_names_the_coordinator_permissions():
    """A refused read of the coordinator: its own job's permissions."""
    world = World(faults=(Fault(kind="forbidden", path="/git/ref/"),))
    world.github.add_workflow("runner-worker.yml", "main")
    result = world.coordinate()
    assert FIX_COORDINATOR_PERMISSIONS in _one_line(result.log)


def test_the_guards_403_names_the_childs_permissions():
    """The guard runs with the child's token: a 403 there is fixed in the child workflow."""
    world = World(faults=(Fault(kind="forbidden", path=r"/actions/runs/\d+$", start=5.0),))
    world.github.add_workflow("runner-worker.yml", "main")
    clock = world.clock
    environ = {
        env_name(
            "request-id"
        ): f"rqf-{PARENT_RUN_ID}-1-1-0123abcd",  # well-formed: the API is reached
        env_name("parent-run-id"): str(PARENT_RUN_ID),
        env_name("parent-run-attempt"): "1",
        env_name("source-ref"): SOURCE_REF,
        env_name("source-sha"): world.sha,
        env_name("token"): TOKEN,
        "GITHUB_REPOSITORY": world.github.repository,
        "GITHUB_RUN_ID": "999",
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_API_URL": world.github.api_url,
    }
    clock.advance(10.0)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["guard"], environ, clock=clock, session=world.github.session())
    text = _one_line(out.getvalue())
    assert code == 1
    assert FIX_CHILD_PERMISSIONS in text
    assert FIX_COORDINATOR_PERMISSIONS not in text
    assert "Resource not accessible by integration" in text  # GitHub's own message is kept


def test_after_dispatch_errors_keep_githubs_message_and_add_one_fix():
    """Every API error class ends in one `Fix:` sentence after GitHub's message."""
    for error_class in (
        errors.NotFound,
        errors.PermissionDenied,
        errors.Unauthorized,
        errors.Conflict,
        errors.Unprocessable,
        errors.ServerError,
        errors.GitHubAPIError,
    ):
        text = str(error_class("GET", "/repos/o/r/actions/runs/1", 418, "GitHub says no"))
        assert "GitHub says no" in text
        assert text.count("Fix:") == 1, error_class


def test_the_troubleshooting_guide_lists_every_message_with_its_fix():
    """docs/troubleshooting.md's list of fixes is the program's: each appears there word for word."""
    guide = (ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    text = " ".join(guide.split())
    for situation, fix in errors.TROUBLESHOOTING.items():
        assert " ".join(fix.split()) in text, situation


# -- 2. the preflight command -----------------------------------------------------------------


def test_preflight_passes_a_good_set_up_without_any_post():
    """Every check passes, exit 0, only GETs; it lists what only a dispatch can show."""
    world = World()
    world.github.add_workflow("runner-worker.yml", "main")
    code, text = world.preflight()
    assert code == 0, text
    assert world.posts() == []
    for name in (
        "GitHub API",
        "token",
        "parent run",
        "source ref",
        "workflow-ref",
        "child workflow",
        "API quota",
    ):
        assert re.search(rf"^  pass\s+{name}:", text, re.MULTILINE), name
    assert "Not checked (only a dispatch can show them):" in text
    assert UNVERIFIABLE_PERMISSION in text
    assert "runner group `nv-cpu-general` (linux-amd64-cpu16)" in text


def test_preflight_fails_a_broken_child_without_any_post():
    """A child missing `workload`: exit 1, the rule named, still no POST."""
    world = World()
    world.github.add_workflow("runner-worker.yml", "main", inputs=CHILD_INPUTS[:-1])
    code, text = world.preflight()
    assert code == 1
    assert world.posts() == []
    assert re.search(
        r"^  FAIL\s+child workflow:.*RQF302.*`workload`", _one_line(text), re.MULTILINE
    )
    assert UNVERIFIABLE_PERMISSION in text


def test_preflight_without_a_run_does_not_check_the_parent_and_accepts_flags():
    """From a terminal: no GITHUB_RUN_ID, inputs as flags; the parent run is not checked."""
    world = World()
    world.github.add_workflow("runner-worker.yml", "main")
    inputs, world.inputs = world.inputs, {}
    flags = [part for name, value in inputs.items() for part in (f"--{name}", value)]
    code, text = world.preflight(*flags, run_id=False)
    assert code == 0, text
    assert re.search(r"^  not checked parent run \(GITHUB_RUN_ID is not set\)$", text, re.MULTILINE)


def test_preflight_with_a_bad_token_stops_at_the_token():
    """401: one failed check naming the token, and no further reads."""
    world = World(faults=(Fault(kind="unauthorized"),))
    world.github.add_workflow("runner-worker.yml", "main")
    code, text = world.preflight()
    assert code == 1
    assert re.search(r"^  FAIL\s+token:", text, re.MULTILINE)
    assert FIX_CREDENTIALS in _one_line(text)
    assert len(world.github.ledger) == 1


def _verdicts(text: str) -> dict[str, str]:
    """Each check's verdict by its name, from the command's lines."""
    found = re.findall(r"^  (pass|FAIL|not checked) +([a-zA-Z -]+?)(?::| \()", text, re.MULTILINE)
    return {name: verdict for verdict, name in found}


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(Fault(kind="connection"), id="connection-refused"),
        pytest.param(Fault(kind="timeout"), id="timeout"),
        pytest.param(Fault(kind="status", status=503), id="503"),
    ],
)
def test_preflight_against_an_unreachable_server_passes_nothing(fault):
    """No usable reply: one FAIL naming the URL and the error; every other check not checked."""
    world = World(faults=(fault,))
    world.github.add_workflow("runner-worker.yml", "main")
    code, text = world.preflight()
    assert code == 1
    assert not re.search(r"^  pass", text, re.MULTILINE), text
    fails = re.findall(r"^  FAIL .*$", _one_line(text), re.MULTILINE)
    assert len(fails) == 1, fails
    assert fails[0].startswith(
        f"  FAIL        GitHub API: no usable reply from {world.github.api_url}"
    )
    verdicts = _verdicts(text)
    assert verdicts.pop("GitHub API") == "FAIL"
    assert verdicts == dict.fromkeys(("token", *DEPENDENT), "not checked"), verdicts
    assert "did not answer" in text


def test_preflight_with_a_refused_token_checks_nothing_that_depends_on_it():
    """401: the token FAILs and every later check says not checked, with the reason."""
    world = World(faults=(Fault(kind="unauthorized"),))
    world.github.add_workflow("runner-worker.yml", "main")
    code, text = world.preflight()
    assert code == 1
    verdicts = _verdicts(text)
    assert verdicts == {
        "GitHub API": "pass",
        "token": "FAIL",
        **dict.fromkeys(DEPENDENT, "not checked"),
    }, verdicts
    for name in DEPENDENT:
        assert f"not checked {name} (GitHub refused the token)" in text


def test_the_token_does_not_pass_when_no_read_succeeded():
    """403 on every read: GitHub answered, but no read showed the token works, so no pass."""
    world = World(faults=(Fault(kind="forbidden"),))
    world.github.add_workflow("runner-worker.yml", "main")
    code, text = world.preflight()
    assert code == 1
    assert _verdicts(text)["token"] == "not checked", text
    assert not re.search(r"^  pass\s+token", text, re.MULTILINE)


def test_the_child_check_is_listed_when_the_workflow_ref_check_fails():
    """workflow-ref not found: the child file is still listed, as not checked and why."""
    world = World()
    world.github.add_workflow("runner-worker.yml", "main")
    world.inputs["workflow-ref"] = "mian"
    _, text = world.preflight()
    assert "  not checked child workflow (the workflow-ref check failed)" in text
    assert _verdicts(text)["token"] == "pass"


def test_preflight_reports_a_moved_source_and_a_wrong_ref():
    """Source ref not at source-sha and an unknown workflow-ref: both fail, exit 1."""
    world = World()
    world.github.add_workflow("runner-worker.yml", "main")
    world.inputs["source-sha"] = "f" * 40
    world.inputs["workflow-ref"] = "mian"
    code, text = world.preflight()
    assert code == 1
    assert re.search(r"^  FAIL\s+source ref:", text, re.MULTILINE)
    assert re.search(r"^  FAIL\s+workflow-ref:.*refs/tags/mian", _one_line(text), re.MULTILINE)
    assert world.posts() == []


def test_preflight_bad_input_exits_2_without_a_request():
    """Input errors are the coordinator's, exit 2, no API request."""
    world = World()
    world.inputs["source-policy"] = "pinned"
    code, text = world.preflight()
    assert code == 2
    assert "input 'source-policy'" in text
    assert world.github.ledger == []


def test_preflight_warns_at_the_coordinators_quota_threshold():
    """The command's low-quota line uses the coordinator's own threshold."""
    assert quota.RESERVE_REQUESTS == LOW_QUOTA  # the two must agree


def test_a_child_file_served_without_its_content_is_dispatched_with_a_warning():
    """GitHub leaves out the content of a file over 1 MB: nothing to check, so say so and go on."""

    def no_content(method: str, path: str, reply: Reply, github: FakeGitHub) -> Reply | None:
        body = json_body(reply)
        if method != "GET" or "/contents/" not in path or not isinstance(body, dict):
            return None
        return with_json(reply, {**body, "content": "", "encoding": "none"})

    world = World()
    world.github.add_workflow("runner-worker.yml", "main")
    Tamper(world.github, [no_content]).install()
    result = world.coordinate()
    assert result.exit_code == 0, result.log
    assert "::warning title=Child workflow not checked::" in result.log
    assert len(world.dispatches()) == 1
