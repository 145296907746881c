"""What one running API server holds: configuration, registry, store, verbs, log streams and faults."""

from __future__ import annotations

from dataclasses import dataclass, field

from gang_sim.apiserver.faults.injector import FaultInjector
from gang_sim.apiserver.gc import DEFAULT_REACTION_DELAY
from gang_sim.apiserver.kinds.core import SIM_TOLERATION_SECONDS, SYSTEM_PRIORITY_CLASSES
from gang_sim.apiserver.kubelet_proxy import LogStreams
from gang_sim.apiserver.operations import Api
from gang_sim.apiserver.registry import Registry
from gang_sim.apiserver.resources import builtin_registry, with_default_tolerations
from gang_sim.apiserver.store import Store

INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


@dataclass
class ServerConfig:
    """Tunables. ``token=None`` disables authentication.

    :param event_window: events kept for watches and consistent pagination; older
        resourceVersions get 410 Expired (small values let tests force compaction).
    :param bookmark_interval: seconds between BOOKMARK events on idle watches that asked.
    :param watch_timeout: (min, max) seconds for watches without ``timeoutSeconds``; like
        kube-apiserver's ``--min-request-timeout`` a random value in between is used.
    :param sim_endpoints: serve the simulator-only ``/sim/v1/...`` endpoints (metrics, faults);
        False answers them as kube-apiserver answers any unknown path (404, plain text).
    :param gc_delay: seconds the garbage collector takes to react to a change (`gc.Collector`).
    :param default_not_ready_toleration_seconds: the ``tolerationSeconds`` of the
        ``node.kubernetes.io/not-ready:NoExecute`` toleration every new pod gets unless it has one
        (the DefaultTolerationSeconds admission plugin; kube-apiserver's
        ``--default-not-ready-toleration-seconds``, 300 upstream, 3 here so that the pods of a
        failed node go within seconds).
    :param default_unreachable_toleration_seconds: the same for ``node.kubernetes.io/unreachable``
        (``--default-unreachable-toleration-seconds``, 300 upstream, 3 here).
    """

    token: str | None = None
    event_window: int = 10_000
    watch_queue_size: int = 10_000
    bookmark_interval: float = 60.0
    watch_timeout: tuple[float, float] = (1800.0, 3600.0)
    sim_endpoints: bool = True
    gc_delay: float = DEFAULT_REACTION_DELAY
    default_not_ready_toleration_seconds: int = SIM_TOLERATION_SECONDS
    default_unreachable_toleration_seconds: int = SIM_TOLERATION_SECONDS
    server_address: str = "127.0.0.1:0"
    extra_registry: Registry | None = field(default=None, repr=False)


class ServerState:
    def __init__(self, config: ServerConfig):
        self.config = config
        self.registry = with_default_tolerations(
            config.extra_registry or builtin_registry(),
            config.default_not_ready_toleration_seconds,
            config.default_unreachable_toleration_seconds,
        )
        self.store = Store(window=config.event_window, watch_queue_size=config.watch_queue_size)
        self.api = Api(self.registry, self.store, gc_delay=config.gc_delay)
        self.log_streams = LogStreams()
        self.faults = FaultInjector(self)
        self._seed()

    def _seed(self) -> None:
        """What a fresh kube-apiserver holds: the system namespaces and priority classes."""
        namespaces = self.registry.by_key("/namespaces")
        classes = self.registry.by_key("scheduling.k8s.io/priorityclasses")
        if namespaces is not None:
            for name in INITIAL_NAMESPACES:
                self.api.create(namespaces, "", {"metadata": {"name": name}})
        if classes is not None:
            for name, value in SYSTEM_PRIORITY_CLASSES.items():
                self.api.create(
                    classes,
                    "",
                    {
                        "metadata": {"name": name},
                        "value": value,
                        "description": "Used for system critical pods that must not be moved from their "
                        "current node.",
                    },
                )
