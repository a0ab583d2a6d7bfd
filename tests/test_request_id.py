"""The request id's grammar: what the coordinator writes, the guard and `stats` read back."""

from __future__ import annotations

import pytest

from runner_queue_fallback.core.request_id import RequestId, parse


def test_a_formatted_request_id_parses_back_to_its_parts() -> None:
    request_id = RequestId(9000000001, 2, 3, "0a1b2c3d")

    assert str(request_id) == "rqf-9000000001-2-3-0a1b2c3d"
    assert parse(str(request_id)) == request_id


@pytest.mark.parametrize(
    "text",
    [
        "hello",
        "rqf-1-1-1",  # no token
        "rqf-01-1-1-0a1b2c3d",  # leading zero
        "rqf-1-0-1-0a1b2c3d",  # attempt 0
        "rqf-1-1-1-0A1B2C3D",  # upper-case token
        "rqf-1-1-1-0a1b2c3d ",  # trailing space
        "rqf-1-1-1-0a1b2c3d\n",  # trailing newline
        " rqf-1-1-1-0a1b2c3d",
        "rqf-1-1-1-0a1b2c3dx",
        "rqf-\u0661-1-1-0a1b2c3d",  # non-ASCII digit
    ],
)
def test_anything_but_an_exact_request_id_is_refused(text: str) -> None:
    assert parse(text) is None
