#!/usr/bin/env bash
# Regenerates the wrapper Go modules under modules/ from the upstream go.mod files
# (replace blocks are derived, never hand-copied). Run only when bumping versions.
set -euo pipefail
. "$(dirname "$0")/common.sh"
mkdir -p "$GOMODCACHE" "$GOCACHE"
modfile() { go mod download -json "$1@$2" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p'; }

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

# --- argo-cd: copy upstream's replace block verbatim
d="$HERMETIC_DIR/modules/argocd"; mkdir -p "$d"
amod="$(modfile github.com/argoproj/argo-cd/v3 "$ARGOCD_VERSION")"
{
  echo "module cnpe.local/hermetic/argocd"; echo
  grep -E '^go ' "$amod"; echo
  echo "require github.com/argoproj/argo-cd/v3 $ARGOCD_VERSION"; echo
  awk '/^replace \(/{p=1} p{print} p&&/^\)/{p=0}' "$amod"
  grep -E '^replace [^(]' "$amod" || true
} > "$d/go.mod"
cat > "$d/tools.go" <<'GO'
//go:build tools

// Package tools pins the upstream Argo CD multi-call command package.
package tools

import _ "github.com/argoproj/argo-cd/v3/cmd"
GO
(cd "$d" && go mod tidy)
echo "modules regenerated"
