"""The Volcano scheduler (vc-scheduler): gang scheduling in sessions, queues, preempt and reclaim.

Modelled on Volcano v1.16.0-alpha.1 (commit a4b775ad), ``pkg/scheduler``; each module cites the
lines it follows (see also ``docs/volcano-preemption.md`` and DOMAIN.md §1 and §10).

- ``scheduler.py``: `Volcano`, the controller: default queues, then one session per period,
  its decisions applied over the API (bindings, events); ``status_updater.py``: the statuses
  it writes, only when they change; ``gang_cache.py``: the informer cache read by gang;
- ``session.py``: one session as a pure function, snapshot in, decisions out (`run_session`);
  ``model.py``: what a session reads and returns, and the gangs it decides on;
- ``gate.py``: the enqueue action's overcommit and proportion checks;
- ``disrupt.py``: a session with ``preempt`` or ``reclaim`` configured; ``preempt.py``: those
  actions; ``plugins.py``: the plugin functions they ask; ``state.py``: the session state they
  change, and Volcano's Statement; ``proportion.py``: resource comparisons and queue shares;
- ``evictor.py``: what an evicted pod goes through (``cache/cache.go``);
- ``conf.py``: ``volcano-scheduler.conf``, the actions and plugin tiers;
- ``messages.py``: the texts vc-scheduler writes into conditions and events.
"""
