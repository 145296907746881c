"""The simulated kubelet: one per node, it keeps the Node alive and runs the pods bound to it.

Modelled on kubernetes/kubernetes ``pkg/kubelet`` (its status manager, node status and lease,
eviction manager and ``/containerLogs`` server), as an ordinary API client that writes what a
real kubelet writes, so clients cannot tell the difference:

- ``kubelet.py``: `Kubelet`, which admits the pods bound to its node and ends them (deletion,
  a machine that dies and comes back, node-pressure eviction);
- ``node.py``: the Node side, registration, heartbeats through the Lease, machine failure;
- ``pod.py``: one pod's containers from start to last exit, restarts in place included;
- ``status.py``: the pod status, Node and Lease bodies, as pure functions;
- ``eviction.py``: what a node-pressure eviction writes (``pkg/kubelet/eviction``);
- ``logs.py`` and ``server.py``: container output kept on the node and served over HTTPS
  where kube-apiserver's ``pods/log`` proxies;
- the pod runtimes, what a main container does: ``script_runtime.py`` (a timed script from
  annotations, held until its job's ``rendezvous.py``) or ``process_runtime.py`` (a real local
  process, e.g. a DDP script).
"""
