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
a failed node (NotReady, its pods Failed with reason ``NodeLost``) until the annotation goes."""
