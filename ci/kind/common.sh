# shellcheck shell=bash
# Shared settings for ci/kind scripts. Sourced, not executed.
KIND_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
. "$KIND_DIR/versions.env"

# The kind cluster these scripts own; every kubectl call names its context explicitly so that
# nothing here ever talks to another cluster.
CLUSTER="${CNPE_KIND_CLUSTER:-cnpe}"
CONTEXT="kind-$CLUSTER"

# Same contract and defaults as the crate.
CNPE_GITOPS_DIR="${CNPE_GITOPS_DIR:-/srv/gitops}"
CNPE_BARE_REPO="${CNPE_BARE_REPO:-/srv/bare/app.git}"
CNPE_REPO_URL="${CNPE_REPO_URL:-git://gitd.gitsrv.svc.cluster.local:9418/app.git}"
# The host directory that holds the bare repo: kind mounts it into the node at /srv/bare, and the
# gitd pod serves it from there, exactly as the lab VM's git daemon serves /srv/bare.
# shellcheck disable=SC2034 # used through ${!name} in kind_render and by the sourcing scripts
KIND_BARE_PARENT="$(dirname "$CNPE_BARE_REPO")"

# Offline path (up.sh --offline, build.sh): everything is built into this machine-level cache.
KIND_CACHE="${CNPE_KIND_CACHE:-/var/cache/cnpe-kind}"
# kind_engine: decide the container engine and podman's settings. Called by each script right
# before its first kind or podman call, never when this file is sourced: on a fresh machine
# up.sh --offline installs podman and writes containers.conf (build.sh part host) after sourcing
# this file, and a decision taken earlier picked docker (a CLI with no daemon here).
# Engine: KIND_EXPERIMENTAL_PROVIDER if set; else docker when a daemon answers (GitHub), else
# podman (our machines: Debian's docker.io cannot run kind's privileged nodes without
# CAP_SYS_RESOURCE, moby#42906). With neither it fails here, naming both, instead of letting
# kind die on "Cannot connect to the Docker daemon".
# podman_conf: podman's settings for this VM (build.sh part host writes them): every podman call
# that kind makes inherits CONTAINERS_CONF, so nothing in /etc/containers is changed.
podman_conf() {
  if [[ -z ${CONTAINERS_CONF:-} && -f $KIND_CACHE/containers.conf ]]; then
    export CONTAINERS_CONF="$KIND_CACHE/containers.conf"
  fi
}
podman_conf
kind_engine() {
  podman_conf
  if [[ -z ${KIND_EXPERIMENTAL_PROVIDER:-} ]]; then
    if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
      KIND_EXPERIMENTAL_PROVIDER=docker
    elif command -v podman >/dev/null; then
      KIND_EXPERIMENTAL_PROVIDER=podman
    else
      log "no container engine for kind: no docker daemon answers and podman is not installed (ci/kind/build.sh host installs podman)"
      return 1
    fi
  fi
  export KIND_EXPERIMENTAL_PROVIDER
}
# The kind binary: the one build.sh built for the offline path, else kind on PATH.
if [[ -x $KIND_CACHE/bin/kind ]]; then PATH="$KIND_CACHE/bin:$PATH"; fi

log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
kc() { kubectl --context "$CONTEXT" "$@"; }

# cluster_exists: is there a kind cluster named $CLUSTER (with this provider)? Reads the whole
# list first, so no writer dies of SIGPIPE.
cluster_exists() {
  local clusters
  clusters="$(kind get clusters 2>/dev/null)" || return 1
  grep -qx "$CLUSTER" <<<"$clusters"
}

# kind_render FILE: print FILE with each @NAME@ replaced by $NAME (only the names below);
# fails if a placeholder is left over or a value is unset.
kind_render() {
  local text name
  text="$(<"$1")"
  for name in GITD_IMAGE KIND_BARE_PARENT KIND_DIR CNPE_REPO_URL TRAEFIK_IMAGE TRAEFIK_WEB_PORT; do
    [[ $text == *"@$name@"* ]] || continue
    text="${text//"@$name@"/"${!name}"}"
  done
  if [[ $text =~ @[A-Z_]+@ ]]; then
    log "unrendered placeholder ${BASH_REMATCH[0]} in $1"
    return 1
  fi
  printf '%s\n' "$text"
}
