"""Deferred waits follow a Kubernetes connection edited while they wait (issue 24).

Two edits: the cluster moves to a new endpoint, and its CA is rotated at the same endpoint.

The connection ``kubernetes_moving`` names a kubeconfig file whose server is a TCP relay in front
of the embedded cluster's API server. While triggers wait, the cluster "moves": a second relay
starts, the kubeconfig file is rewritten to point at it, and the first relay closes with every
connection through it. A triggerer keeping the old settings would then report "Kubernetes API
unavailable" for as long as its triggers live; the provider looks at the connection again when
its server stops answering, and a trigger started after the edit never joins the old cache.

For the CA, a TLS-terminating relay with a CA of its own stands in front of the API server; the
rotation writes a new CA into the kubeconfig's ``certificate-authority-data``, then closes the
relay and starts another on the same port with a certificate of the new CA: the old client's
TLS handshakes now fail verification.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.triggers import watch_cache
from airflow_gang.triggers.gang import GangJobTrigger
from gang_sim.certs import make_serving_certificate
from gang_sim.cluster import SimCluster
from tests.support.cluster import write_kubeconfig
from tests.support.submission import Submitted
from tests.support.triggers import first_event
from tests.support.watch_cache import submit_labelled_jobs  # noqa: F401  (the fixture "submit")
from tests.tcp_relay import TcpRelay
from tests.tls_relay import TlsRelay

pytestmark = pytest.mark.usefixtures("kube_connection")

CONN_ID = "kubernetes_moving"
NAMESPACE = "default"


@pytest.fixture
def moving(cluster: SimCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The kubeconfig file the ``kubernetes_moving`` connection names (first through one relay)."""
    kubeconfig = tmp_path / "kubeconfig"
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{CONN_ID.upper()}",
        json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}),
    )
    return kubeconfig


def api_server(cluster: SimCluster) -> tuple[str, int]:
    parts = urlsplit(cluster.url)
    assert parts.hostname
    assert parts.port
    return parts.hostname, parts.port


def waiting_trigger(job: Submitted, watch: str) -> GangJobTrigger:
    """A trigger as the triggerer rebuilds it, polling every 2 s when ``watch="poll"``."""
    built = GangJobTrigger(
        name=job.name,
        namespace=NAMESPACE,
        uid=job.uid,
        gang_scheduling="provider",
        poll_interval=2 if watch == "poll" else 600,
        watch=watch,
        hook_kwargs=GangJobHook(conn_id=CONN_ID).async_hook_kwargs(),
    )
    return GangJobTrigger(**built.serialize()[1])


@dataclass
class AcrossTheEdit:
    events: list[dict[str, Any]]
    caches_after_edit: int
    # From a second after the edit until both waits ended.
    seconds_to_end: float


async def wait_across_an_edit(
    before: Submitted, after: Submitted, watch: str, edit: Callable[[], Awaitable[None]]
) -> AcrossTheEdit:
    """The trigger of ``before`` waits (2.5 s: watching, or polled once, under the old settings),
    ``edit()`` changes the connection, then the trigger of ``after`` starts; both first events."""
    waiting = asyncio.create_task(first_event(waiting_trigger(before, watch), 60))
    await asyncio.sleep(2.5)
    await edit()
    later = asyncio.create_task(first_event(waiting_trigger(after, watch), 60))
    await asyncio.sleep(1.0)
    caches = len(watch_cache.caches())
    began = time.monotonic()
    events = await asyncio.gather(waiting, later)
    return AcrossTheEdit(list(events), caches, time.monotonic() - began)


def assert_both_succeeded(events: list[dict[str, Any]], before: Submitted, after: Submitted) -> None:
    assert [(event["status"], event["uid"]) for event in events] == [
        ("succeeded", before.uid),
        ("succeeded", after.uid),
    ]


