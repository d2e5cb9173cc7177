#!/usr/bin/env bash
# Brings up the lab's world on a kind cluster: Kubernetes, Argo CD ARGOCD_VERSION from its
# manifests/core-install.yaml, an in-cluster git daemon `gitd` (namespace gitsrv, port 9418)
# serving the host directory that holds CNPE_BARE_REPO, and namespace cnpe-shop; then proves with
# a Job that CNPE_REPO_URL answers from inside the cluster.
# Also lays out what the lab VM provides when it is missing: the bare repo CNPE_BARE_REPO and its
# working copy CNPE_GITOPS_DIR. Idempotent: rerunning reuses an existing cluster, unless it
# mounts another bare repo parent or runs another node image: then it is deleted and recreated
# (the mount is fixed at creation; the cluster is this script's own, named CNPE_KIND_CLUSTER).
#
# Usage: up.sh [--offline]
#   (default)  images come from their registries (GitHub Actions, a laptop): node KIND_NODE_IMAGE,
#              Argo CD's release manifest, GITD_IMAGE. Needs kind, kubectl, curl, git, an engine.
#   --offline  every image is built here by ci/kind/build.sh (cached in /var/cache/cnpe-kind) and
#              loaded into the node; the engine is podman (see common.sh). Same kind config, same
#              Argo CD manifest (from the Argo CD Go module), same gitd manifest and smoke Job.
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

offline=""
for arg in "$@"; do
  case "$arg" in
    --offline) offline=1 ;;
    *) die "usage: up.sh [--offline] (unknown argument '$arg')" ;;
  esac
done

declare -A TOOK
order=()
timed() { # timed NAME FUNC
  local t0=$SECONDS
  "$2"
  TOOK[$1]=$((SECONDS - t0))
  order+=("$1")
  log "step $1 took ${TOOK[$1]}s"
}
T0=$SECONDS

# --- configuration checks: fail here, not deep inside the lab
[[ $KIND_BARE_PARENT =~ ^/[A-Za-z0-9._/-]+$ ]] \
  || die "CNPE_BARE_REPO must be an absolute path of [A-Za-z0-9._/-] (got '$CNPE_BARE_REPO')"
expected_url="git://gitd.gitsrv.svc.cluster.local:9418/$(basename "$CNPE_BARE_REPO")"
[[ $CNPE_REPO_URL == "$expected_url" ]] \
  || die "CNPE_REPO_URL is '$CNPE_REPO_URL' but gitd serves CNPE_BARE_REPO as '$expected_url'"

ARGOCD_MODULE=""
# The add-ons' versions are the hermetic cluster's (the offline path runs the same binaries).
HERMETIC_VERSIONS="$KIND_DIR/../hermetic/versions.env"
ROLLOUTS_VERSION="$(sed -n 's/^ROLLOUTS_VERSION=//p' "$HERMETIC_VERSIONS")"
TRAEFIK_VERSION="$(sed -n 's/^TRAEFIK_VERSION=//p' "$HERMETIC_VERSIONS")"
GATEWAY_API_VERSION="$(sed -n 's/^GATEWAY_API_VERSION=//p' "$HERMETIC_VERSIONS")"
[[ -n $ROLLOUTS_VERSION && -n $TRAEFIK_VERSION && -n $GATEWAY_API_VERSION ]] \
  || die "$HERMETIC_VERSIONS lacks ROLLOUTS_VERSION, TRAEFIK_VERSION or GATEWAY_API_VERSION"
# Traefik's web entrypoint and Service port (the hermetic cluster's Traefik listens on the same).
# shellcheck disable=SC2034 # read by kind_render (${!name})
TRAEFIK_WEB_PORT=18080
step_build() {
  if [[ -z $offline ]]; then return; fi
  bash "$KIND_DIR/build.sh"
  # build.sh put kind into $KIND_CACHE/bin (common.sh prefers it) and wrote containers.conf.
  PATH="$KIND_CACHE/bin:$PATH"
}
timed build step_build
kind_engine || die "cannot create a kind cluster"

if [[ -n $offline ]]; then
  NODE_IMAGE="$KIND_OFFLINE_NODE_IMAGE"
  GITD_IMAGE="$KIND_OFFLINE_GITD_IMAGE"
  ETCD_TAG="$(sed -n 's/^ETCD_VERSION=v//p' "$HERMETIC_VERSIONS")-0"
  ARGOCD_MODULE="${CNPE_HERMETIC_CACHE:-/var/cache/cnpe-hermetic}/gomod/github.com/argoproj/argo-cd/v3@$ARGOCD_VERSION"
  ROLLOUTS_IMAGE="$KIND_OFFLINE_ROLLOUTS_IMAGE_REPO:$ROLLOUTS_VERSION"
  TRAEFIK_IMAGE="$KIND_OFFLINE_TRAEFIK_IMAGE_REPO:$TRAEFIK_VERSION"
