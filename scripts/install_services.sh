#!/usr/bin/env bash
# The system services the tests start themselves but cannot bring from PyPI: Redis, the broker of
# the CeleryExecutor tests (tests/production) and of `make airflow ARGS="--executor celery"`.
# PostgreSQL comes from the pgserver wheel and needs nothing here.
set -euo pipefail
if [ -n "${GANG_REDIS_SERVER:-}" ] || command -v redis-server >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian's redis-server (the Celery tests' broker)"
    export DEBIAN_FRONTEND=noninteractive
    # Without package lists (a fresh image), update them once and try again.
    apt-get install -y -q --no-install-recommends redis-server >/dev/null \
        || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends redis-server >/dev/null; }
    # Debian's package starts a system-wide server on port 6379; the stack starts its own.
    exit 0
fi
echo "error: redis-server is not installed and this is not a root shell with apt-get." >&2
echo "Install it (Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis)," >&2
echo "or name a redis-server binary in GANG_REDIS_SERVER." >&2
exit 1
