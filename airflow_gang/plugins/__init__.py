"""The "Gang jobs" Airflow UI plugin: a FastAPI app mounted at ``/gang`` in the API server.

- `plugin`: the `AirflowPlugin` (app + nav entry) that Airflow loads;
- `app`: assembles the JSON API (`api`) and the HTML page (`pages`, files in ``static/``);
- `cluster_reader`: everything read from Kubernetes, through `GangJobHook` (read-only);
- `metadata`: everything read from Airflow's metadata DB (identities, the ``progress`` entry);
- `summaries` and `identity`: pure functions shaping what the page shows;
- `access`, `errors`, `settings`: who may see what, failures as JSON, the ``[gang]`` options.
"""
