"""Run the API server: uvicorn on a background thread, a kubeconfig for clients.

``start_apiserver()`` binds (port 0 picks a free port), serves from a daemon thread, writes a
kubeconfig pointing at it and returns a handle usable as a context manager. Defaults mirror a
real control plane reached from the same machine: HTTPS with a CA made at startup (its
certificate is in the kubeconfig; Go clients such as kubectl send tokens only over TLS), a
random bearer token, and 127.0.0.1 only. ``tls=False`` serves plain HTTP (then kubectl needs
``auth=False`` too, since it will not send the token over HTTP).

Reached from elsewhere (another container, ``https://kube-sim:6443``), the server binds a wider
interface and ``advertise_url`` names the address clients use: the written kubeconfig carries it
and its host goes into the certificate, while a second kubeconfig (``local_kubeconfig_path``)
keeps the address reachable from this machine for in-process clients such as the controllers.
"""

from __future__ import annotations

import base64
import os
import secrets
import socket
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import yaml

from gang_sim.apiserver.app import build_app
from gang_sim.apiserver.crd_loader import load_crds
from gang_sim.apiserver.kinds.core import SIM_TOLERATION_SECONDS
from gang_sim.apiserver.listener import Listener, Listeners
from gang_sim.apiserver.resources import builtin_registry
from gang_sim.apiserver.state import ServerConfig, ServerState
from gang_sim.certs import make_serving_certificate
from gang_sim.faults import FaultSpec, load_fault_spec

CONTEXT_NAME = "airflow-gang-sim"


def kubeconfig(
    url: str, token: str | None, ca_pem: bytes | None = None, namespace: str = "default"
) -> dict[str, Any]:
    cluster: dict[str, Any] = {"server": url}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT_NAME, "cluster": cluster}],
        "users": [{"name": CONTEXT_NAME, "user": {"token": token} if token else {}}],
        "contexts": [
            {
                "name": CONTEXT_NAME,
                "context": {"cluster": CONTEXT_NAME, "user": CONTEXT_NAME, "namespace": namespace},
            }
        ],
        "current-context": CONTEXT_NAME,
        "preferences": {},
    }


def write_kubeconfig(path: str | Path, url: str, token: str | None, ca_pem: bytes | None = None) -> str:
    """Write atomically with mode 0600 (it holds a credential); returns the path."""
    target = Path(path).expanduser().resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".kubeconfig-")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        yaml.safe_dump(kubeconfig(url, token, ca_pem), handle, sort_keys=False)
    os.chmod(tmp, 0o600)
    os.replace(tmp, target)
    return str(target)


