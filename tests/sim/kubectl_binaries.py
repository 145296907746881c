"""Finding kubectl for tests: Debian's 1.20 client (unpacked privately) and any other on PATH."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "airflow-gang" / "kubectl-1.20"
EXTRACTED = CACHE / "usr" / "bin" / "kubectl"


def _version(binary: str) -> str:
    try:
        out = subprocess.run(
            [binary, "version", "--client", "-o", "json"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        return str(json.loads(out)["clientVersion"]["gitVersion"])
    except (OSError, subprocess.SubprocessError, ValueError, KeyError):
        return ""


def _debian_kubectl() -> str | None:
    """Debian's ``kubernetes-client`` (kubectl 1.20), unpacked into a private cache directory.

    Unpacking with ``dpkg-deb -x`` instead of ``apt-get install`` avoids clashing with another
    package that owns /usr/bin/kubectl, and leaves the system untouched.
    """
    if EXTRACTED.exists():
        return str(EXTRACTED)
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb")) or os.geteuid() != 0:
        return None
    CACHE.mkdir(parents=True, exist_ok=True)
    cached = sorted(Path("/var/cache/apt/archives").glob("kubernetes-client_*.deb"))
    for refresh in (False, True):
        if cached:
            break
        if refresh:  # a fresh machine has no package lists yet
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, timeout=300, check=False)
        subprocess.run(
            ["apt-get", "download", "kubernetes-client"],
            cwd=CACHE,
            capture_output=True,
            timeout=300,
            check=False,
        )
        cached = sorted(CACHE.glob("kubernetes-client_*.deb"))
    if not cached:
        return None
    subprocess.run(["dpkg-deb", "-x", str(cached[-1]), str(CACHE)], check=True, timeout=120)
    return str(EXTRACTED) if EXTRACTED.exists() else None


def find_kubectls() -> list[tuple[str, str]]:
    """``(version, binary)`` of every kubectl found, oldest first."""
    found: dict[str, str] = {}
    debian = _debian_kubectl()
    if debian and _version(debian).startswith("v1.20"):
        found["v1.20"] = debian
    on_path = shutil.which("kubectl")
    if on_path:
        version = _version(on_path)
        if version and not version.startswith("v1.20"):
            found[version] = on_path
    return sorted(found.items())
