"""The Kubeflow training-operator (v1.9), PyTorchJob only: PyTorchJob -> pods, Services, PodGroup.

Modelled on kubeflow/training-operator v1.9: ``ReconcileJobs`` of
``pkg/controller.v1/common/job.go`` for the decisions, ``pkg/controller.v1/pytorch`` for the
PyTorchJob's pods, Services and environment, ``pkg/util/status.go``/``pkg/core/status.go`` for
its conditions (``docs/architecture.md#pytorchjob`` and ``#training-operator-gang``). Other job
kinds (TFJob, MPIJob...) are not simulated.

- ``pytorchjob_controller.py``: `TrainingOperator`, the controller around the plans: reads the
  cache, applies each plan over the API in a fixed order of steps, requeues and backs off;
- ``pytorchjob_watches.py``: which events wake which job (``SetupWithManager``'s predicates);
- ``pytorchjob_writes.py``: its idempotent writes, and which failures requeue a job;
- ``pytorchjob_plan.py``: one job's reconcile as a pure function (`plan_job`);
- ``pytorchjob_resources.py``: the pods, headless Services and Volcano PodGroup it creates;
- ``pytorchjob_status.py``: its conditions, replica statuses and messages;
- ``replica_pods.py``: reading a job's pods (replica slots, phases, exit codes, restarts).
"""
