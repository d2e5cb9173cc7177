#!/usr/bin/env bash
# Installs kind KIND_VERSION and kubectl KUBECTL_VERSION (versions.env) into DIR (default
# ~/.local/bin), checking each download against the checksum its publisher ships beside it.
# Keeps a binary that already reports the pinned version. Needs internet: not for our machines.
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

dir="${1:-$HOME/.local/bin}"
mkdir -p "$dir"
case "$(uname -m)" in
  x86_64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) die "unsupported architecture $(uname -m)" ;;
esac

# fetch URL SHA256_URL DEST: download to DEST after checking its sha256 (first word of SHA256_URL).
fetch() {
  local url="$1" sum_url="$2" dest="$3" tmp want
  tmp="$(mktemp)"
  curl -fsSL --retry 5 --retry-delay 3 -o "$tmp" "$url"
  want="$(curl -fsSL --retry 5 --retry-delay 3 "$sum_url" | awk '{print $1; exit}')"
  [[ $want =~ ^[0-9a-f]{64}$ ]] || die "no sha256 at $sum_url"
  echo "$want  $tmp" | sha256sum --check --quiet || die "checksum mismatch for $url"
  install -m 0755 "$tmp" "$dest"
  rm -f "$tmp"
}

# Versions are captured, then matched: `cmd | grep -q` under pipefail can fail on SIGPIPE.
have_kind="$( { [[ -x $dir/kind ]] && "$dir/kind" version 2>/dev/null; } || true)"
have_kubectl="$( { [[ -x $dir/kubectl ]] && "$dir/kubectl" version --client 2>/dev/null; } || true)"
if [[ $have_kind == "kind $KIND_VERSION "* ]]; then
  log "kind $KIND_VERSION already in $dir"
else
  base="https://github.com/kubernetes-sigs/kind/releases/download/$KIND_VERSION/kind-linux-$arch"
  fetch "$base" "$base.sha256sum" "$dir/kind"
fi

if [[ $'\n'$have_kubectl$'\n' == *$'\n'"Client Version: $KUBECTL_VERSION"$'\n'* ]]; then
  log "kubectl $KUBECTL_VERSION already in $dir"
else
  base="https://dl.k8s.io/release/$KUBECTL_VERSION/bin/linux/$arch/kubectl"
  fetch "$base" "$base.sha256" "$dir/kubectl"
fi

"$dir/kind" version
"$dir/kubectl" version --client
