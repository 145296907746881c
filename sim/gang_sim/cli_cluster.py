"""``airflow-gang sim`` (the whole cluster) and ``airflow-gang sim controllers`` (attach mode)."""

from __future__ import annotations

import argparse
import ipaddress
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from gang_sim.process_tuning import tune_garbage_collection

if TYPE_CHECKING:
    from threading import Event

    from gang_sim.cluster import SimCluster
    from gang_sim.faults import FaultSpec

DEFAULT_KUBECONFIG = "sim.kubeconfig"
_RESOURCE_ALIASES = {"gpu": "nvidia.com/gpu", "gpus": "nvidia.com/gpu", "mem": "memory"}


def parse_queue(text: str) -> tuple[str, dict[str, str] | None]:
    """``research=gpu:4,cpu:16`` -> ("research", {"nvidia.com/gpu": "4", "cpu": "16"}).

    A bare ``NAME`` is a queue without a capability.
    """
    name, _, capability = text.partition("=")
    name = name.strip()
    if not name:
        raise argparse.ArgumentTypeError(f"--queue {text!r}: expected NAME or NAME=gpu:4,cpu:16")
    if not capability.strip():
        return name, None
    limits: dict[str, str] = {}
    for item in capability.split(","):
        resource, _, amount = item.partition(":")
        if not resource.strip() or not amount.strip():
            raise argparse.ArgumentTypeError(f"--queue {text!r}: each limit is RESOURCE:AMOUNT, e.g. gpu:4")
        limits[_RESOURCE_ALIASES.get(resource.strip(), resource.strip())] = amount.strip()
    return name, limits


def parse_advertise_url(text: str) -> str:
    """``https://kube-sim:6443``: the simulator serves HTTPS, so only https URLs with a host."""
    parts = urlsplit(text)
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:  # not a number, or out of range
        port_ok = False
    if parts.scheme != "https" or not parts.hostname or parts.path not in ("", "/") or not port_ok:
        raise argparse.ArgumentTypeError(f"--advertise-url {text!r}: expected https://HOST[:PORT]")
    return text.rstrip("/")


def parse_ip_address(text: str) -> str:
    """``--node-address``: a Node's InternalIP must be an IP address, not a name."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"--node-address {text!r}: expected an IP address") from error


def parse_faults(text: str) -> FaultSpec:
    """``--faults SPEC``: a YAML/JSON file path or inline JSON, validated now (errors name the field)."""
    from gang_sim.faults import FaultSpecError, load_fault_spec

    try:
        return load_fault_spec(text)
    except FaultSpecError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def parse_scheduler_conf(text: str) -> dict[str, Any]:
    """``--scheduler-conf FILE``: Volcano's volcano-scheduler.conf, validated now (errors name the field)."""
    from gang_sim.controllers.volcano.conf import SchedulerConfError, load_scheduler_conf

    try:
        return load_scheduler_conf(Path(text)).to_mapping()
    except SchedulerConfError as error:
        raise argparse.ArgumentTypeError(f"--scheduler-conf: {error}") from error


def add_faults_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--faults",
        default=None,
        type=parse_faults,
        metavar="SPEC",
        help="inject API server faults (errors, latency, watch cuts, outages, deletions, node failures) "
        "for clients other than the simulator's controllers: a YAML/JSON file or inline JSON; "
        "see docs/fault-injection.md",
    )


