"""Who may see what on the page.

Airflow mounts a plugin's FastAPI app as it is: no authentication reaches it unless the
plugin asks for it. Inside the API server the plugin therefore authenticates every JSON route
with Airflow's own `get_user` (the UI's ``_token`` cookie or an ``Authorization: Bearer`` JWT)
and then shows:

- jobs of a DAG only to users the auth manager lets read that DAG;
- queues, and PyTorchJobs without Airflow identity labels (``?all=true``), to any signed-in
  user: they are cluster facts of the namespaces the administrator chose in
  ``[gang] ui_namespaces``;
- the actions (delete, suspend, resume) on a job only to users the auth manager lets change
  that DAG's task instances (``PUT`` on ``TASK_INSTANCE``: what clearing the task needs).

`OpenAccess` (everything visible) is for an app run outside the API server, e.g. in tests or
behind another authenticating proxy.
"""

# No `from __future__ import annotations`: FastAPI must evaluate the route signatures, which
# name dependencies local to the factory functions.
from collections.abc import Callable
from typing import Annotated, Any, Protocol

from fastapi import Depends

from airflow_gang.plugins.identity import TaskIdentity, label_of


class Access(Protocol):
    """The viewer's rights, asked per job."""

    @property
    def user_name(self) -> str: ...

    def can_see_dag(self, identity: TaskIdentity) -> bool: ...

    def can_edit_dag(self, identity: TaskIdentity) -> bool: ...


class OpenAccess:
    """Everything is visible and may be changed."""

    user_name = "anonymous (no authentication)"

    def can_see_dag(self, identity: TaskIdentity) -> bool:
        return True

    def can_edit_dag(self, identity: TaskIdentity) -> bool:
        return True


class AirflowUserAccess:
    """An Airflow user's rights, from the API server's auth manager (read once per request)."""

    def __init__(self, user: Any) -> None:
        self.user = user
        self._dag_ids: set[str] | None = None
        self._dag_labels: set[str] = set()

    def _readable(self) -> set[str]:
        if self._dag_ids is None:
            from airflow.api_fastapi.app import get_auth_manager

            self._dag_ids = set(get_auth_manager().get_authorized_dag_ids(user=self.user, method="GET"))
            self._dag_labels = {label_of(dag_id) for dag_id in self._dag_ids}
        return self._dag_ids

    @property
    def user_name(self) -> str:
        name = getattr(self.user, "get_name", None)
        return str(name() if callable(name) else getattr(self.user, "username", "unknown"))

    def can_see_dag(self, identity: TaskIdentity) -> bool:
        readable = self._readable()
        if identity.resolved or identity.dag_resolved:
            return identity.dag_id in readable
        # Unresolved: the label may be a hash; compare in label space.
        return identity.dag_id in self._dag_labels

    def can_edit_dag(self, identity: TaskIdentity) -> bool:
        if not (identity.resolved or identity.dag_resolved):
            return False  # a hashed label names no DAG the auth manager knows
        from airflow.api_fastapi.app import get_auth_manager
        from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

        return bool(
            get_auth_manager().is_authorized_dag(
                method="PUT",
                access_entity=DagAccessEntity.TASK_INSTANCE,
                details=DagDetails(id=identity.dag_id),
                user=self.user,
            )
        )


def open_access() -> Access:
    return OpenAccess()


def airflow_user_access() -> Callable[..., Access]:
    """A FastAPI dependency: the signed-in Airflow user's `Access` (401/403 from Airflow if none)."""
    from airflow.api_fastapi.core_api.security import get_user

    def dependency(user: Annotated[Any, Depends(get_user)]) -> Access:
        return AirflowUserAccess(user)

    return dependency
