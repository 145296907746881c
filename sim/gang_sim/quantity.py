"""Kubernetes resource quantities as the simulated API server and controllers handle them.

Parsing is the official client's (`kubernetes.utils.parse_quantity`, exact decimals), not the
provider's own parser: the simulator is the oracle the provider is tested against, so a bug in
the provider's quantity handling must not be mirrored on this side. Printing is written here:
the API server's canonical form (the shortest exact one, binary suffixes where the amount was
given in them, sub-nano amounts rounded up to ``1n``), which the client library does not offer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import ROUND_CEILING, Decimal
from typing import Any

from kubernetes.utils import parse_quantity as _client_parse_quantity

_BINARY = (("Ei", 6), ("Pi", 5), ("Ti", 4), ("Gi", 3), ("Mi", 2), ("Ki", 1))
_SUBUNITS = (("m", 3), ("u", 6), ("n", 9))


def parse_quantity(amount: Any) -> Decimal:
    """The exact value of ``amount`` (``"500m"``, ``"16Gi"``, ``4``); ValueError if it is none."""
    if isinstance(amount, bool):
        raise ValueError(f"{amount!r} is not a quantity")
    value: Decimal = _client_parse_quantity(amount)
    return value


def format_quantity(value: Decimal, *, binary: bool = False) -> str:
    """``value`` as the API server prints it; ``binary`` prefers Ki/Mi/Gi... when exact."""
    if value == value.to_integral_value():
        whole = int(value)
        if binary and whole:
            suffix, power = next(((s, p) for s, p in _BINARY if whole % 1024**p == 0), ("", 0))
            return f"{whole // 1024**power}{suffix}"
        return str(whole)
    for suffix, digits in _SUBUNITS:
        scaled = value.scaleb(digits)
        if scaled == scaled.to_integral_value():
            return f"{int(scaled)}{suffix}"
    return f"{int(value.scaleb(9).to_integral_value(rounding=ROUND_CEILING))}n"


def sum_resources(resource_lists: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Resource lists added name by name, each total printed (binary where any part was)."""
    totals: dict[str, Decimal] = {}
    binary: set[str] = set()
    for resources in resource_lists:
        for name, amount in resources.items():
            totals[name] = totals.get(name, Decimal(0)) + parse_quantity(amount)
            if isinstance(amount, str) and amount[-2:] in dict(_BINARY):
                binary.add(name)
    return {name: format_quantity(total, binary=name in binary) for name, total in sorted(totals.items())}
