"""Fault injection in the simulated API server: what a `gang_sim.faults.FaultSpec` does to it.

Simulator-only, with no upstream module of its own: each fault reproduces what clients see of a
real cluster's trouble, in kube-apiserver's own words — a 503 or a 429 with ``Retry-After`` as
API Priority and Fairness answers, latency, broken or expired watches, the server going down
(its listener closing), objects deleted by someone else, nodes whose machine dies and
node-pressure evictions by the kubelet.

- ``injector.py``: holds the active spec, decides per request with seeded randomness, counts;
- ``middleware.py``: the ASGI middleware that applies per-request errors and latency;
- ``clock.py``: the one thread that runs the timed faults in order;
- ``actions.py``: the timed faults that change stored objects, through the ordinary verbs;
- ``routes.py``: ``/sim/v1/faults``, to read, replace and clear the spec over HTTP.

Watch faults act in ``../watch_stream.py``. See ``docs/fault-injection.md``.
"""
