"""The `runners` input: an explicit candidate list that replaces a profile's pools, or fails.

Every candidate must keep the runner type's family, architecture and GPU count; all share one OS;
a repeated pool is allowed only last, with its own deadline and the same group. Malformed JSON
or an invalid candidate is an error, never a silent fall back to the defaults.

A departure (issue 33): `{"hosted": "<label>"}` may come after them all, a GitHub-hosted runner
as the last resort (`core/hosted.py`); "final" in the repeated-pool rule then means final among the
self-hosted candidates.
"""

from __future__ import annotations

import json

from runner_queue_fallback.core import timing
from runner_queue_fallback.core.errors import InputError
from runner_queue_fallback.core.hosted import hosted_candidate, hosted_problem
from runner_queue_fallback.core.profiles import (
    MEMORY_GROUP,
    Candidate,
    LabelInfo,
    Profile,
    parse_label,
)

__all__ = ["parse_json", "resolve_runners"]

_CANDIDATE_KEYS = {"group", "labels", "queue-timeout-minutes"}
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
        candidate, info = _candidate(index, item, profile, default_minutes)
        first_os = first_os or info.os
        if info.os != first_os:
            raise _bad(
                index,
                f"runs on OS {info.os!r} but the first candidate on {first_os!r}; all share one OS",
            )
        _check_duplicate(index, len(self_hosted), item, candidate, candidates)
        candidates.append(candidate)
    if hosted is not None and first_os not in {None, "linux"}:
        raise _bad(len(items), f"is a Linux hosted runner but the others run on OS {first_os!r}")
    return (*candidates, *(() if hosted is None else (hosted,)))


_RUNNERS_SHAPE = (
    '[{"group": "...", "labels": "...", "queue-timeout-minutes": 1-60 (optional)}, ...], '
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


def _bad(index: int, problem: str) -> InputError:
    return InputError("runners", f"candidate {index} {problem}", allowed=_RUNNERS_SHAPE)


def _candidate(
    index: int, item: object, profile: Profile, default_minutes: float
) -> tuple[Candidate, LabelInfo]:
    if not isinstance(item, dict):
        raise _bad(index, "must be an object with group and labels")
    unknown = set(item) - _CANDIDATE_KEYS
    if unknown:
        raise _bad(index, f"has unknown key(s) {sorted(unknown)}")
    group, labels = item.get("group"), item.get("labels")
    if not isinstance(group, str) or not group.strip():
        raise _bad(index, "needs a non-empty string 'group'")
    labels_value = _labels(index, labels)
    info = _label_info(index, labels_value, profile)
    if info.memory_optimised and group != MEMORY_GROUP:
        raise _bad(
            index,
            f"uses a memory-optimised label, which needs group {MEMORY_GROUP!r} (got {group!r})",
        )
    return Candidate(group, labels_value, _deadline(index, item, default_minutes)), info


def _deadline(index: int, item: dict[str, object], default_minutes: float) -> float:
    """The candidate's own `queue-timeout-minutes`, else the action-level or the policy's."""
    deadline = item.get("queue-timeout-minutes", default_minutes)
    if (
        isinstance(deadline, bool)
        or not isinstance(deadline, int | float)
        or not timing.QUEUE_MINUTES_MIN <= deadline <= timing.QUEUE_MINUTES_MAX
    ):
        raise _bad(index, f"queue-timeout-minutes must be a number from 1 to 60 (got {deadline!r})")
    return float(deadline)


def _labels(index: int, labels: object) -> str | tuple[str, ...]:
    if isinstance(labels, str) and labels.strip():
        return labels
    if (
        isinstance(labels, list)
        and labels
        and all(isinstance(x, str) and x.strip() for x in labels)
    ):
        return tuple(labels)
    raise _bad(index, "needs 'labels': a non-empty string or array of strings")


def _label_info(index: int, labels: str | tuple[str, ...], profile: Profile) -> LabelInfo:
    names = (labels,) if isinstance(labels, str) else labels
    infos = [info for name in names if (info := parse_label(name)) is not None]
    if len(infos) != 1:
        raise _bad(
            index,
            "needs exactly one runner label like linux-amd64-cpu16 or linux-amd64-gpu-l4-latest-1",
        )
    info = infos[0]
    want = (profile.family, profile.arch, profile.gpus)
    if (info.family, info.arch, info.gpus) != want:
        raise _bad(
            index,
            f"is {info.family}/{info.arch}/{info.gpus} GPU(s) but runner-type {profile.runner_type!r} "
            f"needs {profile.family}/{profile.arch}/{profile.gpus} GPU(s): family, architecture and "
            "GPU count must be kept",
        )
    return info


def _check_duplicate(
    index: int, total: int, item: dict[str, object], new: Candidate, seen: list[Candidate]
) -> None:
    """A repeated label is allowed only as the final candidate, with its own deadline, same group."""
    earlier = next((c for c in seen if _same_pool(c.labels, new.labels)), None)
    if earlier is None:
        return
    if index != total:
        raise _bad(
            index,
            f"repeats labels {new.label_text!r}; a repeat is allowed only as the final candidate",
        )
    if "queue-timeout-minutes" not in item:
        raise _bad(index, "repeats an earlier pool and must set its own queue-timeout-minutes")
    if earlier.group != new.group:
        raise _bad(
            index,
            f"repeats an earlier pool with another group ({new.group!r} vs {earlier.group!r})",
        )


def _same_pool(a: str | tuple[str, ...], b: str | tuple[str, ...]) -> bool:
    """Two candidates name the same pool when their NVIDIA runner labels are equal.

    Extra labels (such as `self-hosted`) do not make a pool different: comparing whole label
    sets would let a repeat slip in before the final candidate.
    """
    return _pool_labels(a) == _pool_labels(b)


def _pool_labels(labels: str | tuple[str, ...]) -> set[str]:
    names = (labels,) if isinstance(labels, str) else labels
    return {name for name in names if parse_label(name) is not None}
