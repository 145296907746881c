"""Training metrics from a replica's log, in Katib's StdOut collector format (``name=value``).

Kubeflow's Katib reads metrics by scanning the training container's output for ``name=value``
pairs; scripts that already print ``accuracy=0.97`` need no other reporting channel. The
operator applies the same convention to the master replica's log, so a sweep can pick its best
run from the task results. The last value printed for a name wins (the final epoch's loss, not
the first).
"""

from __future__ import annotations

import math
import re

# A name starts with a letter or underscore and may hold the separators Katib allows in metric
# names; the value is a plain or scientific float. Neither side may be glued to more text, so
# "x=1.2.3" or "path=/a/b" are not metrics.
_METRIC = re.compile(
    r"(?<![\w.\-/])([A-Za-z_][\w.\-/]*)\s*=\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)(?![\w.\-/])"
)


def parse_metrics(text: str) -> dict[str, float]:
    """Every ``name=value`` pair in ``text``; later lines override earlier ones."""
    metrics: dict[str, float] = {}
    for name, value in _METRIC.findall(text):
        number = float(value)
        if math.isfinite(number):
            metrics[name] = number
    return metrics
