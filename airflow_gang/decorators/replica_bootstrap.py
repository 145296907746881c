"""Runs a ``@task.pytorchjob`` or ``@task.trainjob`` function on one replica (node) of its job.

This module is shipped to the replicas **as source** (in the payload, see `payload`) and run
there by a small entry program given as the container's command. The image only needs Python
(`BOOTSTRAP_MIN_PYTHON` or newer): this module imports nothing but the standard library, and
torch only when it is installed. Airflow never runs here. The provider imports it too, for the
markers and the JSON rules both sides share.

On a replica it:

1. decodes the payload (the function's source, its arguments as JSON) from `PAYLOAD_ENV`;
   on a TrainJob node, which gets only torchrun's ``PET_*`` variables from Trainer's torch
   runtime, fills in ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE`` and ``RANK`` from them
   (`torch_env`), as torchrun would for its children;
2. with ``PET_NPROC_PER_NODE`` > 1, starts that many local processes of itself, each with its own
   ``RANK``/``LOCAL_RANK`` (what torchrun would do), and waits for them;
3. sets up ``torch.distributed`` from the training-operator's ``MASTER_ADDR``, ``MASTER_PORT``,
   ``WORLD_SIZE`` and ``RANK`` when torch is installed (backend ``nccl`` with CUDA, else
   ``gloo``, unless the payload names one);
4. calls the function; on global rank 0, prints its return value as JSON on marker lines
   (`RESULT_MARK`), which the provider reads back from rank 0's log. Other ranks' return
   values are ignored.

Failures are printed as one block between `ERROR_MARK` and `ERROR_END` (a one-line summary, then
the traceback), which the provider puts into `PyTorchJobFailed` (a TrainJob's: `TrainJobFailed`).
Exit codes: `EXIT_FUNCTION_RAISED` when the function raised, `EXIT_BOOTSTRAP_ERROR` for anything
the bootstrap refused (a return value that is not JSON, source this Python cannot compile); both
are permanent failures under the ``ExitCode`` restart policy (1-127).
"""

from __future__ import annotations
import __future__

import json
import linecache
import os
import signal
import subprocess
import sys
import time
import traceback
import types
from collections.abc import Mapping, Sequence
from typing import Any

PAYLOAD_ENV = "AIRFLOW_GANG_FUNCTION"
LOCAL_CHILD_ENV = "AIRFLOW_GANG_LOCAL_RANK"
DEFAULT_DECORATOR = "@task.pytorchjob"
BOOTSTRAP_MIN_PYTHON = (3, 9)
RESULT_MARK = "[airflow-gang] return value"
ERROR_MARK = "[airflow-gang] error"
ERROR_END = "[airflow-gang] end of error"
# Short lines: container runtimes split long log lines (containerd at 16 KiB).
RESULT_CHUNK_CHARS = 4000
MAX_RESULT_BYTES = 64 * 1024
EXIT_FUNCTION_RAISED = 1
EXIT_BOOTSTRAP_ERROR = 2
MAX_JSON_DEPTH = 64
FUNCTION_MODULE = "__airflow_gang_function__"


class NotJsonError(ValueError):
    """A value that cannot travel as JSON; the message says where in it and what it is."""


def to_json_value(value: Any, where: str, depth: int = 0) -> Any:
    """``value`` as plain JSON types (tuples and other sequences become lists), or `NotJsonError`.

    Stricter than ``json.dumps``, which would silently turn ``{1: "a"}`` into ``{"1": "a"}``: the
    function must get back exactly what the DAG passed.
    """
    if depth > MAX_JSON_DEPTH:
        raise NotJsonError(f"{where} is nested more than {MAX_JSON_DEPTH} levels deep (a cycle?)")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        plain = {}
        for key in value:  # not .items(): Airflow's ParamsDict gives its unresolved Params there
            item = value[key]
            if not isinstance(key, str):
                raise NotJsonError(
                    f"{where} has the key {key!r} ({type(key).__name__}): JSON object keys are strings"
                )
            plain[key] = to_json_value(item, f"{where}[{key!r}]", depth + 1)
        return plain
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return [to_json_value(item, f"{where}[{index}]", depth + 1) for index, item in enumerate(value)]
    kind = f"{type(value).__module__}.{type(value).__qualname__}".removeprefix("builtins.")
    hint = " (convert it with .item() or .tolist())" if hasattr(value, "item") else ""
    raise NotJsonError(f"{where} is a {kind}, which is not JSON-serializable{hint}")


