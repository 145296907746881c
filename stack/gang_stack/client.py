"""A small client of Airflow's REST API (``/api/v2``) for tests and scripts.

It signs in with the simple auth manager's user (``POST /auth/token``) and signs in again when
the token is refused. Every wait is bounded and ends with `StackError` naming what it saw last.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import quote

import httpx

from gang_stack.errors import StackError
from gang_stack.logtext import log_text

T = TypeVar("T")
FINISHED_RUN_STATES = frozenset({"success", "failed"})
PAGE = 100


def _path(*parts: str) -> str:
    return "/".join(quote(part, safe="") for part in parts)


READ_RETRIES = 4


class AirflowClient:
    """REST calls against one Airflow API server as ``username``."""

    def __init__(self, url: str, username: str, password: str, *, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.username = username
        self._password = password
        self._http = httpx.Client(base_url=self.url, timeout=timeout)
        self._token: str | None = None

    def close(self) -> None:
        self._http.close()

    def token(self, refresh: bool = False) -> str:
        """A JWT for the API (``POST /auth/token``), cached until refused."""
        if self._token is None or refresh:
            answer = self._http.post(
                "/auth/token", json={"username": self.username, "password": self._password}
            )
            if answer.status_code not in (200, 201):
                raise StackError(f"POST /auth/token as {self.username!r}: {answer.status_code} {answer.text}")
            self._token = str(answer.json()["access_token"])
        return self._token

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """An authenticated request; one new sign-in when the token is refused (401).

        A GET that meets a server error is tried again a few times: with SQLite under load the
        API server answers 500 "Database error" while the scheduler holds the write lock.
        """
        for attempt in range(READ_RETRIES + 1):
            answer = self._send(method, path, self.token(), **kwargs)
            if answer.status_code == 401:
                answer = self._send(method, path, self.token(refresh=True), **kwargs)
            if method.upper() != "GET" or answer.status_code < 500 or attempt == READ_RETRIES:
                return answer
            time.sleep(0.5 * (attempt + 1))
        return answer

    def _send(self, method: str, path: str, token: str, **kwargs: Any) -> httpx.Response:
        rest = dict(kwargs)  # the caller's kwargs serve every retry: do not consume them
        headers = {"Authorization": f"Bearer {token}", **rest.pop("headers", {})}
        return self._http.request(method, path, headers=headers, **rest)

    def call(self, method: str, path: str, expected: tuple[int, ...] = (200,), **kwargs: Any) -> Any:
        """`request`, then the JSON answer; another status raises `StackError` with the body."""
        answer = self.request(method, path, **kwargs)
        if answer.status_code not in expected:
            raise StackError(f"{method} {path}: {answer.status_code} {answer.text[:2000]}")
        return answer.json() if answer.content else None

    def health(self) -> dict[str, Any]:
        """``/api/v2/monitor/health`` (no sign-in needed)."""
        answer = self._http.get("/api/v2/monitor/health")
        answer.raise_for_status()
        result: dict[str, Any] = answer.json()
        return result

    # DAGs
    def dag(self, dag_id: str) -> dict[str, Any] | None:
        answer = self.request("GET", f"/api/v2/dags/{_path(dag_id)}")
        if answer.status_code == 404:
            return None
        if answer.status_code != 200:
            raise StackError(f"GET dag {dag_id}: {answer.status_code} {answer.text[:2000]}")
        result: dict[str, Any] = answer.json()
        return result

    def dags(self) -> list[dict[str, Any]]:
        return self._pages("/api/v2/dags", "dags")

    def import_errors(self) -> list[dict[str, Any]]:
        return self._pages("/api/v2/importErrors", "import_errors")

    def set_paused(self, dag_id: str, paused: bool) -> None:
        self.call("PATCH", f"/api/v2/dags/{_path(dag_id)}", json={"is_paused": paused})

    def wait_for_dag(self, dag_id: str, timeout: float = 60.0, unpause: bool = True) -> dict[str, Any]:
        """Wait until the dag-processor has stored ``dag_id``, then unpause it (by default)."""
        dag = self._poll(lambda: self.dag(dag_id), timeout, lambda: self._dag_missing(dag_id))
        if unpause and dag.get("is_paused"):
            self.set_paused(dag_id, False)
            dag["is_paused"] = False
        return dag

    def _dag_missing(self, dag_id: str) -> str:
        errors = [f"{error['filename']}:\n{error['stack_trace']}" for error in self.import_errors()]
        detail = "\nimport errors:\n" + "\n".join(errors) if errors else " (no import errors)"
        return f"DAG {dag_id!r} was not parsed{detail}"

    # DAG runs
    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None, run_id: str | None = None) -> str:
        """A manual run of ``dag_id`` now; returns its run id."""
        body: dict[str, Any] = {"logical_date": None, "conf": conf or {}}
        if run_id is not None:
            body["dag_run_id"] = run_id
        answer = self.call("POST", f"/api/v2/dags/{_path(dag_id)}/dagRuns", expected=(200,), json=body)
        return str(answer["dag_run_id"])

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self.call("GET", f"/api/v2/dags/{_path(dag_id, 'dagRuns', run_id)}")
        return result

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 120.0) -> str:
        """Poll until the run is ``success`` or ``failed``; returns that state."""

        def finished() -> str | None:
            state = self.dag_run(dag_id, run_id).get("state")
            return str(state) if state in FINISHED_RUN_STATES else None

        return self._poll(finished, timeout, lambda: self._run_summary(dag_id, run_id))

    def _run_summary(self, dag_id: str, run_id: str) -> str:
        tis = ", ".join(
            f"{ti['task_id']}[{ti['map_index']}]={ti['state']}" for ti in self.task_instances(dag_id, run_id)
        )
        return f"run {dag_id}/{run_id} is {self.dag_run(dag_id, run_id).get('state')}: {tis}"

    # Task instances
    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Every task instance of the run (``task_id``, ``map_index``, ``state``, ``try_number``, ...)."""
        return self._pages(f"/api/v2/dags/{_path(dag_id, 'dagRuns', run_id)}/taskInstances", "task_instances")

    def task_instance(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> dict[str, Any]:
        suffix = f"/{map_index}" if map_index >= 0 else ""
        result: dict[str, Any] = self.call(
            "GET", f"/api/v2/dags/{_path(dag_id, 'dagRuns', run_id, 'taskInstances', task_id)}{suffix}"
        )
        return result

    def wait_for_task_state(
        self,
        dag_id: str,
        run_id: str,
        task_id: str,
        states: set[str],
        *,
        map_index: int = -1,
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        """Poll until the task instance is in one of ``states``; returns it."""

        def reached() -> dict[str, Any] | None:
            ti = self.task_instance(dag_id, run_id, task_id, map_index)
            return ti if ti.get("state") in states else None

        def last() -> str:
            state = self.task_instance(dag_id, run_id, task_id, map_index).get("state")
            return f"{dag_id}/{run_id}/{task_id}[{map_index}] is {state}, not one of {sorted(states)}"

        return self._poll(reached, timeout, last)

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int, map_index: int = -1) -> str:
        """The whole log of one try as text (one line per structured log event)."""
        path = f"/api/v2/dags/{_path(dag_id, 'dagRuns', run_id, 'taskInstances', task_id)}/logs/{try_number}"
        params: dict[str, Any] = {"map_index": map_index, "full_content": True}
        lines: list[str] = []
        for _ in range(100):  # continuation pages of a log still being written
            answer = self.call("GET", path, params=params, headers={"Accept": "application/json"})
            content = answer.get("content") or []
            lines.extend(log_text(content))
            token = answer.get("continuation_token")
            if not token or not content:
                break
            params = {"map_index": map_index, "token": token}
        return "\n".join(lines)

    def set_task_state(
        self, dag_id: str, run_id: str, task_id: str, new_state: str, map_index: int = -1
    ) -> list[dict[str, Any]]:
        """Mark a task instance ``failed``, ``success`` or ``skipped`` (a running one is killed)."""
        suffix = f"/{map_index}" if map_index >= 0 else ""
        path = f"/api/v2/dags/{_path(dag_id, 'dagRuns', run_id, 'taskInstances', task_id)}{suffix}"
        answer = self.call("PATCH", path, json={"new_state": new_state})
        return list(answer.get("task_instances", []))

    def clear_task(
        self, dag_id: str, run_id: str, task_id: str, map_index: int | None = None, only_failed: bool = False
    ) -> list[dict[str, Any]]:
        """Clear a task instance (all map indexes unless ``map_index``) so the scheduler runs it again."""
        target: str | list[Any] = task_id if map_index is None else [task_id, map_index]
        body = {"dry_run": False, "dag_run_id": run_id, "task_ids": [target], "only_failed": only_failed}
        answer = self.call("POST", f"/api/v2/dags/{_path(dag_id)}/clearTaskInstances", json=body)
        return list(answer.get("task_instances", []))

    def _pages(self, path: str, key: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        while True:
            answer = self.call("GET", path, params={"limit": PAGE, "offset": len(items)})
            page = answer.get(key) or []
            items.extend(page)
            if not page or len(items) >= int(answer.get("total_entries", 0)):
                return items

    @staticmethod
    def _poll(probe: Callable[[], T | None], timeout: float, describe: Callable[[], str]) -> T:
        deadline = time.monotonic() + timeout
        interval = 0.2
        while True:
            result = probe()
            if result:
                return result
            if time.monotonic() > deadline:
                raise StackError(f"not reached within {timeout:.0f}s: {describe()}")
            time.sleep(interval)
            interval = min(interval * 1.5, 1.0)
