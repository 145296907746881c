"""Seeded chaos lifecycles on the package's real stack (see benchmarks/chaos.py and conftest.py).

Thirty-odd DAG runs (success, replica failure, admission timeout then retry, kill, clear; sync
and deferrable; provider and training-operator gangs), six at a time, while the API server
answers 5 % of requests with 500/503/429, cuts watches every few seconds, goes away twice, one
job is deleted from outside and the triggerer is SIGKILLed and restarted. The provider's rule
must hold throughout: every task ends as its lifecycle says, nothing is left behind, no try
submits two jobs, and no job is deleted but for a reason the rule allows.
``benchmarks/bench_chaos.py`` runs the same engine with 200 lifecycles.
"""

from __future__ import annotations

import os

import pytest

from gang_sim.cluster import SimCluster
from gang_stack import AirflowStack
from tests.support.benchmarks import benchmark_module
from tests.support.realstack import component_logs

SEED = int(os.environ.get("GANG_CHAOS_SEED", "25"))
LIFECYCLES = int(os.environ.get("GANG_CHAOS_LIFECYCLES", "30"))
CONCURRENCY = 6


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_seeded_chaos_lifecycles_keep_the_deletion_rule(cluster: SimCluster, stack: AirflowStack) -> None:
    chaos = benchmark_module("chaos")  # the engine benchmarks/bench_chaos.py runs too
    report = chaos.run_chaos(cluster, stack, seed=SEED, lifecycles=LIFECYCLES, concurrency=CONCURRENCY)
    table = report.table()
    print(table)
    missed = report.missed_targets()
    assert not missed, (
        f"{table}\n\ntargets missed:\n"
        + "\n".join(missed)
        + f"\n\nunexpected lifecycles:\n{report.unexpected()}\n\n{component_logs(stack)}"
    )
