"""Distributed data-parallel training of a small MLP on scikit-learn's bundled digits data set.

A real PyTorch DDP script for the CPU (gloo backend) that needs no download: 1,797 8x8 images of
handwritten digits from ``sklearn.datasets.load_digits``, split 80/20 (stratified, fixed seed),
scaled with the training split's mean and standard deviation. It reads its place in the job from
the environment, as the Kubeflow training-operator sets it for every replica of a PyTorchJob:
``WORLD_SIZE``, ``RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` (``init_process_group`` with
``env://``). With ``WORLD_SIZE`` unset or 1 it trains in a single process, without a process
group.

Output (rank 0 only, flushed line by line because the log is read while the job runs), in the
``name=value`` format of Katib's StdOut metrics collector::

    epoch 1/12 loss=1.2345        (the mean training loss of the epoch over every replica)
    ...
    accuracy=0.9750               (on the held-out 20 %)
    test accuracy 97.50% (351/360 digits), world size 2, 12 epochs in 3.1s

Standalone (one process)::

    python examples/train_digits.py --epochs 12 --metrics-file /tmp/metrics.json

Two processes on one machine, as a PyTorchJob's Master and Worker would run::

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 RANK=0 python examples/train_digits.py &
    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 RANK=1 python examples/train_digits.py

As a PyTorchJob (Master + 1 Worker) submitted by the provider; the training-operator gives each
replica its ``WORLD_SIZE``/``RANK``/``MASTER_ADDR``/``MASTER_PORT``::

    PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/digits:1", workers=1, resources={"cpu": 1},
        command=["python", "examples/train_digits.py", "--metrics-file", "/tmp/metrics.json"],
    )

On the embedded cluster's process runtime (``SimCluster(runtime="process", workdir=<repo
root>)``) each replica's command runs as a local process from ``workdir`` with
``MASTER_ADDR=127.0.0.1``; the image is ignored and ``python`` is looked up on the simulator's
``PATH``, so name the interpreter that has the ``[train]`` extra (``sys.executable``).

Checkpoints: with ``--checkpoint-dir`` (default: ``GANG_CHECKPOINT_DIR``, which the provider gives
every replica of every try of a task instance, the same place each time) rank 0 saves the model,
the optimizer and the losses after every epoch (``checkpoint.pt``, written atomically), and a
start that finds one resumes after its epoch, printing ``resumed from epoch N/E``: a gang given
up after a disruption and retried goes on where it was, not from the first epoch.
``--epoch-delay`` sleeps after each epoch, standing in for a bigger model (demos and tests of
disruptions need a job that is still running when a node goes).

``--batch-size`` is per process (as in the Kubeflow mnist example): each replica trains on its
own shard of the training split (``DistributedSampler``) and DDP averages the gradients.
``--metrics-file`` makes rank 0 write a JSON summary: ``accuracy``, ``loss`` (one value per
epoch), ``world_size``, ``epochs``, ``lr``, ``batch_size``, ``seed`` and ``seconds``.
Invalid arguments or environment variables end the script with exit code 2 and a one-line
message.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

EXIT_USAGE = 2
TEST_FRACTION = 0.2
HIDDEN_UNITS = 128
SPLIT_SEED = 0  # the train/test split is the same whatever --seed says, so runs are comparable


@dataclass(frozen=True)
class Placement:
    """Where this process sits in the job: its rank among ``world_size`` processes."""

    rank: int
    world_size: int

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


@dataclass(frozen=True)
class Data:
    train: TensorDataset
    test_x: torch.Tensor
    test_y: torch.Tensor


class UsageError(Exception):
    """A bad argument or environment variable: reported in one line, exit code 2."""


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a finite number > 0")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="PyTorch DDP training of an MLP on scikit-learn's digits data set (CPU, gloo).",
    )
    parser.add_argument("--epochs", type=positive_int, default=12, help="passes over the data (12)")
    parser.add_argument("--lr", type=positive_float, default=0.003, help="Adam learning rate (0.003)")
    parser.add_argument(
        "--batch-size", type=positive_int, default=32, help="samples per step and process (32)"
    )
    parser.add_argument("--seed", type=int, default=1, help="weights and shuffling seed (1)")
    parser.add_argument(
        "--backend", default="gloo", choices=["gloo", "mpi", "nccl"], help="torch.distributed backend"
    )
    parser.add_argument(
        "--timeout", type=positive_float, default=120.0, help="seconds to wait for the other replicas"
    )
    parser.add_argument("--metrics-file", type=Path, default=None, help="rank 0 writes a JSON summary here")
    parser.add_argument(
        "--checkpoint-dir",
        type=Path,
        default=Path(os.environ["GANG_CHECKPOINT_DIR"]) if os.environ.get("GANG_CHECKPOINT_DIR") else None,
        help="save after every epoch and resume from here (default: $GANG_CHECKPOINT_DIR)",
    )
    parser.add_argument(
        "--epoch-delay", type=float, default=0.0, help="seconds to sleep after each epoch (0)"
    )
    return parser


def _env_int(env: Mapping[str, str], name: str, default: int | None = None) -> int:
    text = env.get(name)
    if text is None or not text.strip():
        if default is None:
            raise UsageError(f"{name} is not set (it is required when WORLD_SIZE > 1)")
        return default
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"{name}={text!r} is not a whole number") from None


def placement_from_env(env: Mapping[str, str]) -> Placement:
    """``WORLD_SIZE`` and ``RANK`` as the training-operator sets them; unset means one process."""
    world_size = _env_int(env, "WORLD_SIZE", default=1)
    if world_size < 1:
        raise UsageError(f"WORLD_SIZE={world_size} must be >= 1")
    if world_size == 1:
        return Placement(rank=0, world_size=1)
    rank = _env_int(env, "RANK")
    if not 0 <= rank < world_size:
        raise UsageError(f"RANK={rank} must be between 0 and WORLD_SIZE-1={world_size - 1}")
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        if not env.get(name):
            raise UsageError(f"{name} is not set (it is required when WORLD_SIZE > 1)")
    return Placement(rank=rank, world_size=world_size)


def load_data() -> Data:
    """The deterministic 80/20 stratified split, features scaled on the training split."""
    digits = load_digits()
    train_x, test_x, train_y, test_y = train_test_split(
        digits.data,
        digits.target,
        test_size=TEST_FRACTION,
        stratify=digits.target,
        random_state=SPLIT_SEED,
    )
    scaler = StandardScaler().fit(train_x)
    return Data(
        train=TensorDataset(
            torch.tensor(scaler.transform(train_x), dtype=torch.float32),
            torch.tensor(train_y, dtype=torch.long),
        ),
        test_x=torch.tensor(scaler.transform(test_x), dtype=torch.float32),
        test_y=torch.tensor(test_y, dtype=torch.long),
    )


def build_model(features: int, classes: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(features, HIDDEN_UNITS),
        nn.ReLU(),
        nn.Linear(HIDDEN_UNITS, classes),
    )


def train_epoch(
    model: nn.Module,
    loader: DataLoader[tuple[torch.Tensor, ...]],
    optimizer: torch.optim.Optimizer,
    placement: Placement,
) -> float:
    """One pass over this process's shard; returns the mean loss over every process's samples."""
    model.train()
    loss_fn = nn.CrossEntropyLoss()
    total = torch.zeros(2, dtype=torch.float64)  # summed loss, samples
    for features, labels in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        total += torch.tensor([loss.item() * len(labels), len(labels)], dtype=torch.float64)
    if placement.distributed:
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return float(total[0] / total[1])


@torch.no_grad()
def evaluate(model: nn.Module, features: torch.Tensor, labels: torch.Tensor) -> tuple[int, int]:
    """Correct predictions and total on the test split (every replica holds the same weights)."""
    model.eval()
    predicted = model(features).argmax(dim=1)
    return int((predicted == labels).sum()), len(labels)


def write_metrics(path: Path, metrics: Mapping[str, object]) -> None:
    """Write atomically: whoever reads the file never sees half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(metrics, indent=2) + "\n")
    partial.replace(path)


