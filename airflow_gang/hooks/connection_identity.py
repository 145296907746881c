"""What a Kubernetes connection resolves to, as short fingerprints: which cluster, as whom.

A triggerer keeps clients and watches for as long as triggers use them. When a person edits the
connection (or rewrites the kubeconfig it names, or rotates a CA) while triggers wait, what was
loaded before must not be kept: the shared watch cache is keyed by `definition_fingerprint` and
a hook's pooled client by `client_fingerprint`, so a change means a new cache or a new client.

- `definition_fingerprint`: what a person edits, without loading credentials: the connection's
  extras, the hook's own overrides and the bytes of the kubeconfig file they name. Cheap enough
  for every trigger to compute when it starts.
- `client_fingerprint`: what a loaded client configuration talks to and trusts: the server, the
  TLS name and proxy, the verification flags, the *contents* of the CA and client certificate
  and key (the kubeconfig loader writes ``*-data`` fields to new temporary files on every load),
  and a static token. Credentials that expire and are reloaded in place (kubeconfig ``exec``
  plugins, in-cluster service-account tokens) are not part of it.

Only digests leave this module: the inputs hold credentials.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import Configuration

DEFAULT_KUBECONFIG = "~/.kube/config"


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:32]


def file_digest(path: str | None) -> str | None:
    """SHA-256 of a file's bytes; None when there is no path or no such file. Blocking."""
    if not path:
        return None
    try:
        return hashlib.sha256(Path(path).expanduser().read_bytes()).hexdigest()
    except OSError:
        return None


def kubeconfig_path(extras: dict[str, Any], hook_kwargs: dict[str, Any]) -> str | None:
    """The kubeconfig file a hook with these extras and kwargs loads, or None (in-cluster, inline,
    a config dict). The cncf hook's order: ``in_cluster``, ``config_dict``, the connection's
    ``kube_config_path`` (our hook honours ``config_file`` first), an inline ``kube_config``,
    then the default file (``$KUBECONFIG``'s first entry, else ``~/.kube/config``)."""

    def field(name: str) -> Any:
        return extras.get(name, extras.get(f"extra__kubernetes__{name}"))

    if hook_kwargs.get("in_cluster") or field("in_cluster") or hook_kwargs.get("config_dict"):
        return None
    path = hook_kwargs.get("config_file") or field("kube_config_path")
    if path:
        return str(path)
    if field("kube_config"):
        return None
    default = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or DEFAULT_KUBECONFIG
    return os.path.expanduser(default)


def definition_fingerprint(extras: dict[str, Any], hook_kwargs: dict[str, Any]) -> str:
    """The connection as a person defined it: its extras, the hook's overrides and the kubeconfig
    file's bytes. Blocking (reads the file): run it off the event loop."""
    path = kubeconfig_path(extras, hook_kwargs)
    return _digest({"extras": extras, "hook": hook_kwargs, "kubeconfig": file_digest(path)})


def client_fingerprint(configuration: Configuration, *, reloads_credentials: bool) -> str:
    """What a loaded configuration talks to and trusts (see the module docstring). Blocking."""
    refreshed = reloads_credentials or configuration.refresh_api_key_hook is not None
    return _digest(
        {
            "host": configuration.host,
            "tls_server_name": configuration.tls_server_name,
            "proxy": configuration.proxy,
            "verify_ssl": configuration.verify_ssl,
            "strict": configuration.disable_strict_ssl_verification,
            "ca": file_digest(configuration.ssl_ca_cert),
            "cert": file_digest(configuration.cert_file),
            "key": file_digest(configuration.key_file),
            "username": configuration.username,
            "password": configuration.password,
            "token": None if refreshed else dict(configuration.api_key or {}),
        }
    )
