#!/usr/bin/env bash
# Deletes the kind cluster that up.sh created. Leaves the host's git repos and evidence alone.
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
kind delete cluster --name "$CLUSTER"