CHECKPOINT_FILE = "checkpoint.pt"


def save_checkpoint(folder: Path, state: Mapping[str, object]) -> None:
    """Write atomically: a replica killed mid-write leaves the previous checkpoint whole."""
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / (CHECKPOINT_FILE + ".partial")
    torch.save(dict(state), partial)
    partial.replace(folder / CHECKPOINT_FILE)


def load_checkpoint(folder: Path | None) -> dict[str, object] | None:
    if folder is None or not (folder / CHECKPOINT_FILE).exists():
        return None
    loaded: dict[str, object] = torch.load(folder / CHECKPOINT_FILE, weights_only=False)
    return loaded


def train(args: argparse.Namespace, placement: Placement) -> None:
    started = time.monotonic()
    leader = placement.rank == 0
    torch.manual_seed(args.seed)  # the same initial weights everywhere (DDP also broadcasts rank 0's)
    data = load_data()
    sampler: DistributedSampler[tuple[torch.Tensor, ...]] = DistributedSampler(
        data.train, num_replicas=placement.world_size, rank=placement.rank, shuffle=True, seed=args.seed
    )
    loader = DataLoader(data.train, batch_size=args.batch_size, sampler=sampler)
    model = build_model(data.test_x.shape[1], int(data.test_y.max()) + 1)
    if placement.distributed:
        model = DistributedDataParallel(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    plain = model.module if isinstance(model, DistributedDataParallel) else model

    losses: list[float] = []
    first = 0
    # Every replica reads the same checkpoint, so all resume at the same epoch with the same weights.
    if (saved := load_checkpoint(args.checkpoint_dir)) is not None:
        plain.load_state_dict(saved["model"])  # type: ignore[arg-type]
        optimizer.load_state_dict(saved["optimizer"])  # type: ignore[arg-type]
        losses = list(saved["losses"])  # type: ignore[call-overload]
        first = int(saved["epoch"])  # type: ignore[call-overload]
        if leader:
            print(
                f"resumed from epoch {first}/{args.epochs} ({args.checkpoint_dir / CHECKPOINT_FILE})",
                flush=True,
            )
    for epoch in range(first, args.epochs):
        sampler.set_epoch(epoch)  # a different shuffle each epoch, identical on every replica
        losses.append(train_epoch(model, loader, optimizer, placement))
        if leader:
            print(f"epoch {epoch + 1}/{args.epochs} loss={losses[-1]:.4f}", flush=True)
            if args.checkpoint_dir is not None:
                state = {"epoch": epoch + 1, "model": plain.state_dict(), "optimizer": optimizer.state_dict()}
                save_checkpoint(args.checkpoint_dir, {**state, "losses": losses})
        if args.epoch_delay:
            time.sleep(args.epoch_delay)

    correct, total = evaluate(model, data.test_x, data.test_y)
    accuracy = correct / total
    seconds = time.monotonic() - started
    if not leader:
        return
    print(f"accuracy={accuracy:.4f}", flush=True)
    print(
        f"test accuracy {accuracy:.2%} ({correct}/{total} digits), world size {placement.world_size}, "
        f"{args.epochs} epochs in {seconds:.1f}s",
        flush=True,
    )
    if args.metrics_file is not None:
        write_metrics(
            args.metrics_file,
            {
                "accuracy": accuracy,
                "loss": losses,
                "world_size": placement.world_size,
                "epochs": args.epochs,
                "lr": args.lr,
                "batch_size": args.batch_size,
                "seed": args.seed,
                "seconds": round(seconds, 3),
            },
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # bad arguments: usage, message, exit code 2
    try:
        placement = placement_from_env(os.environ)
    except UsageError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    torch.set_num_threads(1)  # one core per replica: replicas share the machine's few cores
    if not placement.distributed:
        train(args, placement)
        return 0
    dist.init_process_group(
        backend=args.backend,
        init_method="env://",
        rank=placement.rank,
        world_size=placement.world_size,
        timeout=dt.timedelta(seconds=args.timeout),
    )
    try:
        train(args, placement)
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
