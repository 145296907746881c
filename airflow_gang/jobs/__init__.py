"""The lifecycle of one gang job, shared by everything that handles one.

Operators, the TaskFlow decorator, triggers, sensors, the orphan reaper and the UI each need the
same decisions about a job; this package makes them once, as pure functions and plans over the
objects the cluster shows, with thin sync and async drivers beside them where I/O is needed.

- `submission`: finding an earlier try's job, adopting it, or submitting PodGroup + PyTorchJob;
- `observation`: one look at the job (job, PodGroup, pods), the queue check, the failure and
  its log;
- `deletion`: deleting a job on purpose — which objects, under which uid preconditions, in which
  order, and what counts as confirmed gone; `cleanup` carries it out synchronously
  (`airflow_gang.triggers.deletion` asynchronously);
- `result`: the task's return value; `resume_hold`: when a deferred wait may end at the earliest.

The operator, the sensors and the orphan reaper use these; none of them imports another's
module (import-linter checks that sensors and the reaper never import `operators`).
"""
