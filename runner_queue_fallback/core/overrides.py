"""The `runners` input: an explicit candidate list that replaces a profile's pools, or fails.

A candidate is a runner group, labels, or both, as `runs-on` takes them, and may declare its
machine (`core/machine.py`). Every candidate must keep the runner type's family, architecture and
GPU count; all share one OS; a repeated pool (`core/labels.py`) is allowed only last, with its own
deadline and the same group. Malformed JSON or an invalid candidate is an error, never a silent
fall back to the defaults.

A departure: `{"hosted": "<label>"}` may come after them all, a GitHub-hosted runner
as the last resort (`core/hosted.py`); "final" in the repeated-pool rule then means final among the
self-hosted candidates.
"""

from __future__ import annotations

import json

from runner_queue_fallback.core import timing
from runner_queue_fallback.core.errors import InputError
from runner_queue_fallback.core.hosted import classify, hosted_candidate, hosted_problem
from runner_queue_fallback.core.input_names import closest
from runner_queue_fallback.core.labels import Labels, has_label, label_names, same_pool
from runner_queue_fallback.core.machine import (
    MEMORY_GROUP,
    Machine,
    MachineProblem,
    read_machine,
)
from runner_queue_fallback.core.profiles import Candidate, Profile

__all__ = ["parse_json", "resolve_runners"]

_CANDIDATE_KEYS = {"group", "labels", "queue-timeout-minutes", "os", "arch", "gpus"}
_HOSTED_KEYS = {"hosted", "queue-timeout-minutes"}


def parse_json(name: str, raw: str, allowed: str) -> object:
    """Parse an input's JSON; anything json refuses (even by nesting or size) is an input error."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        problem = f"is not valid JSON ({exc.msg})"
    except (
        ValueError,
        RecursionError,
    ):  # a 4300+ digit number, or nesting deeper than Python's stack
        problem = "is JSON too deeply nested or with a number too long to read"
    raise InputError(name, problem, given=raw, allowed=allowed)


def resolve_runners(
    raw: str, profile: Profile, policy: str, minutes: float | None
) -> tuple[Candidate, ...]:
    """Resolve an explicit `runners` list: it replaces the defaults entirely, or fails."""
    items = parse_json("runners", raw, _RUNNERS_SHAPE)
    if not isinstance(items, list) or not 1 <= len(items) <= timing.MAX_CANDIDATES:
        raise InputError(
            "runners",
            "must be a JSON array of 1 to 7 candidates",
            given=raw,
            allowed=_RUNNERS_SHAPE,
        )
    default_minutes = minutes if minutes is not None else profile.default_queue_minutes(policy)
    hosted = _hosted_last(items, profile, default_minutes)
    self_hosted = items[:-1] if hosted is not None else items
    candidates: list[Candidate] = []
    first_os: str | None = None
    for index, item in enumerate(self_hosted, start=1):
        candidate, machine = _candidate(index, item, profile, default_minutes)
        first_os = first_os or machine.os
        if machine.os != first_os:
            raise _bad(
                index,
                f"runs on OS {machine.os!r} but the first candidate on {first_os!r}; all share one OS",
            )
        _check_duplicate(index, len(self_hosted), item, candidate, candidates)
        candidates.append(candidate)
    if hosted is not None and first_os not in {None, "linux"}:
        raise _bad(len(items), f"is a Linux hosted runner but the others run on OS {first_os!r}")
    return (*candidates, *(() if hosted is None else (hosted,)))


_RUNNERS_SHAPE = (
    '[{"group": "...", "labels": ["...", ...], "queue-timeout-minutes": 1-60, "os": "linux", '
    '"arch": "amd64", "gpus": 0-8}, ...] (group, labels or both; the rest optional), '
    'optionally ending with {"hosted": "ubuntu-24.04", "queue-timeout-minutes": 1-60 (optional)}'
)


def _hosted_last(items: list[object], profile: Profile, default_minutes: float) -> Candidate | None:
    """The hosted candidate, which only the last item may be; None when there is none."""
    for index, item in enumerate(items, start=1):
        if isinstance(item, dict) and "hosted" in item and index != len(items):
            raise _bad(
                index,
                "is a GitHub-hosted runner; a hosted candidate is allowed only as the last one",
            )
    last = items[-1]
    if not (isinstance(last, dict) and "hosted" in last):
        return None
    index = len(items)
    unknown = set(last) - _HOSTED_KEYS
    if unknown:
        raise _bad(
            index,
            f"is a hosted runner and takes only 'hosted' and "
            f"'queue-timeout-minutes', not {sorted(unknown)}",
        )
    label = last["hosted"]
    if not isinstance(label, str):
        raise _bad(index, "needs 'hosted': one GitHub-hosted runner label such as ubuntu-24.04")
    problem = hosted_problem(label, profile)
    if problem is not None:
        raise _bad(index, problem)
    return hosted_candidate(label, _deadline(index, last, default_minutes))


def _bad(index: int | str, problem: str) -> InputError:
    """`index`: the number, or `2 (group ci, labels [...])`; a problem led by `:` follows it."""
    gap = "" if problem.startswith(":") else " "
    return InputError("runners", f"candidate {index}{gap}{problem}", allowed=_RUNNERS_SHAPE)


def _candidate(
    index: int, item: object, profile: Profile, default_minutes: float
) -> tuple[Candidate, Machine]:
    if not isinstance(item, dict):
        raise _bad(index, "must be an object with group, labels or both")
    unknown = set(item) - _CANDIDATE_KEYS
    if unknown:
        raise _bad(index, f"has unknown key(s) {sorted(unknown)}{_meant(unknown, _CANDIDATE_KEYS)}")
    group, labels = _group(index, item), _labels(index, item)
    if not group and not labels:
        raise _bad(index, "needs 'group', 'labels' or both, as runs-on takes them")
    where = f"{index} ({_written(group, labels)})"
    _not_hosted(where, group, labels)
    try:
        machine = read_machine(item, labels, profile.needs)
    except MachineProblem as problem:
        raise _bad(where, f": {problem}") from None
    _keeps_type(where, machine, profile)
    if machine.memory_optimised and group != MEMORY_GROUP:
        raise _bad(
            where,
            f"uses a memory-optimised label, which needs group {MEMORY_GROUP!r} (got {group!r})",
        )
    deadline = _deadline(index, item, default_minutes)
    return Candidate(group, labels, deadline, machine=machine), machine


def _group(index: int, item: dict[str, object]) -> str:
    group = item.get("group", "")
    if not isinstance(group, str) or ("group" in item and not group.strip()):
        raise _bad(index, "has 'group' that is not a non-empty string")
    return group


def _labels(index: int, item: dict[str, object]) -> Labels:
    if "labels" not in item:
        return ()
    labels = item["labels"]
    if isinstance(labels, str) and labels.strip():
        return labels
    if (
        isinstance(labels, list)
        and labels
        and all(isinstance(x, str) and x.strip() for x in labels)
    ):
        return tuple(labels)
    raise _bad(index, "has 'labels' that is not a non-empty string or array of strings")


def _written(group: str, labels: Labels) -> str:
    """The candidate as its user wrote it, for messages: `group ci, labels [a, b]`."""
    names = label_names(labels)
    return ", ".join(
        [
            f"group {group}" if group else "any group",
            f"labels [{', '.join(names)}]" if names else "any labels",
        ]
    )


def _not_hosted(where: str, group: str, labels: Labels) -> None:
    """No group and no `self-hosted`, but a hosted image's label: GitHub would run it hosted."""
    if group or has_label(labels, "self-hosted"):
        return
    image = next((name for name in label_names(labels) if classify(name) is not None), None)
    if image is not None:
        raise _bad(
            where,
            f"names {image!r}, a GitHub-hosted image, with no runner group and no 'self-hosted' "
            f"label: GitHub would run it on a hosted runner. For a hosted last resort write "
            f'{{"hosted": "{image}"}} as the last candidate (it is outside every runner group: '
            "see the trust note of the hosted last resort); for your own runners add their group "
            "or the 'self-hosted' label",
        )


