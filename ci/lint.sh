#!/usr/bin/env bash
# Static checks of the CI files (usage: bash ci/lint.sh, from anywhere):
#  - ShellCheck on every *.sh under ci/ (found at run time, so new scripts are linted too;
#    sourced libraries, i.e. *.sh without a shebang, are checked as bash without SC2034);
#  - actionlint on every workflow under .github/workflows/ (with ShellCheck on run: blocks);
#  - manifests: ci/kind's kind config and manifests, rendered as up.sh renders them, parsed and
#    cross-checked by ci/kind/check-manifests.py;
#  - deploy/: the gate's RBAC rendered by `kubectl kustomize` (offline) and its PostSync Job, both
#    checked by ci/check-deploy.py (read-only verbs, nothing more than the gate watches, the Job's
#    securityContext), with the default namespaces and deploy/example-overlay's;
#  - the crate: `cargo fmt --check` and `cargo clippy --all-targets -- -D warnings`.
# Usage: bash ci/lint.sh [all|static|clippy]: static is everything but clippy (fast), clippy only
# clippy (.ci/run runs it beside the hermetic tests, in its own target directory); default all.
# Installs missing tools: shellcheck from Debian, actionlint from the Go module proxy into
# $CNPE_TOOLS_CACHE (default /var/cache/cnpe-tools), PyYAML from Debian. Runs every check, then
# exits non-zero if any failed, ending with one summary line.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
WHAT="${1:-all}"
case $WHAT in
  all | static | clippy) ;;
  *) echo "usage: bash ci/lint.sh [all|static|clippy] (not: $WHAT)" >&2; exit 2 ;;
esac

ACTIONLINT_VERSION=v1.7.12
TOOLS="${CNPE_TOOLS_CACHE:-/var/cache/cnpe-tools}"
start=$SECONDS
say() { printf 'lint: %s\n' "$*" >&2; }