else
  NODE_IMAGE="$KIND_NODE_IMAGE"
  ROLLOUTS_IMAGE="$ROLLOUTS_IMAGE_REPO:$ROLLOUTS_VERSION"
  TRAEFIK_IMAGE="$TRAEFIK_IMAGE_REPO:$TRAEFIK_VERSION"
fi
tools=(kind kubectl git)
[[ -n $offline ]] || tools+=(curl)
for tool in "${tools[@]}"; do
  command -v "$tool" >/dev/null || die "$tool not found (ci/kind/install-tools.sh installs kind and kubectl)"
done

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
node="$CLUSTER-control-plane"
step_cluster() {
  if cluster_exists; then
    local mounted image
    mounted="$("$KIND_EXPERIMENTAL_PROVIDER" inspect "$node" \
      --format '{{range .Mounts}}{{if eq .Destination "/srv/bare"}}{{.Source}}{{end}}{{end}}')"
    image="$("$KIND_EXPERIMENTAL_PROVIDER" inspect "$node" --format '{{.Config.Image}}')"
    if [[ $mounted != "$KIND_BARE_PARENT" ]]; then
      log "kind cluster $CLUSTER mounts '$mounted' at /srv/bare, not $KIND_BARE_PARENT (fixed at creation): recreating it"
      kind delete cluster --name "$CLUSTER"
    elif [[ $image != "$NODE_IMAGE" && $image != "${NODE_IMAGE%@*}" ]]; then
      log "kind cluster $CLUSTER runs node image '$image', not $NODE_IMAGE: recreating it"
      kind delete cluster --name "$CLUSTER"
    else
      log "kind cluster $CLUSTER exists with /srv/bare = $KIND_BARE_PARENT; reusing it"
      kind export kubeconfig --name "$CLUSTER"
      return
    fi
  fi
  kind_render "$KIND_DIR/kind-config.yaml" >"$tmp/kind-config.yaml"
  if [[ -n $offline ]]; then
    # The one offline difference in the config: etcd is the hermetic pin (ETCD_VERSION), not
    # kubeadm's default tag (kubeadmConfigPatches is the file's last key).
    printf '  - |\n    kind: ClusterConfiguration\n    etcd:\n      local:\n        imageTag: "%s"\n' \
      "$ETCD_TAG" >>"$tmp/kind-config.yaml"
  fi
  log "creating kind cluster $CLUSTER ($NODE_IMAGE, $(kind version), provider $KIND_EXPERIMENTAL_PROVIDER)"
  kind create cluster --name "$CLUSTER" --image "$NODE_IMAGE" \
    --config "$tmp/kind-config.yaml" --wait 300s
}
timed cluster step_cluster
kc wait --for=condition=Ready node --all --timeout=180s
kc create namespace cnpe-shop --dry-run=client -o yaml | kc apply -f -

# --- images: offline, the ones the pods need are loaded from build.sh's archives
step_load() {
  if [[ -z $offline ]]; then return; fi
  local t
  for t in argocd redis gitd nginx argo-rollouts traefik; do
    log "loading $KIND_CACHE/images/$t.tar into $node"
    kind load image-archive --name "$CLUSTER" "$KIND_CACHE/images/$t.tar"
  done
  # The gate's image for its PostSync hook, when `build.sh gate` made it.
  if [[ -e $KIND_CACHE/images/cnpe-gate.tar ]]; then
    log "loading $KIND_CACHE/images/cnpe-gate.tar into $node"
    kind load image-archive --name "$CLUSTER" "$KIND_CACHE/images/cnpe-gate.tar"
  fi
}
timed load step_load

# wait_established CRD...: every CRD has condition Established=True within 120 s. A CRD that
# was just created may have no status yet (kubectl wait --for=condition fails on that).
wait_established() {
  local deadline=$((SECONDS + 120)) crd st
  for crd in "$@"; do
    while :; do
      st="$(kc get crd "$crd" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null || true)"
      [[ $st == True ]] && break
      ((SECONDS < deadline)) || die "CRD $crd not Established after 120 s (status '${st:-none}')"
      sleep 2
    done
  done
}

