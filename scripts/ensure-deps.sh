#!/usr/bin/env bash
# Makes sure the programs the tests need are on this machine: redis-server
# and redis-cli (the tests start real servers and a local Redis Cluster),
# and, with --browser, Chromium for the dashboard's end-to-end test, or,
# with --examples, node, npm and python3 for the example workers' test,
# or, with --openapi-tools, node and npm for the OpenAPI tools' test
# (Redocly's CLI and openapi-typescript on the served document), or, with
# --valgrind, valgrind for make bench-instr.
# Installs them from Debian's packages when run as root; otherwise says
# exactly what is missing.
set -euo pipefail
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
for arg in "$@"; do
  case "$arg" in
  --browser)
    command -v chromium >/dev/null 2>&1 || need+=(chromium)
    ;;
  --examples)
    command -v node >/dev/null 2>&1 || need+=(nodejs)
    command -v npm >/dev/null 2>&1 || need+=(npm)
    command -v python3 >/dev/null 2>&1 || need+=(python3)
    ;;
  --openapi-tools)
    command -v node >/dev/null 2>&1 || need+=(nodejs)
    command -v npm >/dev/null 2>&1 || need+=(npm)
    ;;
  --valgrind)
    command -v valgrind >/dev/null 2>&1 || need+=(valgrind)
    ;;
  *)
    echo "ensure-deps.sh: unknown option $arg" >&2
    exit 2
    ;;
  esac
done
# Each package once (--examples and --openapi-tools both need node).
if [ ${#need[@]} -gt 0 ]; then
  mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
fi
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "missing: ${need[*]}. Install them (Debian: sudo apt-get install ${need[*]}), or point the tests at running servers with CHRONOQ_TEST_REDIS_ADDR and CHRONOQ_TEST_CLUSTER_ADDRS." >&2
  exit 1
fi
echo "installing ${need[*]} from Debian's packages" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
