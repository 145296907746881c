"""The ``airflow-gang`` command: ``version``, ``render`` (manifests as YAML), and the commands
other distributions register.

Commands beyond the provider's own come from the ``airflow_gang.cli`` entry point group: each
entry is a ``register(subparsers)`` function. The repository's simulator (``airflow-gang-sim``)
registers ``sim`` and its real-Airflow harness (``airflow-gang-stack``) registers ``airflow``;
the provider imports neither, so a plain ``pip install airflow-gang`` has ``version`` and
``render`` only, and says which distribution brings a missing command.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from functools import partial
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from airflow_gang import __version__

DEMO_IMAGE = "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727"
COMMAND_ENTRY_POINTS = "airflow_gang.cli"
# Commands of the repository's other distributions, named in the help when they are missing.
ELSEWHERE = {"sim": "airflow-gang-sim", "airflow": "airflow-gang-stack"}


def _version(args: argparse.Namespace) -> int:
    print(f"airflow-gang {__version__}")
    return 0


def _render(args: argparse.Namespace) -> int:
    import yaml

    from airflow_gang.exceptions import GangSpecError
    from airflow_gang.kinds.pytorchjob.spec import GangJobSpec

    arguments: dict[str, Any] = {}
    if args.spec:
        loaded = yaml.safe_load(Path(args.spec).read_text(encoding="utf-8")) or {}
        if not isinstance(loaded, dict):
            print(f"error: {args.spec} must hold a mapping of PyTorchJobOperator arguments", file=sys.stderr)
            return 2
        arguments.update(loaded)
    resources = dict(arguments.get("resources") or {})
    for key, value in (("cpu", args.cpu), ("memory", args.memory), ("nvidia.com/gpu", args.gpus)):
        if value is not None:
            resources[key] = value
    flags = {
        "image": args.image,
        "command": shlex.split(args.command) if args.command else None,
        "workers": args.workers,
        "queue": args.queue,
        "gang_scheduling": args.gang_scheduling,
        "resources": resources or None,
    }
    arguments.update({key: value for key, value in flags.items() if value is not None})
    arguments.setdefault("image", DEMO_IMAGE)
    try:
        spec = GangJobSpec(**arguments)
        documents: list[dict[str, Any]] = []
        for index in range(args.count):
            name = args.name if args.count == 1 else f"{args.name}-{index + 1}"
            podgroup = spec.build_podgroup(name, args.namespace)
            if podgroup is not None:
                documents.append(podgroup)
            documents.append(spec.build_pytorchjob(name, args.namespace))
    except GangSpecError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(yaml.safe_dump_all(documents, sort_keys=False), end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="airflow-gang", description="Gang-scheduled Kubeflow PyTorchJobs on Volcano, from Airflow."
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    version = commands.add_parser("version", help="print the provider version")
    version.set_defaults(func=_version)

    render = commands.add_parser(
        "render",
        help="print the PodGroup and PyTorchJob manifests the operator would submit as YAML",
    )
    render.add_argument("--spec", help="YAML file of PyTorchJobOperator job arguments (flags override it)")
    render.add_argument(
        "--name", default="train", help="job name, or prefix with --count > 1 (default: train)"
    )
    render.add_argument("--namespace", default="default")
    render.add_argument("--count", type=int, default=1, help="how many identical jobs to render")
    render.add_argument("--image", help=f"training image (default: {DEMO_IMAGE})")
    render.add_argument("--command", help="container command, split like a shell would")
    render.add_argument("--workers", type=int, help="Worker replicas besides the Master (default 1)")
    render.add_argument("--gpus", type=int, help="nvidia.com/gpu per replica")
    render.add_argument("--cpu", help="cpu request per replica, e.g. 4 or 500m")
    render.add_argument("--memory", help="memory request per replica, e.g. 16Gi")
    render.add_argument("--queue", help="Volcano queue (default: default)")
    render.add_argument(
        "--gang-scheduling", choices=["provider", "training-operator", "disabled"], help="default: provider"
    )
    render.set_defaults(func=_render)

    for entry in sorted(entry_points(group=COMMAND_ENTRY_POINTS), key=lambda entry: entry.name):
        entry.load()(commands)
    for command, distribution in ELSEWHERE.items():
        if command not in commands.choices:
            missing = commands.add_parser(command, help=f"(needs {distribution}: not installed)")
            missing.set_defaults(func=partial(_not_installed, command, distribution))
    return parser


def _not_installed(command: str, distribution: str, args: argparse.Namespace) -> int:
    print(
        f"error: `airflow-gang {command}` comes with the {distribution} distribution, which is not "
        "installed; `make install` in the airflow-gang repository installs it",
        file=sys.stderr,
    )
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 2
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
