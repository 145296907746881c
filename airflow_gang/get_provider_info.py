"""Provider metadata read by Airflow's ProvidersManager (``airflow providers list`` shows it).

Airflow imports this while it initialises its own configuration, so it must import nothing from
Airflow, nor anything heavy (`airflow_gang.kinds` is pure data: each kind's ``@task`` decorator).
"""

from __future__ import annotations

from typing import Any

from airflow_gang.kinds import JOB_KINDS

# Every released version, newest first (the "versions" of Airflow's provider.yaml schema): a release
# adds its own at the front, and tests/unit/test_cli_and_provider.py checks that the first is the
# package's __version__.
RELEASED_VERSIONS = ["1.0.0"]


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-gang",
        "name": "Gang-scheduled training jobs (Volcano)",
        "description": (
            "Submit Kubeflow PyTorchJobs, Trainer v2 TrainJobs and Volcano Jobs gang-scheduled by Volcano "
            "PodGroups, "
            "wait until the whole gang is admitted by its queue, wait for training to finish, and retry "
            "cleanly when a job waits in the queue too long."
        ),
        "versions": list(RELEASED_VERSIONS),
        "integrations": [
            {
                "integration-name": "Volcano gang scheduling",
                "external-doc-url": "https://volcano.sh/en/docs/podgroup/",
                "tags": ["software"],
            },
            {
                "integration-name": "Kubeflow PyTorchJob",
                "external-doc-url": "https://www.kubeflow.org/docs/components/trainer/legacy-v1/user-guides/pytorch/",
                "tags": ["software"],
            },
            {
                "integration-name": "Kubeflow Trainer TrainJob",
                "external-doc-url": "https://www.kubeflow.org/docs/components/trainer/",
                "tags": ["software"],
            },
            {
                "integration-name": "Volcano Job",
                "external-doc-url": "https://volcano.sh/en/docs/vcjob/",
                "tags": ["software"],
            },
        ],
        # The hook, the sensors' module and the trigger serve every job kind: they are listed under
        # the gang scheduling they wait for; each operator module under its kind.
        "hooks": [
            {"integration-name": "Volcano gang scheduling", "python-modules": ["airflow_gang.hooks.gang"]},
        ],
        "operators": [
            {
                "integration-name": "Kubeflow PyTorchJob",
                "python-modules": ["airflow_gang.operators.pytorch_job"],
            },
            {
                "integration-name": "Kubeflow Trainer TrainJob",
                "python-modules": ["airflow_gang.operators.train_job"],
            },
            {"integration-name": "Volcano Job", "python-modules": ["airflow_gang.operators.volcano_job"]},
        ],
        "sensors": [
            {"integration-name": "Volcano gang scheduling", "python-modules": ["airflow_gang.sensors.gang"]},
        ],
        "triggers": [
            {"integration-name": "Volcano gang scheduling", "python-modules": ["airflow_gang.triggers.gang"]},
        ],
        "task-decorators": [
            {"name": job_kind.task_decorator, "class-name": job_kind.decorator_class}
            for job_kind in JOB_KINDS.values()
        ],
        "extra-links": [
            "airflow_gang.links.GangJobLink",
            "airflow_gang.links.KubernetesDashboardLink",
        ],
        "plugins": [
            {"name": "airflow_gang", "plugin-class": "airflow_gang.plugins.plugin.GangPlugin"},
        ],
        # We reuse the cncf.kubernetes `kubernetes` connection type (same hook, same extras) and
        # deliberately do not list it here: ProvidersManager keeps the first registration it finds,
        # so a second entry would take the type (and its connection form) away from cncf.kubernetes
        # and log a warning at every start.
        "connection-types": [],
        # Each option's version_added is the release that first brought it. 1.0.0 is the first
        # release: the options written before it, under 0.x numbers that were never published, were
        # first installable in 1.0.0, so all of them say 1.0.0; an option added later says its release.
        "config": {
            "gang": {
                "description": "Defaults and UI settings of the airflow-gang provider.",
                "options": {
                    "default_admission_timeout": {
                        "description": (
                            "Seconds a job may wait for its gang to be admitted before it is deleted "
                            "and GangAdmissionTimeout is raised, when the operator is given no "
                            "admission_timeout. Empty means wait forever."
                        ),
                        "version_added": "1.0.0",
                        "type": "integer",
                        "example": "1800",
                        "default": "1800",
                    },
                    "checkpoint_root": {
                        "description": (
                            "Where gang jobs keep checkpoints when the operator is given no "
                            "checkpoint_dir: each task instance gets <root>/<dag_id>/<task_id>/"
                            "<run_id>[/<map_index>], the same for every try, passed to every replica "
                            "as GANG_CHECKPOINT_DIR. Empty gives none."
                        ),
                        "version_added": "1.0.0",
                        "type": "string",
                        "example": "s3://ml-checkpoints/airflow",
                        "default": "",
                    },
                    "freeze_triggerer_heap": {
                        "description": (
                            "Inside an Airflow triggerer, freeze the objects alive when the first "
                            "shared watch cache starts (gc.freeze), so the garbage collector's full "
                            "passes skip the two hundred thousand objects the trigger runner inherits "
                            "from its supervisor: at a thousand deferred jobs each such pass held the "
                            "triggerer's event loop 0.2 to 1 s. A frozen object that later becomes "
                            "cyclic garbage is never freed."
                        ),
                        "version_added": "1.0.0",
                        "type": "boolean",
                        "example": "True",
                        "default": "True",
                    },
                    "kubeconfig_to_triggerer": {
                        "description": (
                            "Ship the kubeconfig file's content and the connection's extras from the "
                            "worker to the triggerer inside the trigger's kwargs. Off by default: the "
                            "triggerer looks the connection up itself and the trigger table holds no "
                            "credentials. Turn on only when the connection's kube_config_path exists on "
                            "workers but not on the triggerer: Airflow 3.3.2 stores a deferral's trigger "
                            "kwargs as plain JSON, so the credentials become readable in the metadata "
                            "database."
                        ),
                        "version_added": "1.0.0",
                        "type": "boolean",
                        "example": "False",
                        "default": "False",
                    },
                    "resume_hold_seconds": {
                        "description": (
                            "Earliest a deferred gang wait may resume its task, in seconds after the "
                            "deferral. Airflow 3.3.2 fails a task whose resumed try is already queued or "
                            "running when the scheduler reads the executor's success of the deferring try "
                            "(apache/airflow#72716, #71580); a trigger firing seconds after the deferral "
                            "hits that window. 0 turns the hold off (safe with dag.test())."
                        ),
                        "version_added": "1.0.0",
                        "type": "float",
                        "example": "10",
                        "default": "10",
                    },
                    "orphan_reaper_interval": {
                        "description": (
                            "Seconds between the scheduler's sweeps for orphaned gang jobs: live "
                            "PyTorchJobs whose task instance ended failed, upstream_failed, skipped or "
                            "removed, so that no try will ever wait for them (a task failed from outside: "
                            "a zombie, a killed worker, a scheduler race). 0 turns the reaper off."
                        ),
                        "version_added": "1.0.0",
                        "type": "float",
                        "example": "30",
                        "default": "30",
                    },
                    "ui_url_template": {
                        "description": (
                            "URL of the 'Gang job' extra link. Placeholders: {namespace}, {name}, {base_url}."
                        ),
                        "version_added": "1.0.0",
                        "type": "string",
                        "example": "{base_url}/gang/jobs/{namespace}/{name}",
                        "default": "{base_url}/gang/jobs/{namespace}/{name}",
                    },
                    "ui_kubernetes_conn_id": {
                        "description": (
                            "Kubernetes connection (cncf.kubernetes `kubernetes` type) the 'Gang jobs' "
                            "page in the Airflow UI reads the cluster with (gang jobs, PodGroups, pods, "
                            "events, nodes and Volcano queues) and through which its delete, suspend and "
                            "resume buttons act on a job, for users allowed to change the DAG's tasks."
                        ),
                        "version_added": "1.0.0",
                        "type": "string",
                        "example": "kubernetes_default",
                        "default": "kubernetes_default",
                    },
                    "ui_namespaces": {
                        "description": (
                            "Comma-separated namespaces whose gang jobs the 'Gang jobs' page shows. Empty "
                            "means the namespace of the ui_kubernetes_conn_id connection, else 'default'."
                        ),
                        "version_added": "1.0.0",
                        "type": "string",
                        "example": "ml-team,research",
                        "default": "",
                    },
                    "dashboard_url_template": {
                        "description": (
                            "URL of the 'Kubernetes dashboard' extra link. Empty: the button opens the job's "
                            "Gang jobs page, which says to set this option. "
                            "Placeholders: {namespace}, {name}."
                        ),
                        "version_added": "1.0.0",
                        "type": "string",
                        "example": "https://dashboard.example.com/#/customresourcedefinition/"
                        "pytorchjobs.kubeflow.org/{namespace}/{name}",
                        "default": "",
                    },
                },
            }
        },
    }
