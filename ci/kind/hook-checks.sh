#!/usr/bin/env bash
# The gate as an Argo CD PostSync hook, for real, on the kind cluster the lab just ran on (its
# Application at the recovered release): .ci/run's kind tier runs it after the gate traps.
#   1. the lab's release plus the hook (deploy/hook, timeout 45 s): the hook Job succeeds and
#      the sync operation Succeeded;
#   2. the same release serving another page (Argo CD calls it Healthy): the hook fails and the
#      operation Failed, the gate's log naming the endpoint's answer; then the revert: Succeeded;
#   3. a gate Job for an Application that does not exist fails with a one-line reason.
# RBAC (what the hook's account may and may not do) is ci/hook-rbac.sh. Needs KUBECONFIG, the
# lab's CNPE_GITOPS_DIR (a working copy whose origin is the bare repository Argo CD reads) and
# cnpe.local/cnpe-gate:0.1.0 in the nodes (build.sh gate; up.sh loads it). It adds commits to
# that working copy (never rewrites them), lets the lab's AppProject create Jobs and turns the
# Application's automated sync off.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
: "${KUBECONFIG:?KUBECONFIG must point at the kind cluster}" "${CNPE_GITOPS_DIR:?CNPE_GITOPS_DIR must be the lab working copy}"
NS="${CNPE_NAMESPACE:-cnpe-shop}" ARGO_NS="${CNPE_ARGOCD_NAMESPACE:-argocd}"
APP="${CNPE_APPLICATION:-cnpe-shop}" PROJECT="${CNPE_PROJECT:-cnpe-delivery}" BODY="${CNPE_BODY:-labhub-cnpe-v1}"
T0=$SECONDS
say() { printf '\n== hook-checks [%ds] %s\n' "$((SECONDS - T0))" "$*" >&2; }
fail() { echo "hook-checks: FAILED: $*" >&2; exit 1; }
git_() { git -C "$CNPE_GITOPS_DIR" -c user.name=cnpe-hook-checks -c user.email=cnpe@hook.local "$@"; }
field() { kubectl -n "$ARGO_NS" get application "$APP" -o jsonpath="$1"; }

# release: push HEAD, point the Application at it with a sync operation, wait (deadline 240 s)
# for that operation to end; sets PHASE, MESSAGE and JOB_LOG.
release() {
  local sha t0=$SECONDS
  git_ push -q origin HEAD:main
  sha="$(git_ rev-parse HEAD)"
  kubectl -n "$ARGO_NS" patch application "$APP" --type merge -p \
    "{\"spec\":{\"source\":{\"targetRevision\":\"$sha\"}},\"operation\":{\"initiatedBy\":{\"username\":\"hook-checks\"},\"retry\":{\"limit\":1},\"sync\":{\"revision\":\"$sha\"}}}" >/dev/null
  while :; do
    # Empty while the Application has no operation state for this SHA yet.
    local now
    now="$(field '{.status.operationState.syncResult.revision} {.status.operationState.phase}')"
    case $now in "$sha Succeeded" | "$sha Failed" | "$sha Error") break ;; esac
    ((SECONDS - t0 < 240)) || fail "the sync to ${sha:0:12} did not end in 240 s (now: ${now:-no operation})"
    sleep 2
  done
  PHASE="$(field '{.status.operationState.phase}')"
  MESSAGE="$(field '{.status.operationState.message}')"
  JOB_LOG="$(kubectl -n "$NS" logs job/cnpe-gate 2>&1 || true)"
  JOB="$(kubectl -n "$NS" get job cnpe-gate -o jsonpath='start {.status.startTime}, completion {.status.completionTime}, succeeded {.status.succeeded}, failed {.status.failed}' 2>&1 || true)"
  echo "sync to ${sha:0:12}: operation $PHASE, message: $MESSAGE; hook Job: $JOB; after $((SECONDS - t0)) s" >&2
}

say "the hook's account, the AppProject's permission to create it, syncs driven by this script"
kubectl apply -k deploy/ >/dev/null
# Automated sync would start each sync before this script's operation, and Argo CD gives an
# operation without a retry policy limit 5 (measured: "Retrying attempt #3", minutes per
# release): each sync here is one explicit operation with retry limit 1 (an explicit 0 may be
# dropped as unset; not tried).
kubectl -n "$ARGO_NS" patch application "$APP" --type merge -p '{"spec":{"syncPolicy":{"automated":null}}}' >/dev/null
kind_ok="$(kubectl -n "$ARGO_NS" get appproject "$PROJECT" -o jsonpath='{.spec.namespaceResourceWhitelist[?(@.kind=="Job")].group}')"
if [[ $kind_ok != batch ]]; then
  kubectl -n "$ARGO_NS" patch appproject "$PROJECT" --type json \
    -p '[{"op":"add","path":"/spec/namespaceResourceWhitelist/-","value":{"group":"batch","kind":"Job"}}]' >/dev/null
fi

say "1. the recovered release with the hook: the hook Job succeeds, the operation Succeeded"
kubectl kustomize deploy/hook/ | sed 's/^\( *\)- "120"$/\1- "45"/' >"$CNPE_GITOPS_DIR/app/hook.yaml"
grep -F -- '- "45"' "$CNPE_GITOPS_DIR/app/hook.yaml" >/dev/null || fail "could not set the hook's --timeout 45"
git_ add app/hook.yaml
git_ commit -qm "hook-checks: the gate as a PostSync hook"
release
[[ $PHASE == Succeeded ]] || fail "the good release with the hook: operation $PHASE ($MESSAGE); gate log: $JOB_LOG"

say "2. the same release serving another page: the hook fails, the operation Failed"
sed -i "s/$BODY/$BODY-wrong-page/g" "$CNPE_GITOPS_DIR/app/release.json"
git_ commit -qam "hook-checks: a release that serves another page"
release
[[ $PHASE == Failed ]] || fail "the wrong page: operation $PHASE ($MESSAGE)"
[[ $JOB_LOG == *REJECTED* && $JOB_LOG == *endpoint_answers* && $JOB_LOG == *"$BODY-wrong-page"* ]] \
  || fail "the hook failed, but its log does not name the endpoint's wrong answer: $JOB_LOG"
echo "the gate's rejection, from the hook's log:" >&2
grep -E 'REJECTED|^  - endpoint_answers' <<<"$JOB_LOG" | head -3 >&2 || true

say "2b. git revert of the wrong page: Succeeded again"
git_ revert --no-edit HEAD >/dev/null
release
[[ $PHASE == Succeeded ]] || fail "the revert: operation $PHASE ($MESSAGE); gate log: $JOB_LOG"

say "3. an Application that does not exist: the gate Job fails with one line"
kubectl -n "$NS" delete job cnpe-gate-noapp --ignore-not-found >/dev/null
kubectl kustomize deploy/hook/ | sed -e 's/^\(  name:\) cnpe-gate$/\1 cnpe-gate-noapp/' -e 's/^\( *\)- cnpe-shop$/\1- cnpe-no-such-app/' \
  | kubectl apply -f - >/dev/null
kubectl -n "$NS" wait --for=condition=Failed --timeout=180s job/cnpe-gate-noapp >/dev/null \
  || fail "the gate Job for a missing Application did not fail"
noapp="$(kubectl -n "$NS" logs job/cnpe-gate-noapp 2>&1)"
echo "$noapp" >&2
[[ $(wc -l <<<"$noapp") -eq 1 && $noapp == *"does not exist"* ]] || fail "not a one-line reason: $noapp"
kubectl -n "$NS" delete job cnpe-gate-noapp >/dev/null
say "all hook checks passed"
