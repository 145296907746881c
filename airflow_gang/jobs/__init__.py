"""The lifecycle of one gang job, shared by everything that handles one.

Operators, the TaskFlow decorator, triggers, sensors, the orphan reaper and the UI each need the
same decisions about a job; this package makes them once, as pure functions and plans over the
objects the cluster shows, with thin sync and async drivers beside them where I/O is needed.

- `submission`: finding an earlier try's job and taking it over, retiring a cleared try's job,
  sweeping orphaned PodGroups; `creation`: creating PodGroup and job once, whatever the API
  answers, and what a failed create leaves behind;
- `observation`: one look at the job (job, PodGroup, pods), the queue check, the failure and its
  log, the admission-timeout error;
- `wait_plan`: what a wait is for and until when (`airflow_gang.triggers.handover` turns it
  into the trigger that carries it out in the triggerer);
- `deletion`: deleting a job on purpose, as one pure plan: which objects, under which uid
  preconditions, in which order, and what counts as confirmed gone; `cleanup` carries it out
  synchronously (`airflow_gang.triggers.deletion` asynchronously);
- `outcome`: how a finished job ended, as a value (the result or the failure, the leader's
  log tail), and whether ``delete_on_finish`` deletes it; `result`: the task's return value;
- `resume_hold`: when a deferred wait may end at the earliest.

None of these calls back into an operator, and none imports `airflow_gang.operators`
(import-linter checks it).

The interface of a job kind. What differs between kinds of gang job is, on one side, data: an
`airflow_gang.job_kinds.JobKind` (where the kind is served, the label its pods carry, the
training container, the replica specs field, the leader whose log is the task's), read by this
package, the hooks, the trigger and the UI instead of PyTorchJob literals. On the other side,
four operations the lifecycle calls, which `PYTORCHJOB` implements with the modules above:

1. build: the job's manifest, and the provider's PodGroup if the kind needs one
   (`airflow_gang.spec.GangJobSpec.build_pytorchjob` / ``build_podgroup``);
2. find its PodGroup: by the job's name (PyTorchJob: the provider's or the training-operator's
   group is named like the job);
3. judge: where the gang stands from job, PodGroup and pods (`airflow_gang.model.gang_state`,
   the job's conditions ``Created/Running/Succeeded/Failed``);
4. diagnose: the failing replica, its exit code and log (`observation.failure_error`).

A second kind (Kubeflow Trainer v2's TrainJob, whose Volcano plugin makes the PodGroup; a
Volcano Job) adds a `JobKind` value and these four for its objects; submission, the waits, the
deadlines, deletion, outage riding, the orphan reaper and the outcome stay as they are.
"""
