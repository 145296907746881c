"""``airflow-gang sim ...``: command-line entry points of the simulator.

``register(subparsers)`` adds the ``sim`` command to the top-level ``airflow-gang`` parser (the
``airflow_gang.cli`` entry point of this distribution); each command sets ``func(args) -> int``:

- ``sim``: the whole embedded cluster (API server, Volcano, kube-scheduler, training-operator,
  kubelets) in the foreground until SIGINT/SIGTERM;
- ``sim apiserver``: the API server alone;
- ``sim controllers``: chosen controllers (and simulated nodes) attached to an existing API
  server through its kubeconfig (attach mode);
- ``sim drain NODE`` / ``sim uncordon NODE``: ``kubectl drain`` (through the Eviction API) and
  ``kubectl uncordon`` against a cluster's kubeconfig (``cli_drain.py``).

``sim`` and ``sim apiserver`` take ``--faults SPEC`` (a YAML/JSON file or inline JSON): fault
injection for clients other than the simulator's controllers (``docs/fault-injection.md``).

Runnable without the provider as ``gang-sim ...`` or ``python -m gang_sim.cli apiserver ...``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from gang_sim.process_tuning import tune_garbage_collection
from gang_sim.stopping import stop_signals, wait_until

DEFAULT_KUBECONFIG = "sim.kubeconfig"


def register(subparsers: Any) -> None:
    """Add ``sim`` (with its sub-subcommands) to an ``argparse`` subparsers object."""
    sim = subparsers.add_parser(
        "sim",
        help="embedded Kubernetes cluster simulator",
        description="Run the embedded cluster simulator (or parts of it).",
    )
    from gang_sim import cli_cluster

    cli_cluster.add_cluster_arguments(sim)
    sim.set_defaults(func=cli_cluster.run_cluster)
    commands = sim.add_subparsers(dest="sim_command", metavar="COMMAND")
    _add_apiserver(commands)
    cli_cluster.add_controllers_command(commands)
    from gang_sim import cli_drain

    cli_drain.add_drain_commands(commands)


def _add_apiserver(commands: Any) -> None:
    from gang_sim import cli_cluster

    parser = commands.add_parser(
        "apiserver",
        help="run the Kubernetes API server alone",
        description="Serve the simulated Kubernetes API in the foreground; write a kubeconfig for clients.",
    )
    parser.add_argument("--port", type=int, default=0, help="TCP port (default: 0, a free port)")
    parser.add_argument(
        "--kubeconfig",
        default=DEFAULT_KUBECONFIG,
        help=f"where to write the kubeconfig (default: {DEFAULT_KUBECONFIG})",
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: 127.0.0.1)")
    parser.add_argument("--no-auth", action="store_true", help="accept requests without the bearer token")
    parser.add_argument("--token", default=None, help="bearer token to require (default: random)")
    parser.add_argument(
        "--no-tls",
        action="store_true",
        help="serve plain HTTP (kubectl then sends no token: combine with --no-auth)",
    )
    parser.add_argument(
        "--tls-san",
        action="append",
        default=[],
        metavar="NAME",
        help="extra host name or address for the serving certificate (repeatable)",
    )
    parser.add_argument(
        "--crd",
        action="append",
        default=[],
        metavar="PATH",
        help="CRD YAML whose schema replaces the built-in one (repeatable)",
    )
    parser.add_argument(
        "--event-window",
        type=int,
        default=10_000,
        help="events kept for watches; older resourceVersions get 410 (default: 10000)",
    )
    parser.add_argument(
        "--no-sim-endpoints",
        action="store_true",
        help="turn the simulator-only /sim/v1/... endpoints (metrics, faults) off: they answer 404 "
        "like any path kube-apiserver does not know (to check clients need nothing else)",
    )
    cli_cluster.add_faults_argument(parser)
    cli_cluster.add_toleration_arguments(parser)
    parser.set_defaults(func=run_apiserver)


def run_apiserver(args: argparse.Namespace) -> int:
    from gang_sim.apiserver.server import start_apiserver

    tune_garbage_collection()
    with stop_signals() as stop:
        handle = start_apiserver(
            port=args.port,
            kubeconfig_path=args.kubeconfig,
            token=args.token,
            host=args.host,
            auth=not args.no_auth,
            tls=not args.no_tls,
            tls_hosts=args.tls_san,
            crd_paths=args.crd,
            event_window=args.event_window,
            faults=args.faults,
            sim_endpoints=not args.no_sim_endpoints,
            default_not_ready_toleration_seconds=args.default_not_ready_toleration_seconds,
            default_unreachable_toleration_seconds=args.default_unreachable_toleration_seconds,
        )
        try:
            print(f"API server listening on {handle.url}", flush=True)
            if args.no_sim_endpoints:
                print("simulator-only endpoints (/sim/v1/...) are off", flush=True)
            print(f"kubeconfig: {handle.kubeconfig_path}", flush=True)
            print(f"use it with: export KUBECONFIG={handle.kubeconfig_path}", flush=True)
            if args.faults is not None:
                print(f"fault injection: {json.dumps(args.faults.to_json())}", flush=True)
            wait_until(stop)
        finally:
            handle.stop()
    print("API server stopped", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="airflow-gang")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["sim", *(argv if argv is not None else sys.argv[1:])])
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
