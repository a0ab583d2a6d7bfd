"""`lint`: a good pair is clean, each broken pair gives exactly its finding, and the CLI reports."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.core.actions_io import COORDINATOR_OUTPUTS
from runner_queue_fallback.core.outcome import OUTCOMES
from runner_queue_fallback.tools.lint import RULES, lint_directory, lint_files
from runner_queue_fallback.workflow.model import Finding

GOOD = Path(__file__).parent / "data" / "lint" / "good"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
FILES = {"c": "runner-check.yml", "w": "runner-worker.yml"}
SHA = "0123456789abcdef0123456789abcdef01234567"
GUARD_USES = f"      - uses: acme/runner-queue-fallback/guard@{SHA}\n"
GUARD_STEP = (
    GUARD_USES
    + "        with:\n"
    + "".join(
        f"          {name}: ${{{{ inputs.{name} }}}}\n"
        for name in (
            "request-id",
            "parent-run-id",
            "parent-run-attempt",
            "source-ref",
            "source-sha",
        )
    )
    + "          coordinator-workflow: runner-check.yml\n"
    + "          coordinator-ref: refs/heads/main\n"
)
WORKLOAD_INPUT = "      workload:\n        required: true\n        type: string\n"
COORDINATOR_USES = f"      - uses: acme/runner-queue-fallback@{SHA}\n"
ON_DISPATCH = "on:\n  workflow_dispatch:"
PINNED = "          source-policy: pinned-after-start\n"
HOSTED_LAST_RESORT = "          hosted-last-resort: ubuntu-24.04\n"
QUOTA_WAIT = "          guard-quota-wait-minutes: {}\n"


def _add(key: str, after: str, added: str) -> tuple[str, str, str]:
    """An edit that adds lines after `after`."""
    return (key, after, after + added)


# (rule, edits, expected): each edit is (file, old, new) on the good pair, `old` occurring once;
# each expected finding is (file, anchor): the first line of that file containing the anchor.
CATALOGUE = [
    pytest.param(
        "RQF000",
        [("w", "name: Runner worker\n", "name: [Runner worker\n")],
        [("w", "run-name:")],
        id="unclosed-flow-sequence",
    ),
    pytest.param(
        "RQF101",
        [("w", "on:\n  workflow_dispatch:", "on:\n  push:\n  workflow_dispatch:")],
        [("w", "push:")],
        id="child-also-on-push",
    ),
    pytest.param(
        "RQF102",
        [("w", "      runner:\n        required: true", "      runner:\n        required: false")],
        [("w", "required: false")],
        id="input-not-required",
    ),
    pytest.param(
        "RQF103",
        [("w", "run-name: ${{ inputs.request-id }}", "run-name: Runner worker")],
        [("w", "run-name:")],
        id="run-name-not-request-id",
    ),
    pytest.param(
        "RQF104",
        [
            (
                "w",
                "jobs:\n",
                "jobs:\n  prepare:\n    runs-on: ubuntu-latest\n    steps:\n      - run: x\n",
            )
        ],
        [("w", "jobs:")],
        id="two-jobs",
    ),
    pytest.param(
        "RQF105",
        [("w", "    name: worker", "    name: Worker")],
        [("w", "name: Worker")],
        id="job-name-not-worker",
    ),
    pytest.param(
        "RQF105",
        [("w", "  worker:\n", "  test:\n")],
        [("w", "  test:")],
        id="job-id-not-worker",
    ),
    pytest.param(
        "RQF106",
        [("w", "runs-on: ${{ fromJSON(inputs.runner) }}", "runs-on: ubuntu-latest")],
        [("w", "runs-on:")],
        id="runs-on-fixed",
    ),
    pytest.param(
        "RQF107",
        [
            (
                "w",
                "    timeout-minutes: 15\n",
                "    timeout-minutes: 15\n    strategy:\n      matrix:\n        n: [1, 2]\n",
            )
        ],
        [("w", "strategy:")],
        id="child-matrix",
    ),
    pytest.param(
        "RQF108",
        [("w", "    timeout-minutes: 15\n", "    timeout-minutes: 15\n    needs: prepare\n")],
        [("w", "needs:")],
        id="child-needs",
    ),
    pytest.param(
        "RQF109",
        [
            (
                "w",
                "    timeout-minutes: 15\n",
                "    timeout-minutes: 15\n    environment: production\n",
            )
        ],
        [("w", "environment:")],
        id="child-environment",
    ),
    pytest.param(
        "RQF110",
        [
            (
                "w",
                "    timeout-minutes: 15\n",
                "    timeout-minutes: 15\n    if: github.actor == 'me'\n",
            )
        ],
        [("w", "    if:")],
        id="child-job-if",
    ),
    pytest.param(
        "RQF111",
        [("w", "jobs:\n", "concurrency: runner-worker\njobs:\n")],
        [("w", "concurrency:")],
        id="child-workflow-concurrency",
    ),
    pytest.param(
        "RQF111",
        [("w", "    timeout-minutes: 15\n", "    timeout-minutes: 15\n    concurrency: worker\n")],
        [("w", "concurrency:")],
        id="child-job-concurrency",
    ),
    pytest.param(
        "RQF112",
        [("w", GUARD_USES, "      - run: make prepare\n" + GUARD_USES)],
        [("w", "guard@")],
        id="step-before-guard",
    ),
    pytest.param(
        "RQF112",
        [("w", GUARD_USES, GUARD_USES + "        if: github.event_name == 'workflow_dispatch'\n")],
        [("w", "        if:")],
        id="guard-with-if",
    ),
    pytest.param(
        "RQF112",
        [("w", GUARD_STEP, "")],
        [("w", "    steps:")],
        id="no-guard",
    ),
    pytest.param(
        "RQF113",
        [
            (
                "w",
                "parent-run-id: ${{ inputs.parent-run-id }}",
                "parent-run-id: ${{ github.run_id }}",
            )
        ],
        [("w", "parent-run-id: ${{ github")],
        id="guard-input-miswired",
    ),
    pytest.param(
        "RQF114",
        [
            (
                "w",
                "          ref: ${{ inputs.source-sha }}",
                "          ref: ${{ inputs.source-ref }}",
            )
        ],
        [("w", "          ref: ${{ inputs.source-ref }}")],
        id="checkout-by-ref-not-sha",
    ),
    pytest.param(
        "RQF115",
        [("w", "persist-credentials: false", "persist-credentials: true")],
        [("w", "persist-credentials:")],
        id="checkout-keeps-credentials",
    ),
    pytest.param(
        "RQF116",
        [("w", "    timeout-minutes: 15\n", "")],
        [("w", "  worker:")],
        id="child-without-timeout",
    ),
    pytest.param(
        "RQF117",
        [("w", "  actions: read\n", "  actions: write\n")],
        [("w", "actions: write")],
        id="child-can-write",
    ),
    pytest.param(
        "RQF117",
        [("w", "permissions:\n  contents: read\n  actions: read\n", "")],
        [("w", "  worker:")],
        id="child-without-permissions",
    ),
    pytest.param(
        "RQF118",
        [("w", "  contents: read\n  actions: read\n", "  contents: read\n")],
        [("w", "permissions:")],
        id="guard-cannot-read-runs",
    ),
    pytest.param(
        "RQF119",
        [("w", "        run: node", "        continue-on-error: true\n        run: node")],
        [("w", "continue-on-error:")],
        id="workload-continue-on-error",
    ),
    pytest.param(
        "RQF119",
        [
            (
                "w",
                "    timeout-minutes: 15\n",
                "    timeout-minutes: 15\n    continue-on-error: true\n",
            )
        ],
        [("w", "continue-on-error:")],
        id="worker-job-continue-on-error",
    ),
    pytest.param(
        "RQF119",
        [("w", GUARD_USES, GUARD_USES + "        continue-on-error: True\n")],
        [("w", "continue-on-error:")],
        id="guard-continue-on-error",
    ),
    pytest.param(
        "RQF120",
        [
            _add(
                "w",
                "          source-sha: ${{ inputs.source-sha }}\n",
                "          token: ${{ secrets.RUNNER_PAT }}\n",
            )
        ],
        [("w", "token:")],
        id="secret-in-guard",
    ),
    pytest.param(
        "RQF121",
        [("w", "          coordinator-ref: refs/heads/main\n", "")],
        [("w", "coordinator-workflow:")],
        id="guard-names-its-coordinator-but-not-its-ref",
    ),
    pytest.param(
        "RQF122",
        [
            _add(
                "w",
                "    timeout-minutes: 15\n",
                "    container:\n      image: nvidia/cuda:12.4.1-base\n",
            )
        ],
        [("w", "guard@")],
        id="composite-guard-in-a-container-job",
    ),
    pytest.param(
        "RQF123",
        [_add("w", "          coordinator-ref: refs/heads/main\n", QUOTA_WAIT.format("'61'"))],
        [("w", "guard-quota-wait-minutes:")],
        id="guard-quota-wait-past-an-hour",
    ),
    pytest.param(
        "RQF200",
        [("c", "acme/runner-queue-fallback@", "acme/other-action@")],
        [("c", "# A coordinator")],
        id="no-coordinator-step",
    ),
    pytest.param(
        "RQF201",
        [("c", "          runner-type: cpu\n", "")],
        [("c", "runner-queue-fallback@")],
        id="runner-type-missing",
    ),
    pytest.param(
        "RQF202",
        [("c", "      actions: write\n", "      actions: read\n")],
        [("c", "    permissions:")],
        id="coordinator-cannot-dispatch",
    ),
    pytest.param(
        "RQF203",
        [("c", "timeout-minutes: 250", "timeout-minutes: 60")],
        [("c", "timeout-minutes:")],
        id="coordinator-timeout-below-plan",
    ),
    pytest.param(
        "RQF203",
        [
            ("c", "timeout-minutes: 250", "timeout-minutes: 420"),
            ("c", "execution-timeout-minutes: '15'", "execution-timeout-minutes: '300'"),
            ("w", "timeout-minutes: 15", "timeout-minutes: 300"),
        ],
        [("c", "timeout-minutes:")],
        id="plan-exceeds-hosted-job-limit",
    ),
    pytest.param(
        "RQF204",
        [("c", "queue-policy: extended", "queue-policy: fastest")],
        [("c", "queue-policy:")],
        id="invalid-queue-policy",
    ),
    pytest.param(
        "RQF205",
        [("c", "workflow: runner-worker.yml", "workflow: workers/runner-worker.yml")],
        [("c", "workflow: workers")],
        id="workflow-not-a-file-name",
    ),
    pytest.param(
        "RQF206",
        [
            _add(
                "c",
                "          execution-timeout-minutes: '15'\n",
                "          source-policy: ${{ inputs.policy }}\n",
            )
        ],
        [("c", "source-policy:")],
        id="source-policy-from-expression",
    ),
    pytest.param(
        "RQF207",
        [
            _add(
                "c",
                "          execution-timeout-minutes: '15'\n",
                "          source-policy: pinned-after-start\n",
            ),
            ("c", "cancel-in-progress: false", "cancel-in-progress: true"),
        ],
        [("c", "cancel-in-progress:")],
        id="pinned-after-start-cancelled-by-push",
    ),
    pytest.param(
        "RQF208",
        [
            (
                "c",
                "source-sha: ${{ inputs.source-sha }}",
                "source-sha: ${{ github.event.pull_request.head.sha }}",
            )
        ],
        [("c", "source-sha: ${{ github")],
        id="source-sha-from-pull-request",
    ),
    pytest.param(
        "RQF209",
        [
            _add(
                "c",
                "          runner-type: cpu\n",
                '          workload: \'{"npm": "${{ secrets.NPM_TOKEN }}"}\'\n',
            )
        ],
        [("c", "workload:")],
        id="secret-in-workload",
    ),
    pytest.param(
        "RQF210",
        [
            (
                "c",
                "    runs-on: ubuntu-latest\n",
                "    strategy:\n      matrix:\n        shard: [1, 2]\n    runs-on: ubuntu-latest\n",
            )
        ],
        [("c", "strategy:")],
        id="coordinator-matrix-unbounded",
    ),
    pytest.param(
        "RQF211",
        [
            (
                "c",
                "          queue-policy: extended\n",
                "          queue-policy: extended\n          queue-polcy: standard\n",
            )
        ],
        [("c", "queue-polcy:")],
        id="unknown-coordinator-input",
    ),
    pytest.param(
        "RQF219",
        [
            (
                "c",
                "      - uses: acme/runner-queue-fallback@",
                "      - id: fallback\n        uses: acme/runner-queue-fallback@",
            ),
            _add(
                "c",
                "    timeout-minutes: 250\n",
                "    outputs:\n      gave-up: ${{ steps.fallback.outputs.outcome == 'no_runner' }}\n",
            ),
        ],
        [("c", "no_runner")],
        id="outcome-compared-with-a-word-it-never-takes",
    ),
    pytest.param(
        "RQF212",
        [("c", "runs-on: ubuntu-latest", "runs-on: self-hosted")],
        [("c", "runs-on:")],
        id="coordinator-on-any-self-hosted-runner",
    ),
    pytest.param(
        "RQF212",
        [("c", "runs-on: ubuntu-latest", "runs-on: [self-hosted, linux-amd64-cpu16]")],
        [("c", "runs-on:")],
        id="coordinator-on-a-pool-label",
    ),
    pytest.param(
        "RQF212",
        [
            (
                "c",
                "runs-on: ubuntu-latest\n",
                "runs-on:\n      group: nv-cpu-general\n      labels: linux-amd64-cpu16\n",
            )
        ],
        [("c", "runs-on:")],
        id="coordinator-in-a-runner-group",
    ),
    pytest.param(
        "RQF213",
        [("c", COORDINATOR_USES, "      - uses: actions/checkout@v4\n" + COORDINATOR_USES)],
        [("c", "actions/checkout")],
        id="coordinator-checks-out-source",
    ),
    pytest.param(
        "RQF213",
        [
            (
                "c",
                COORDINATOR_USES,
                "      - uses: actions/checkout@v4\n        with:\n"
                "          repository: ${{ github.repository }}\n"
                "          ref: ${{ inputs.source-sha }}\n" + COORDINATOR_USES,
            )
        ],
        [("c", "actions/checkout")],
        id="coordinator-checks-out-its-own-repository",
    ),
    pytest.param(
        "RQF214",
        [("c", COORDINATOR_USES, "      - run: make test\n" + COORDINATOR_USES)],
        [("c", "run: make test")],
        id="coordinator-runs-a-script",
    ),
    pytest.param(
        "RQF215",
        [
            ("c", ON_DISPATCH, "on:\n  pull_request:\n  workflow_dispatch:"),
            _add("c", "          execution-timeout-minutes: '15'\n", PINNED),
        ],
        [("c", "source-policy:")],
        id="pinned-after-start-on-pull-request",
    ),
    pytest.param(
        "RQF216",
        [
            ("c", ON_DISPATCH, "on:\n  pull_request:\n  workflow_dispatch:"),
            ("c", "source-sha: ${{ inputs.source-sha }}", "source-sha: ${{ github.sha }}"),
        ],
        [("c", "source-sha: ${{ github")],
        id="pull-request-sha-without-approval",
    ),
    pytest.param(
        "RQF216",
        [
            ("c", ON_DISPATCH, "on:\n  pull_request_target:\n  workflow_dispatch:"),
            ("c", "source-ref: ${{ inputs.source-ref }}", "source-ref: ${{ github.ref }}"),
        ],
        [("c", "source-ref: ${{ github")],
        id="pull-request-target-base-ref",
    ),
    pytest.param(
        "RQF217",
        [("c", "timeout-minutes: 250", "timeout-minutes: 400")],
        [("c", "timeout-minutes:")],
        id="hosted-coordinator-timeout-above-six-hours",
    ),
    pytest.param(
        "RQF218",
        [("c", "queue-timeout-minutes: '10'", "queue-timeout-minutes: '1.5'")],
        [("c", "queue-timeout-minutes:")],
        id="queue-deadline-under-two-minutes",
    ),
    pytest.param(
        "RQF220",
        [
            (
                "c",
                "          queue-timeout-minutes: '10'\n",
                (
                    "          queue-timeout-minutes: '10'\n"
                    '          runners: \'[{"labels": ["self-hosted", "Windows", "X64"]}]\'\n'
                ),
            )
        ],
        [("c", "runners:")],
        id="candidates-on-windows",
    ),
    pytest.param(
        "RQF221",
        [
            (
                "c",
                "          queue-timeout-minutes: '10'\n",
                (
                    "          queue-timeout-minutes: '10'\n"
                    '          runners: \'[{"labels": ["self-hosted", "Linux", "X64", '
                    '"${{ github.run_id }}"]}]\'\n'
                ),
            )
        ],
        [("c", "runners:")],
        id="runners-reads-the-coordinators-github-context",
    ),
    pytest.param(
        "RQF222",
        [
            _add(
                "c",
                "          runner-type: cpu\n",
                "          runners-token: ${{ vars.RUNNERS }}\n",
            )
        ],
        [("c", "runners-token:")],
        id="runners-token-from-a-variable",
    ),
    pytest.param(
        "RQF223",
        [
            _add(
                "c",
                "          runner-type: cpu\n",
                "          token: ${{ secrets.PAT }}\n"
                "          app-id: ${{ vars.APP_ID }}\n"
                "          app-private-key: ${{ secrets.APP_PRIVATE_KEY }}\n",
            )
        ],
        [("c", "token:")],
        id="token-beside-the-apps-credentials",
    ),
    pytest.param(
        "RQF301",
        [("c", "workflow: runner-worker.yml", "workflow: missing-worker.yml")],
        [("c", "workflow:")],
        id="child-file-missing",
    ),
    pytest.param(
        "RQF302",
        [("w", WORKLOAD_INPUT, "")],
        [("w", "    inputs:")],
        id="child-lacks-workload-input",
    ),
    pytest.param(
        "RQF302",
        [("w", WORKLOAD_INPUT, WORKLOAD_INPUT + "      shard:\n        required: false\n")],
        [("w", "shard:")],
        id="child-declares-extra-input",
    ),
    pytest.param(
        "RQF302",
        [("w", WORKLOAD_INPUT, WORKLOAD_INPUT + "      shard:\n        required: TRUE\n")],
        [("w", "shard:")],
        id="child-requires-extra-input",
    ),
    pytest.param(
        "RQF303",
        [("w", f"guard@{SHA}", "guard@89abcdef0123456789abcdef0123456789abcdef")],
        [("w", "guard@")],
        id="guard-from-another-commit",
    ),
    pytest.param(
        "RQF304",
        [("c", f"fallback@{SHA}", "fallback@main"), ("w", f"guard@{SHA}", "guard@main")],
        [("c", "fallback@main"), ("w", "guard@main")],
        id="both-at-main",
    ),
    pytest.param(
        "RQF305",
        [
            ("w", "timeout-minutes: 15", "timeout-minutes: 10"),
            # no quota wait: with the default 10 minutes, RQF123 (and RQF308) would say 10 is none
            _add("w", "          coordinator-ref: refs/heads/main\n", QUOTA_WAIT.format("'0'")),
        ],
        [("w", "timeout-minutes:")],
        id="child-timeout-below-execution-budget",
    ),
    pytest.param(
        "RQF306",
        [("w", "          coordinator-workflow: runner-check.yml\n", "")],
        [("w", "guard@")],
        id="guard-without-coordinator-workflow",
    ),
    pytest.param(
        "RQF306",
        [("w", "coordinator-workflow: runner-check.yml", "coordinator-workflow: ci.yml")],
        [("w", "coordinator-workflow:")],
        id="guard-names-another-coordinator",
    ),
    pytest.param(  # issue 33; its errors and notice: tests/test_hosted.py
        "RQF307",
        [
            _add("c", "          execution-timeout-minutes: '15'\n", HOSTED_LAST_RESORT),
            ("c", "timeout-minutes: 250", "timeout-minutes: 270"),  # one more candidate
        ],
        [("w", "    steps:")],
        id="hosted-last-resort-is-billed-and-runs-every-step",
    ),
    pytest.param(
        "RQF308",
        [
            _add("w", "          coordinator-ref: refs/heads/main\n", QUOTA_WAIT.format("'11'")),
            ("w", "timeout-minutes: 15", "timeout-minutes: 30"),
        ],
        [("c", "execution-timeout-minutes:")],
        id="execution-timeout-no-longer-than-the-guards-wait",
    ),
]


def _write_pair(tmp_path: Path, edits=()) -> dict[str, str]:
    texts = {key: (GOOD / name).read_text(encoding="utf-8") for key, name in FILES.items()}
    for key, old, new in edits:
        assert texts[key].count(old) == 1, f"{old!r} must occur once in {FILES[key]}"
        texts[key] = texts[key].replace(old, new)
    for key, name in FILES.items():
        (tmp_path / name).write_text(texts[key], encoding="utf-8")
    return texts


def _line(text: str, anchor: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), start=1) if anchor in line)


def _found(result) -> set[tuple[str, str, int]]:
    return {(f.rule, Path(f.path).name, f.line) for f in result.findings}


def test_the_good_pair_is_clean():
    """The spec's example pair, pinned to one SHA and with plan's timeout, has no finding."""
    result = lint_files(GOOD / FILES["c"])
    assert result.findings == []
    assert result.coordinators == (GOOD / FILES["c"],)


def test_the_good_pair_is_clean_when_both_files_are_given():
    assert lint_files(GOOD / FILES["c"], GOOD / FILES["w"]).findings == []


@pytest.mark.parametrize(("rule", "edits", "expected"), CATALOGUE)
def test_each_broken_pair_gives_exactly_its_finding(tmp_path, rule, edits, expected):
    """One edit to the good pair breaks one rule, reported at the line it concerns."""
    texts = _write_pair(tmp_path, edits)
    result = lint_files(tmp_path / FILES["c"])
    want = {(rule, FILES[key], _line(texts[key], anchor)) for key, anchor in expected}
    assert _found(result) == want, "\n".join(f.text() for f in result.findings)
    assert all(f.message and f.fix for f in result.findings)


def test_the_catalogue_covers_every_rule():
    assert {case.values[0] for case in CATALOGUE} == set(RULES)


@pytest.mark.parametrize(
    ("wait", "child", "found"),
    [
        ("'11'", 15, {"RQF123", "RQF308"}),  # 2 + 11 + 2 = 15: neither limit leaves room
        ("'10'", 15, set()),  # 14 minutes at most: both leave one
        ("'0'", 4, {"RQF305"}),  # no wait: only the child's usual rule
        ("${{ vars.GUARD_WAIT }}", 15, set()),  # not known before the run
    ],
    ids=["both-full", "room-left", "no-wait", "expression"],
)
def test_the_guards_quota_wait_counts_against_both_timeouts(tmp_path, wait, child, found):
    """A wait that fills the child's timeout fills the execution timeout too (RQF305 holds)."""
    edits = [
        _add("w", "          coordinator-ref: refs/heads/main\n", QUOTA_WAIT.format(wait)),
        ("w", "timeout-minutes: 15", f"timeout-minutes: {child}"),
    ]
    _write_pair(tmp_path, edits)
    findings = lint_files(tmp_path / FILES["c"]).findings
    assert {f.rule for f in findings} == found, "\n".join(f.text() for f in findings)
    assert all(f.level == "warning" for f in findings)
    if found == {"RQF123", "RQF308"}:
        assert all("15" in f.message and "guard-quota-wait-minutes" in f.fix for f in findings)


