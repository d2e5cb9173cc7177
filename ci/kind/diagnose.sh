#!/usr/bin/env bash
# Dumps Argo CD, add-on (Argo Rollouts, Traefik) and lab namespace state from the kind cluster, for a failed run: to stdout and,
# one file per command, into DIR (default ./kind-diagnostics). Never fails on a single command:
# a missing resource is itself a finding.
set -uo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

out="${1:-kind-diagnostics}"
mkdir -p "$out"

# dump NAME ARGS...: run `kubectl --context CONTEXT ARGS...`, tee into $out/NAME.txt.
dump() {
  local name="$1"
  shift
  printf '\n===== kubectl %s\n' "$*"
  kc "$@" 2>&1 | tee "$out/$name.txt"
}

dump applications get applications.argoproj.io -A -o yaml
dump appprojects get appprojects.argoproj.io -A -o yaml
dump shop-all get all -n cnpe-shop -o wide
dump shop-endpointslices get endpointslices -n cnpe-shop -o yaml
dump shop-describe-deployment describe deployment -n cnpe-shop
dump shop-describe-pods describe pods -n cnpe-shop
dump events get events -A --sort-by=.lastTimestamp
dump argocd-pods get pods -n argocd -o wide
dump argocd-application-controller logs -n argocd statefulset/argocd-application-controller --all-containers --tail=400
dump argocd-repo-server logs -n argocd deployment/argocd-repo-server --all-containers --tail=400
dump gitsrv-all get all -n gitsrv -o wide
dump gitd logs -n gitsrv deployment/gitd --tail=200
dump gitd-smoke logs -n gitsrv job/gitd-smoke --tail=50
dump rollouts-all get all -n argo-rollouts -o wide
dump rollouts-controller logs -n argo-rollouts deployment/argo-rollouts --tail=200
dump ingress-all get all,gateways.gateway.networking.k8s.io -n cnpe-ingress -o wide
dump traefik logs -n cnpe-ingress deployment/traefik --tail=200
dump routes get ingresses.networking.k8s.io,httproutes.gateway.networking.k8s.io,rollouts.argoproj.io -A -o yaml
exit 0
