#!/usr/bin/env bash
# Prints the path of the hermetic cluster's admin kubeconfig (written by up.sh).
set -euo pipefail
. "$(dirname "$0")/common.sh"
echo "$KUBECONFIG_ADMIN"
[ -s "$KUBECONFIG_ADMIN" ] || { echo "kubeconfig.sh: $KUBECONFIG_ADMIN missing (run up.sh)" >&2; exit 1; }
