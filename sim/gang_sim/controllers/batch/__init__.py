"""The batch/v1 Job controller: Jobs -> pods, their counts and conditions.

kube-controller-manager's Job controller (kubernetes/kubernetes ``pkg/controller/job``), for
what JobSet's Jobs use: Indexed and NonIndexed completion, ``parallelism``, ``backoffLimit``,
suspension. ``job_plan.py`` decides one Job's sync as a pure function (pods to create or
delete, the status to write); ``job_controller.py`` reads the cache and applies the plans over
the API, with the events the real controller records.
"""
