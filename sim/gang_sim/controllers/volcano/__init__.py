"""The Volcano scheduler (vc-scheduler): gang scheduling in sessions, queues, preempt and reclaim.

Modelled on Volcano v1.16.0-alpha.1 (commit a4b775ad), ``pkg/scheduler``; each module cites the
lines it follows (see also ``docs/volcano-preemption.md`` and ``docs/architecture.md#podgroups``
and the sections after it).

- ``scheduler.py``: `Volcano`, the controller: default queues, then one session per period,
  its decisions applied over the API (bindings, events); ``status_updater.py``: the statuses
  it writes, only when they change; ``gang_cache.py``: the informer cache read by gang;
- ``session.py``: one session as a pure function, snapshot in, decisions out (`run_session`),
  its enqueue action included; ``model.py``: what a session reads and returns, and the gangs it
  decides on;
- ``gate.py``: the enqueue action's overcommit and proportion checks;
- ``allocate.py``: the default allocate action, all or nothing per gang;
- ``close.py``: the session's close, every PodGroup's status, conditions and events;
  ``queue_status.py``: every queue's;
- ``disrupt.py``: a session with ``preempt`` or ``reclaim`` configured, which allocates with
  pipelining (``allocate_pipelining.py``), then runs those actions (``preempt.py``), asking the
  plugin functions (``plugins.py``) and changing the session state (``state.py``, with
  Volcano's Statement); the gangs they touched are closed from the session's end state
  (``close_end_state.py``); ``proportion.py``: resource comparisons and queue shares;
- ``evictor.py``: what an evicted pod goes through (``cache/cache.go``);
- ``conf.py``: ``volcano-scheduler.conf``, the actions and plugin tiers;
- ``messages.py``: the texts vc-scheduler writes into conditions and events.
"""
