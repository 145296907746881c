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

What differs between kinds of gang job is not here: each kind's `airflow_gang.kinds.base.JobKind`
(its facts, and what its objects say: replicas, state, queue, PodGroup name, suspension) and its
recipe (`airflow_gang.kinds.recipe.JobRecipe`: how its manifests are built) are read by this
package, which never tells the kinds apart (``tests/unit/test_kind_boundary.py``).
"""