# Rules whose level depends on the case: (edits, the one finding's rule and level).
LEVELS = [
    pytest.param(
        [("w", "        run: node", "        continue-on-error: true\n        run: node")],
        ("RQF119", "warning"),
        id="continue-on-error-on-an-ordinary-step-warns",
    ),
    pytest.param(
        [
            (
                "w",
                "    timeout-minutes: 15\n",
                "    timeout-minutes: 15\n    continue-on-error: true\n",
            )
        ],
        ("RQF119", "error"),
        id="continue-on-error-on-the-job-fails",
    ),
    pytest.param(
        [("w", GUARD_USES, GUARD_USES + "        continue-on-error: true\n")],
        ("RQF119", "error"),
        id="continue-on-error-on-the-guard-fails",
    ),
    pytest.param(
        [("w", WORKLOAD_INPUT, WORKLOAD_INPUT + "      shard:\n        required: false\n")],
        ("RQF302", "warning"),
        id="extra-optional-input-warns",
    ),
    pytest.param(
        [
            (
                "w",
                WORKLOAD_INPUT,
                WORKLOAD_INPUT + "      shard:\n        required: true\n        default: '1'\n",
            )
        ],
        ("RQF302", "warning"),
        id="extra-required-input-with-default-warns",
    ),
    pytest.param(
        [("w", WORKLOAD_INPUT, WORKLOAD_INPUT + "      shard:\n        required: true\n")],
        ("RQF302", "error"),
        id="extra-required-input-fails",
    ),
    pytest.param(
        [("w", WORKLOAD_INPUT, "")],
        ("RQF302", "error"),
        id="missing-input-fails",
    ),
    pytest.param(
        [("c", "runs-on: ubuntu-latest", "runs-on: self-hosted")],
        ("RQF212", "error"),
        id="self-hosted-alone-fails",
    ),
    pytest.param(
        [("c", "runs-on: ubuntu-latest", "runs-on: [self-hosted, rqf-coordinator]")],
        ("RQF212", "warning"),
        id="self-hosted-with-own-label-warns",
    ),
    pytest.param(
        [("c", COORDINATOR_USES, "      - uses: actions/checkout@v4\n" + COORDINATOR_USES)],
        ("RQF213", "error"),
        id="coordinator-checkout-fails",
    ),
    pytest.param(
        [("c", COORDINATOR_USES, "      - run: make test\n" + COORDINATOR_USES)],
        ("RQF214", "warning"),
        id="coordinator-run-step-warns",
    ),
    pytest.param(
        [
            ("c", ON_DISPATCH, "on:\n  pull_request:\n  workflow_dispatch:"),
            _add("c", "          execution-timeout-minutes: '15'\n", PINNED),
        ],
        ("RQF215", "error"),
        id="pinned-after-start-on-pull-request-fails",
    ),
    pytest.param(
        [
            ("c", ON_DISPATCH, "on:\n  pull_request:\n  workflow_dispatch:"),
            ("c", "source-sha: ${{ inputs.source-sha }}", "source-sha: ${{ github.sha }}"),
        ],
        ("RQF216", "warning"),
        id="pull-request-sha-warns",
    ),
    pytest.param(
        [("c", "runs-on: ubuntu-latest", "runs-on: windows-latest"), ("c", ": 250", ": 400")],
        ("RQF217", "warning"),
        id="hosted-timeout-above-six-hours-warns",
    ),
    pytest.param(
        [
            ("c", "timeout-minutes: 250", "timeout-minutes: 420"),
            ("c", "execution-timeout-minutes: '15'", "execution-timeout-minutes: '300'"),
            ("w", "timeout-minutes: 15", "timeout-minutes: 300"),
        ],
        ("RQF203", "error"),
        id="plan-above-hosted-limit-fails",
    ),
]


