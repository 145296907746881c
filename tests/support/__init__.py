"""What the tests share, by purpose: test modules import from here, never from each other
(tests/unit/test_test_imports.py checks that).

- `cluster`: the embedded cluster's objects as tests read, make and remove them (API groups,
  what is left behind, a DAG's jobs, a job's pods, pods holding GPUs, a kubeconfig elsewhere);
- `submission`: `submit`, the one way a test creates a gang job as the operator does, and
  `gang_spec`, the usual gang;
- `job_watches`: watches recording every PyTorchJob created (and deleted) while a test runs;
- `dag_runs`: DAGs run in-process with ``dag.test()``: shared DAG sources and what a test reads
  off a run (task states, XComs, the run's report);
- `triggers`, `watch_cache`: a `GangJobTrigger` run in-process, its first event and its
  requests; the shared watch cache's cluster and ``submit`` fixtures (imported by name);
- `fault_proxy`: a reverse proxy that answers or drops chosen API requests;
- `pages`: the Gang jobs page's shared scenario as the page shows it;
- `crd_schemas`: the upstream CRD schemas, and what their pruning would drop;
- `realstack`: a real Airflow deployment's processes, logs, database and REST API, its gang
  sweep, and the timings of the process-fault scenarios;
- `benchmarks`: modules of benchmarks/ loaded by path (the chaos engine, benchmarks/chaos.py).

Fixtures stay in the conftest.py of the folders that use them. The older helper modules at the
top of tests/ (waiting, metadata, gang_page, the relays, statsd_listener) stay where they are:
tests/sim and other modules being changed elsewhere import them from there.
"""