class ApiServerHandle:
    """A running API server. ``url``, ``token``, ``kubeconfig_path``; ``stop()`` ends it.

    ``state.faults`` is its fault injector (``set_faults``/``clear_faults`` are shortcuts); an
    injected outage takes the ``listener`` down and back up on the same address.
    """

    def __init__(
        self,
        listener: Listener | Listeners,
        *,
        state: ServerState,
        url: str,
        token: str | None,
        kubeconfig_path: str,
        temp_dir: tempfile.TemporaryDirectory[str],
        ca_pem: bytes | None,
        advertise_url: str | None = None,
        local_kubeconfig_path: str | None = None,
        controllers_kubeconfig_path: str | None = None,
    ):
        self.listener = listener
        self.state = state
        self.url = url
        self.token = token
        self.kubeconfig_path = kubeconfig_path
        self._temp_dir: tempfile.TemporaryDirectory[str] | None = temp_dir
        self.ca_pem = ca_pem
        # What the written kubeconfig tells clients; ``url`` is where the server listens.
        self.advertise_url = advertise_url or url
        # A kubeconfig reaching the server from this machine (the written one may name a host,
        # such as a compose service, that only other machines resolve).
        self.local_kubeconfig_path = local_kubeconfig_path or kubeconfig_path
        # What the embedded controllers use: the plain loopback listener when there is one.
        self.controllers_kubeconfig_path = controllers_kubeconfig_path or self.local_kubeconfig_path

    @property
    def running(self) -> bool:
        """True until ``stop()``, also while an injected outage has the listener down."""
        return not self.listener.stopped

    def set_faults(self, spec: FaultSpec | Mapping[str, Any] | str | Path) -> FaultSpec:
        """Replace the active fault spec (a spec, a mapping, a YAML/JSON path or inline JSON)."""
        loaded = load_fault_spec(spec)
        self.state.faults.apply(loaded)
        return loaded

    def clear_faults(self) -> None:
        self.state.faults.clear()

    def stop(self, timeout: float = 10.0) -> None:
        # First, so that no timed fault reopens the listener after it is stopped.
        self.state.faults.shutdown()
        # Open watches would otherwise hold the graceful shutdown until its timeout.
        self.state.store.close_watchers()
        self.state.log_streams.close_all()
        self.listener.stop(timeout)
        if self._temp_dir is not None and not self.listener.serving:
            self._temp_dir.cleanup()
            self._temp_dir = None

    def __enter__(self) -> ApiServerHandle:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def start_apiserver(
    port: int = 0,
    kubeconfig_path: str | Path | None = None,
    token: str | None = None,
    host: str = "127.0.0.1",
    *,
    auth: bool = True,
    tls: bool = True,
    tls_hosts: Iterable[str] = (),
    crd_paths: Iterable[str | Path] = (),
    event_window: int = 10_000,
    bookmark_interval: float = 60.0,
    watch_queue_size: int = 10_000,
    startup_timeout: float = 15.0,
    advertise_url: str | None = None,
    faults: FaultSpec | Mapping[str, Any] | str | Path | None = None,
    sim_endpoints: bool = True,
    controllers_loopback: bool = False,
    default_not_ready_toleration_seconds: int = SIM_TOLERATION_SECONDS,
    default_unreachable_toleration_seconds: int = SIM_TOLERATION_SECONDS,
) -> ApiServerHandle:
    """Start an API server on a background thread and write its kubeconfig.

    :param port: TCP port; 0 picks a free one.
    :param kubeconfig_path: where to write the kubeconfig; None writes one into the server's
        temporary directory, removed by ``stop()``.
    :param token: bearer token clients must send; None generates a random one (ignored when
        ``auth`` is False).
    :param host: interface to bind; loopback unless you mean to expose it.
    :param auth: require the bearer token (401 without it).
    :param tls: serve HTTPS with a fresh CA (in the kubeconfig); False serves plain HTTP.
    :param tls_hosts: extra names or addresses for the serving certificate (loopback and
        ``host`` are always included).
    :param crd_paths: upstream CRD YAML files whose schemas replace the built-in ones.
    :param event_window: retained events; older resourceVersions get 410 Expired.
    :param bookmark_interval: seconds between BOOKMARKs on idle watches that allow them.
    :param watch_queue_size: events a watcher may lag behind before it is closed.
    :param advertise_url: the server URL written into the kubeconfig when clients reach the
        server under another address (``https://kube-sim:6443`` from other containers); its
        host joins the certificate's names. The handle's ``local_kubeconfig_path`` then points
        at a second kubeconfig with the address reachable from this machine.
    :param faults: a fault spec to apply once the server is up (see ``gang_sim.faults``):
        a `FaultSpec`, a mapping, a YAML/JSON file path or inline JSON.
    :param controllers_loopback: also serve plain HTTP on a second, loopback-only port for
        controllers running on this machine (the handle's ``controllers_kubeconfig_path``), as
        kube-apiserver's localhost port once served the control plane beside it: the token is
        still required, only TLS is skipped. TLS on the loopback cost a fifth of the embedded
        cluster's CPU under load. An outage takes both listeners down.
    :param sim_endpoints: serve the simulator-only ``/sim/v1/...`` endpoints (request metrics,
        the fault spec over HTTP). False makes the server look like a bare kube-apiserver: those
        paths answer 404 ``404 page not found`` (plain text), so a client that still needs them
        shows up (the attach-mode test runs the controllers against such a server). Faults
        given here or through the handle still apply.
    :param default_not_ready_toleration_seconds: kube-apiserver's
        ``--default-not-ready-toleration-seconds`` (300 upstream; 3 here, see `ServerConfig`).
    :param default_unreachable_toleration_seconds: ``--default-unreachable-toleration-seconds``
        (300 upstream; 3 here).
    """
    fault_spec = load_fault_spec(faults) if faults is not None else None
    advertised_host = _advertised_host(advertise_url, tls) if advertise_url else None
    if auth and token is None:
        token = secrets.token_urlsafe(32)
    if not auth:
        token = None
    base = builtin_registry()
    crd_paths = list(crd_paths)
    registry = base.replaced(load_crds(crd_paths, base)) if crd_paths else base
    config = ServerConfig(
        token=token,
        event_window=event_window,
        bookmark_interval=bookmark_interval,
        watch_queue_size=watch_queue_size,
        extra_registry=registry,
        sim_endpoints=sim_endpoints,
        default_not_ready_toleration_seconds=default_not_ready_toleration_seconds,
        default_unreachable_toleration_seconds=default_unreachable_toleration_seconds,
    )
    listener = Listener(host, port)
    bound_port = listener.port
    shown_host = f"[{host}]" if ":" in host else host
    url = f"{'https' if tls else 'http'}://{shown_host}:{bound_port}"
    config.server_address = f"{shown_host}:{bound_port}"
    state = ServerState(config)
    app = build_app(config, state)
    # One private directory per server: TLS files and, unless a path was given, the kubeconfig.
    temp_dir = tempfile.TemporaryDirectory(prefix="airflow-gang-sim-")
    ssl_files: dict[str, Any] = {}
    ca_pem = None
    if tls:
        ssl_files, ca_pem = _serving_tls(Path(temp_dir.name), host, [*tls_hosts], advertised_host)
    try:
        listener.start(app, startup_timeout=startup_timeout, **_uvicorn_options(), **ssl_files)
    except BaseException:
        listener.stop()
        temp_dir.cleanup()
        raise
    served: Listener | Listeners = listener
    controllers_kubeconfig = None
    if controllers_loopback:
        try:
            loopback = _serve_loopback(app, startup_timeout)
        except BaseException:
            listener.stop()
            temp_dir.cleanup()
            raise
        served = Listeners([listener, loopback])
        controllers_kubeconfig = write_kubeconfig(
            Path(temp_dir.name) / "controllers-kubeconfig", f"http://127.0.0.1:{loopback.port}", token
        )
    state.faults.attach_listener(served)
    if kubeconfig_path is None:
        kubeconfig_path = Path(temp_dir.name) / "kubeconfig"
    written = write_kubeconfig(kubeconfig_path, advertise_url or url, token, ca_pem)
    local_kubeconfig = None
    if advertise_url:
        local_kubeconfig = write_kubeconfig(
            Path(temp_dir.name) / "local-kubeconfig", _local_url(url, host, bound_port, tls), token, ca_pem
        )
    handle = ApiServerHandle(
        served,
        state=state,
        url=url,
        token=token,
        kubeconfig_path=written,
        temp_dir=temp_dir,
        ca_pem=ca_pem,
        advertise_url=advertise_url,
        local_kubeconfig_path=local_kubeconfig,
        controllers_kubeconfig_path=controllers_kubeconfig,
    )
    if fault_spec is not None:
        state.faults.apply(fault_spec)
    return handle