@pytest.mark.parametrize(("edits", "expected"), LEVELS)
def test_each_finding_has_the_level_its_case_deserves(tmp_path, edits, expected):
    _write_pair(tmp_path, edits)
    findings = lint_files(tmp_path / FILES["c"]).findings
    assert [(f.rule, f.level) for f in findings] == [expected], "\n".join(
        f.text() for f in findings
    )


@pytest.mark.parametrize(
    "edits",
    [
        pytest.param(
            [
                (
                    "w",
                    "    timeout-minutes: 15\n",
                    "    timeout-minutes: 15\n    continue-on-error: False\n",
                )
            ],
            id="job-continue-on-error-False",
        ),
        pytest.param(
            [("w", "        run: node", "        continue-on-error: FALSE\n        run: node")],
            id="step-continue-on-error-FALSE",
        ),
        pytest.param(
            [("w", "persist-credentials: false", "persist-credentials: False")],
            id="persist-credentials-False",
        ),
        pytest.param(
            [("w", "persist-credentials: false", "persist-credentials: FALSE")],
            id="persist-credentials-FALSE",
        ),
        pytest.param(
            [
                (
                    "w",
                    "      runner:\n        required: true",
                    "      runner:\n        required: True",
                )
            ],
            id="required-True",
        ),
        pytest.param(
            [
                _add("c", "          execution-timeout-minutes: '15'\n", PINNED),
                ("c", "cancel-in-progress: false", "cancel-in-progress: FALSE"),
            ],
            id="cancel-in-progress-FALSE",
        ),
        pytest.param(
            [
                (
                    "c",
                    COORDINATOR_USES,
                    "      - uses: actions/checkout@v4\n        with:\n"
                    "          repository: acme/release-tools\n" + COORDINATOR_USES,
                )
            ],
            id="coordinator-checks-out-another-repository",
        ),
        pytest.param(
            [("c", "runs-on: ubuntu-latest", "runs-on: ${{ matrix.os }}")],
            id="coordinator-runs-on-expression",
        ),
        pytest.param(
            [("c", "timeout-minutes: 250", "timeout-minutes: 360")],
            id="hosted-timeout-of-exactly-six-hours",
        ),
        pytest.param(
            [
                ("c", ON_DISPATCH, "on:\n  push:\n  workflow_dispatch:"),
                ("c", "source-sha: ${{ inputs.source-sha }}", "source-sha: ${{ github.sha }}"),
                ("c", "source-ref: ${{ inputs.source-ref }}", "source-ref: ${{ github.ref }}"),
                _add("c", "          execution-timeout-minutes: '15'\n", PINNED),
            ],
            id="push-with-run-ref-and-pinned-policy",
        ),
    ],
)
def test_accepted_spellings_and_setups_give_no_finding(tmp_path, edits):
    """YAML booleans in any case, a tools checkout, push-triggered cache preparation."""
    _write_pair(tmp_path, edits)
    findings = lint_files(tmp_path / FILES["c"]).findings
    assert findings == [], "\n".join(f.text() for f in findings)


