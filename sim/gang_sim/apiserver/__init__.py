"""Kubernetes REST API subset served over real HTTP (FastAPI + uvicorn).

Faithful enough that the official ``kubernetes``/``kubernetes_asyncio`` clients, Airflow's
``KubernetesHook`` and ``kubectl`` cannot tell it from kube-apiserver for the kinds and verbs
the project uses. Start it with :func:`gang_sim.apiserver.server.start_apiserver`
(background thread, returns a handle with ``url``, ``token``, ``kubeconfig_path``, ``stop()``)
or ``airflow-gang sim apiserver --port N --kubeconfig PATH``.

How the pieces fit (each module has one job):

- ``registry.py`` / ``resources.py``: every kind is one :class:`ResourceInfo` row (group,
  version, kind, plural, scope, subresources, schema, field selectors, hooks).
- ``routes.py`` (+ ``params.py``, ``watch_stream.py``, ``subresources.py``, ``scale.py``):
  generic handlers, one per HTTP method, for ``/api/v1/...`` and ``/apis/{group}/{version}/...``
  (reached through ``resource_dispatch.py``, the innermost middleware), plus discovery;
  ``kubelet_proxy.py``: ``pods/log`` relayed to the node's kubelet. JSON on the wire goes
  through ``../json_wire.py`` (msgspec).
- ``operations.py``: the verbs; ``admission.py``: decode -> mutate -> validate -> webhooks;
  ``gc.py``: deletion, finalizers and ownerReference garbage collection.
- ``store.py`` / ``watching.py``: one resourceVersion, a bounded event log, per-watcher queues.
- ``errors.py``: every failure is a ``Status`` with kube-apiserver's code, reason and wording.
- ``openapi.py`` / ``crd_loader.py``: structural schema defaulting, pruning and validation
  with built-in schemas or upstream CRD files.
- ``kinds/``: what is particular to each kind. Built-in defaulting and admission in
  ``kinds/core.py`` (batch/v1 Jobs in ``kinds/batch.py``, PodDisruptionBudgets in
  ``kinds/policy.py``); the admission webhooks in ``kinds/webhooks.py`` and the built-in
  schemas in ``kinds/schemas.py``; Kubeflow Trainer v2 and JobSet have theirs in
  ``kinds/trainer_webhooks.py`` and ``kinds/trainer_schemas.py`` (the schemas built from
  ``kinds/schema_parts.py``).
- ``app.py`` / ``server.py`` / ``listener.py`` (+ ``../certs.py``): HTTPS with a throwaway CA,
  bearer-token auth, the kubeconfig, a listener that an outage can take down and bring back.
- ``faults/``: fault injection (``gang_sim.faults.FaultSpec``): the injector and its
  counters, the middleware for errors and latency, the timed faults (outages, deletions, node
  failures) and the simulator-only ``/sim/v1/faults`` endpoint; watch faults act in
  ``watch_stream.py``. See ``docs/fault-injection.md``.

Pod logs: the server keeps none. ``GET /api/v1/namespaces/{ns}/pods/{name}/log`` (``container``,
``follow``, ``previous``, ``tailLines``, ``sinceSeconds``, ``sinceTime``, ``timestamps``,
``limitBytes``) is checked here and relayed, as kube-apiserver relays it, to
``https://<node address>:<kubeletEndpoint port>/containerLogs/...`` of the pod's node, where the
simulator's kubelets keep their containers' output. So the simulator's kubelets work the same
against this server and a real one.

Simulator-only endpoints (``/sim/v1/metrics``, ``/sim/v1/faults``) can be turned off
(``start_apiserver(sim_endpoints=False)``, ``airflow-gang sim apiserver --no-sim-endpoints``):
they then answer a plain-text 404 like any path kube-apiserver does not know. No controller
needs them.

Known, deliberate differences from kube-apiserver: JSON only (no protobuf, no server-side
apply, no ``/openapi/v3``; ``/openapi/v2`` serves an empty document so kubectl skips
client-side validation); one served version per group; no RBAC (one token, full access);
CEL rules in CRD schemas are not evaluated; garbage collection runs inside the deleting request
instead of shortly after it; the PyTorchJob defaults (replica key case, ``pytorchjob-port``)
are persisted, where the real operator applies them in memory; the kubelets' certificates are
not checked (kube-apiserver's default without ``--kubelet-certificate-authority``) and the
server presents no client certificate to them.
"""
