"""`SimCluster`: an embedded Kubernetes cluster with Volcano and the Kubeflow training-operator.

It starts the API server, then every controller as an ordinary API client on one background
event loop (in child processes with ``isolate_controllers=True``): Volcano, the default
kube-scheduler, the training-operator, and one kubelet per simulated node. It writes a
kubeconfig that the official clients, Airflow's KubernetesHook and kubectl can use. ``stop()``
(or leaving the ``with`` block) ends everything it started.

    with SimCluster(nodes=2, gpus_per_node=2) as cluster:
        kubernetes.config.load_kube_config(cluster.kubeconfig_path)

``faults=`` (or ``set_faults()`` at run time) injects API server faults for clients other than
the cluster's own controllers: errors, latency, cut watches, outages, external deletions, node
failures and kubelet evictions (``gang_sim.faults``, ``docs/fault-injection.md``).

Pods are disrupted as on a real cluster: the Eviction API honours PodDisruptionBudgets
(``gang_sim.drain.drain_node`` drains a node through it), a failed node goes ``Unknown`` after
``node_monitor_grace_period`` and its pods are deleted once their toleration of the
``unreachable`` taint runs out (``default_unreachable_toleration_seconds``), and pod GC removes
the pods of a deleted Node. Both times are a few seconds here (40-50 s and 300 s upstream).

Kubeflow Trainer v2 runs too: a TrainJob (``trainer.kubeflow.org/v1alpha1``) becomes a JobSet,
batch Jobs and pods (the ``trainer``, ``jobset`` and ``job-controller`` controllers). The cluster
starts with two ClusterTrainingRuntimes (``gang_sim.trainer_runtimes``): ``torch-distributed``,
gang-scheduled by Volcano through a PodGroup per TrainJob, and ``torch-distributed-no-gang``,
placed pod by pod by the default scheduler (the no-gang scenario).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from gang_sim.apiserver.kinds.core import SIM_TOLERATION_SECONDS
from gang_sim.apiserver.server import ApiServerHandle, start_apiserver
from gang_sim.controller_process import ControllerProcesses
from gang_sim.controllers.core.node_lifecycle import DEFAULT_GRACE_PERIOD
from gang_sim.controllers.manager import ControllerManager
from gang_sim.controllers.volcano.conf import SchedulerConf, load_scheduler_conf
from gang_sim.faults import FaultSpec, load_fault_spec
from gang_sim.topology import (
    CONTROLLER_NAMES,
    Runtime,
    Topology,
    controller_factories,
    controller_names,
)
from gang_sim.trainer_runtimes import install_default_runtimes

# The topology names lived here before `gang_sim.topology`; callers still import them here.
__all__ = [
    "CONTROLLER_NAMES",
    "Runtime",
    "SimCluster",
    "Topology",
    "controller_factories",
    "controller_names",
]


class SimCluster:
    """An embedded cluster: API server + Volcano + kube-scheduler + training-operator + kubelets.

    :param nodes: simulated nodes, each with ``gpus_per_node`` ``nvidia.com/gpu``,
        ``cpus_per_node`` CPUs and ``memory_per_node`` memory.
    :param queues: extra Volcano queues, name -> capability (``{"nvidia.com/gpu": 2}``) or None
        for no cap. ``root`` and ``default`` always exist.
    :param overcommit_factor: Volcano's enqueue overcommit factor (1.2 like Volcano's default).
    :param training_operator_gang: ``"volcano"`` mirrors the operator's
        ``--gang-scheduler-name=volcano`` flag (it then creates PodGroups itself).
    :param runtime: ``"script"`` (pods behave as their ``sim.airflow-gang.io/*`` annotations say)
        or ``"process"`` (the container command runs as a local process).
    :param schedule_period: seconds between Volcano scheduling sessions (1 s like Volcano).
    :param port: API server port (0 picks a free one).
    :param kubeconfig_path: where to write the kubeconfig (default: a temporary file).
    :param workdir: working directory of process-runtime pods.
    :param node_address: where each node's kubelet API (container logs, which ``pods/log``
        proxies to) listens; advertised as the Node's InternalIP.
    :param tls_sans: extra DNS names or IP addresses for the API server's certificate.
    :param advertise_url: the server URL written into the kubeconfig, for clients that reach
        the API server under another name (``https://kube-sim:6443`` from other containers);
        the controllers keep using the address reachable from this machine.
    :param faults: a fault spec applied once the cluster is ready (its times count from then):
        a `FaultSpec`, a mapping, or a path to a YAML/JSON file. Invalid specs raise
        `FaultSpecError` here, before anything starts.
    :param node_monitor_grace_period: seconds a node may stay silent before the node lifecycle
        controller marks it ``Unknown`` and taints it ``unreachable`` (kube-controller-manager's
        ``--node-monitor-grace-period``: 40 s, 50 s from v1.32; 10 s here). The kubelets renew their
        Lease every quarter of it.
    :param default_not_ready_toleration_seconds: kube-apiserver's
        ``--default-not-ready-toleration-seconds`` (300 upstream; 3 here).
    :param default_unreachable_toleration_seconds: kube-apiserver's
        ``--default-unreachable-toleration-seconds`` (300 upstream; 3 here): how long a pod without
        a toleration of its own stays on a node that went ``Unknown``.
    :param scheduler_conf: Volcano's ``volcano-scheduler.conf``: a mapping, YAML text or a path
        to a YAML file (``actions: "enqueue, allocate, preempt, reclaim, backfill"`` and plugin
        ``tiers``; `gang_sim.controllers.volcano.conf`, ``docs/volcano-preemption.md``). None is
        Volcano's compiled-in default, with no preempt or reclaim. Invalid ones raise
        `SchedulerConfError` here, before anything starts.
    :param isolate_controllers: run the controllers in child processes (`ControllerProcesses`:
        Volcano in one, the others in another), so that they and the API server stop sharing
        one interpreter: for large simulations (``benchmarks/bench_scheduler.py``,
        ``airflow-gang sim``). It costs a second or two at start, and the controllers' logs go
        to the children's stderr.
    """

    def __init__(
        self,
        *,
        nodes: int = 2,
        gpus_per_node: int = 2,
        cpus_per_node: int | str = 16,
        memory_per_node: str = "64Gi",
        queues: Mapping[str, Mapping[str, Any] | None] | None = None,
        overcommit_factor: float = 1.2,
        training_operator_gang: str | None = None,
        runtime: Runtime = "script",
        schedule_period: float = 1.0,
        port: int = 0,
        host: str = "127.0.0.1",
        kubeconfig_path: str | Path | None = None,
        workdir: str | None = None,
        node_address: str = "127.0.0.1",
        auth: bool = True,
        tls_sans: Iterable[str] = (),
        advertise_url: str | None = None,
        faults: FaultSpec | Mapping[str, Any] | str | Path | None = None,
        isolate_controllers: bool = False,
        node_monitor_grace_period: float = DEFAULT_GRACE_PERIOD,
        default_not_ready_toleration_seconds: int = SIM_TOLERATION_SECONDS,
        default_unreachable_toleration_seconds: int = SIM_TOLERATION_SECONDS,
        scheduler_conf: SchedulerConf | Mapping[str, Any] | str | Path | None = None,
    ) -> None:
        self.faults = load_fault_spec(faults) if faults is not None else None
        conf = load_scheduler_conf(scheduler_conf) if scheduler_conf is not None else None
        self.topology = Topology(
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            cpus_per_node=cpus_per_node,
            memory_per_node=memory_per_node,
            queues=dict(queues or {}),
            overcommit_factor=overcommit_factor,
            training_operator_gang=training_operator_gang,
            runtime=runtime,
            schedule_period=schedule_period,
            workdir=workdir,
            node_address=node_address,
            node_monitor_grace_period=node_monitor_grace_period,
            scheduler_conf=conf.to_mapping() if conf is not None else None,
        )
        self._tolerations = (default_not_ready_toleration_seconds, default_unreachable_toleration_seconds)
        self._port = port
        self._host = host
        self._kubeconfig_path = kubeconfig_path
        self._auth = auth
        self._tls_sans = tuple(tls_sans)
        self._advertise_url = advertise_url
        self._isolate_controllers = isolate_controllers
        self.apiserver: ApiServerHandle | None = None
        self.controllers: ControllerManager | ControllerProcesses | None = None

    @property
    def kubeconfig_path(self) -> str:
        if self.apiserver is None:
            raise RuntimeError("the cluster is not running: call start() or use it as a context manager")
        return self.apiserver.kubeconfig_path

    @property
    def url(self) -> str:
        if self.apiserver is None:
            raise RuntimeError("the cluster is not running")
        return self.apiserver.url

    @property
    def advertise_url(self) -> str:
        """The server URL in the kubeconfig (``url`` unless ``advertise_url`` was given)."""
        if self.apiserver is None:
            raise RuntimeError("the cluster is not running")
        return self.apiserver.advertise_url

    def start(self, timeout: float = 30.0) -> SimCluster:
        self.apiserver = start_apiserver(
            port=self._port,
            host=self._host,
            kubeconfig_path=self._kubeconfig_path,
            auth=self._auth,
            tls_hosts=self._tls_sans,
            advertise_url=self._advertise_url,
            controllers_loopback=True,
            default_not_ready_toleration_seconds=self._tolerations[0],
            default_unreachable_toleration_seconds=self._tolerations[1],
        )
        try:
            # Before the controllers: a TrainJob created as soon as start() returns finds them.
            with self.api_client() as api:
                install_default_runtimes(api)
            kubeconfig = self.apiserver.controllers_kubeconfig_path
            if self._isolate_controllers:
                self.controllers = ControllerProcesses(kubeconfig, self.topology)
            else:
                self.controllers = ControllerManager(kubeconfig, controller_factories(self.topology))
            self.controllers.start(timeout)
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        if self.faults is not None:
            self.apiserver.state.faults.apply(self.faults)
        return self

    def set_faults(self, spec: FaultSpec | Mapping[str, Any] | str | Path) -> FaultSpec:
        """Replace the active fault spec; its ``start``/``at`` times count from now."""
        return self._running().set_faults(spec)

    def clear_faults(self) -> None:
        """Stop injecting faults; an outage or node failure in progress ends now."""
        self._running().clear_faults()

    def fault_counts(self) -> dict[str, int]:
        """Faults injected so far, by kind (``error_503``, ``outage``, ...; see ``FAULT_KINDS``)."""
        return self._running().state.faults.counts()

    def _running(self) -> ApiServerHandle:
        if self.apiserver is None:
            raise RuntimeError("the cluster is not running: call start() or use it as a context manager")
        return self.apiserver

    def _wait_ready(self, timeout: float) -> None:
        """Return once every node is registered and the default queues exist."""
        expected_nodes = set(self.topology.node_names())
        expected_queues = {"root", "default", *self.topology.queues}
        deadline = time.monotonic() + timeout
        with self.api_client() as api:
            core, custom = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
            while True:
                nodes = {n.metadata.name for n in core.list_node().items}
                queues = {
                    q["metadata"]["name"]
                    for q in custom.list_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues")[
                        "items"
                    ]
                }
                if expected_nodes <= nodes and expected_queues <= queues:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"simulated cluster not ready after {timeout:.0f}s: "
                        f"nodes {sorted(nodes)}, queues {sorted(queues)}"
                    )
                time.sleep(0.05)

    def api_client(self) -> k8s.ApiClient:
        """A new official ``kubernetes`` ApiClient for this cluster (close it, or use ``with``).

        It reaches the API server from this machine, also when the kubeconfig advertises
        another address.
        """
        if self.apiserver is None:
            raise RuntimeError("the cluster is not running: call start() or use it as a context manager")
        return k8s_config.new_client_from_config(config_file=self.apiserver.local_kubeconfig_path)

    def stop(self) -> None:
        if self.controllers is not None:
            self.controllers.stop()
            self.controllers = None
        if self.apiserver is not None:
            self.apiserver.stop()
            self.apiserver = None

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