def test_pull_request_head_sha_is_pr_controlled_not_just_unapproved(tmp_path):
    """The head SHA is an RQF208 error under any trigger; RQF216 is only for github.sha/ref."""
    _write_pair(
        tmp_path,
        [
            ("c", ON_DISPATCH, "on:\n  pull_request_target:\n  workflow_dispatch:"),
            (
                "c",
                "source-sha: ${{ inputs.source-sha }}",
                "source-sha: ${{ github.event.pull_request.head.sha }}",
            ),
        ],
    )
    findings = lint_files(tmp_path / FILES["c"]).findings
    assert [(f.rule, f.level) for f in findings] == [("RQF208", "error")]


def test_the_hosted_limit_finding_says_why_and_how(tmp_path):
    _write_pair(
        tmp_path,
        [
            ("c", "execution-timeout-minutes: '15'", "execution-timeout-minutes: '300'"),
            ("w", "timeout-minutes: 15", "timeout-minutes: 300"),
        ],
    )
    (finding,) = lint_files(tmp_path / FILES["c"]).findings
    assert finding.rule == "RQF203"
    assert "need at least 408" in finding.message
    assert "after 360 minutes" in finding.message
    assert "self-hosted runner" in finding.fix
    assert "shorten the queues/execution timeout" in finding.fix


