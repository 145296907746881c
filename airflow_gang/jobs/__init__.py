"""The lifecycle of one gang job, shared by everything that handles one.

Operators, the TaskFlow decorator, triggers, sensors, the orphan reaper and the UI each need the
same decisions about a job; this package makes them once, as pure functions and plans over the
objects the cluster shows, with thin sync and async drivers beside them where I/O is needed.

- `deletion`: deleting a job on purpose — which objects, under which uid preconditions, in which
  order, and what counts as confirmed gone.
"""
