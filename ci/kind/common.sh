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

log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
kc() { kubectl --context "$CONTEXT" "$@"; }

# kind_render FILE: print FILE with each @NAME@ replaced by $NAME (only the names below);
# fails if a placeholder is left over or a value is unset.
kind_render() {
  local text name
  text="$(<"$1")"
  for name in GITD_IMAGE KIND_BARE_PARENT CNPE_REPO_URL; do
    text="${text//"@$name@"/"${!name}"}"
  done
  if [[ $text =~ @[A-Z_]+@ ]]; then
    log "unrendered placeholder ${BASH_REMATCH[0]} in $1"
    return 1
  fi
  printf '%s\n' "$text"
}
