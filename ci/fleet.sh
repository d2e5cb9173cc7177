#!/usr/bin/env bash
# Measures the any-Application gate as the fleet grows, on a running hermetic cluster:
# N = 1, 10 and 30 Applications (one small nginx each, a namespace each), released to a new
# commit at once and gated in one `cnpe-lab gate --selector` run (examples/fleet.rs).
# Writes the table to docs/fleet.md and prints it.
# Usage: bash ci/fleet.sh [N...]   (ci/hermetic/up.sh first)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="$PATH:/usr/local/go/bin:/root/.cargo/bin"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/cache/cnpe-lab/target}"

KUBECONFIG="$(bash ci/hermetic/kubeconfig.sh)" || {
  echo "ci/fleet.sh: no hermetic cluster: run bash ci/hermetic/up.sh first" >&2
  exit 2
}
export KUBECONFIG
if ! kubectl --kubeconfig "$KUBECONFIG" get --raw /readyz >/dev/null 2>&1; then
  echo "ci/fleet.sh: the hermetic cluster's API server does not answer: bash ci/hermetic/up.sh" >&2
  exit 2
fi
# The fleet's repository sits next to the lab's bare repository, which the running git daemon
# serves (up.sh recorded its command line).
RUN="${CNPE_HERMETIC_RUN:-/var/cache/cnpe-hermetic/run}"
served="$(tr '\0' '\n' <"$RUN/argv/git-daemon" | sed -n 's/^--base-path=//p')"
[[ -n $served ]] || { echo "ci/fleet.sh: cannot tell which directory the git daemon serves" >&2; exit 2; }
export CNPE_BARE_REPO="$served/app.git"
[[ -x /usr/bin/time ]] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null

cargo build --locked --release --bin cnpe-lab --example fleet
export CNPE_LAB_BIN="$CARGO_TARGET_DIR/release/cnpe-lab"
out="$(mktemp)"
"$CARGO_TARGET_DIR/release/examples/fleet" "$@" | tee "$out"
{
  echo "# The gate's cost as the fleet grows"
  echo
  echo "Measured by \`bash ci/fleet.sh\` on the hermetic cluster (Kubernetes $(sed -n 's/^K8S_VERSION=//p' ci/hermetic/versions.env), Argo CD $(sed -n 's/^ARGOCD_VERSION=//p' ci/hermetic/versions.env), 2 cores) on $(date -u +%Y-%m-%d):"
  echo "N Applications released to one new commit at once, gated in one \`cnpe-lab gate --selector\` run."
  echo "Watch streams are one reflector per kind; API requests exclude the probes. Decision latency is"
  echo "counted from the earliest input (watch event or probe answer) a decision had not seen; the"
  echo "deciding decision is the one that approved or rejected an Application."
  echo
  cat "$out"
} >docs/fleet.md
rm -f "$out"
echo "ci/fleet.sh: table written to docs/fleet.md" >&2
