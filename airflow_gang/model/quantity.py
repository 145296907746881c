"""Kubernetes resource quantities ("500m", "16Gi", "1e3") as exact decimals, and back.

Pure functions, no I/O: the job spec needs them to validate requests and to sum a gang's
`minResources` exactly as the training-operator does. Parsing is the official client's
(`kubernetes.utils.quantity`), behind a check of apimachinery's grammar; rendering picks the
shortest exact form, as the API server prints it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal

_BINARY_SUFFIXES = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
# The apimachinery grammar: a signed decimal number followed by a binary SI suffix, a decimal SI
# suffix, or a decimal exponent (e/E with an optional sign).
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)

Quantity = str | int | float | Decimal


class QuantityError(ValueError):
    """A value is not a Kubernetes quantity."""


def parse_quantity(value: Quantity) -> Decimal:
    """Return the exact value of a quantity; raise `QuantityError` when it is not one.

    The arithmetic is the official client's (`kubernetes.utils.quantity.parse_quantity`); what is
    checked here first is what the API server would refuse and that client lets through: a
    boolean, a non-finite number, a string outside apimachinery's grammar (``"1K"``, ``" 5"``,
    ``"NaN"``), so a bad request names its field before anything is sent.

    :param value: a Kubernetes quantity string such as ``"500m"``, ``"16Gi"``, ``"2"``, or a number.
    """
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is a boolean, not a quantity")
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise QuantityError(f"{value!r} is not a finite number")
        value = repr(value)  # the decimal the user wrote, not the binary float's expansion
    elif isinstance(value, str):
        _check_grammar(value)
    elif not isinstance(value, int | Decimal):
        raise QuantityError(f"{value!r} ({type(value).__name__}) is not a quantity")
    try:
        result = _official_parse(value)
    except ValueError as error:
        raise QuantityError(f"{value!r} is not a Kubernetes quantity: {error}") from error
    if not result.is_finite():
        raise QuantityError(f"{value!r} is not a finite number")
    return result


def _official_parse(value: Quantity) -> Decimal:
    # Imported on first use, not with this module: the triggerer imports a trigger's modules (this
    # one among them) on its event loop, where importing the client package would block it; the
    # triggers never parse a quantity, the workers and the page (which load the client anyway) do.
    from kubernetes.utils.quantity import parse_quantity as official

    parsed: Decimal = official(value)
    return parsed


def _check_grammar(text: str) -> None:
    if _QUANTITY.fullmatch(text) is None:
        raise QuantityError(f"{text!r} is not a Kubernetes quantity (examples: '500m', '4', '16Gi', '1e3')")


def format_quantity(value: Decimal, *, binary: bool = False) -> str:
    """Render a quantity in the shortest exact form Kubernetes would print.

    :param value: the exact amount.
    :param binary: prefer binary suffixes (Ki, Mi, Gi, ...) when they are exact, as for memory
        that was given in binary units.
    """
    if value == value.to_integral_value():
        integer = int(value)
        if binary and integer != 0:
            for suffix, power in sorted(_BINARY_SUFFIXES.items(), key=lambda item: -item[1]):
                if integer % (1024**power) == 0:
                    return f"{integer // 1024**power}{suffix}"
        return str(integer)
    for suffix, exponent in (("m", -3), ("u", -6), ("n", -9)):
        scaled = value.scaleb(-exponent)
        if scaled == scaled.to_integral_value():
            return f"{int(scaled)}{suffix}"
    # Kubernetes rounds sub-nano amounts up to the next nano unit.
    return f"{int(value.scaleb(9).to_integral_value(rounding='ROUND_CEILING'))}n"


def uses_binary_suffix(value: Quantity) -> bool:
    """Whether a quantity was written with a binary suffix such as ``Gi``."""
    return isinstance(value, str) and value[-2:] in _BINARY_SUFFIXES


def sum_resources(resource_lists: Iterable[Mapping[str, Quantity]]) -> dict[str, str]:
    """Add resource lists key by key and render each total, keeping binary units where used."""
    totals: dict[str, Decimal] = {}
    binary: dict[str, bool] = {}
    for resources in resource_lists:
        for name, amount in resources.items():
            totals[name] = totals.get(name, Decimal(0)) + parse_quantity(amount)
            binary[name] = binary.get(name, False) or uses_binary_suffix(amount)
    return {name: format_quantity(total, binary=binary[name]) for name, total in sorted(totals.items())}
