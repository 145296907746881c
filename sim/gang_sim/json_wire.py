"""JSON as the simulator's API server and controllers put it on the wire.

Every request and watch event is JSON encoded once and decoded at least once, a fifth of the
embedded cluster's CPU time with the standard library's ``json``. msgspec (which Airflow itself
depends on) does both in C several times faster and produces the same documents: same key order,
compact separators. Its output is UTF-8 rather than ASCII with ``\\u`` escapes, which every JSON
client reads the same.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


def dumps(value: Any) -> bytes:
    """``value`` as compact JSON bytes."""
    try:
        return _encoder.encode(value)
    except (TypeError, OverflowError):  # an int beyond 64 bits, a non-str key: the slow path
        return json.dumps(value, separators=(",", ":")).encode()


def loads(raw: bytes | str) -> Any:
    """The document in ``raw``; a :class:`ValueError` (msgspec's ``DecodeError``) if it is not JSON."""
    return _decoder.decode(raw)