# --- Argo CD: core-install.yaml (redis, repo-server, application-controller, applicationset-
# controller; no API server, dex or notifications: the lab talks to Kubernetes only). Server-side
# apply: its CRDs are too large otherwise. Pull policy Always -> IfNotPresent on both paths (it
# is the only way a loaded image is used; on GitHub the tags are immutable releases anyway).
step_argocd() {
  local src="$tmp/argocd-core-install.yaml"
  if [[ -n $offline ]]; then
    [[ -f $ARGOCD_MODULE/manifests/core-install.yaml ]] \
      || die "$ARGOCD_MODULE/manifests/core-install.yaml missing (ci/kind/build.sh downloads the module)"
    cp "$ARGOCD_MODULE/manifests/core-install.yaml" "$src"
  else
    curl -fsSL --retry 5 --retry-delay 3 -o "$src" \
      "https://raw.githubusercontent.com/argoproj/argo-cd/$ARGOCD_VERSION/manifests/core-install.yaml"
  fi
  sed -i 's/imagePullPolicy: Always/imagePullPolicy: IfNotPresent/' "$src"
  if [[ -n $offline ]]; then
    # the only offline edit: where the two images come from
    sed -i -e "s|image: quay.io/argoproj/argocd:$ARGOCD_VERSION\$|image: cnpe.local/argocd:$ARGOCD_VERSION|" \
      -e "s|image: public.ecr.aws/docker/library/redis:.*\$|image: $KIND_OFFLINE_REDIS_IMAGE|" "$src"
    local images
    images="$(sed -n 's/^ *image: *//p' "$src" | sort -u | tr '\n' ' ')"
    [[ $images == "cnpe.local/argocd:$ARGOCD_VERSION $KIND_OFFLINE_REDIS_IMAGE " ]] \
      || die "Argo CD manifest uses images '$images'; build.sh provides cnpe.local/argocd:$ARGOCD_VERSION and $KIND_OFFLINE_REDIS_IMAGE"
  fi
  log "installing Argo CD $ARGOCD_VERSION (core-install.yaml)"
  kc create namespace argocd --dry-run=client -o yaml | kc apply -f -
  kc apply -n argocd --server-side --force-conflicts -f "$src" >/dev/null
  wait_established applications.argoproj.io appprojects.argoproj.io
}
timed argocd step_argocd

# --- add-ons: Argo Rollouts (upstream's install.yaml: CRDs, RBAC, controller) and Traefik with
# the Gateway API's standard CRDs (ci/addons/traefik.yaml: RBAC, IngressClass, GatewayClass,
# Gateway cnpe-ingress/web; ci/kind/traefik.yaml: its Deployment and Service). Offline, the
# manifests are what ci/hermetic/build.sh copied from the modules; the only edit is the image.
step_addons() {
  local hman="${CNPE_HERMETIC_CACHE:-/var/cache/cnpe-hermetic}/manifests"
  local ro="$tmp/rollouts-install.yaml" gw=() f
  if [[ -n $offline ]]; then
    [[ -s $hman/rollouts-$ROLLOUTS_VERSION/install.yaml ]] \
      || die "$hman/rollouts-$ROLLOUTS_VERSION/install.yaml missing (ci/hermetic/build.sh rollouts)"
    cp "$hman/rollouts-$ROLLOUTS_VERSION/install.yaml" "$ro"
    for f in "$hman/gateway-api-$GATEWAY_API_VERSION"/gateway.networking.k8s.io_*.yaml; do
      [[ -s $f ]] || die "no Gateway API CRDs in $hman/gateway-api-$GATEWAY_API_VERSION (ci/hermetic/build.sh traefik)"
      gw+=(-f "$f")
    done
  else
    curl -fsSL --retry 5 --retry-delay 3 -o "$ro" \
      "https://github.com/argoproj/argo-rollouts/releases/download/$ROLLOUTS_VERSION/install.yaml"
    curl -fsSL --retry 5 --retry-delay 3 -o "$tmp/gateway-api.yaml" \
      "https://github.com/kubernetes-sigs/gateway-api/releases/download/$GATEWAY_API_VERSION/standard-install.yaml"
    gw=(-f "$tmp/gateway-api.yaml")
  fi
  sed -i -e "s|image: quay.io/argoproj/argo-rollouts:.*\$|image: $ROLLOUTS_IMAGE|" \
    -e 's/imagePullPolicy: Always/imagePullPolicy: IfNotPresent/' "$ro"
  # the images its pods run (the CRDs' schemas have "image:" properties too: read the YAML)
  local images
  images="$(python3 -c '
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d.get("kind") == "Deployment":
        for c in d["spec"]["template"]["spec"]["containers"]:
            print(c["image"])' "$ro" | sort -u | tr '\n' ' ')"
  [[ $images == "$ROLLOUTS_IMAGE " ]] || die "Argo Rollouts' install.yaml runs images '$images', not $ROLLOUTS_IMAGE"
  log "installing Argo Rollouts $ROLLOUTS_VERSION ($ROLLOUTS_IMAGE) and the Gateway API $GATEWAY_API_VERSION CRDs"
  kc create namespace argo-rollouts --dry-run=client -o yaml | kc apply -f - >/dev/null
  kc apply -n argo-rollouts --server-side --force-conflicts -f "$ro" >/dev/null
  kc apply --server-side --force-conflicts "${gw[@]}" >/dev/null
  wait_established rollouts.argoproj.io analysisruns.argoproj.io gatewayclasses.gateway.networking.k8s.io \
    gateways.gateway.networking.k8s.io httproutes.gateway.networking.k8s.io
  log "installing Traefik $TRAEFIK_VERSION ($TRAEFIK_IMAGE), IngressClass and GatewayClass traefik, Gateway cnpe-ingress/web"
  kind_render "$KIND_DIR/../addons/traefik.yaml" >"$tmp/traefik-rbac.yaml"
  kind_render "$KIND_DIR/traefik.yaml" >"$tmp/traefik.yaml"
  kc apply -f "$tmp/traefik-rbac.yaml" -f "$tmp/traefik.yaml" >/dev/null
}
timed addons step_addons