def test_a_self_hosted_coordinator_may_exceed_six_hours(tmp_path):
    """Only the RQF212 warning for the own label: no hosted limit on a self-hosted runner."""
    _write_pair(
        tmp_path,
        [
            ("c", "runs-on: ubuntu-latest", "runs-on: [self-hosted, rqf-coordinator]"),
            ("c", "timeout-minutes: 250", "timeout-minutes: 540"),  # 408 + the quota's 125
            ("c", "execution-timeout-minutes: '15'", "execution-timeout-minutes: '300'"),
            ("w", "timeout-minutes: 15", "timeout-minutes: 300"),
        ],
    )
    findings = lint_files(tmp_path / FILES["c"]).findings
    assert [(f.rule, f.level) for f in findings] == [("RQF212", "warning")]


@pytest.mark.parametrize(
    ("value", "rules"),
    [
        ("'\u00b2'", {"RQF204"}),  # '²' passes str.isdigit but is no number of minutes
        ("'0'", {"RQF204"}),
        ("${{ inputs.minutes }}", {"RQF203"}),  # the notice that the timeout is not checked
    ],
)
def test_the_execution_budget_is_read_as_the_action_reads_it(tmp_path, value, rules):
    """An invalid or dynamic budget is reported once and never compared with the child's."""
    _write_pair(
        tmp_path, [("c", "execution-timeout-minutes: '15'", f"execution-timeout-minutes: {value}")]
    )
    findings = lint_files(tmp_path / FILES["c"]).findings
    assert {f.rule for f in findings} == rules, "\n".join(f.text() for f in findings)


def test_the_timeout_finding_names_the_number_plan_computes(tmp_path):
    _write_pair(tmp_path, [("c", "timeout-minutes: 250", "timeout-minutes: 60")])
    (finding,) = lint_files(tmp_path / FILES["c"]).findings
    assert "need at least 123" in finding.message
    assert "timeout-minutes: 123" in finding.fix


def test_pool_inputs_from_expressions_skip_the_timeout_rule_with_a_notice(tmp_path):
    _write_pair(tmp_path, [("c", "runner-type: cpu", "runner-type: ${{ inputs.type }}")])
    (finding,) = lint_files(tmp_path / FILES["c"]).findings
    assert (finding.rule, finding.level) == ("RQF203", "notice")
    assert "runner-type" in finding.message


def test_a_child_given_explicitly_must_be_the_one_workflow_names(tmp_path):
    _write_pair(tmp_path)
    other = tmp_path / "other-worker.yml"
    other.write_text((tmp_path / FILES["w"]).read_text(encoding="utf-8"), encoding="utf-8")
    result = lint_files(tmp_path / FILES["c"], other)
    assert {(f.rule, Path(f.path).name) for f in result.findings} == {("RQF205", FILES["c"])}


def test_the_local_action_forms_count(tmp_path):
    """`uses: ./` is the coordinator and `./guard` the guard, both from the local checkout."""
    _write_pair(
        tmp_path,
        [
            ("c", f"acme/runner-queue-fallback@{SHA}", "./"),
            ("w", f"acme/runner-queue-fallback/guard@{SHA}", "./guard"),
        ],
    )
    result = lint_files(tmp_path / FILES["c"])
    assert result.findings == []
    assert result.coordinators == (tmp_path / FILES["c"],)


@pytest.mark.parametrize(
    "guard",
    [
        f"acme/runner-queue-fallback/guard@{SHA}",
        f"acme/runner-queue-fallback/guard/docker@{SHA}",
        "./guard",
        "./guard/docker",
        "./guard/docker/",
    ],
    ids=["composite", "docker", "local-composite", "local-docker", "local-docker-slash"],
)
def test_either_guard_form_is_the_guard(tmp_path, guard):
    """The composite guard (guard/) and the Docker guard (guard/docker) both count as the guard."""
    edits = [("w", f"acme/runner-queue-fallback/guard@{SHA}", guard)]
    if guard.startswith("./"):  # both actions from the same place: the local checkout
        edits.append(("c", f"acme/runner-queue-fallback@{SHA}", "./"))
    _write_pair(tmp_path, edits)
    assert lint_files(tmp_path / FILES["c"]).findings == []


def test_the_docker_guard_after_another_step_is_not_first(tmp_path):
    texts = _write_pair(
        tmp_path,
        [
            ("w", "guard@", "guard/docker@"),
            ("w", "    steps:\n", "    steps:\n      - run: echo before\n"),
        ],
    )
    result = lint_files(tmp_path / FILES["c"])
    assert _found(result) == {("RQF112", FILES["w"], _line(texts["w"], "guard/docker@"))}


