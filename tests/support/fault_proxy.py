"""`FaultProxy`: a plain-HTTP reverse proxy in front of the embedded cluster's HTTPS API server
that answers or drops chosen requests (`Fault`) and forwards the rest, for faults the simulator
cannot produce on demand (503s, dropped connections, RBAC 403s, a cluster without the CRDs).
`rbac_forbidden` is the body of such a 403.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import yaml


@dataclass
class Fault:
    """Answer (``status``/``body``) or ``drop`` the next ``times`` requests matching method and path."""

    method: str
    path: str
    status: int = 503
    body: dict[str, Any] | None = None
    drop: bool = False
    forward_first: bool = False
    times: int = 1


class FaultProxy(ThreadingHTTPServer):
    """Plain-HTTP reverse proxy to the simulator's HTTPS API server, recording every request."""

    daemon_threads = True

    def __init__(self, kubeconfig_path: str) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        with open(kubeconfig_path, encoding="utf-8") as handle:
            config = yaml.safe_load(handle)
        cluster = config["clusters"][0]["cluster"]
        self.upstream = urlsplit(cluster["server"])
        self.ssl_context = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
        )
        cluster["server"] = f"http://127.0.0.1:{self.server_address[1]}"
        del cluster["certificate-authority-data"]
        self.config = config
        self.faults: list[Fault] = []
        self.seen: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def take_fault(self, method: str, path: str) -> Fault | None:
        with self.lock:
            self.seen.append((method, path))
            for fault in self.faults:
                if fault.times > 0 and fault.method == method and urlsplit(path).path == fault.path:
                    fault.times -= 1
                    return fault
        return None

    def forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        upstream = http.client.HTTPSConnection(
            self.upstream.hostname, self.upstream.port, context=self.ssl_context, timeout=30
        )
        try:
            upstream.request(method, path, body=body or None, headers=headers)
            response = upstream.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            upstream.close()


class _ProxyHandler(BaseHTTPRequestHandler):
    server: FaultProxy

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _handle(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        fault = self.server.take_fault(self.command, self.path)
        if fault is not None and fault.forward_first:
            self.server.forward(self.command, self.path, headers, body)
        if fault is not None and fault.drop:
            self.close_connection = True  # no status line at all: the client sees a reset
            return
        if fault is not None:
            status, out_headers, data = fault.status, [("Content-Type", "application/json")], b""
            data = json.dumps(fault.body or {"kind": "Status", "code": fault.status}).encode()
        else:
            status, out_headers, data = self.server.forward(self.command, self.path, headers, body)
        self.send_response(status)
        for key, value in out_headers:
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _handle


def rbac_forbidden(verb: str, resource: str, namespace: str) -> dict[str, Any]:
    plural, _, group = resource.partition(".")
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": f'{resource} is forbidden: User "system:serviceaccount:airflow:worker" cannot {verb} '
        f'resource "{plural}" in API group "{group}" in the namespace "{namespace}"',
        "reason": "Forbidden",
        "details": {"group": group, "kind": plural},
        "code": 403,
    }
