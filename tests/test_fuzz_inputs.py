"""Fuzz every coordinator input: each value is accepted and resolves to a valid candidate list, or
fails with InputErrors naming the input as spelled in action.yml, before any API request.

Values are random text, near-misses of valid values, and for `runners` JSON built from valid-ish
candidate objects with random mutations. A share of the examples goes through
`cli.main(["coordinate"])` with a session that records requests: bad inputs exit 2 with one
`::error` line per problem and no request; good ones reach the API (the parent check first).
Never a traceback. Profiles (`RQF_FUZZ_PROFILE`): see conftest.py.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from hypothesis import event, given, note, settings
from hypothesis import strategies as st

from runner_queue_fallback import cli
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.hosted import HOSTED_EXAMPLES, classify, hosted_problem
from runner_queue_fallback.core.inputs import (
    COORDINATOR_INPUTS,
    CoordinatorInputs,
    InputErrors,
    env_name,
    read_coordinator_inputs,
)
from runner_queue_fallback.core.labels import has_label, label_names, label_set, same_pool
from runner_queue_fallback.core.machine import MEMORY_GROUP, parse_label
from runner_queue_fallback.core.profiles import Candidate, Profile, load_profiles
from runner_queue_fallback.fake_github.model import fake_token
from tests.conftest import SHA
from tests.outside import PLANTS, watch_stdout
from tests.test_fuzz_coordinator import candidate_overrides

PROFILES = load_profiles()
ACTION = Path(__file__).resolve().parent.parent / "action.yml"
TOKEN = fake_token("fuzzedtokenvalue")  # the 2026 format, to prove it is never printed

VALID: dict[str, str] = {
    "workflow": "runner-worker.yml",
    "workflow-ref": "main",
    "source-ref": "refs/pull/123/merge",
    "source-sha": SHA,
    "runner-type": "cpu",
    "token": TOKEN,
}
RUN_CONTEXT = {
    "GITHUB_REPOSITORY": "octo-org/octo-repo",
    "GITHUB_RUN_ID": "4242",
    "GITHUB_RUN_ATTEMPT": "1",
    "GITHUB_API_URL": "https://api.github.test",
    "GITHUB_SERVER_URL": "https://github.test",
}


def test_the_fuzzed_inputs_are_the_inputs_of_action_yml():
    """The names the errors must use are the ones action.yml declares."""
    declared = yaml.safe_load(ACTION.read_text(encoding="utf-8"))["inputs"]
    assert set(declared) == set(COORDINATOR_INPUTS)


# ------------------------------------------------------------------------------ strategies

#: Text a person might paste: any printable text, whitespace, newlines, workflow commands.
junk = st.one_of(
    st.text(max_size=40),
    # ASCII; max_codepoint rather than codec="ascii", which maps every code point on first use
    st.text(alphabet=st.characters(max_codepoint=127), max_size=20),
    st.sampled_from(
        [
            "",
            " ",
            "\t",
            "\n",
            "null",
            "true",
            "[]",
            "{}",
            "0",
            "-1",
            "1e3",
            "nan",
            "inf",
            "${{ inputs.x }}",
            "::set-output name=x::y",
            "%0A::error::injected",
            "a\n::error::injected",
            "\u0661\u0662",  # Arabic-Indic digits: str.isdigit() is True
            "\uff11\uff10",  # fullwidth digits
            *PLANTS,  # outside text with every command and link syntax, carrying the marker
        ]
    ),
)


def near(*values: str) -> st.SearchStrategy[str]:
    """Valid values, and the same values with whitespace, case or a character changed."""
    base = st.sampled_from(values)
    return st.one_of(
        base,
        base.map(lambda v: f" {v} "),
        base.map(str.upper),
        base.map(lambda v: v[:-1]),
        base.map(lambda v: v + "x"),
        base.map(lambda v: v.replace("-", "_")),
        base.map(lambda v: f"{v}\n{v}"),
    )


def numbers(low: float, high: float) -> st.SearchStrategy[str]:
    """Numbers in and around [low, high], written the ways people write them."""
    return st.one_of(
        st.integers(int(low) - 2, int(high) + 2).map(str),
        st.floats(low - 1, high + 1, allow_nan=False).map(repr),
        st.floats(allow_nan=True, allow_infinity=True).map(str),
        st.integers().map(str),
        st.sampled_from(["01", "+5", "5.", ".5", "5,0", "1_0", "0x10", "5 min", "1" * 30]),
    )


SHAS = st.one_of(
    st.just(SHA),
    st.just(SHA.upper()),
    st.text(alphabet="0123456789abcdef", min_size=39, max_size=41),
    st.text(alphabet="0123456789abcdefg", min_size=40, max_size=40),
)
REFS = st.one_of(
    near("refs/pull/123/merge", "refs/pull/7/head", "refs/heads/main", "refs/tags/v1.2"),
    st.sampled_from(["main", "refs/pull/x/merge", "refs/heads/", "refs/heads/a b"]),
    # git check-ref-format: traversal, `//`, `@{`, `.lock`, a leading dot, `~^:?*[\`
    st.sampled_from(
        [
            "refs/heads/x/../../../../../../other/fork/git/ref/heads/x",
            "refs/heads/a//b",
            "refs/heads/a@{1}",
            "refs/heads/a.lock",
            "refs/heads/.hidden",
            "refs/tags/v1.",
            "refs/heads/a~1",
            "refs/heads/a\\b",
            "refs/heads/a%2F..%2Fb",
        ]
    ),
    st.sampled_from(PLANTS).map(lambda plant: f"refs/heads/{plant}"),
)
LABELS = sorted(
    {pool.labels for profile in PROFILES.values() for pool in profile.pools}
    | {"linux-amd64-cpu16m", "linux-arm64-cpu4", "linux-amd64-gpu-l4-r550-1", "windows-amd64-cpu8"}
)
GROUP_OF = {pool.labels: pool.group for p in PROFILES.values() for pool in p.pools}
GROUPS = sorted({pool.group for p in PROFILES.values() for pool in p.pools} | {MEMORY_GROUP})
JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=10),
)


#: A team's own labels (issue 42): GitHub's defaults in any case, the 32-bit ARM label, names
#: that say a machine but must not be read (`l40s-4gpu`), a hosted image, ARC scale-set names.
TEAM_LABELS = [
    "self-hosted",
    "Linux",
    "linux",
    "LINUX",
    "Windows",
    "macOS",
    "X64",
    "x64",
    "ARM64",
    "ARM",
    "gpu",
    "nvidia",
    "a6000",
    "l40s-4gpu",
    "h100.8",
    "arc-runner-set",
    "ubuntu-22.04",
    "ubuntu-latest",
    "LINUX-AMD64-CPU16",
    "Linux-ARM64-GPU-L4-latest-1",
]
#: A declaration: valid values mostly, and values outside the allowed ones.
DECLARED = {
    "os": st.sampled_from(["linux", "linux", "windows", "macos", "Linux", "solaris", 1]),
    "arch": st.sampled_from(["amd64", "amd64", "arm64", "x64", "ARM64", None]),
    "gpus": st.sampled_from([0, 1, 2, 4, 8, 9, -1, True, 1.5, "1"]),
}


@st.composite
def candidate_object(draw: st.DrawFn, labels_from: list[str]) -> dict[str, Any]:
    """A valid-looking candidate (mostly of the runner type's own labels), then mutations."""
    labels = draw(candidate_labels(labels_from))
    group = draw(st.sampled_from([*GROUPS, "team-ci"]))
    if labels in labels_from and draw(st.integers(0, 9)):
        group = GROUP_OF[labels]
    item: dict[str, Any] = {"group": group, "labels": labels}
    for key, values in DECLARED.items():
        if draw(st.integers(0, 3)) == 0:
            item[key] = draw(values)
    shape = draw(weighted((10, "both"), (1, "group only"), (1, "labels only")))
    if shape != "both":
        item.pop("labels" if shape == "group only" else "group")
    return mutated_candidate(draw, item)


@st.composite
def candidate_labels(draw: st.DrawFn, labels_from: list[str]) -> Any:
    """The runner type's own scheme label mostly; else any scheme label, a list, a team's own."""
    own = bool(labels_from) and draw(st.integers(0, 9)) != 0
    labels: Any = draw(st.sampled_from(labels_from if own else LABELS))
    if draw(st.integers(0, 5)) == 0:
        labels = draw(st.lists(st.sampled_from([*labels_from, "self-hosted", "linux"]), max_size=3))
    elif draw(st.integers(0, 3)) == 0:  # a team's own labels, perhaps with its declaration
        labels = draw(st.lists(st.sampled_from(TEAM_LABELS), min_size=1, max_size=4))
    return labels


def mutated_candidate(draw: st.DrawFn, item: dict[str, Any]) -> dict[str, Any]:
    """The candidate with a deadline perhaps, and perhaps a key dropped, replaced or nested."""
    if draw(st.booleans()):
        deadline = draw(
            weighted(
                (4, st.integers(1, 60)),
                (2, st.floats(1, 60, allow_nan=False)),
                (1, st.integers(-1, 61)),
                (1, st.floats(0.5, 61, allow_nan=False)),
            ).flatmap(lambda strategy: strategy)
        )
        item["queue-timeout-minutes"] = deadline
    for _ in range(draw(weighted((12, 0), (2, 1), (1, 2)))):
        key = draw(st.sampled_from(["group", "labels", "queue-timeout-minutes", "runs-on", ""]))
        action = draw(st.sampled_from(["drop", "replace", "nest"]))
        if action == "drop":
            item.pop(key, None)
        elif action == "replace":
            item[key] = draw(JSON_SCALARS)
        else:
            item[key] = [item.get(key)]
    return item


#: Hosted labels: each architecture's, a larger runner's own name, and the ones refused.
HOSTED_LABELS = st.one_of(
    near("ubuntu-24.04", "ubuntu-24.04-arm", "ubuntu-latest", "ubuntu-22.04-arm"),
    st.sampled_from(["org-linux-16core", "windows-2025", "macos-15", "self-hosted"]),
    st.sampled_from(sorted({pool.labels for p in PROFILES.values() for pool in p.pools})),
)


def hosted_labels(runner_type: str) -> st.SearchStrategy[str]:
    """Half the time the label that fits the runner type's architecture, else any."""
    fitting = HOSTED_EXAMPLES[PROFILES[runner_type].arch]
    return st.one_of(st.just(fitting), HOSTED_LABELS)


@st.composite
def hosted_object(draw: st.DrawFn, runner_type: str) -> dict[str, Any]:
    """`{"hosted": label}`, perhaps with a deadline, perhaps with a key it does not take."""
    label = st.one_of(hosted_labels(runner_type), hosted_labels(runner_type), JSON_SCALARS)
    item: dict[str, Any] = {"hosted": draw(label)}
    if draw(st.booleans()):
        item["queue-timeout-minutes"] = draw(st.sampled_from([1, 5, 60, 61, "5"]))
    if draw(st.integers(0, 5)) == 0:
        item[draw(st.sampled_from(["group", "labels", "runs-on"]))] = "x"
    return item


@st.composite
def runners_values(draw: st.DrawFn, runner_type: str) -> str:
    """JSON for `runners`: a list of candidate objects, mutated as a list and as text."""
    own = sorted({pool.labels for pool in PROFILES[runner_type].pools})  # none: 3 to 8 GPUs
    size = draw(weighted((1, 0), (12, st.integers(1, 7)), (1, st.integers(8, 9))))
    if not isinstance(size, int):
        size = draw(size)
    items: list[Any] = draw(st.lists(candidate_object(own), min_size=size, max_size=size))
    if items and draw(st.integers(0, 3)) == 0:  # repeat one as the final candidate
        repeated = dict(items[draw(st.integers(0, len(items) - 1))])
        if draw(st.booleans()):
            repeated["queue-timeout-minutes"] = draw(st.sampled_from([1, 30, 60]))
        items.append(repeated)
    if draw(st.integers(0, 3)) == 0:  # a hosted candidate (issue 33): mostly last
        at = len(items) if draw(st.integers(0, 4)) else draw(st.integers(0, len(items)))
        items.insert(at, draw(hosted_object(runner_type)))
    if items and draw(st.integers(0, 5)) == 0:
        items[draw(st.integers(0, len(items) - 1))] = draw(JSON_SCALARS)
    shape = draw(weighted((6, "list"), (1, "object"), (1, "scalar"), (1, "nested")))
    value: Any = items
    if shape == "object":
        value = items[0] if items else {}
    elif shape == "scalar":
        value = draw(JSON_SCALARS)
    elif shape == "nested":
        value = [items]
    return draw(mutated_text(json.dumps(value)))


@st.composite
def mutated_text(draw: st.DrawFn, text: str) -> str:
    """JSON text, mostly unchanged, else cut, extended, nested deep, single-quoted or huge."""
    mutation = draw(
        weighted((12, "none"), (1, "cut"), (1, "append"), (1, "deep"), (1, "single"), (1, "huge"))
    )
    if mutation == "cut":
        text = text[: draw(st.integers(0, len(text)))]
    elif mutation == "append":
        text += draw(st.sampled_from([",", "]", "}", " x", "\n", "// comment"]))
    elif mutation == "deep":
        depth = draw(st.sampled_from([100, 10_000, 100_000]))
        text = "[" * depth + "]" * depth
    elif mutation == "single":
        text = text.replace('"', "'")
    elif mutation == "huge":  # a number too long for int(): 4300 digits is Python's limit
        text = text.replace("[{", '[{"queue-timeout-minutes": ' + "1" * 5000 + ", ", 1)
    return text


def workloads() -> st.SearchStrategy[str]:
    """The `workload` input: JSON objects, other JSON, and broken JSON."""
    objects = st.dictionaries(st.text(max_size=8), JSON_SCALARS, max_size=4).map(json.dumps)
    return st.one_of(
        objects,
        JSON_SCALARS.map(json.dumps),
        objects.map(lambda t: t[:-1]),
        st.sampled_from(['{"a": NaN}', "[" * 100_000, '{"a": 1}{"b": 2}']),
        junk,
    )


INPUT_VALUES: dict[str, st.SearchStrategy[str]] = {
    "workflow": st.one_of(
        near("runner-worker.yml", ".github/workflows/runner-worker.yaml"),
        st.sampled_from(["../runner-worker.yml", "dir/runner-worker.yml", "worker.json"]),
        junk,
    ),
    "workflow-ref": st.one_of(near("main", "v1", "refs/heads/main", "refs/tags/v1"), REFS, junk),
    "source-ref": st.one_of(REFS, junk),
    "source-sha": st.one_of(SHAS, junk),
    "runner-type": st.one_of(near(*sorted(PROFILES)), junk),
    "queue-policy": st.one_of(near("standard", "extended"), junk),
    "queue-timeout-minutes": st.one_of(numbers(1, 60), junk),
    "execution-timeout-minutes": st.one_of(numbers(1, timing.EXECUTION_MINUTES_MAX), junk),
    "admission-timeout-minutes": st.one_of(numbers(0, timing.ADMISSION_MINUTES_MAX), junk),
    # `runners` is drawn in `input_sets`, knowing the runner type.
    "hosted-last-resort": st.one_of(HOSTED_LABELS, junk),
    "workload": workloads(),
    "source-policy": st.one_of(near("current", "pinned-after-start"), junk),
    "api-version": st.one_of(near("auto", "2026-03-10", "2022-11-28"), junk),
    "token": st.one_of(
        st.just(TOKEN),
        st.text(min_size=1, max_size=10).map(lambda t: f"{TOKEN}{t}"),
        st.sampled_from([f"{TOKEN} ", f"{TOKEN} x", f"{TOKEN}\nx", ""]),
    ),
    # optional: blank is "not given"; a space or a line break is refused like `token`'s
    "runners-token": st.sampled_from(["", "ghs_runnersread0123456789", "ghs_r x", "ghs_r\nx"]),
    # a GitHub App's inputs: never a usable pair here (no App on this fake: tests/test_app_wiring.py),
    # so any one given is an error of its own or of the pair's
    "app-id": st.sampled_from(["", "31337", "Iv23liAbC.d_1", "0", "app", "31337 x"]),
    "app-private-key": st.sampled_from(["", "not a key", "ghs_x"]),
    "app-installation-id": st.sampled_from(["", "42", "0", "x"]),
}
assert set(INPUT_VALUES) | {"runners"} == set(COORDINATOR_INPUTS)


@functools.cache  # built once for each list: a strategy made per draw costs more than the draw
def weighted(*choices: tuple[int, Any]) -> st.SearchStrategy[Any]:
    """Values with weights: `weighted((3, "a"), (1, "b"))` is "a" three times in four."""
    return st.sampled_from([value for weight, value in choices for _ in range(weight)])


@dataclass(frozen=True)
class InputSet:
    """Input values by their action.yml names (absent: omitted), and which ones were changed."""

    values: Mapping[str, str]
    changed: frozenset[str]
    via_cli: bool

    def environ(self) -> dict[str, str]:
        """The environment the runner would give the container."""
        return {env_name(name): value for name, value in self.values.items()}


#: Runner types, those for 3 to 8 GPUs (issue 42: no pools, `runners` always) one draw in six,
#: as before they came: twelve of them would otherwise take most draws.
RUNNER_TYPES = weighted(
    (5, st.sampled_from(sorted(t for t, p in PROFILES.items() if p.pools))),
    (1, st.sampled_from(sorted(t for t, p in PROFILES.items() if not p.pools))),
).flatmap(lambda strategy: strategy)


@st.composite
def input_sets(draw: st.DrawFn) -> InputSet:
    """A valid input set with some inputs replaced, blanked or removed."""
    values = dict(VALID)
    runner_type = draw(RUNNER_TYPES)
    values["runner-type"] = runner_type
    names = draw(st.sets(st.sampled_from(COORDINATOR_INPUTS), max_size=3))
    # `runners` is the richest input: fuzz it more often than the others; a runner type without
    # default pools (3 to 8 GPUs) needs it, so leaving it out is a change too.
    if draw(st.booleans()) or not PROFILES[runner_type].pools:
        names = names | {"runners"}
    elif draw(st.integers(0, 3)) == 0:  # the hosted opt-in (issue 33), where it may be taken
        names = names | {"hosted-last-resort"}
    for name in sorted(names):
        how = draw(weighted((8, "value"), (1, "blank"), (1, "omit")))
        if how == "omit":
            values.pop(name, None)
        elif how == "blank":
            values[name] = draw(st.sampled_from(["", " ", "\t", "\n"]))
        elif name == "hosted-last-resort":
            values[name] = draw(st.one_of(hosted_labels(runner_type), junk))
        elif name == "runners":
            values[name] = draw(
                weighted(
                    (4, candidate_overrides(runner_type)),
                    (5, runners_values(runner_type)),
                    (1, junk),
                ).flatmap(lambda strategy: strategy)
            )
        else:
            values[name] = draw(INPUT_VALUES[name])
    final_type = PROFILES.get(values.get("runner-type", "").strip())
    if final_type is not None and not final_type.pools:
        names = names | {"runners"}  # 3 to 8 GPUs: `runners` is required, given or not
    return InputSet(values, frozenset(names), via_cli=draw(st.integers(0, 3)) == 0)


# --------------------------------------------------------------------------------- checks


def check_candidates(inputs: CoordinatorInputs, values: Mapping[str, str]) -> None:
    """An accepted input set resolves to 1-7 candidates that keep the type's machine."""
    pools = inputs.pools
    profile = pools.profile
    candidates = pools.candidates
    assert 1 <= len(candidates) <= timing.MAX_CANDIDATES
    assert profile is PROFILES[values["runner-type"].strip()]
    candidates = check_hosted(candidates, profile, values)
    for candidate in candidates:
        check_machine(candidate, profile)
    assert len({c.machine.os for c in candidates if c.machine is not None}) <= 1, "one OS"
    assert 1 <= pools.execution_timeout_minutes <= timing.EXECUTION_MINUTES_MAX
    assert 0 <= pools.admission_timeout_minutes <= timing.ADMISSION_MINUTES_MAX
    raw = values.get("runners", "").strip()
    if not raw:
        minutes = pools.queue_timeout_minutes
        assert candidates == profile.candidates(pools.queue_policy, minutes)
        return
    items = json.loads(raw)
    if len(items) == len(candidates) + 1:  # the hosted one, checked by check_hosted
        items = items[:-1]
    assert len(items) == len(candidates)
    default = (
        pools.queue_timeout_minutes
        if pools.queue_timeout_minutes is not None
        else profile.default_queue_minutes(pools.queue_policy)
    )
    for item, candidate in zip(items, candidates, strict=True):
        check_as_written(item, candidate, default)
    # A repeated pool only as the final candidate, with its own deadline and the same group.
    for index, candidate in enumerate(candidates):
        for earlier in candidates[:index]:
            if same_pool(earlier.group, earlier.labels, candidate.group, candidate.labels):
                assert index == len(candidates) - 1
                assert "queue-timeout-minutes" in items[index]
                assert earlier.group == candidate.group


def check_machine(candidate: Candidate, profile: Profile) -> None:
    """Every fact a candidate's labels state is the runner type's; nothing guessed from names."""
    assert isinstance(candidate, Candidate)
    assert candidate.group.strip() or label_names(candidate.labels), "group, labels or both"
    machine = candidate.machine
    assert machine is not None
    assert (machine.family, machine.arch, machine.gpus) == (
        profile.family,
        profile.arch,
        profile.gpus,
    )
    names = label_set(candidate.labels)
    assert "arm" not in names, "GitHub's 32-bit ARM label has no supported architecture"
    for info in (parse_label(name) for name in names):
        if info is not None:
            assert (info.os, info.arch, info.gpus) == (machine.os, machine.arch, machine.gpus)
            if info.memory_optimised:
                assert candidate.group == MEMORY_GROUP
    for label, os_name in (("linux", "linux"), ("windows", "windows"), ("macos", "macos")):
        assert label not in names or machine.os == os_name
    for label, arch in (("x64", "amd64"), ("arm64", "arm64")):
        assert label not in names or machine.arch == arch
    if not candidate.group and not has_label(candidate.labels, "self-hosted"):
        assert not any(classify(name) for name in names), "a hosted image in disguise"
    assert timing.QUEUE_MINUTES_MIN <= candidate.queue_minutes <= timing.QUEUE_MINUTES_MAX


def check_as_written(item: dict[str, Any], candidate: Candidate, default: float) -> None:
    """The child's runner input is the candidate's group and labels as written, never the
    declaration or the deadline; the declaration is the machine's."""
    runner = json.loads(candidate.runner_json())
    assert runner == {key: item[key] for key in ("group", "labels") if key in item}
    assert candidate.queue_minutes == float(item.get("queue-timeout-minutes", default))
    assert candidate.machine is not None
    for key in ("os", "arch", "gpus"):
        if key in item:
            assert item[key] == getattr(candidate.machine, key)


def check_hosted(
    candidates: tuple[Candidate, ...], profile: Profile, values: Mapping[str, str]
) -> tuple[Candidate, ...]:
    """A hosted candidate (issue 33) is last, of a CPU type, of a label that fits the type.

    It comes from `{"hosted": ...}` last in `runners` or from `hosted-last-resort`, never both;
    its `runner` input names the label alone. Returns the self-hosted candidates.
    """
    hosted = [n for n, c in enumerate(candidates) if c.hosted]
    opt_in = values.get("hosted-last-resort", "").strip()
    raw = values.get("runners", "").strip()
    assert not (opt_in and raw), "the opt-in beside an explicit runners list is refused"
    if not hosted:
        assert not opt_in
        return candidates
    assert hosted == [len(candidates) - 1], "a hosted candidate only last"
    last = candidates[-1]
    assert profile.family == "cpu"
    assert isinstance(last.labels, str)
    assert hosted_problem(last.labels, profile) is None
    assert last.group == ""
    assert json.loads(last.runner_json()) == {"labels": last.labels}
    if opt_in:
        assert last.labels == opt_in
    else:
        assert json.loads(raw)[-1]["hosted"] == last.labels
    assert timing.QUEUE_MINUTES_MIN <= last.queue_minutes <= timing.QUEUE_MINUTES_MAX
    return candidates[:-1]


class RecordingAdapter(requests.adapters.BaseAdapter):
    """Records every request and answers none (a connection error), so a run stops quickly."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[str] = []

    def send(self, request: requests.PreparedRequest, *_args: Any, **_kwargs: Any) -> Any:
        self.sent.append(f"{request.method} {request.url}")
        raise requests.ConnectionError("no network in the input fuzz test")

    def close(self) -> None:
        """Nothing to close."""


@dataclass
class CliRun:
    """What `cli.main(["coordinate"])` printed and sent."""

    code: int
    stdout: str
    sent: list[str] = field(default_factory=list)


def run_cli(values: InputSet) -> CliRun:
    """Run the coordinate command on a FakeClock with a recording session."""
    adapter = RecordingAdapter()
    session = requests.Session()
    # No proxy or netrc applies to the recording adapter, and requests reads them per request.
    session.trust_env = False
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), watch_stdout() as watch:
        try:
            code = cli.main(
                ["coordinate"],
                {**values.environ(), **RUN_CONTEXT},
                clock=FakeClock(),
                session=session,
            )
        except Exception as exc:  # the invariant below names it
            raise AssertionError(f"{type(exc).__name__} reached main: {exc!r}") from exc
    # Invariant 9: no line the runner would read as a command comes from an input's value.
    assert watch.problems() == [], watch.problems()
    return CliRun(code, out.getvalue(), adapter.sent)


def check_rejected(values: InputSet, errors: InputErrors) -> None:
    """Every error names a changed input as action.yml spells it, and never shows the token."""
    names = [error.name for error in errors.errors]
    assert names, "InputErrors without an error"
    assert set(names) <= set(COORDINATOR_INPUTS), names
    assert set(names) <= values.changed, (names, values.changed)
    for error in errors.errors:
        assert str(error).startswith(f"input '{error.name}' ")
    token = values.values.get("token", "").strip()
    if len(token) >= len(TOKEN):
        assert token not in str(errors)


def check_cli_rejected(values: InputSet, errors: InputErrors, run: CliRun) -> None:
    """Exit 2, one `::error` line per problem naming its input, nothing else, no request."""
    assert run.code == 2, run.stdout
    assert run.sent == []
    lines = run.stdout.splitlines()
    assert len(lines) == len(errors.errors), lines  # an input value cannot add a line
    for line, error in zip(lines, errors.errors, strict=True):
        assert line.startswith("::error title=error%3A Invalid input::"), line
        assert f"input '{error.name}'" in line
    token = values.values.get("token", "").strip()
    if len(token) >= len(TOKEN):
        assert token not in run.stdout


def check_cli_accepted(run: CliRun) -> None:
    """Valid inputs reach the API, the parent check first; the run then fails (no network)."""
    assert run.code == 1, run.stdout
    assert run.sent, "valid inputs made no request"
    assert (
        run.sent[0]
        == f"GET {RUN_CONTEXT['GITHUB_API_URL']}/repos/octo-org/octo-repo/actions/runs/4242"
    )
    assert TOKEN not in "\n".join(
        line for line in run.stdout.splitlines() if not line.startswith("::add-mask::")
    )


# ---------------------------------------------------------------------------------- tests


#: The profile's examples in shards that pytest-xdist spreads over the cores (each
#: parametrisation draws its own input sets).
SHARDS = 4


@pytest.mark.parametrize("shard", range(SHARDS))
@settings(max_examples=max(1, settings().max_examples // SHARDS))
@given(input_sets())
def test_fuzz_inputs_resolve_or_fail_naming_the_input_before_any_request(
    shard: int, values: InputSet
):
    note(repr(values)[:2000])
    try:
        inputs = read_coordinator_inputs(values.environ(), PROFILES)
    except InputErrors as exc:
        event("rejected")
        for error in exc.errors:
            event(f"rejected: {error.name}")
        check_rejected(values, exc)
        if values.via_cli:
            check_cli_rejected(values, exc, run_cli(values))
    else:
        event("accepted")
        event(f"accepted: {len(inputs.pools.candidates)} candidate(s)")
        if "runners" in values.values and values.values["runners"].strip():
            event("accepted: runners override")
        if any(c.hosted for c in inputs.pools.candidates):
            event("accepted: a hosted candidate last")
        check_candidates(inputs, values.values)
        if values.via_cli:
            check_cli_accepted(run_cli(values))
