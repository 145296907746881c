"""The pure model of gangs and their objects: no I/O, no cluster client (an import contract).

Where a gang stands (`gang_state`), what a queue can still admit (`capacity`), wire-form helpers
(`k8s_objects`, `quantity`), the names and labels of a task's jobs (`naming`), argument checks
(`validation`, `pod_fields`, `spec_choices`), which watch events matter (`watch_rules`), and how
an API outage is told and ridden out (`outage`).
"""
