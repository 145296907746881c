from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_gang.model.quantity import QuantityError, format_quantity, parse_quantity, sum_resources


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500m", Decimal("0.5")),
        ("4", Decimal(4)),
        ("16Gi", Decimal(16 * 1024**3)),
        ("1.5Gi", Decimal("1.5") * 1024**3),
        ("2k", Decimal(2000)),
        ("1e3", Decimal(1000)),
        ("1E-3", Decimal("0.001")),
        ("100n", Decimal("0.0000001")),
        (".5", Decimal("0.5")),
        (3, Decimal(3)),
        (0.25, Decimal("0.25")),
    ],
)
def test_parse_quantity_reads_every_suffix_kind(text: str | int | float, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    "bad", ["", "16GB", "Gi", "1.2.3", "4 cpus", "1e", "--1", "16gi", "1Gi\n", True, None, [1]]
)
def test_parse_quantity_rejects_non_quantities(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)  # type: ignore[arg-type]


def test_format_quantity_prefers_exact_binary_units_for_binary_inputs() -> None:
    assert format_quantity(Decimal(32 * 1024**3), binary=True) == "32Gi"
    assert format_quantity(Decimal(1536 * 1024**2), binary=True) == "1536Mi"
    assert format_quantity(Decimal("4.5")) == "4500m"
    assert format_quantity(Decimal(8)) == "8"


def test_sum_resources_adds_key_by_key_and_keeps_units() -> None:
    total = sum_resources(
        [{"cpu": "500m", "memory": "1Gi"}, {"cpu": 2, "memory": "512Mi", "nvidia.com/gpu": 1}]
    )
    assert total == {"cpu": "2500m", "memory": "1536Mi", "nvidia.com/gpu": "1"}


@given(st.integers(min_value=0, max_value=10**12), st.sampled_from(["", "m", "k", "Mi", "Gi", "Ki"]))
def test_formatted_quantities_parse_back_to_the_same_value(number: int, suffix: str) -> None:
    value = parse_quantity(f"{number}{suffix}")
    assert parse_quantity(format_quantity(value, binary=suffix.endswith("i"))) == value


@pytest.mark.parametrize("text", ["1K", " 5", "NaN", "Infinity"])
def test_what_the_official_parser_lets_through_and_the_api_server_refuses_is_refused(text: str) -> None:
    from kubernetes.utils.quantity import parse_quantity as official

    official(text)  # the arithmetic parser takes it: the grammar check is what refuses it
    with pytest.raises(QuantityError, match="not a Kubernetes quantity"):
        parse_quantity(text)


def test_a_boolean_is_not_one_quantity_though_the_official_parser_reads_it_as_a_number() -> None:
    with pytest.raises(QuantityError, match="boolean"):
        parse_quantity(True)