@pytest.mark.parametrize("path", ["guard/dockerx", "guard/other", "docker"])
def test_another_subfolder_of_the_action_is_not_a_guard(tmp_path, path):
    """Only guard/ and guard/docker are guards: anything else leaves the child unguarded."""
    _write_pair(tmp_path, [("w", "runner-queue-fallback/guard@", f"runner-queue-fallback/{path}@")])
    rules = {f.rule for f in lint_files(tmp_path / FILES["c"]).findings}
    assert "RQF112" in rules


def test_a_tag_is_pinned_enough(tmp_path):
    _write_pair(
        tmp_path,
        [("c", f"fallback@{SHA}", "fallback@v1.2.0"), ("w", f"guard@{SHA}", "guard@v1.2.0")],
    )
    assert lint_files(tmp_path / FILES["c"]).findings == []


def test_the_on_key_in_all_three_forms(tmp_path):
    """`on:` is read as the string key it is written as, never YAML 1.1's boolean True."""
    text = (GOOD / FILES["w"]).read_text(encoding="utf-8")
    start, end = text.index("on:\n"), text.index("permissions:\n")
    for form in ("on: workflow_dispatch\n", "on: [workflow_dispatch]\n", '"on": [push]\n'):
        _write_pair(tmp_path)
        (tmp_path / FILES["w"]).write_text(text[:start] + form + text[end:], encoding="utf-8")
        rules = {f.rule for f in lint_files(tmp_path / FILES["c"]).findings}
        assert rules == ({"RQF101"} if "push" in form else {"RQF302"})


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason="examples/ has not landed yet")
def test_every_example_coordinator_lints_without_errors():
    result = lint_directory(EXAMPLES)
    assert result.coordinators, "examples/ holds no coordinator workflow"
    assert result.errors == [], "\n".join(f.text() for f in result.errors)


def _run(argv: list[str], capsys) -> tuple[int, str]:
    code = cli.main(argv, environ={})
    return code, capsys.readouterr().out


def test_cli_text_format_and_exit_code(tmp_path, capsys):
    _write_pair(tmp_path, [("w", "persist-credentials: false", "persist-credentials: true")])
    code, out = _run(["lint", str(tmp_path / FILES["c"]), str(tmp_path / FILES["w"])], capsys)
    assert code == 1
    first = out.splitlines()[0]
    assert re.fullmatch(
        rf"{re.escape(str(tmp_path / FILES['w']))}:\d+: RQF115 error: .+ \(fix: .+\)", first
    )
    assert (
        out.splitlines()[-1] == "lint: 1 error, 0 warnings, 0 notices in 1 coordinator workflow(s)"
    )


def test_cli_github_format_annotates_errors_and_fails(tmp_path, capsys):
    _write_pair(
        tmp_path, [("w", "runs-on: ${{ fromJSON(inputs.runner) }}", "runs-on: ubuntu-latest")]
    )
    code, out = _run(["lint", str(tmp_path / FILES["c"]), "--format", "github"], capsys)
    assert code == 1
    line = _line((tmp_path / FILES["w"]).read_text(encoding="utf-8"), "runs-on:")
    path = str(tmp_path / FILES["w"]).replace(":", "%3A").replace(",", "%2C")
    assert out.splitlines()[0].startswith(f"::error file={path},line={line},title=RQF106::")


def test_cli_warnings_alone_do_not_fail(tmp_path, capsys):
    _write_pair(
        tmp_path, [("c", f"fallback@{SHA}", "fallback@main"), ("w", f"guard@{SHA}", "guard@main")]
    )
    code, out = _run(["lint", str(tmp_path / FILES["c"]), "--format", "github"], capsys)
    assert code == 0
    assert [line.split(" ", 1)[0] for line in out.splitlines()[:2]] == ["::warning", "::warning"]


def test_cli_clean_pair_exits_zero(capsys):
    code, out = _run(["lint", str(GOOD / FILES["c"])], capsys)
    assert (code, out) == (
        0,
        "lint: 0 errors, 0 warnings, 0 notices in 1 coordinator workflow(s)\n",
    )


def test_cli_directory_mode_finds_coordinators_and_their_children(tmp_path, capsys, monkeypatch):
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    _write_pair(workflows, [("w", "persist-credentials: false", "persist-credentials: true")])
    (workflows / "ci.yaml").write_text("on: push\njobs:\n  test:\n    runs-on: x\n    steps: []\n")
    monkeypatch.chdir(tmp_path)
    code, out = _run(["lint"], capsys)
    assert code == 1
    assert out.startswith(".github/workflows/runner-worker.yml:")
    assert "RQF115" in out
    assert "in 1 coordinator workflow(s)" in out


def test_cli_directory_mode_with_dir_and_nothing_to_lint(tmp_path, capsys):
    """Nothing to check is a usage problem: it says so and exits 2, never a silent pass."""
    (tmp_path / "ci.yml").write_text("on: push\njobs: {}\n")
    code, out = _run(["lint", "--dir", str(tmp_path)], capsys)
    assert code == 2
    assert out.startswith("error: nothing to check: no workflow in")
    assert "uses the coordinator" in out


def test_cli_usage_problems_exit_two(tmp_path, capsys):
    assert _run(["lint", "--dir", str(tmp_path / "absent")], capsys)[0] == 2
    assert _run(["lint", str(tmp_path / "absent.yml")], capsys)[0] == 2
    assert _run(["lint", "a", "b", "c"], capsys)[0] == 2
    assert _run(["lint", str(GOOD / FILES["c"]), "--dir", str(GOOD)], capsys)[0] == 2


def test_cli_prints_the_rule_table(capsys):
    code, out = _run(["lint", "--rules"], capsys)
    assert code == 0
    assert all(f"| {rule} |" in out for rule in RULES)


# -- RQF203 as a warning: the time a short API quota may add (issue 27) -------------------------


def _timeout_findings(tmp_path: Path, edits: list[tuple[str, str, str]]) -> list[Finding]:
    _write_pair(tmp_path, edits)
    return [f for f in lint_files(tmp_path / FILES["c"]).findings if f.rule == "RQF203"]


def test_a_timeout_covering_the_minimum_but_not_the_quotas_extra_warns(tmp_path):
    """135 covers plan's 123 but not its possible extra of 125: raise it (no admission would do)."""
    (finding,) = _timeout_findings(
        tmp_path, [("c", "timeout-minutes: 250", "timeout-minutes: 135")]
    )
    assert finding.level == "warning"
    assert "timeout-minutes 135 covers `plan`'s minimum 123" in finding.message
    assert "possible extra of 125 min" in finding.message
    assert "reach the job's end" in finding.message
    assert finding.fix == "set `timeout-minutes: 248` or more on job `runner-check`"


def test_the_warning_names_the_lower_admission_timeout_that_would_fit(tmp_path):
    """200 = 123 + 12 of admission + 5 of spread + one reset of 60."""
    (finding,) = _timeout_findings(
        tmp_path, [("c", "timeout-minutes: 250", "timeout-minutes: 200")]
    )
    assert finding.level == "warning"
    assert "lower `admission-timeout-minutes` to '12'" in finding.fix


def test_a_lower_admission_timeout_that_fits_gives_no_warning(tmp_path):
    admission = "          admission-timeout-minutes: '12'\n"
    edits = [
        ("c", "timeout-minutes: 250", "timeout-minutes: 200"),
        _add("c", "          execution-timeout-minutes: '15'\n", admission),
    ]
    assert _timeout_findings(tmp_path, edits) == []