def _add_topology(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=2, help="simulated nodes (default: 2)")
    parser.add_argument("--gpus-per-node", type=int, default=2, help="nvidia.com/gpu per node (default: 2)")
    parser.add_argument("--cpus-per-node", default="16", help="CPUs per node (default: 16)")
    parser.add_argument("--memory-per-node", default="64Gi", help="memory per node (default: 64Gi)")
    parser.add_argument(
        "--queue",
        action="append",
        type=parse_queue,
        default=[],
        metavar="NAME[=gpu:4,cpu:16]",
        help="extra Volcano queue with an optional capability (repeatable)",
    )
    parser.add_argument(
        "--overcommit-factor", type=float, default=1.2, help="Volcano overcommit (default: 1.2)"
    )
    parser.add_argument(
        "--training-operator-gang",
        choices=["volcano"],
        default=None,
        help="mirror the training-operator's --gang-scheduler-name=volcano (it then creates PodGroups)",
    )
    parser.add_argument(
        "--runtime",
        choices=["script", "process"],
        default="script",
        help="script: pods follow their sim.airflow-gang.io annotations; process: run the command",
    )
    parser.add_argument(
        "--schedule-period", type=float, default=1.0, help="Volcano session period (default: 1s)"
    )
    parser.add_argument("--workdir", default=None, help="working directory of process-runtime pods")
    parser.add_argument(
        "--scheduler-conf",
        default=None,
        type=parse_scheduler_conf,
        metavar="FILE",
        help="Volcano's volcano-scheduler.conf (actions and plugin tiers), as vc-scheduler's flag of the "
        'same name; e.g. actions: "enqueue, allocate, preempt, reclaim, backfill" turns on preemption '
        "(default: Volcano's compiled-in enqueue, allocate, backfill); see docs/volcano-preemption.md",
    )
    parser.add_argument(
        "--node-monitor-grace-period",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="how long a node may stay silent before the node lifecycle controller marks it Unknown "
        "(kube-controller-manager's flag: 40-50 s upstream; default: 2); kubelets renew their Lease "
        "every quarter of it",
    )
    parser.add_argument(
        "--node-address",
        default="127.0.0.1",
        type=parse_ip_address,
        metavar="IP",
        help="address each simulated node's kubelet API (container logs) listens on and advertises as "
        "its InternalIP; the API server must reach it (default: 127.0.0.1, an API server on this machine)",
    )


def add_toleration_arguments(parser: argparse.ArgumentParser) -> None:
    """kube-apiserver's DefaultTolerationSeconds flags (300 upstream, 3 in the simulator)."""
    for condition in ("not-ready", "unreachable"):
        parser.add_argument(
            f"--default-{condition}-toleration-seconds",
            type=int,
            default=3,
            metavar="SECONDS",
            help=f"tolerationSeconds of the node.kubernetes.io/{condition}:NoExecute toleration every pod "
            "gets unless it has one (kube-apiserver's flag: 300 upstream; default: 3)",
        )


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    _add_topology(parser)
    add_toleration_arguments(parser)
    parser.add_argument("--port", type=int, default=0, help="API server port (default: a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: 127.0.0.1)")
    parser.add_argument(
        "--kubeconfig", default=DEFAULT_KUBECONFIG, help=f"kubeconfig to write ({DEFAULT_KUBECONFIG})"
    )
    parser.add_argument(
        "--tls-san",
        action="append",
        default=[],
        metavar="NAME",
        help="extra DNS name or IP address for the serving certificate (repeatable)",
    )
    parser.add_argument(
        "--advertise-url",
        default=None,
        type=parse_advertise_url,
        metavar="URL",
        help="server URL written into the kubeconfig, for clients reaching the cluster under another "
        "name, e.g. https://kube-sim:6443 from other containers (its host joins the certificate)",
    )
    parser.add_argument(
        "--isolate-controllers",
        action="store_true",
        help="run the controllers in a child process, so they and the API server each get a core "
        "(large simulations: thousands of pods)",
    )
    add_faults_argument(parser)


def _topology(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "nodes": args.nodes,
        "gpus_per_node": args.gpus_per_node,
        "cpus_per_node": args.cpus_per_node,
        "memory_per_node": args.memory_per_node,
        "queues": dict(args.queue),
        "overcommit_factor": args.overcommit_factor,
        "training_operator_gang": args.training_operator_gang,
        "runtime": args.runtime,
        "schedule_period": args.schedule_period,
        "workdir": args.workdir,
        "node_address": args.node_address,
        "node_monitor_grace_period": args.node_monitor_grace_period,
        "scheduler_conf": args.scheduler_conf,
    }


def airflow_connection_env(kubeconfig_path: str) -> str:
    """The ``AIRFLOW_CONN_KUBERNETES_DEFAULT`` value pointing Airflow at a kubeconfig."""
    return json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": kubeconfig_path}})


