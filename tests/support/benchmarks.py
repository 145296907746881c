"""Modules of benchmarks/ for the tests that share them (the chaos engine, `benchmark_module("chaos")`).

benchmarks/ is neither a package nor on ``sys.path``: its scripts import their siblings by name
from their own folder. A test loads such a module from its file (as tests/bench does), once per
session, so the conftest and the test that both use it share one module.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def benchmark_module(name: str) -> ModuleType:
    """``benchmarks/<name>.py``, loaded on first use as ``benchmarks.<name>``."""
    qualified = f"benchmarks.{name}"
    loaded = sys.modules.get(qualified)
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(qualified, BENCHMARKS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as an import would: its classes' ``__module__`` names it.
    sys.modules[qualified] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[qualified]
        raise
    return module
