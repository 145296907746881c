"""The options the UI plugin reads (``[gang]`` and a few of Airflow's own), resolved once per
request (config may change)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_CONN_ID = "kubernetes_default"


@dataclass(frozen=True)
class UiSettings:
    """What the page reads and where Airflow's own UI lives.

    :param conn_id: the cncf.kubernetes connection to read the cluster with.
    :param namespaces: namespaces to show; empty means the connection's namespace, else
        ``default``.
    :param airflow_base_path: path prefix of Airflow's UI (``""`` at the root), for the links
        back to task instances.
    :param timezone: the page's default timezone, from ``[core] default_timezone``: an IANA
        name, ``UTC``, or ``system`` (the browser's own zone). The page checks the name and
        falls back to UTC for one the browser does not know.
    """

    conn_id: str = DEFAULT_CONN_ID
    namespaces: tuple[str, ...] = ()
    airflow_base_path: str = ""
    timezone: str = "UTC"


def parse_namespaces(value: str | None) -> tuple[str, ...]:
    """``"ml, research,"`` -> ``("ml", "research")``, first occurrence order, no blanks."""
    seen: list[str] = []
    for part in (value or "").split(","):
        name = part.strip()
        if name and name not in seen:
            seen.append(name)
    return tuple(seen)


def base_path(base_url: str | None) -> str:
    """The path of ``[api] base_url`` without its trailing slash: ``""`` for the root."""
    return urlsplit(base_url or "").path.rstrip("/")


def ui_timezone(value: str | None) -> str:
    """``[core] default_timezone`` as the page takes it: ``utc`` (any case) or blank -> ``UTC``,
    ``system`` (any case) -> ``system``, anything else as written (an IANA name)."""
    zone = (value or "").strip()
    if not zone or zone.lower() == "utc":
        return "UTC"
    if zone.lower() == "system":
        return "system"
    return zone


def load_settings() -> UiSettings:
    """Read ``[gang] ui_kubernetes_conn_id``, ``[gang] ui_namespaces``, ``[api] base_url`` and
    ``[core] default_timezone``."""
    from airflow.configuration import conf

    return UiSettings(
        conn_id=conf.get("gang", "ui_kubernetes_conn_id", fallback=DEFAULT_CONN_ID) or DEFAULT_CONN_ID,
        namespaces=parse_namespaces(conf.get("gang", "ui_namespaces", fallback="")),
        airflow_base_path=base_path(conf.get("api", "base_url", fallback="")),
        timezone=ui_timezone(conf.get("core", "default_timezone", fallback="utc")),
    )
