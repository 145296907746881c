"""Kubeflow Trainer v2 and the JobSet controller it builds on: TrainJob -> JobSet -> batch Jobs.

- The Trainer controller (kubeflow/trainer v2.3.0, ``pkg/controller/trainjob_controller.go``
  and its runtime plugins): ``trainjob_controller.py`` turns each TrainJob and its (Cluster)
  TrainingRuntime into a runtime snapshot, a Volcano PodGroup and a JobSet, and its status from
  the JobSet's; ``trainjob_build.py`` builds those objects and ``trainjob_status.py`` computes
  that status, both as pure functions.
- The JobSet controller (kubernetes-sigs/jobset v0.12, ``pkg/controllers/jobset_controller.go``):
  ``jobset_controller.py`` turns each JobSet into batch Jobs and a headless Service;
  ``jobset_plan.py`` decides one reconcile (create, delete, suspend, restart, the status) and
  ``jobset_build.py`` builds the children, as pure functions.

The Jobs are run by the batch/v1 Job controller (``../batch/``), their pods by the kubelets.
See ``docs/trainer-v2.md`` for the upstream facts each follows.
"""
