"""``make dist``: the wheel and sdist of each of the repository's three distributions, checked.

The distributions, each with its own ``pyproject.toml``:

- ``airflow-gang``, the provider (the repository's root);
- ``airflow-gang-sim``, the embedded cluster (``sim/``);
- ``airflow-gang-stack``, the real-Airflow harness (``stack/``).

For each, ``python -m build`` writes the sdist and then builds the wheel from that sdist, so a file
the sdist leaves out is missing from the wheel too and the tests of the installed wheel catch it.
Then every file is checked: one sdist and one wheel per distribution, named with the version its
package declares (``__version__``), and ``twine check --strict`` (the metadata PyPI needs, a README
it can render). Any failure stops the script with a message and exit code 1.

Before building, the earlier artifacts of these three distributions in the output folder are
removed, so that what is checked (and what an upload of ``dist/*`` would send) is this build only.

By default every build runs in a fresh environment holding its ``[build-system] requires`` (pip
downloads setuptools from the index): what a release is built with. ``--no-isolation`` builds
with this Python's own setuptools instead, which must be 77 or newer (the first to read the PEP 639
``license = "Apache-2.0"`` strings; ``make install`` upgrades the venv's): no download, a few
seconds, what the tests of the wheels use (tests/packaging/test_wheel_install.py).

Usage: ``python scripts/build_dist.py [--outdir DIR] [--no-isolation]``.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MIN_SETUPTOOLS = 77


@dataclass(frozen=True)
class Distribution:
    name: str  # the project name on PyPI
    source: Path  # the folder holding its pyproject.toml
    version_file: Path  # the module whose __version__ the pyproject reads

    @property
    def file_stem(self) -> str:
        """The normalized name that starts its wheel's and sdist's file names."""
        return self.name.replace("-", "_")

    def version(self) -> str:
        """``__version__`` of its package, read from the file without importing it."""
        tree = ast.parse(self.version_file.read_text(), filename=str(self.version_file))
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and [getattr(target, "id", None) for target in node.targets] == ["__version__"]
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                return node.value.value
        raise SystemExit(f"build_dist: no __version__ = '...' in {self.version_file}")

    def artifacts(self, outdir: Path) -> list[Path]:
        """Its wheels and sdists in ``outdir``, of any version."""
        return sorted([*outdir.glob(f"{self.file_stem}-*.whl"), *outdir.glob(f"{self.file_stem}-*.tar.gz")])


DISTRIBUTIONS = (
    Distribution("airflow-gang", REPO, REPO / "airflow_gang" / "__init__.py"),
    Distribution("airflow-gang-sim", REPO / "sim", REPO / "sim" / "gang_sim" / "version.py"),
    Distribution("airflow-gang-stack", REPO / "stack", REPO / "stack" / "gang_stack" / "__init__.py"),
)


def log(message: str) -> None:
    print(f"[dist] {message}", flush=True)


def fail(message: str) -> None:
    print(f"[dist] FAILED: {message}", file=sys.stderr, flush=True)
    raise SystemExit(1)


def run(command: list[str], what: str) -> None:
    """Run ``command`` from the repository; on failure print its output's end and stop."""
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip().splitlines()
        fail(f"{what} (exit code {done.returncode}): {' '.join(command)}\n" + "\n".join(output[-40:]))


def check_setuptools() -> None:
    version = importlib.metadata.version("setuptools")
    if int(version.split(".")[0]) < MIN_SETUPTOOLS:
        fail(
            f"--no-isolation builds with this Python's setuptools {version}, which cannot read the "
            f"PEP 639 license strings: pip install 'setuptools>={MIN_SETUPTOOLS}' (make install does)"
        )


def build(dist: Distribution, outdir: Path, isolated: bool) -> None:
    command = [sys.executable, "-m", "build", "--outdir", str(outdir)]
    if not isolated:
        # The venv's setuptools is checked above; the provider's build-system also names `wheel`,
        # which setuptools has not needed since 70.1 and the venv need not hold.
        command += ["--no-isolation", "--skip-dependency-check"]
    started = time.monotonic()
    run([*command, str(dist.source)], f"building {dist.name}")
    log(f"built {dist.name} in {time.monotonic() - started:.1f}s")


def check(outdir: Path) -> list[Path]:
    """The six files, each distribution's sdist and wheel at its declared version."""
    files = []
    for dist in DISTRIBUTIONS:
        version = dist.version()
        expected = [f"{dist.file_stem}-{version}-py3-none-any.whl", f"{dist.file_stem}-{version}.tar.gz"]
        found = sorted(path.name for path in dist.artifacts(outdir))
        if found != sorted(expected):
            fail(f"{dist.name} {version}: expected {expected} in {outdir}, found {found}")
        files += [outdir / name for name in expected]
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--outdir", type=Path, default=REPO / "dist", help="default: dist/")
    parser.add_argument(
        "--no-isolation",
        action="store_true",
        help="build with this Python's setuptools (>= 77) instead of a fresh environment per build",
    )
    args = parser.parse_args(argv)
    outdir: Path = args.outdir.resolve()
    outdir.mkdir(parents=True, exist_ok=True)
    if args.no_isolation:
        check_setuptools()

    for dist in DISTRIBUTIONS:
        for stale in dist.artifacts(outdir):
            log(f"removing the earlier {stale.name}")
            stale.unlink()
    for dist in DISTRIBUTIONS:
        build(dist, outdir, isolated=not args.no_isolation)

    files = check(outdir)
    run([sys.executable, "-m", "twine", "check", "--strict", *map(str, files)], "twine check --strict")
    log(f"twine check --strict passed; in {outdir}:")
    for path in files:
        log(f"  {path.name}  ({path.stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