def _keeps_type(where: str, machine: Machine, profile: Profile) -> None:
    want = (profile.family, profile.arch, profile.gpus)
    if (machine.family, machine.arch, machine.gpus) != want:
        raise _bad(
            where,
            f"is {machine.family}/{machine.arch}/{machine.gpus} GPU(s) but runner-type "
            f"{profile.runner_type!r} needs {profile.family}/{profile.arch}/{profile.gpus} "
            "GPU(s): family, architecture and GPU count must be kept",
        )


def _meant(unknown: set[str], keys: set[str]) -> str:
    """` (did you mean 'labels'?)` for each unknown key close to a known one."""
    found = [f"{near!r} for {key!r}" for key in sorted(unknown) if (near := closest(key, keys))]
    return f" (did you mean {', '.join(found)}?)" if found else ""


def _deadline(index: int, item: dict[str, object], default_minutes: float) -> float:
    """The candidate's own `queue-timeout-minutes`, else the action-level or the policy's."""
    deadline = item.get("queue-timeout-minutes", default_minutes)
    if isinstance(deadline, str):
        raise _bad(
            index,
            f"queue-timeout-minutes is a JSON string ({deadline!r}); write the number without "
            "quotes, from 1 to 60",
        )
    if (
        isinstance(deadline, bool)
        or not isinstance(deadline, int | float)
        or not timing.QUEUE_MINUTES_MIN <= deadline <= timing.QUEUE_MINUTES_MAX
    ):
        raise _bad(index, f"queue-timeout-minutes must be a number from 1 to 60 (got {deadline!r})")
    return float(deadline)


def _check_duplicate(
    index: int, total: int, item: dict[str, object], new: Candidate, seen: list[Candidate]
) -> None:
    """A repeated label is allowed only as the final candidate, with its own deadline, same group."""
    earlier = next((c for c in seen if same_pool(c.group, c.labels, new.group, new.labels)), None)
    if earlier is None:
        return
    if index != total:
        raise _bad(
            index,
            f"repeats the pool of an earlier candidate ({_written(earlier.group, earlier.labels)});"
            " a repeat is allowed only as the final candidate",
        )
    if "queue-timeout-minutes" not in item:
        raise _bad(index, "repeats an earlier pool and must set its own queue-timeout-minutes")
    if earlier.group != new.group:
        raise _bad(
            index,
            f"repeats an earlier pool with another group ({new.group!r} vs {earlier.group!r})",
        )