apt_updated=""
apt_install() {
  if [[ -z $apt_updated ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# --- checks: each records its result; all run even when one fails
passed=()
failed=()
record() { # NAME STATUS
  if [[ $2 -eq 0 ]]; then passed+=("$1"); else failed+=("$1"); fi
}

# Everything but the crate's checks (its body is not indented: its here-documents end at column 0).
static_checks() {
# --- tools
if ! command -v shellcheck >/dev/null; then
  say "installing shellcheck (Debian)"
  apt_install shellcheck
fi
SHELLCHECK="$(command -v shellcheck)"

ACTIONLINT="$TOOLS/bin/actionlint"
if [[ ! -x $ACTIONLINT ]] || [[ "$("$ACTIONLINT" -version 2>/dev/null | head -n1)" != "$ACTIONLINT_VERSION" ]]; then
  say "installing actionlint $ACTIONLINT_VERSION (Go module proxy) into $TOOLS/bin"
  command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
  mkdir -p "$TOOLS/bin"
  GOBIN="$TOOLS/bin" GOMODCACHE="$TOOLS/gomod" GOCACHE="$TOOLS/gocache" GOFLAGS="" \
    GOTOOLCHAIN=local CGO_ENABLED=0 \
    go install "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION"
fi

PYTHON=""
for py in python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null && "$py" -c 'import yaml' 2>/dev/null; then
    PYTHON="$(command -v "$py")"
    break
  fi
done
if [[ -z $PYTHON ]]; then
  say "installing PyYAML (Debian python3-yaml)"
  apt_install python3 python3-yaml
  PYTHON=/usr/bin/python3
fi

# A *.sh without a shebang is a library that bash scripts source: it is checked as bash, and
# SC2034 ("appears unused") is left out for it alone, since its sourcers use what it assigns.
mapfile -d '' scripts < <(find ci -type f -name '*.sh' -print0 | sort -z)
programs=()
libraries=()
for f in "${scripts[@]}"; do
  if [[ "$(head -c2 "$f")" == '#!' ]]; then programs+=("$f"); else libraries+=("$f"); fi
done
if [[ ${#scripts[@]} -eq 0 ]]; then
  say "no *.sh under ci/: nothing was linted, which is itself a failure"
  record "shellcheck(0 files)" 1
else
  status=0
  sc=("$SHELLCHECK" --external-sources --source-path=SCRIPTDIR)
  if [[ ${#programs[@]} -gt 0 ]]; then "${sc[@]}" "${programs[@]}" || status=$?; fi
  if [[ ${#libraries[@]} -gt 0 ]]; then
    "${sc[@]}" --shell=bash --exclude=SC2034 "${libraries[@]}" || status=$?
  fi
  record "shellcheck(${#programs[@]} scripts, ${#libraries[@]} sourced)" "$status"
fi

mapfile -d '' workflows < <(find .github/workflows -type f \( -name '*.yml' -o -name '*.yaml' \) -print0 2>/dev/null | sort -z)
if [[ ${#workflows[@]} -eq 0 ]]; then
  say "no workflow under .github/workflows: nothing was linted, which is itself a failure"
  record "actionlint(0 workflows)" 1
else
  status=0
  "$ACTIONLINT" -shellcheck "$SHELLCHECK" "${workflows[@]}" || status=$?
  record "actionlint(${#workflows[@]} workflows)" "$status"
fi

# Render the templates exactly as up.sh does (same function), with a sample bare repo path.
status=0
rendered="$(mktemp -d)"
trap 'rm -rf "$rendered"' EXIT
(
  export CNPE_BARE_REPO=/tmp/cnpe-lint/srv/bare/app.git
  unset CNPE_REPO_URL
  # set -e does not apply in a subshell whose status is tested: exit explicitly.
  # shellcheck source=kind/common.sh
  . ci/kind/common.sh || exit 1
  for f in kind-config.yaml gitd.yaml gitd-smoke.yaml; do
    kind_render "ci/kind/$f" > "$rendered/$f" || exit 1
  done
  "$PYTHON" ci/kind/check-manifests.py ci/kind/versions.env \
    "$rendered/kind-config.yaml" "$rendered/gitd.yaml" "$rendered/gitd-smoke.yaml" \
    .github/workflows/lab-kind.yml "$KIND_BARE_PARENT" "$CNPE_REPO_URL" || exit 1
  # the add-ons' manifests (up.sh renders them with these two values): no placeholder left, YAML
  export TRAEFIK_IMAGE="$KIND_OFFLINE_TRAEFIK_IMAGE_REPO:v0.0.0" TRAEFIK_WEB_PORT=18080
  kind_render ci/addons/traefik.yaml > "$rendered/addons-traefik.yaml" || exit 1
  kind_render ci/kind/traefik.yaml > "$rendered/traefik.yaml" || exit 1
  "$PYTHON" - "$rendered/addons-traefik.yaml" "$rendered/traefik.yaml" <<'PY' || exit 1
import sys, yaml
for path in sys.argv[1:]:
    try:
        docs = [d for d in yaml.safe_load_all(open(path)) if d]
    except yaml.YAMLError as e:
        sys.exit(f"{path}: {e}")
    for d in docs:
        if not (d.get("kind") and d.get("metadata", {}).get("name")):
            sys.exit(f"{path}: a document without kind or metadata.name")
PY
) || status=$?
record "manifests(ci/kind)" "$status"

# deploy/: the RBAC rendered by kubectl's built-in kustomize (what `kubectl apply -k` runs;
# offline), for the defaults and for the example overlay (other namespaces) that
# deploy/README.md documents; ci/check-deploy.py checks it, and the hook Job as committed (a
# plain manifest: kustomize refuses its generateName).
status=0
if command -v kubectl >/dev/null; then
  while read -r dir app_ns argo_ns hook; do
    out="$rendered/deploy-${dir//\//-}"
    if kubectl kustomize "$dir" > "$out-rbac.yaml"; then
      "$PYTHON" ci/check-deploy.py "$app_ns" "$argo_ns" "$out-rbac.yaml" ${hook:+"$hook"} || status=1
    else
      say "kubectl kustomize $dir failed"
      status=1
    fi
  done <<'EOF'
deploy cnpe-shop argocd deploy/hook/job.yaml
deploy/example-overlay shop-b gitops
EOF
else
  say "kubectl not found: deploy/ was not rendered, which is itself a failure"
  status=1
fi
record "deploy(kustomize)" "$status"

# The online Dockerfile and the offline image (ci/kind/build.sh, part gate) must agree on what
# the hook Job relies on: the user, the entrypoint, the binaries' paths.
status=0
for want in 'USER 65532:65532' 'ENTRYPOINT ["/usr/local/bin/cnpe-lab"]' \
  'COPY --from=build /src/target/release/cnpe-lab /src/target/release/release-gate /usr/local/bin/'; do
  grep -qxF -- "$want" deploy/image/Dockerfile || { echo "deploy/image/Dockerfile: no line: $want" >&2; status=1; }
done
# shellcheck disable=SC2016 # the last one is build.sh's literal text
for want in '--config.user 65532:65532' '--config.entrypoint /usr/local/bin/cnpe-lab' '"$dir/usr/local/bin/$b"'; do
  grep -qF -- "$want" ci/kind/build.sh || { echo "ci/kind/build.sh's gate part no longer has: $want" >&2; status=1; }
done
grep -qE '^ +runAsUser: 65532( |$)' deploy/hook/job.yaml \
  || { echo "deploy/hook/job.yaml: the Job does not run as 65532" >&2; status=1; }
record "image(Dockerfile = offline build)" "$status"
}
[[ $WHAT == clippy ]] || static_checks

# --- the crate: rustfmt and clippy with warnings as errors (same toolchain as cargo test)
if command -v cargo >/dev/null; then
  if [[ $WHAT != clippy ]]; then
    status=0
    cargo fmt --all --check || status=$?
    record "rustfmt" "$status"
  fi
  if [[ $WHAT != static ]]; then
    status=0
    cargo clippy --locked --all-targets --quiet -- -D warnings || status=$?
    record "clippy" "$status"
  fi
else
  say "cargo not found: rustfmt and clippy were not run, which is itself a failure"
  record "rustfmt+clippy(no cargo)" 1
fi

took=$((SECONDS - start))
if [[ ${#failed[@]} -eq 0 ]]; then
  echo "lint: OK: ${passed[*]} (${took}s)"
else
  echo "lint: FAILED: ${failed[*]}; ok: ${passed[*]:-none} (${took}s)"
  exit 1
fi
