"""Garbage-collector settings for a process that runs the simulator and nothing else.

The simulator's objects are JSON documents: dicts and lists without cycles, freed by reference
counting the moment they are dropped. CPython's cyclic collector still walks them. Its default
first threshold (700 net new containers) starts a young collection every few requests, and as
the informer caches and the store grow to tens of thousands of objects, the older generations'
collections walk all of them again and again. Measured with ``benchmarks/bench_scheduler.py``
(1,000 jobs x 8 replicas, one run each): 4.4 s of the API server's 40 s of CPU, 5.5 s of
Volcano's 31 s and 9.9 s of the other controllers' 39 s went to the collector; with the
thresholds below, 0.9, 0.4 and 1.0 s, and the run took 57 s instead of 68 s.

Only processes the simulator owns call `tune_garbage_collection`: the ``airflow-gang sim``
commands, the controllers' child processes and the benchmarks' cluster process. A process that
embeds a `SimCluster` (a test, ``dag.test()``) keeps its own settings.
"""

from __future__ import annotations

import gc

# A young collection per 50,000 net new containers (not 700); the middle and oldest generations
# as rarely relative to it. Cycles (tracebacks, finished tasks) still go, just in bigger batches.
SIMULATOR_GC_THRESHOLDS = (50_000, 20, 10)


def tune_garbage_collection() -> None:
    """Collect cycles rarely, and never walk what exists at startup (modules, classes) again."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*SIMULATOR_GC_THRESHOLDS)
