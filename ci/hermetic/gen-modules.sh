#!/usr/bin/env bash
# Regenerates the wrapper Go modules under modules/ from the upstream go.mod files
# (replace blocks are derived, never hand-copied). Run only when bumping versions.
set -euo pipefail
. "$(dirname "$0")/common.sh"
mkdir -p "$GOMODCACHE" "$GOCACHE"
modfile() { go mod download -json "$1@$2" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p'; }

gen_kubernetes() {
# --- kubernetes: every ./staging/src/k8s.io/X replace becomes k8s.io/X $K8S_STAGING_VERSION
d="$HERMETIC_DIR/modules/kubernetes"; mkdir -p "$d"
kmod="$(modfile k8s.io/kubernetes "$K8S_VERSION")"
{
  echo "module cnpe.local/hermetic/kubernetes"; echo
  grep -E '^go ' "$kmod"; grep -E '^godebug ' "$kmod" || true; echo
  echo "require k8s.io/kubernetes $K8S_VERSION"; echo
  echo "replace ("
  sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/k8s.io/.*#\t\1 => \1 '"$K8S_STAGING_VERSION"'#p' "$kmod"
  echo ")"
} > "$d/go.mod"
cat > "$d/tools.go" <<'GO'
//go:build tools

// Package tools pins the upstream command packages this wrapper builds.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
(cd "$d" && go mod tidy)
}

gen_etcd() {
# --- etcd: server module; its ../ replaces become published modules at the same version
d="$HERMETIC_DIR/modules/etcd"; mkdir -p "$d"
emod="$(modfile go.etcd.io/etcd/server/v3 "$ETCD_VERSION")"
{
  echo "module cnpe.local/hermetic/etcd"; echo
  grep -E '^go ' "$emod"; echo
  echo "require go.etcd.io/etcd/server/v3 $ETCD_VERSION"; echo
  echo "replace ("
  sed -n 's#^\s*\(go.etcd.io/etcd/[a-z0-9/]*\) => \.\./.*#\t\1 => \1 '"$ETCD_VERSION"'#p' "$emod"
  echo ")"
} > "$d/go.mod"
cat > "$d/tools.go" <<'GO'
//go:build tools

// Package tools pins the upstream etcd server command package.
package tools

import _ "go.etcd.io/etcd/server/v3"
GO
(cd "$d" && go mod tidy)
}

# --- argo-cd: upstream's replace block, except its local gitops-engine replace.
# v3.3+ keeps gitops-engine in the same repository behind
#   replace github.com/argoproj/argo-cd/gitops-engine => ./gitops-engine
# which cannot work outside upstream's checkout. The proxy serves that nested module at
# pseudo-versions cut from argo-cd commits; the one cut from the tag's commit carries the tag's
# commit time. So: read the tag's Time from its .info, find the gitops-engine pseudo-version with
# exactly that timestamp in the proxy's version list, check its own .info Time, and replace with it.
infotime() { # infotime MODULE VERSION -> RFC 3339 commit time from the module's .info
  local info; info="$(go mod download -json "$1@$2" | sed -n 's/.*"Info": "\(.*\)".*/\1/p')"
  [ -s "$info" ] || { echo "gen-modules.sh: no .info for $1@$2" >&2; return 1; }
  sed -n 's/.*"Time": *"\([^"]*\)".*/\1/p' "$info"
}
proxy_list() { # proxy_list MODULE -> every version the first GOPROXY URL lists (pseudo-versions too)
  local all p="" e
  all="$(go env GOPROXY)"
  for e in ${all//[,|]/ }; do
    case "$e" in http://*|https://*) p="$e"; break ;; esac
  done
  [ -n "$p" ] || { echo "gen-modules.sh: GOPROXY ($all) has no proxy URL" >&2; return 1; }
  curl -fsS "${p%/}/$1/@v/list"
}
gitops_engine_version() { # the gitops-engine pseudo-version cut from argo-cd $ARGOCD_VERSION
  local ge=github.com/argoproj/argo-cd/gitops-engine t ts list cands n
  t="$(infotime github.com/argoproj/argo-cd/v3 "$ARGOCD_VERSION")"
  ts="$(printf '%s' "$t" | sed -n 's/^\([0-9]\{4\}\)-\([0-9]\{2\}\)-\([0-9]\{2\}\)T\([0-9]\{2\}\):\([0-9]\{2\}\):\([0-9]\{2\}\)Z$/\1\2\3\4\5\6/p')"
  [ -n "$ts" ] || { echo "gen-modules.sh: unexpected tag time '$t' for argo-cd $ARGOCD_VERSION" >&2; return 1; }
  list="$(proxy_list "$ge")"
  cands="$(printf '%s\n' "$list" | grep -E -- "[.-]$ts-[0-9a-f]{12}\$" || true)"
  n="$(printf '%s' "$cands" | grep -c . || true)"
  if [ "$n" != 1 ]; then
    echo "gen-modules.sh: want exactly one $ge pseudo-version with time $ts (argo-cd $ARGOCD_VERSION), found $n:" >&2
    printf '%s\n' "$list" >&2
    return 1
  fi
  [ "$(infotime "$ge" "$cands")" = "$t" ] || { echo "gen-modules.sh: $ge@$cands .info Time is not $t" >&2; return 1; }
  echo "$cands"
}
gen_argocd() {
  local d="$HERMETIC_DIR/modules/argocd" amod ge
  mkdir -p "$d"
  amod="$(modfile github.com/argoproj/argo-cd/v3 "$ARGOCD_VERSION")"
  ge="$(gitops_engine_version)"
  echo "argo-cd $ARGOCD_VERSION: gitops-engine $ge" >&2
  {
    echo "module cnpe.local/hermetic/argocd"; echo
    grep -E '^go ' "$amod"; echo
    echo "require github.com/argoproj/argo-cd/v3 $ARGOCD_VERSION"; echo
    # upstream's replace blocks and one-line replaces, minus any local (./ or ../) target
    awk '/^replace \(/{p=1} p && !/=> \.\.?\//{print} p&&/^\)/{p=0}' "$amod"
    grep -E '^replace [^(]' "$amod" | grep -vE '=> \.\.?/' || true
    echo
    echo "// cut from the argo-cd $ARGOCD_VERSION commit (same commit time), in place of upstream's ./gitops-engine"
    echo "replace github.com/argoproj/argo-cd/gitops-engine => github.com/argoproj/argo-cd/gitops-engine $ge"
  } > "$d/go.mod"
  cat > "$d/tools.go" <<'GO'
//go:build tools

// Package tools pins the upstream Argo CD multi-call command package.
package tools

import _ "github.com/argoproj/argo-cd/v3/cmd"
GO
  rm -f "$d/go.sum"
  (cd "$d" && go mod tidy)
}

# --- add-ons: a wrapper requiring MODULE@VERSION with upstream's replaces (minus local ones)
# gen_wrapper DIR MODULE VERSION IMPORT...: go.mod (upstream's go line, its replace blocks and
# one-line replaces without a ./ or ../ target), tools.go importing the command packages, tidy.
gen_wrapper() {
  local d="$1" m="$2" v="$3" umod i; shift 3
  mkdir -p "$d"
  umod="$(modfile "$m" "$v")"
  [ -s "$umod" ] || { echo "gen-modules.sh: no go.mod for $m@$v" >&2; return 1; }
  {
    echo "module cnpe.local/hermetic/$(basename "$d")"; echo
    grep -E '^go ' "$umod"; echo
    echo "require $m $v"; echo
    awk '/^replace \(/{p=1} p && !/=> \.\.?\//{print} p&&/^\)/{p=0}' "$umod"
    grep -E '^replace [^(]' "$umod" | grep -vE '=> \.\.?/' || true
  } > "$d/go.mod"
  {
    echo '//go:build tools'; echo
    echo "// Package tools pins the upstream command packages this wrapper builds."
    echo 'package tools'; echo
    echo 'import ('
    for i in "$@"; do printf '\t_ "%s"\n' "$i"; done
    echo ')'
  } > "$d/tools.go"
  rm -f "$d/go.sum"
  (cd "$d" && go mod tidy)
}
gen_rollouts() {
  gen_wrapper "$HERMETIC_DIR/modules/rollouts" github.com/argoproj/argo-rollouts "$ROLLOUTS_VERSION" \
    github.com/argoproj/argo-rollouts/cmd/rollouts-controller \
    github.com/argoproj/argo-rollouts/cmd/kubectl-argo-rollouts
}
gen_traefik() {
  gen_wrapper "$HERMETIC_DIR/modules/traefik" github.com/traefik/traefik/v3 "$TRAEFIK_VERSION" \
    github.com/traefik/traefik/v3/cmd/traefik
}

ALL_MODULES=(kubernetes etcd argocd rollouts traefik)
parts=("$@"); [ ${#parts[@]} -gt 0 ] || parts=("${ALL_MODULES[@]}")
for p in "${parts[@]}"; do
  case "$p" in
    kubernetes|etcd|argocd|rollouts|traefik) "gen_$p" ;;
    *) echo "gen-modules.sh: unknown part '$p' (${ALL_MODULES[*]})" >&2; exit 2 ;;
  esac
done
echo "modules regenerated"