def run_cluster(args: argparse.Namespace) -> int:
    from gang_sim.cluster import SimCluster
    from gang_sim.stopping import stop_signals

    kubeconfig = str(Path(args.kubeconfig).resolve())
    cluster = SimCluster(
        port=args.port,
        host=args.host,
        kubeconfig_path=kubeconfig,
        tls_sans=args.tls_san,
        advertise_url=args.advertise_url,
        faults=args.faults,
        isolate_controllers=args.isolate_controllers,
        default_not_ready_toleration_seconds=args.default_not_ready_toleration_seconds,
        default_unreachable_toleration_seconds=args.default_unreachable_toleration_seconds,
        **_topology(args),
    )
    tune_garbage_collection()
    with stop_signals() as stop:
        cluster.start()
        _report_and_serve(args, cluster, kubeconfig, stop)
    print("simulated cluster stopped", flush=True)
    return 0


def _report_and_serve(args: argparse.Namespace, cluster: SimCluster, kubeconfig: str, stop: Event) -> None:
    from gang_sim.stopping import wait_until

    try:
        names = cluster.topology.node_names()
        print(
            f"simulated cluster ready: {len(names)} nodes x {args.gpus_per_node} GPUs, API at {cluster.url}",
            flush=True,
        )
        print(
            "TrainJob runtimes: torch-distributed (Volcano gang), torch-distributed-no-gang",
            flush=True,
        )
        if cluster.advertise_url != cluster.url:
            print(f"advertised to clients as {cluster.advertise_url}", flush=True)
        if args.faults is not None:
            print(f"fault injection: {json.dumps(args.faults.to_json())}", flush=True)
        print(f"kubeconfig: {kubeconfig}", flush=True)
        print(f"  kubectl:  export KUBECONFIG={kubeconfig}", flush=True)
        print(
            f"  Airflow:  export AIRFLOW_CONN_KUBERNETES_DEFAULT='{airflow_connection_env(kubeconfig)}'",
            flush=True,
        )
        print("Ctrl-C stops it.", flush=True)
        wait_until(stop)
    finally:
        cluster.stop()


def add_controllers_command(commands: Any) -> None:
    parser = commands.add_parser(
        "controllers",
        help="attach simulated controllers (and nodes) to an existing API server",
        description="Run chosen controllers against the API server of an existing kubeconfig: each is an "
        "ordinary API client. E.g. simulated GPU nodes next to a real Volcano.",
    )
    parser.add_argument("--kubeconfig", required=True, help="kubeconfig of the existing API server")
    parser.add_argument("--context", default=None, help="kubeconfig context (default: current)")
    parser.add_argument(
        "--only",
        default="volcano,kube-scheduler,training-operator,kubelet",
        help="comma-separated subset of volcano,kube-scheduler,training-operator,trainer,jobset,"
        "job-controller,node-lifecycle,taint-eviction,pod-gc,disruption,kubelet (default: "
        "volcano,kube-scheduler,training-operator,kubelet; the Trainer v2 ones need the TrainJob, "
        "JobSet and batch Job kinds served, and a real cluster already runs the Job controller and "
        "kube-controller-manager's node-lifecycle, taint-eviction, pod-gc and disruption)",
    )
    _add_topology(parser)
    parser.set_defaults(func=run_controllers)


def run_controllers(args: argparse.Namespace) -> int:
    from gang_sim.controllers.manager import ControllerManager
    from gang_sim.stopping import stop_signals, wait_until
    from gang_sim.topology import Topology, controller_factories, controller_names

    try:
        factories = controller_factories(Topology(**_topology(args)), controller_names(args.only))
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    manager = ControllerManager(args.kubeconfig, factories, context=args.context)
    tune_garbage_collection()
    with stop_signals() as stop:
        manager.start()
        try:
            print(f"controllers running against {args.kubeconfig}: {args.only}", flush=True)
            wait_until(stop)
        finally:
            manager.stop()
    print("controllers stopped", flush=True)
    return 0