def _serving_tls(
    directory: Path, host: str, tls_hosts: list[str], advertised_host: str | None
) -> tuple[dict[str, Any], bytes]:
    """uvicorn's certificate options and the CA that signed them, for every name of this server."""
    names = ["127.0.0.1", "::1", "localhost", host, *tls_hosts]
    if advertised_host:
        names.append(advertised_host)
    if host in ("0.0.0.0", "::"):
        names.append(socket.gethostname())
    certificate = make_serving_certificate(names)
    certfile, keyfile = certificate.write(directory)
    return {"ssl_certfile": certfile, "ssl_keyfile": keyfile}, certificate.ca_pem


def _serve_loopback(app: Any, startup_timeout: float) -> Listener:
    """The plain-HTTP, loopback-only listener of ``controllers_loopback``."""
    loopback = Listener("127.0.0.1", 0)
    try:
        loopback.start(app, startup_timeout=startup_timeout, **_uvicorn_options())
    except BaseException:
        loopback.stop()
        raise
    return loopback


def _uvicorn_options() -> dict[str, Any]:
    return {
        "log_level": "warning",
        "access_log": False,
        "lifespan": "off",
        "timeout_graceful_shutdown": 1,
        "backlog": 4096,
        "timeout_keep_alive": 30,
        # No proxy stands in front of it: uvicorn's X-Forwarded-* rewriting would only cost time.
        "proxy_headers": False,
    }


def _advertised_host(advertise_url: str, tls: bool) -> str:
    """The host of ``advertise_url``, after checking it is a URL of this server's scheme."""
    parts = urlsplit(advertise_url)
    scheme = "https" if tls else "http"
    if parts.scheme != scheme or not parts.hostname:
        raise ValueError(f"advertise_url {advertise_url!r}: expected {scheme}://HOST[:PORT]")
    return parts.hostname


def _local_url(url: str, host: str, port: int, tls: bool) -> str:
    """``url``, with a wildcard bind address replaced by the loopback address."""
    if host in ("0.0.0.0", ""):
        return f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    if host == "::":
        return f"{'https' if tls else 'http'}://[::1]:{port}"
    return url
