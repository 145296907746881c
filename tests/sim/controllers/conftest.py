"""Fixtures for controller tests: one real API server over HTTPS for the session (clients and
namespaces come from tests/sim/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gang_sim.apiserver.server import ApiServerHandle, start_apiserver


@pytest.fixture(scope="session")
def apiserver() -> Iterator[ApiServerHandle]:
    with start_apiserver() as handle:
        yield handle
