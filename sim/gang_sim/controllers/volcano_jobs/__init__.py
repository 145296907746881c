"""Volcano's own job controller (vc-controller-manager ``job-controller``): its ``batch.volcano.sh`` Jobs.

Modelled on volcano-sh/volcano v1.16.0-alpha.1 (commit a4b775ad), ``pkg/controllers/job``; see
``docs/volcano-job.md`` for the upstream facts each module follows.

- ``controller.py``: `VolcanoJobController`, the I/O: requests per job from the cache's changes,
  each executed as its job's phase takes its policies' action; writes, requeues with backoff,
  delayed actions, ``ttlSecondsAfterFinished``;
- ``policies.py``: which event each change is (``job_controller_handler.go``) and which action
  a job's policies pick (``applyPolicies``);
- ``status.py``: the phase state machine (``state/*.go``) as pure update functions;
- ``plan.py``: one ``syncJob`` or ``killPods`` as pure decisions, and the status that follows;
- ``build.py``: the PodGroup and pods (``createOrUpdatePodGroup``, ``createJobPod``);
- ``plugins.py``: the ``env``, ``svc`` and ``pytorch`` job plugins.

The job's admission (``mutatejob.volcano.sh``, ``validatejob.volcano.sh``) is the API server's:
``apiserver/kinds/volcano_job_webhooks.py``.
"""
