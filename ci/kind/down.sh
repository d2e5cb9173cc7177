#!/usr/bin/env bash
# Deletes the kind cluster that up.sh created (CNPE_KIND_CLUSTER, default cnpe) and nothing
# else: no other cluster, container or network; the host's git repos, evidence and the build
# caches in /var/cache/cnpe-kind stay.
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
kind_engine || { log "so there is no kind cluster $CLUSTER to delete"; exit 0; }
if cluster_exists; then
  kind delete cluster --name "$CLUSTER"
else
  log "no kind cluster $CLUSTER (provider $KIND_EXPERIMENTAL_PROVIDER): nothing to delete"
fi
rm -f "$KIND_CACHE/run/$CLUSTER.kubeconfig"
