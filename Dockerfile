# Airflow 3.3 with the airflow-gang provider and, for this demo deployment only, the embedded
# cluster simulator (airflow-gang-sim, from sim/). Used by docker-compose.yaml for every Airflow
# component and for the kube-sim service. An image for a real cluster installs the provider
# alone (`pip install /path/to/airflow-gang`): it brings no simulator and no test harness.
#
#   docker build -t airflow-gang .
FROM apache/airflow:3.3.2

# The kubeconfig directory the kube-sim service writes into (a named volume in compose). It
# exists in the image, owned by the airflow user, so a fresh volume mounted here starts with
# that ownership and the simulator (running as airflow) can write to it.
USER root
RUN mkdir -p /opt/airflow/kube && chown airflow:0 /opt/airflow/kube && chmod 0775 /opt/airflow/kube
USER airflow

COPY --chown=airflow:0 pyproject.toml README.md /tmp/airflow-gang/
COPY --chown=airflow:0 airflow_gang/ /tmp/airflow-gang/airflow_gang/
COPY --chown=airflow:0 sim/ /tmp/airflow-gang/sim/

# Pinning apache-airflow to the base image's version keeps pip from replacing it while
# resolving the provider's dependencies.
RUN pip install --no-cache-dir "apache-airflow==${AIRFLOW_VERSION}" /tmp/airflow-gang /tmp/airflow-gang/sim \
    && rm -rf /tmp/airflow-gang