def entry_program(min_python: tuple[int, int], decorator: str = DEFAULT_DECORATOR) -> str:
    """The container's ``python -c`` program: check the version, decode the payload, run `main`.

    Written so that any Python, even 2.7, parses it and reaches the version check; and without
    ``$``, which Kubernetes would expand in a container's command.
    """
    major, minor = min_python
    return (
        "import sys\n"
        f"if sys.version_info[:2] < ({major}, {minor}):\n"
        f"    sys.stderr.write('{ERROR_MARK} on this replica: {decorator} needs Python {major}.{minor} "
        "or newer, but %s is Python %d.%d: use an image with a newer Python, or name another "
        "interpreter with python=...\\n"
        f"{ERROR_END}\\n' % (sys.executable, sys.version_info[0], sys.version_info[1]))\n"
        f"    sys.exit({EXIT_BOOTSTRAP_ERROR})\n"
        "import base64, json, os, zlib\n"
        f"encoded = os.environ['{PAYLOAD_ENV}']\n"
        "payload = json.loads(zlib.decompress(base64.b64decode(encoded)).decode('utf-8'))\n"
        "scope = {'__name__': 'airflow_gang_bootstrap'}\n"
        "exec(compile(payload['bootstrap'], '<airflow-gang bootstrap>', 'exec'), scope)\n"
        "sys.exit(scope['main'](payload))\n"
    )


# --- where this process sits in the job ------------------------------------------------------


def _int_env(env: Mapping[str, str], name: str, default: int) -> int:
    text = (env.get(name) or "").strip()
    return int(text) if text.isdigit() else default


def local_processes(env: Mapping[str, str]) -> int:
    """How many processes this replica runs: ``PET_NPROC_PER_NODE`` when a whole number.

    ``auto``/``cpu``/``gpu`` count as 1, as they do in the training-operator's ``WORLD_SIZE``.
    """
    return max(1, _int_env(env, "PET_NPROC_PER_NODE", 1))


def local_rank_env(env: Mapping[str, str], local_rank: int) -> dict[str, str]:
    """The environment of local process ``local_rank`` of this replica (torchrun's variables)."""
    nproc = local_processes(env)
    node_rank = _int_env(env, "PET_NODE_RANK", _int_env(env, "RANK", 0))
    child = dict(env)
    child.update(
        {
            "RANK": str(node_rank * nproc + local_rank),
            "LOCAL_RANK": str(local_rank),
            "LOCAL_WORLD_SIZE": str(nproc),
            "GROUP_RANK": str(node_rank),
            LOCAL_CHILD_ENV: str(local_rank),
        }
    )
    return child


def rank_and_world(env: Mapping[str, str]) -> tuple[int, int]:
    return _int_env(env, "RANK", 0), max(1, _int_env(env, "WORLD_SIZE", 1))


def torch_env(env: Mapping[str, str]) -> dict[str, str]:
    """What ``env`` lacks of ``MASTER_ADDR``/``MASTER_PORT``/``WORLD_SIZE``/``RANK``, from ``PET_*``.

    Trainer's torch runtime gives a TrainJob node only torchrun's variables (``PET_NNODES``,
    ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK``, ``PET_MASTER_ADDR``, ``PET_MASTER_PORT``); the
    training-operator gives a PyTorchJob replica both kinds, so nothing is added there. ``RANK``
    is the node's rank (local processes get their global rank from `local_rank_env`),
    ``WORLD_SIZE`` the nodes times the processes per node. ``PET_NNODES`` may be elastic
    (``min:max``): its upper bound, which a fixed-size job sets to its lower one.
    """
    added: dict[str, str] = {}
    for name, pet in (("MASTER_ADDR", "PET_MASTER_ADDR"), ("MASTER_PORT", "PET_MASTER_PORT")):
        if name not in env and (env.get(pet) or "").strip():
            added[name] = env[pet].strip()
    nodes = (env.get("PET_NNODES") or "").strip().split(":")[-1]
    if "WORLD_SIZE" not in env and nodes.isdigit():
        added["WORLD_SIZE"] = str(max(1, int(nodes)) * local_processes(env))
    if "RANK" not in env and (env.get("PET_NODE_RANK") or "").strip().isdigit():
        added["RANK"] = str(int(env["PET_NODE_RANK"].strip()))
    return added


# --- reporting -------------------------------------------------------------------------------


def report_error(summary: str, details: str = "") -> None:
    """One block on stderr, written at once so nothing interleaves with it."""
    rank, _ = rank_and_world(os.environ)
    block = f"{ERROR_MARK} on rank {rank}: {summary}\n"
    if details:
        block += details if details.endswith("\n") else details + "\n"
    sys.stderr.write(block + ERROR_END + "\n")
    sys.stderr.flush()


def result_lines(value: Any, function: str) -> list[str]:
    """The marker lines carrying the return value; `NotJsonError` if it cannot be sent."""
    text = json.dumps(to_json_value(value, f"the return value of {function}()"), separators=(",", ":"))
    if len(text) > MAX_RESULT_BYTES:
        raise NotJsonError(
            f"the return value of {function}() takes {len(text)} bytes as JSON, over the "
            f"{MAX_RESULT_BYTES}-byte limit: return small results (metrics), and write big ones "
            "(weights, predictions) to storage and return their path"
        )
    chunks = [text[start : start + RESULT_CHUNK_CHARS] for start in range(0, len(text), RESULT_CHUNK_CHARS)]
    return [f"{RESULT_MARK} {index}/{len(chunks)}: {chunk}" for index, chunk in enumerate(chunks, start=1)]


