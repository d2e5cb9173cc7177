#!/usr/bin/env bash
# Brings up the lab's world on a kind cluster, for a machine with a container engine and internet
# (GitHub Actions, a laptop): Kubernetes (node image from versions.env), Argo CD ARGOCD_VERSION
# from its release manifest, an in-cluster git daemon `gitd` (namespace gitsrv, port 9418)
# serving the host directory that holds CNPE_BARE_REPO, and namespace cnpe-shop.
# Also lays out what the lab VM provides when it is missing: the bare repo CNPE_BARE_REPO and its
# working copy CNPE_GITOPS_DIR. Idempotent: rerunning reuses an existing cluster.
# Needs: kind, kubectl, curl, git, a container engine (see install-tools.sh for kind/kubectl).
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

for tool in kind kubectl curl git; do
  command -v "$tool" >/dev/null || die "$tool not found (ci/kind/install-tools.sh installs kind and kubectl)"
done

# --- configuration checks: fail here, not deep inside the lab
[[ $KIND_BARE_PARENT =~ ^/[A-Za-z0-9._/-]+$ ]] \
  || die "CNPE_BARE_REPO must be an absolute path of [A-Za-z0-9._/-] (got '$CNPE_BARE_REPO')"
expected_url="git://gitd.gitsrv.svc.cluster.local:9418/$(basename "$CNPE_BARE_REPO")"
[[ $CNPE_REPO_URL == "$expected_url" ]] \
  || die "CNPE_REPO_URL is '$CNPE_REPO_URL' but gitd serves CNPE_BARE_REPO as '$expected_url'"

# --- the lab VM's git layout, created only where missing (the kind mount needs the parent now)
mkdir -p "$KIND_BARE_PARENT"
if [[ ! -e $CNPE_BARE_REPO ]]; then
  log "creating bare repo $CNPE_BARE_REPO"
  git init -q --bare --initial-branch=main "$CNPE_BARE_REPO"
fi
if [[ ! -e $CNPE_GITOPS_DIR ]]; then
  log "cloning $CNPE_BARE_REPO to $CNPE_GITOPS_DIR"
  mkdir -p "$(dirname "$CNPE_GITOPS_DIR")"
  git clone -q "$CNPE_BARE_REPO" "$CNPE_GITOPS_DIR"
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# --- cluster
if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  log "kind cluster $CLUSTER exists; reusing it (its /srv/bare mount was fixed at creation)"
  kind export kubeconfig --name "$CLUSTER"
else
  kind_render "$KIND_DIR/kind-config.yaml" > "$tmp/kind-config.yaml"
  log "creating kind cluster $CLUSTER ($KIND_NODE_IMAGE, kind $(kind version | awk '{print $2}'))"
  kind create cluster --name "$CLUSTER" --image "$KIND_NODE_IMAGE" \
    --config "$tmp/kind-config.yaml" --wait 180s
fi
kc wait --for=condition=Ready node --all --timeout=180s
kc create namespace cnpe-shop --dry-run=client -o yaml | kc apply -f -

# --- Argo CD from its release manifest (server-side apply: its CRDs are too large otherwise)
argocd_url="https://raw.githubusercontent.com/argoproj/argo-cd/$ARGOCD_VERSION/manifests/install.yaml"
log "installing Argo CD $ARGOCD_VERSION"
curl -fsSL --retry 5 --retry-delay 3 -o "$tmp/argocd-install.yaml" "$argocd_url"
kc create namespace argocd --dry-run=client -o yaml | kc apply -f -
kc apply -n argocd --server-side --force-conflicts -f "$tmp/argocd-install.yaml" >/dev/null
kc wait --for=condition=Established --timeout=120s \
  crd/applications.argoproj.io crd/appprojects.argoproj.io

# --- gitd (applied before waiting on Argo CD, so both images pull at the same time)
log "deploying gitd ($GITD_IMAGE) serving $KIND_BARE_PARENT"
kind_render "$KIND_DIR/gitd.yaml" > "$tmp/gitd.yaml"
kc apply -f "$tmp/gitd.yaml"

kc -n argocd rollout status deployment/argocd-redis --timeout=300s
kc -n argocd rollout status deployment/argocd-repo-server --timeout=300s
kc -n argocd rollout status statefulset/argocd-application-controller --timeout=300s
kc -n gitsrv rollout status deployment/gitd --timeout=300s

# --- prove the repo URL answers from inside the cluster, as Argo CD will ask it
log "checking $CNPE_REPO_URL from inside the cluster"
kind_render "$KIND_DIR/gitd-smoke.yaml" > "$tmp/gitd-smoke.yaml"
kc -n gitsrv delete job gitd-smoke --ignore-not-found --wait=true >/dev/null
kc apply -f "$tmp/gitd-smoke.yaml" >/dev/null
smoke=""
for _ in $(seq 1 90); do
  smoke="$(kc -n gitsrv get job gitd-smoke \
    -o jsonpath='{range .status.conditions[?(@.status=="True")]}{.type}{" "}{end}')"
  [[ $smoke == *Complete* || $smoke == *Failed* ]] && break
  sleep 2
done
if [[ $smoke != *Complete* ]]; then
  kc -n gitsrv logs job/gitd-smoke --all-containers >&2 || true
  kc -n gitsrv logs deployment/gitd --tail=50 >&2 || true
  die "in-cluster git ls-remote $CNPE_REPO_URL did not succeed (job conditions: '${smoke:-none}')"
fi

log "ready: context $CONTEXT; Argo CD $ARGOCD_VERSION; $CNPE_REPO_URL -> $CNPE_BARE_REPO; gitops dir $CNPE_GITOPS_DIR"
