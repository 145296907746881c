"""The core control plane's controllers, for Pods and Nodes: kube-scheduler and kube-controller-manager's.

- ``kube_scheduler.py``: the default scheduler, first fit one pod at a time, with no notion of
  a gang (``pkg/scheduler``); it places every pod Volcano does not.
- ``node_lifecycle.py``: judges nodes by their heartbeats, marks them ``Unknown`` and taints
  them (``pkg/controller/nodelifecycle``).
- ``taint_eviction.py``: deletes the pods that do not tolerate their node's ``NoExecute``
  taints (``pkg/controller/tainteviction``).
- ``pod_gc.py``: force-deletes the pods of nodes that are gone or out of service
  (``pkg/controller/podgc``).
- ``disruption.py``: keeps PodDisruptionBudget status current for the Eviction API
  (``pkg/controller/disruption``).

All are kubernetes/kubernetes controllers; each module names the upstream functions it
follows. The batch/v1 Job controller, kube-controller-manager's too, is in ``../batch/``.
"""