# --- running the function --------------------------------------------------------------------


def load_function(payload: Mapping[str, Any]) -> Any:
    """Compile the function where its DAG file had it, so tracebacks name the DAG file's lines."""
    filename = str(payload["filename"])
    padded = "\n" * (int(payload["first_line"]) - 1) + str(payload["source"])
    # Tracebacks show the source lines although the DAG file is not on this machine.
    linecache.cache[filename] = (len(padded), None, padded.splitlines(True), filename)
    # Annotations stay strings: they may name types only the DAG file imported.
    flags = __future__.annotations.compiler_flag
    code = compile(padded, filename, "exec", flags=flags, dont_inherit=True)
    module = types.ModuleType(FUNCTION_MODULE)
    sys.modules[FUNCTION_MODULE] = module  # so pickle (DataLoader workers) can find the function
    exec(code, module.__dict__)
    return module.__dict__[payload["function"]]


def start_distributed(backend: str | None) -> Any:
    """Initialise ``torch.distributed`` from ``MASTER_*``, ``RANK``, ``WORLD_SIZE``; None without either."""
    if "MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ:
        return None
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        rank, world_size = rank_and_world(os.environ)
        if world_size > 1:
            print(
                f"[airflow-gang] torch is not installed: rank {rank} of {world_size} runs the function "
                "without torch.distributed",
                flush=True,
            )
        return None
    if not dist.is_available():
        return None
    rank, world_size = rank_and_world(os.environ)
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(_int_env(os.environ, "LOCAL_RANK", 0) % torch.cuda.device_count())
    dist.init_process_group(
        backend=backend or ("nccl" if cuda else "gloo"),
        init_method="env://",
        rank=rank,
        world_size=world_size,
    )
    return dist


def run_function(payload: Mapping[str, Any]) -> int:
    name = str(payload["function"])
    try:
        function = load_function(payload)
    except SyntaxError as error:
        version = ".".join(str(part) for part in sys.version_info[:3])
        report_error(
            f"the source of {name}() does not compile on Python {version} ({error.msg}, line "
            f"{error.lineno}): it may use syntax of a newer Python; use an image with one, or "
            "raise min_python",
            "".join(traceback.format_exception_only(type(error), error)),
        )
        return EXIT_BOOTSTRAP_ERROR
    dist = start_distributed(payload.get("backend"))
    try:
        value = function(*payload.get("args") or [], **payload.get("kwargs") or {})
    except Exception as error:  # the function's own failure, with its traceback (SystemExit passes)
        frames = error.__traceback__.tb_next if error.__traceback__ is not None else None
        details = "".join(traceback.format_exception(type(error), error, frames))
        report_error(f"{name}() raised {type(error).__name__}: {error}", details)
        return EXIT_FUNCTION_RAISED
    if dist is not None:
        dist.destroy_process_group()
    rank, _ = rank_and_world(os.environ)
    if rank != 0:
        return 0
    try:
        lines = result_lines(value, name)
    except NotJsonError as error:
        report_error(
            f"{error}; {payload.get('decorator') or DEFAULT_DECORATOR} hands the return value back as JSON: "
            "return numbers, strings, "
            "lists and dicts"
        )
        return EXIT_BOOTSTRAP_ERROR
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()
    return 0


def run_local_processes(payload: Mapping[str, Any], nproc: int) -> int:
    """Start ``nproc`` local ranks (each runs `main` again) and wait; the first failure stops the rest."""
    major, minor = payload["min_python"]
    program = entry_program((int(major), int(minor)), str(payload.get("decorator") or DEFAULT_DECORATOR))
    children = [
        subprocess.Popen([sys.executable, "-c", program], env=local_rank_env(os.environ, local_rank))
        for local_rank in range(nproc)
    ]

    def stop_children(signum: int, _frame: Any) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, stop_children)
    while True:
        codes = [child.poll() for child in children]
        failed = [code for code in codes if code not in (None, 0)]
        if failed:
            stop_children(signal.SIGTERM, None)
            for child in children:
                child.wait()
            return int(failed[0])
        if all(code == 0 for code in codes):
            return 0
        time.sleep(0.1)


def main(payload: Mapping[str, Any]) -> int:
    os.environ.update(torch_env(os.environ))
    nproc = local_processes(os.environ)
    if nproc > 1 and LOCAL_CHILD_ENV not in os.environ:
        return run_local_processes(payload, nproc)
    return run_function(payload)