# The default watch (shared) in every make test; the per-trigger and polling ones are slow (CI's
# time budget).
@pytest.mark.parametrize(
    "watch",
    ["shared", *[pytest.param(watch, marks=pytest.mark.slow) for watch in ("per_trigger", "poll")]],
)
def test_waits_follow_a_connection_edited_to_a_new_endpoint_without_a_phantom_outage(
    watch: str,
    cluster: SimCluster,
    moving: Path,
    submit: Callable[..., Submitted],
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    old = TcpRelay(api_server(cluster))
    write_kubeconfig(moving, cluster, old.url)
    before, after = submit(8.0), submit(3.0)
    seen: dict[str, Any] = {}

    relays: list[TcpRelay] = []

    async def move() -> None:
        seen["through the old endpoint"] = old.opened > 0
        new = TcpRelay(api_server(cluster))
        relays.append(new)
        seen["new endpoint"] = new.url
        await asyncio.to_thread(write_kubeconfig, moving, cluster, new.url)
        old.close()

    result = asyncio.run(wait_across_an_edit(before, after, watch, move))
    seen["caches after the edit"] = result.caches_after_edit
    seen["through the new endpoint"] = relays[0].opened > 0
    relays[0].close()

    assert_both_succeeded(result.events, before, after)
    assert seen["through the old endpoint"], seen
    assert seen["through the new endpoint"], seen
    if watch == "shared":
        # The trigger started after the edit did not join the old settings' cache.
        assert seen["caches after the edit"] == 2, seen
    logged = capfd.readouterr().out + caplog.text
    assert "unavailable" not in logged.lower(), logged[-3000:]
    # The waits started before the edit switched their client, and said so.
    assert f"calls now go to {seen['new endpoint']}" in logged, logged[-3000:]


# Both orders of the edit for every watch; CI runs both for the default (shared), the others are
# slow (CI's time budget).
@pytest.mark.parametrize(
    ("kubeconfig_first", "watch"),
    [
        *[(first, "shared") for first in (True, False)],
        *[
            pytest.param(first, watch, marks=pytest.mark.slow)
            for first in (True, False)
            for watch in ("per_trigger", "poll")
        ],
    ],
    ids=lambda value: value if isinstance(value, str) else "kubeconfig-first" if value else "server-first",
)
def test_waits_follow_a_ca_rotated_at_the_same_endpoint_without_a_phantom_outage(
    watch: str,
    kubeconfig_first: bool,
    cluster: SimCluster,
    moving: Path,
    submit: Callable[..., Submitted],
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    old = TlsRelay(api_server(cluster))
    write_kubeconfig(moving, cluster, old.url, old.certificate.ca_pem)
    before, after = submit(8.0), submit(3.0)
    seen: dict[str, Any] = {}

    relays: list[TlsRelay] = []

    async def rotate() -> None:
        seen["under the old CA"] = old.opened > 0
        # The new CA goes into the kubeconfig, and the server presents a certificate of it, in
        # either order; server first, the waits fail their TLS handshakes until the edit.
        rotated = make_serving_certificate(["127.0.0.1"])
        if kubeconfig_first:
            await asyncio.to_thread(write_kubeconfig, moving, cluster, old.url, rotated.ca_pem)
        old.close()
        new = await asyncio.to_thread(TlsRelay, api_server(cluster), old.port, rotated)
        relays.append(new)
        seen["same endpoint"] = new.url == old.url
        if not kubeconfig_first:
            await asyncio.sleep(3.0)  # handshakes fail: a real outage under the old settings
            await asyncio.to_thread(write_kubeconfig, moving, cluster, old.url, rotated.ca_pem)

    result = asyncio.run(wait_across_an_edit(before, after, watch, rotate))
    seen["caches after the edit"] = result.caches_after_edit
    seen["ended after the rotation"] = result.seconds_to_end
    seen["under the new CA"] = relays[0].opened > 0
    relays[0].close()

    assert_both_succeeded(result.events, before, after)
    assert seen["under the old CA"], seen
    assert seen["same endpoint"], seen
    assert seen["under the new CA"], seen
    if watch == "shared":
        assert seen["caches after the edit"] == 2, seen
    logged = capfd.readouterr().out + caplog.text
    # The waits started before the rotation switched their client (its CA) and said so.
    assert f"connection {CONN_ID} changed: calls now go to {old.url}" in logged, logged[-3000:]
    if kubeconfig_first:
        assert "unavailable" not in logged.lower(), logged[-3000:]
    else:
        # Unavailable while the kubeconfig still named the old CA, and followed at once after
        # the edit, not at the next 30 s look: the waits ended with their 8 s and 3 s jobs.
        assert seen["ended after the rotation"] < 15, seen
