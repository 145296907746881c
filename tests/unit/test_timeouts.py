"""One rule for every admission timeout the operator and the sensors accept."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from airflow_gang.exceptions import GangSpecError
from airflow_gang.model.validation import positive_seconds


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, None),
        ("", None),
        ("None", None),
        (90, 90.0),
        (1.5, 1.5),
        ("60", 60.0),
        (dt.timedelta(minutes=2), 120.0),
    ],
)
def test_seconds_from_numbers_text_and_timedeltas(value: Any, seconds: float | None) -> None:
    assert positive_seconds(value, "admission_timeout") == seconds


@pytest.mark.parametrize("value", [0, -5, "soon", dt.timedelta(0), float("nan"), [30]])
def test_anything_else_names_the_field_and_the_fix(value: Any) -> None:
    with pytest.raises(
        GangSpecError, match=r"admission_timeout=.* is invalid: must be a positive number"
    ) as error:
        positive_seconds(value, "admission_timeout")
    assert error.value.field == "admission_timeout"