def test_past_six_hours_the_warning_says_a_hosted_coordinator_cannot_cover_it(tmp_path):
    """Minimum 288 (180 of execution) plus 125 passes 360: admission 7 and 360 would fit."""
    edits = [
        ("c", "timeout-minutes: 250", "timeout-minutes: 300"),
        ("c", "execution-timeout-minutes: '15'", "execution-timeout-minutes: '180'"),
        ("w", "timeout-minutes: 15", "timeout-minutes: 180"),
    ]
    (finding,) = _timeout_findings(tmp_path, edits)
    assert finding.level == "warning"
    assert "minimum plus extra is 413 minutes" in finding.message
    assert "more than a GitHub-hosted coordinator may run (360)" in finding.message
    assert "`admission-timeout-minutes: '7'` and `timeout-minutes: 360`" in finding.fix
    assert "self-hosted runner" in finding.fix


# -- RQF218: a queue deadline under 2 minutes (issue 28) ------------------------------------------

EXPLICIT_RUNNERS = (
    "          runners: >-\n"
    '            [{"group":"nv-cpu-general","labels":"linux-amd64-cpu16"},\n'
    '             {"group":"nv-cpu-general","labels":"linux-amd64-cpu8","queue-timeout-minutes":1}]\n'
)


def _rqf218(tmp_path: Path, edits: list[tuple[str, str, str]]) -> list[Finding]:
    _write_pair(tmp_path, edits)
    result = lint_files(tmp_path / FILES["c"])
    assert not [f for f in result.findings if f.rule == "RQF204"], "the deadline is allowed"
    return [f for f in result.findings if f.rule == "RQF218"]


def test_rqf218_a_deadline_under_two_minutes_warns_and_says_why(tmp_path):
    """1 minute is the spec's minimum, still valid; lint explains the broker and the re-queue."""
    (finding,) = _rqf218(
        tmp_path, [("c", "queue-timeout-minutes: '10'", "queue-timeout-minutes: '1'")]
    )
    assert finding.level == "warning"
    assert "allowed (the minimum is 1)" in finding.message
    assert "only after about 60 s" in finding.message
    assert (
        "re-queues a job whose assigned runner does not pick it up within 60 s" in finding.message
    )
    assert "2 or more" in finding.fix


def test_rqf218_two_minutes_is_enough(tmp_path):
    assert (
        _rqf218(tmp_path, [("c", "queue-timeout-minutes: '10'", "queue-timeout-minutes: '2'")])
        == []
    )


def test_rqf218_a_short_deadline_inside_runners_is_reported_at_runners(tmp_path):
    """The action-level deadline is 10; the second candidate's own deadline is 1 minute."""
    edits = [_add("c", "          queue-timeout-minutes: '10'\n", EXPLICIT_RUNNERS)]
    texts = _write_pair(tmp_path, edits)
    (finding,) = _rqf218(tmp_path, edits)
    assert finding.line == _line(texts["c"], "runners:")
    assert "candidate 2 (nv-cpu-general / linux-amd64-cpu8, 1 min)" in finding.message
    assert "candidate 1" not in finding.message


# RQF122: the composite guard in a `container:` job runs on the image's Python (if any).
CUDA = "nvidia/cuda:12.4.1-base-ubuntu22.04"
IN_CONTAINER = (
    "    container:\n      image: {image}\n      env:\n        NVIDIA_VISIBLE_DEVICES: x\n"
)


def _rqf122(tmp_path: Path, edits) -> list[Finding]:
    _write_pair(tmp_path, edits)
    findings = lint_files(tmp_path / FILES["c"]).findings
    assert {f.rule for f in findings} <= {"RQF122"}, [f.text() for f in findings]
    return findings


def _container_job(image: str = CUDA) -> tuple[str, str, str]:
    return _add("w", "    timeout-minutes: 15\n", IN_CONTAINER.format(image=image))


def test_rqf122_the_composite_guard_in_a_container_job_warns_and_names_the_docker_form(tmp_path):
    (finding,) = _rqf122(tmp_path, [_container_job()])
    assert finding.level == "warning"
    assert "runs inside the job's image" in finding.message
    assert "python3 >= 3.11" in finding.message
    assert "guard/docker@" in finding.fix
    assert "# rqf: python3.11+" in finding.fix


@pytest.mark.parametrize(
    "guard",
    [f"acme/runner-queue-fallback/guard/docker@{SHA}", "./guard/docker", "./guard/docker/"],
    ids=["docker", "local-docker", "local-docker-slash"],
)
def test_rqf122_the_docker_guard_in_a_container_job_does_not_warn(tmp_path, guard):
    edits = [_container_job(), ("w", f"acme/runner-queue-fallback/guard@{SHA}", guard)]
    if guard.startswith("./"):
        edits.append(("c", f"acme/runner-queue-fallback@{SHA}", "./"))
    assert _rqf122(tmp_path, edits) == []


def test_rqf122_the_local_composite_guard_warns_too(tmp_path):
    edits = [
        _container_job(),
        ("w", f"acme/runner-queue-fallback/guard@{SHA}", "./guard"),
        ("c", f"acme/runner-queue-fallback@{SHA}", "./"),
    ]
    assert [f.rule for f in _rqf122(tmp_path, edits)] == ["RQF122"]


@pytest.mark.parametrize(
    "container",
    [
        "    container:\n      image: python:3.12-slim # rqf: python3.11+\n",
        "    container: # RQF: Python3.11+ (our CI image)\n      image: ghcr.io/acme/ci:3\n",
        "    container: python:3.12-slim  # rqf: python3.11+\n",
    ],
    ids=["on-the-image-line", "on-the-container-line-any-case", "string-form"],
)
def test_rqf122_the_stated_python_image_does_not_warn(tmp_path, container):
    """The user states the image has python3 >= 3.11 with the documented comment marker."""
    edits = [_add("w", "    timeout-minutes: 15\n", container)]
    assert _rqf122(tmp_path, edits) == []


def test_rqf122_the_marker_elsewhere_states_nothing(tmp_path):
    """Only the `container:` or `image:` line counts: a marker on another line is not a statement."""
    edits = [
        _container_job(),
        ("w", "    timeout-minutes: 15\n", "    timeout-minutes: 15 # rqf: python3.11+\n"),
    ]
    assert [f.rule for f in _rqf122(tmp_path, edits)] == ["RQF122"]


def test_rqf122_a_job_without_container_does_not_warn(tmp_path):
    assert _rqf122(tmp_path, []) == []


# RQF219: lint knows the coordinator's outputs (actionlint cannot) and the words of `outcome`.
FALLBACK_ID = (
    "c",
    "      - uses: acme/runner-queue-fallback@",
    "      - id: fallback\n        uses: acme/runner-queue-fallback@",
)


def _rqf219(tmp_path: Path, steps: str) -> tuple[list[Finding], str]:
    after = "          execution-timeout-minutes: '15'\n"
    texts = _write_pair(tmp_path, [FALLBACK_ID, _add("c", after, steps)])
    result = lint_files(tmp_path / FILES["c"])
    return [f for f in result.findings if f.rule == "RQF219"], texts["c"]