# gateway_accepted: Gateway cnpe-ingress/web has Accepted=True (no status yet: not yet).
gateway_accepted() {
  local deadline=$((SECONDS + 180)) st=""
  while ((SECONDS < deadline)); do
    st="$(kc -n cnpe-ingress get gateway web -o 'jsonpath={range .status.conditions[*]}{.type}={.status} {end}' 2>/dev/null || true)"
    [[ " $st" == *" Accepted=True "* ]] && return 0
    sleep 2
  done
  kc -n cnpe-ingress logs deployment/traefik --tail=50 >&2 || true
  die "Gateway cnpe-ingress/web not Accepted after 180 s (conditions '${st:-none}')"
}

# --- gitd (applied before waiting on Argo CD, so its pods start at the same time)
step_gitd() {
  log "deploying gitd ($GITD_IMAGE) serving $KIND_BARE_PARENT"
  kind_render "$KIND_DIR/gitd.yaml" >"$tmp/gitd.yaml"
  kc apply -f "$tmp/gitd.yaml"
  kc -n argocd rollout status deployment/argocd-redis --timeout=300s
  kc -n argocd rollout status deployment/argocd-repo-server --timeout=300s
  kc -n argocd rollout status statefulset/argocd-application-controller --timeout=300s
  kc -n gitsrv rollout status deployment/gitd --timeout=300s
  kc -n argo-rollouts rollout status deployment/argo-rollouts --timeout=300s
  kc -n cnpe-ingress rollout status deployment/traefik --timeout=300s
  gateway_accepted
}
timed rollout step_gitd

# --- prove the repo URL answers from inside the cluster, as Argo CD will ask it
step_smoke() {
  log "checking $CNPE_REPO_URL from inside the cluster"
  kind_render "$KIND_DIR/gitd-smoke.yaml" >"$tmp/gitd-smoke.yaml"
  kc -n gitsrv delete job gitd-smoke --ignore-not-found --wait=true >/dev/null
  kc apply -f "$tmp/gitd-smoke.yaml" >/dev/null
  local smoke="" deadline=$((SECONDS + 180))
  while ((SECONDS < deadline)); do
    smoke="$(kc -n gitsrv get job gitd-smoke \
      -o jsonpath='{range .status.conditions[?(@.status=="True")]}{.type}{" "}{end}' 2>/dev/null || true)"
    [[ $smoke == *Complete* || $smoke == *Failed* ]] && break
    sleep 2
  done
  if [[ $smoke != *Complete* ]]; then
    kc -n gitsrv logs job/gitd-smoke --all-containers >&2 || true
    kc -n gitsrv logs deployment/gitd --tail=50 >&2 || true
    die "in-cluster git ls-remote $CNPE_REPO_URL did not succeed (job conditions: '${smoke:-none}')"
  fi
}
timed smoke step_smoke

summary=""
for s in "${order[@]}"; do summary+="$s=${TOOK[$s]}s "; done
log "up.sh done in $((SECONDS - T0))s: $summary"
log "ready: context $CONTEXT; Argo CD $ARGOCD_VERSION, Argo Rollouts $ROLLOUTS_VERSION, Traefik $TRAEFIK_VERSION (svc cnpe-ingress/traefik:web); $CNPE_REPO_URL -> $CNPE_BARE_REPO; gitops dir $CNPE_GITOPS_DIR"
