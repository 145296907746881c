"""The one error the stack and its client raise."""

from __future__ import annotations


class StackError(RuntimeError):
    """An Airflow component did not start or answer, or a wait ran out of time.

    The message carries what was seen last (component log tails, states, import errors).
    """