def test_rqf219_every_output_and_every_outcome_word_of_the_action_is_clean(tmp_path):
    """The outputs action.yml declares and the five words of `outcome` give no finding."""
    outputs = " ".join(f"${{{{ steps.fallback.outputs.{name} }}}}" for name in COORDINATOR_OUTPUTS)
    words = " || ".join(f"steps.fallback.outputs.outcome == '{word}'" for word in OUTCOMES)
    steps = f"      - if: {words}\n        run: echo {outputs}\n"
    found, _ = _rqf219(tmp_path, steps)
    assert found == []


def test_rqf219_an_output_the_action_does_not_set_is_reported_at_its_line(tmp_path):
    """In a block `run:`, the line of the reference itself; another step's outputs are not ours."""
    steps = (
        "      - id: other\n        run: echo\n"
        "      - run: |\n"
        "          echo ${{ steps.other.outputs.result }}\n"
        "          echo ${{ steps.fallback.outputs.result }}\n"
    )
    found, text = _rqf219(tmp_path, steps)
    [finding] = found
    assert finding.line == _line(text, "steps.fallback.outputs.result")
    assert "sets no output `result`" in finding.message
    assert "outcome" in finding.fix


def test_rqf219_a_word_compared_either_way_round_is_checked(tmp_path):
    steps = "      - if: \"'no_runner' != steps.fallback.outputs.outcome\"\n        run: echo\n"
    [finding], _ = _rqf219(tmp_path, steps)
    assert "'no_runner', a word it never takes" in finding.message
    assert "no-runner" in finding.fix


# -- RQF221: `runners` with expressions (issue 43) -----------------------------------------------


def _with_runners(tmp_path: Path, runners: str) -> list[Finding]:
    edit = _add("c", "          queue-timeout-minutes: '10'\n", f"          runners: {runners}\n")
    _write_pair(tmp_path, [edit])
    return lint_files(tmp_path / FILES["c"]).findings


def test_rqf221_an_expression_inside_a_json_string_is_a_stand_in_and_the_rest_is_checked(
    tmp_path,
):
    """The group from a variable; the labels say no machine: still an input error (RQF204)."""
    runners = """'[{"group": "${{ vars.CI_GROUP }}", "labels": ["self-hosted", "big"]}]'"""
    findings = _with_runners(tmp_path, runners)
    (error,) = [f for f in findings if f.rule == "RQF204"]
    assert "OS and architecture unknown" in error.message
    assert "rqf-expression" in error.message, "the stand-in is named where it stands"
    assert not [f for f in findings if f.rule == "RQF221"]


def test_rqf221_a_checkable_list_with_a_stand_in_passes(tmp_path):
    runners = """'[{"group": "${{ vars.CI_GROUP }}", "labels": ["self-hosted", "Linux", "X64"]}]'"""
    findings = _with_runners(tmp_path, runners)
    assert not [f for f in findings if f.rule in {"RQF204", "RQF221", "RQF203"}], findings


def test_rqf221_the_whole_list_from_an_expression_is_said_unchecked(tmp_path):
    (notice,) = [
        f for f in _with_runners(tmp_path, "${{ vars.RQF_CPU_RUNNERS }}") if f.rule == "RQF221"
    ]
    assert notice.level == "notice"
    assert "was not checked" in notice.message


def test_rqf221_a_github_context_takes_the_coordinators_value(tmp_path):
    runners = """'[{"labels": ["self-hosted", "Linux", "X64", "run-${{ github.run_id }}"]}]'"""
    (notice,) = [f for f in _with_runners(tmp_path, runners) if f.rule == "RQF221"]
    assert "github.run_id" in notice.message
    assert "the coordinator's value" in notice.message


# -- RQF223 and RQF209: the GitHub App's inputs ------------------------------------------------


def _with_app(tmp_path: Path, lines: str) -> list[Finding]:
    _write_pair(tmp_path, [_add("c", "          runner-type: cpu\n", lines)])
    return [f for f in lint_files(tmp_path / FILES["c"]).findings if f.rule.startswith("RQF2")]


APP_LINES = (
    "          app-id: ${{ secrets.APP_ID }}\n"
    "          app-private-key: ${{ secrets.APP_PRIVATE_KEY }}\n"
)


def test_app_credentials_from_secrets_alone_are_quiet(tmp_path):
    """No RQF223 (token is left to default), no RQF209 (secrets fill the App's inputs), no RQF204."""
    assert _with_app(tmp_path, APP_LINES) == []
    literal = "          app-id: '31337'\n          app-installation-id: '42'\n"
    key = "          app-private-key: ${{ secrets.APP_PRIVATE_KEY }}\n"
    assert _with_app(tmp_path, literal + key) == []


def test_rqf202_asks_nothing_of_the_jobs_token_when_the_app_does_the_work(tmp_path):
    read_only = ("c", "      actions: write\n", "      actions: read\n")
    app = _add("c", "          runner-type: cpu\n", APP_LINES)
    _write_pair(tmp_path, [read_only, app])
    assert lint_files(tmp_path / FILES["c"]).findings == []
    _write_pair(tmp_path, [read_only])
    assert [f.rule for f in lint_files(tmp_path / FILES["c"]).findings] == ["RQF202"]


def test_rqf223_flags_an_explicit_token_beside_the_app_and_only_then(tmp_path):
    (finding,) = _with_app(tmp_path, APP_LINES + "          token: ${{ secrets.PAT }}\n")
    assert (finding.rule, finding.level) == ("RQF223", "warning")
    assert "never used" in finding.message
    assert _with_app(tmp_path, "          token: ${{ secrets.PAT }}\n") == []


def test_an_app_id_without_its_key_is_refused_as_the_action_refuses_it(tmp_path):
    (finding,) = _with_app(tmp_path, "          app-id: '31337'\n")
    assert finding.rule == "RQF204"
    assert "app-private-key" in finding.message


# -- RQF222: where `runners-token` comes from ---------------------------------------------------


def _with_runners_token(tmp_path: Path, value: str) -> list[Finding]:
    edit = _add("c", "          runner-type: cpu\n", f"          runners-token: {value}\n")
    _write_pair(tmp_path, [edit])
    return [f for f in lint_files(tmp_path / FILES["c"]).findings if f.rule.startswith("RQF2")]


@pytest.mark.parametrize(
    "value",
    [
        "${{ secrets.RUNNERS_TOKEN }}",
        "${{secrets['RUNNERS-TOKEN']}}",
        "${{ steps.app-token.outputs.token }}",
    ],
)
def test_rqf222_a_secret_or_a_steps_output_is_quiet(tmp_path, value):
    """Neither a notice nor RQF209 (a secret in an input other than the tokens)."""
    assert _with_runners_token(tmp_path, value) == []


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("ghs_abc123", "written in the workflow file"),
        ("${{ vars.RUNNERS_TOKEN }}", "in plain text"),
        ("${{ env.RUNNERS_TOKEN }}", "in plain text"),
        ("${{ needs.mint.outputs.token }}", "in plain text"),
        ("${{ secrets.A || secrets.B }}", "other than a secret"),
        ("${{ github.token }}", "cannot read runner groups (403)"),
        ("${{ secrets.GITHUB_TOKEN }}", "cannot read runner groups (403)"),
    ],
)
def test_rqf222_anything_else_is_a_notice_with_the_fix(tmp_path, value, why):
    (notice,) = _with_runners_token(tmp_path, value)
    assert (notice.rule, notice.level) == ("RQF222", "notice")
    assert why in notice.message
    assert "secrets.RUNNERS_TOKEN" in notice.fix
    assert "App installation token" in notice.fix
