"""``airflow-gang sim drain NODE`` and ``airflow-gang sim uncordon NODE``: ``kubectl drain``
(``--ignore-daemonsets --delete-emptydir-data``) and ``kubectl uncordon`` against a running
simulator — or any cluster — through a kubeconfig, as ``sim controllers`` reaches one.

``drain`` prints kubectl's progress lines and exits 0 once the node is drained, 1 when
``--timeout`` passed with pods a disruption budget still protects (or evicted pods not gone
yet, as on a dead node), 2 when it could not drain at all (pods without a controller and no
``--force``). See `gang_sim.drain`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

DEFAULT_KUBECONFIG = "sim.kubeconfig"


def add_drain_commands(commands: Any) -> None:
    drain = commands.add_parser(
        "drain",
        help="cordon a node and evict its pods through the Eviction API (kubectl drain)",
        description="Cordon NODE and evict its pods as `kubectl drain --ignore-daemonsets "
        "--delete-emptydir-data` does: PodDisruptionBudgets are honoured, refused evictions retried.",
    )
    drain.add_argument("node", metavar="NODE")
    _add_kubeconfig(drain)
    drain.add_argument(
        "--timeout", type=float, default=60.0, help="give up after so many seconds (default: 60)"
    )
    drain.add_argument(
        "--retry-interval",
        type=float,
        default=5.0,
        help="seconds between retries of an eviction a budget refused (default: 5, as kubectl)",
    )
    drain.add_argument(
        "--grace-period", type=int, default=None, help="evictions' grace period (default: each pod's own)"
    )
    drain.add_argument("--force", action="store_true", help="also evict pods that have no controller")
    drain.set_defaults(func=run_drain)
    uncordon = commands.add_parser(
        "uncordon", help="mark a node schedulable again (kubectl uncordon)", description="Uncordon NODE."
    )
    uncordon.add_argument("node", metavar="NODE")
    _add_kubeconfig(uncordon)
    uncordon.set_defaults(func=run_uncordon)


def _add_kubeconfig(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        default=DEFAULT_KUBECONFIG,
        help=f"kubeconfig of the cluster (default: {DEFAULT_KUBECONFIG}, what `airflow-gang sim` writes)",
    )
    parser.add_argument("--context", default=None, help="kubeconfig context (default: current)")


def _core(args: argparse.Namespace) -> Any:
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    api = k8s_config.new_client_from_config(config_file=args.kubeconfig, context=args.context)
    return k8s.CoreV1Api(api)


def run_drain(args: argparse.Namespace) -> int:
    from gang_sim.drain import DrainError, drain_node

    core = _core(args)
    try:
        result = drain_node(
            core,
            args.node,
            timeout=args.timeout,
            retry_interval=args.retry_interval,
            grace_period_seconds=args.grace_period,
            force=args.force,
            echo=lambda line: print(line, flush=True),
        )
    except DrainError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        core.api_client.close()
    if result.complete:
        return 0
    print(
        f"error: unable to drain node {args.node!r} within {args.timeout:g}s: still protected by a "
        f"disruption budget: {', '.join(result.blocked) or 'none'}; evicted but not gone: "
        f"{', '.join(result.terminating) or 'none'}",
        file=sys.stderr,
    )
    return 1


def run_uncordon(args: argparse.Namespace) -> int:
    from gang_sim.drain import cordon

    core = _core(args)
    try:
        cordon(core, args.node, unschedulable=False)
    finally:
        core.api_client.close()
    print(f"node/{args.node} uncordoned", flush=True)
    return 0
