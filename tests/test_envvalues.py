"""envvalues: the writer-lock timeout read before anything else is imported."""

from __future__ import annotations

import math

import pytest

from qmem_git.envvalues import DEFAULT_LOCK_TIMEOUT, lock_timeout


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, DEFAULT_LOCK_TIMEOUT),
        ("", DEFAULT_LOCK_TIMEOUT),
        ("2.5", 2.5),
        ("0", 0.0),
        ("-1", -1.0),  # wait as long as it takes
        ("abc", DEFAULT_LOCK_TIMEOUT),
        ("nan", DEFAULT_LOCK_TIMEOUT),  # would compare false both ways: wait forever
        ("-NaN", DEFAULT_LOCK_TIMEOUT),
    ],
)
def test_lock_timeout(value: str | None, expected: float) -> None:
    env = {} if value is None else {"QMEM_LOCK_TIMEOUT": value}
    assert lock_timeout(env) == expected


def test_an_infinite_timeout_stays_infinite() -> None:
    assert math.isinf(lock_timeout({"QMEM_LOCK_TIMEOUT": "inf"}))
