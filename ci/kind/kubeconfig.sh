#!/usr/bin/env bash
# Prints the path of a kubeconfig for the kind cluster up.sh created (only that cluster, current
# context kind-CNPE_KIND_CLUSTER), written fresh from `kind get kubeconfig`. Usage:
#   KUBECONFIG="$(bash ci/kind/kubeconfig.sh)" cargo test --test lab
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
kind_engine || die "no kind cluster $CLUSTER: run ci/kind/up.sh"
cluster_exists || die "no kind cluster $CLUSTER (provider $KIND_EXPERIMENTAL_PROVIDER): run ci/kind/up.sh"
out="$KIND_CACHE/run/$CLUSTER.kubeconfig"
mkdir -p "$(dirname "$out")"
kind get kubeconfig --name "$CLUSTER" >"$out.tmp"
chmod 0600 "$out.tmp"
mv "$out.tmp" "$out"
printf '%s\n' "$out"
