"""Names the simulator's API server and its controllers agree on without importing each other.

The controllers are ordinary API clients and must not import API server internals (and the API
server has no business importing controllers), so the few simulator-only conventions they share
over the wire live here.
"""

from __future__ import annotations

from gang_sim.version import __version__

CONTROLLERS_USER_AGENT = f"sim-controller-manager/{__version__}"
"""The ``User-Agent`` of every request the simulator's controllers send (Volcano, kube-scheduler,
training-operator, kubelets). Fault injection leaves these requests alone unless a spec's
``clients`` names them."""

NODE_FAILURE_ANNOTATION = "sim.airflow-gang.io/node-failure"
"""On a Node: the simulated machine is down. The simulator's kubelet of that node then behaves as
a dead machine (its containers die, it writes nothing; the node lifecycle controller marks the
node ``Unknown``) until the annotation goes."""

KUBELET_EVICTION_ANNOTATION = "sim.airflow-gang.io/kubelet-eviction"
"""On a Pod: its node's kubelet is short of a resource and evicts it (node-pressure eviction). The
value is JSON: ``{"resource": "memory", "threshold": "100Mi", "available": "80Mi"}`` and
optionally ``"usage"`` (the main container's use). Set by the API server's fault injection
(``kubelet_evictions``); the simulator's kubelet of the pod's node carries it out."""
