#!/usr/bin/env bash
# The gate as an Argo CD PostSync hook, for real, on the kind cluster the lab just ran on (its
# Application at the recovered release): .ci/run's kind tier runs it after the gate traps.
#   1. the lab's release plus the hook (deploy/hook, timeout 20 s): the hook Job succeeds and
#      the sync operation Succeeded;
#   2. the same release serving another page (Argo CD calls it Healthy): the hook fails and the
#      operation Failed, the gate's log naming the endpoint's answer; then the revert: Succeeded;
#   3. the lab's bad release (readiness on /not-ready: never Ready) with the hook: Argo CD waits
#      for the Deployment's health before PostSync, the Deployment turns Degraded at its progress
#      deadline, the operation Failed naming it, and the hook never runs; then the revert. The
#      same release again, its ReplicaSet now in the Deployment's history: Kubernetes sets no
#      progress deadline (kubernetes#106054), Argo CD waits for health with no end, and the gate
#      run beside it rejects naming that; the script terminates the operation, then reverts;
#   4. gate Jobs for an Application that does not exist and for an unreachable API server fail
#      with a one-line reason;
#   5. an Argo Rollouts canary beside the Deployment: the hook approves both; then its next page
#      paused at 50 %: Argo CD waits for the Rollout's health with no end and runs no hook
#      (argo-cd#19422), the gate beside it rejects naming the pause; the script terminates it.
# RBAC (what the hook's account may and may not do) is ci/hook-rbac.sh. Needs KUBECONFIG, the
# lab's CNPE_GITOPS_DIR (a working copy whose origin is the bare repository Argo CD reads) and
# cnpe.local/cnpe-gate:0.1.0 in the nodes (build.sh gate; up.sh loads it) and CNPE_LAB (default
# target/debug/cnpe-lab) for the gate run beside case 3c. It adds commits to
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
git_() { git -C "$CNPE_GITOPS_DIR" -c user.name=cnpe-hook-checks -c user.email=cnpe@hook.local "$@"; }
field() { kubectl -n "$ARGO_NS" get application "$APP" -o jsonpath="$1"; }
# What the last operation did, one line per task (a hook shows its type and phase).
TASKS='{range .status.operationState.syncResult.resources[*]}  {.kind}/{.name} {.hookType} {.syncPhase} {.status} {.hookPhase} {.message}{"\n"}{end}'
# diagnose: what Argo CD saw and did during this script, for a failure; never fails itself.
diagnose() {
  local since="$((SECONDS - T0 + 30))s"
  {
    echo "--- the last operation: $(field '{.status.operationState.operation.sync}' 2>&1 || true)"
    field "$TASKS" 2>&1 || true
    echo "--- the Application's conditions"
    field '{range .status.conditions[*]}  {.type}: {.message}{"\n"}{end}' 2>&1 || true
    echo "--- the application controller's lines for $APP (last 40, cut at 300 characters)"
    kubectl -n "$ARGO_NS" logs statefulset/argocd-application-controller --since="$since" 2>&1 \
      | grep -F "application=$APP" | grep -vF 'level=debug' | cut -c1-300 | tail -40 || true
    echo "--- the repo server's warnings and errors"
    kubectl -n "$ARGO_NS" logs deployment/argocd-repo-server --since="$since" 2>&1 \
      | grep -E 'level=(warning|error|fatal)' | cut -c1-300 | tail -20 || true
  } >&2
}
fail() {
  diagnose
  echo "hook-checks: FAILED: $*" >&2
  exit 1
}

# terminate_operation: what `argocd app terminate-op` does; the controller stops the operation.
terminate_operation() {
  kubectl -n "$ARGO_NS" patch application "$APP" --type merge -p '{"status":{"operationState":{"phase":"Terminating"}}}' >/dev/null
}
# terminate_and_wait: terminate_operation, then wait (60 s) until the operation has ended Failed.
terminate_and_wait() {
  terminate_operation
  local t1=$SECONDS
  until [[ $(field '{.status.operationState.phase}') == Failed ]]; do
    ((SECONDS - t1 < 60)) || fail "the terminated operation did not end in 60 s: $(field '{.status.operationState.phase} {.status.operationState.message}')"
    sleep 1
  done
  echo "terminated: $(field '{.status.operationState.message}')" >&2
}

# waiting_for_health KIND_PATH WHAT: wait (120 s) until the operation of the release just started
# (SHA) is Running, waiting for the health of KIND_PATH (group/Kind/name); sets t0.
waiting_for_health() {
  local waiting=""
  t0=$SECONDS
  until [[ $waiting == "$SHA Running waiting for healthy state of $1"* ]]; do
    ((SECONDS - t0 < 120)) || fail "the sync to ${SHA:0:12} is not waiting for $2 after 120 s: ${waiting:-no operation}"
    sleep 2
    waiting="$(field '{.status.operationState.syncResult.revision} {.status.operationState.phase} {.status.operationState.message}')"
  done
}

# start_release: push HEAD and point the Application at it with a sync operation of exactly
# these fields, once no other operation is pending, in one compare-and-set on the
# resourceVersion (what `argocd app sync` does). A merge patch merged into whatever operation
# was pending: seen, with automation already off, an operation carrying initiatedBy.automated,
# prune and the source of a release a minute older, all kept beside our fields (where Argo CD
# got it from is not known). An operation this script did not start is terminated after 30 s,
# by name. Sets SHA.
start_release() {
  git_ push -q origin HEAD:main
  SHA="$(git_ rev-parse HEAD)"
  local t0=$SECONDS rv phase pending terminated="" op
  op="{\"initiatedBy\":{\"username\":\"hook-checks\"},\"retry\":{\"limit\":1},\"sync\":{\"revision\":\"$SHA\"}}"
  while :; do
    IFS='|' read -r rv phase pending < <(field '{.metadata.resourceVersion}|{.status.operationState.phase}|{.operation}{"\n"}') || true
    if [[ -z $pending && $phase != Running && $phase != Terminating ]]; then
      kubectl -n "$ARGO_NS" patch application "$APP" --type json -p "[
        {\"op\":\"test\",\"path\":\"/metadata/resourceVersion\",\"value\":\"$rv\"},
        {\"op\":\"replace\",\"path\":\"/spec/source/targetRevision\",\"value\":\"$SHA\"},
        {\"op\":\"add\",\"path\":\"/operation\",\"value\":$op}]" >/dev/null 2>&1 && return 0
    elif ((SECONDS - t0 >= 30)) && [[ -z $terminated ]]; then
      echo "hook-checks: terminating an operation this script did not start: phase $phase, $(field '{.status.operationState.operation.initiatedBy} sync to {.status.operationState.operation.sync.revision}')" >&2
      terminate_operation
      terminated=yes
    fi
    ((SECONDS - t0 < 120)) || fail "could not start the sync to ${SHA:0:12} in 120 s: operation ${pending:-none}, phase ${phase:-none}"
    sleep 1
  done
}

# release: start_release, then wait (deadline 240 s) for that operation to end; sets PHASE,
# MESSAGE, HOOK (the operation's PostSync Job, empty if it ran none), JOB, JOB_LOG and TOOK.
release() {
  local sha t0=$SECONDS
  start_release
  sha="$SHA"
  while :; do
    # Empty while the Application has no operation state for this SHA yet.
    local now
    now="$(field '{.status.operationState.syncResult.revision} {.status.operationState.phase} {.status.operationState.operation.initiatedBy.username}')"
    case $now in "$sha Succeeded hook-checks" | "$sha Failed hook-checks" | "$sha Error hook-checks") break ;; esac
    ((SECONDS - t0 < 240)) || fail "the sync to ${sha:0:12} did not end in 240 s (now: ${now:-no operation})"
    sleep 2
  done
  PHASE="$(field '{.status.operationState.phase}')"
  MESSAGE="$(field '{.status.operationState.message}')"
  HOOK="$(field '{.status.operationState.syncResult.resources[?(@.hookType=="PostSync")].name}')"
  JOB="none" JOB_LOG=""
  if [[ -n $HOOK ]]; then
    JOB="$HOOK: $(kubectl -n "$NS" get job "$HOOK" -o jsonpath='start {.status.startTime}, completion {.status.completionTime}, succeeded {.status.succeeded}, failed {.status.failed}' 2>&1 || true)"
    JOB_LOG="$(kubectl -n "$NS" logs "job/$HOOK" 2>&1 || true)"
  fi
  TOOK=$((SECONDS - t0))
  echo "sync to ${sha:0:12}: operation $PHASE, message: $MESSAGE; hook Job $JOB; after $TOOK s; its tasks:" >&2
  field "$TASKS" >&2 || true
}

# gate_jobs: the hook Jobs in the Application's namespace, one name per line.
gate_jobs() { kubectl -n "$NS" get jobs -l app.kubernetes.io/name=cnpe-gate -o name; }

# revert_succeeds WHAT: git revert HEAD, release it; the operation (and so the hook) must succeed.
revert_succeeds() {
  git_ revert --no-edit HEAD >/dev/null
  release
  [[ $PHASE == Succeeded ]] || fail "$1: operation $PHASE ($MESSAGE); gate log: $JOB_LOG"
}

say "the hook's account, the AppProject's permission to create it, syncs driven by this script"
kubectl apply -k deploy/ >/dev/null
# Automated sync would start each sync before this script's operation, and Argo CD gives an
# operation without a retry policy limit 5 (measured: "Retrying attempt #3", minutes per
# release): each sync here is one explicit operation with retry limit 1 (an explicit 0 may be
# dropped as unset; not tried).
# With a refresh asked in the same patch (the annotation `argocd app get --refresh` sets; the
# controller removes it when it has reconciled).
kubectl -n "$ARGO_NS" patch application "$APP" --type merge \
  -p '{"metadata":{"annotations":{"argocd.argoproj.io/refresh":"normal"}},"spec":{"syncPolicy":{"automated":null}}}' >/dev/null
# Until the controller has reconciled the Application after that patch, its cache may still say
# automated: a self-heal it starts then is a selective sync (status.operationState.operation
# .sync.resources), which runs no hooks (seen right after a lab run: "hook Job none"). Wait (up
# to 60 s, then go on saying so) for that reconcile with no operation pending.
t_off=$SECONDS
while :; do
  IFS='|' read -r reconciled pending phase asked < <(field '{.status.reconciledAt}|{.operation}|{.status.operationState.phase}|{.metadata.annotations.argocd\.argoproj\.io/refresh}{"\n"}') || true
  if [[ -z $asked && -z $pending && $phase != Running ]]; then break; fi
  if ((SECONDS - t_off >= 60)); then
    echo "hook-checks: no reconcile of $APP after automation went off within 60 s (reconciledAt ${reconciled:-none}, refresh still asked '${asked:-no}', operation phase ${phase:-none}); going on" >&2
    break
  fi
  sleep 1
done
echo "hook-checks: $APP reconciled after automation went off: $((SECONDS - t_off)) s" >&2
kind_ok="$(kubectl -n "$ARGO_NS" get appproject "$PROJECT" -o jsonpath='{.spec.namespaceResourceWhitelist[?(@.kind=="Job")].group}')"
if [[ $kind_ok != batch ]]; then
  kubectl -n "$ARGO_NS" patch appproject "$PROJECT" --type json \
    -p '[{"op":"add","path":"/spec/namespaceResourceWhitelist/-","value":{"group":"batch","kind":"Job"}}]' >/dev/null
fi

say "1. the recovered release with the hook: the hook Job succeeds, the operation Succeeded"
# --timeout 20, not the shipped 120: an approval comes within seconds of the Job's start, and a
# rejection (case 2) waits the whole timeout, twice (the operation's retry limit 1).
sed 's/^\( *\)- "120"$/\1- "20"/' deploy/hook/job.yaml >"$CNPE_GITOPS_DIR/app/hook.yaml"
grep -F -- '- "20"' "$CNPE_GITOPS_DIR/app/hook.yaml" >/dev/null || fail "could not set the hook's --timeout 20"
git_ add app/hook.yaml
git_ commit -qm "hook-checks: the gate as a PostSync hook"
release
[[ $PHASE == Succeeded && -n $HOOK ]] || fail "the good release with the hook: operation $PHASE ($MESSAGE), hook Job ${HOOK:-none}; gate log: $JOB_LOG"
[[ $JOB_LOG == *APPROVED* ]] || fail "the operation Succeeded, but the hook's log holds no approval: $JOB_LOG"

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
revert_succeeds "the revert"

say "3. the lab's bad release (readiness never passes), new pod template: the operation Failed before PostSync, the hook never ran"
bad_sha="$(cat "${CNPE_EVIDENCE_DIR:-$HOME/cnpe}/bad.sha")"
git_ cat-file -e "$bad_sha^{commit}" || fail "the lab's bad release $bad_sha is not in $CNPE_GITOPS_DIR"
jobs_before="$(gate_jobs)"
# An annotation on the pod template makes its ReplicaSet new (the lab's own bad ReplicaSet is
# still in the Deployment's history: going back to it is case 3c).
git_ show "$bad_sha:app/release.json" | python3 -c '
import json, sys
release = json.load(sys.stdin)
for o in release["items"]:
    if o["kind"] == "Deployment":
        o["spec"]["template"]["metadata"].setdefault("annotations", {})["cnpe.dev/hook-check"] = sys.argv[1]
json.dump(release, sys.stdout, indent=2)
print()' "$(git_ rev-parse HEAD)" >"$CNPE_GITOPS_DIR/app/release.json"
git_ commit -qam "hook-checks: the lab's bad release (readiness on /not-ready) with the hook, as a new pod template"
release
deploy_msg="$(field '{.status.operationState.syncResult.resources[?(@.kind=="Deployment")].message}')"
echo "the Deployment's result in the operation: $deploy_msg" >&2
[[ $PHASE == Failed ]] || fail "the lab's bad release with the hook: operation $PHASE ($MESSAGE)"
[[ $deploy_msg == *"exceeded its progress deadline"* ]] \
  || fail "the operation failed, but not on the Deployment's progress deadline: $deploy_msg"
[[ -z $HOOK && $(gate_jobs) == "$jobs_before" ]] || fail "a PostSync hook ran although the Deployment never got Healthy: ${HOOK:-a new Job}"
echo "outcome: operation Failed after $TOOK s; no hook Job was created (Argo CD starts PostSync only on Healthy)" >&2

say "3b. git revert of the bad release: Succeeded, the hook passes"
revert_succeeds "the revert of the bad release"

say "3c. the same bad release again (its ReplicaSet exists: kubernetes#106054): Argo CD waits with no end; the gate beside it rejects, naming it"
git_ revert --no-edit HEAD >/dev/null # the revert of the revert: the bad pod template again
start_release
waiting_for_health apps/Deployment/web "the Deployment's health"
status=0
verdict="$("${CNPE_LAB:-$ROOT/target/debug/cnpe-lab}" gate --app "$APP" --sha "$SHA" --expect-body "$BODY" --timeout 40 2>&1)" || status=$?
[[ $status -eq 1 && $verdict == *REJECTED* && $verdict == *106054* ]] \
  || fail "the gate beside the endless sync did not reject naming kubernetes#106054 (exit $status): $verdict"
grep -E 'REJECTED|^  - (operation_phase|health_status)|106054' <<<"$verdict" | head -4 >&2
waited="$(field '{.status.operationState.phase} {.status.operationState.message}')"
echo "Argo CD after $((SECONDS - t0)) s: $waited, health $(field '{.status.health.status}')" >&2
[[ $waited == "Running waiting for healthy state of apps/Deployment/web" ]] \
  || fail "Argo CD ended the sync on its own ($waited): case 3c no longer shows kubernetes#106054"
terminate_and_wait

say "3d. git revert of it: Succeeded, the hook passes"
revert_succeeds "the revert of the bad release"

say "4. an Application that does not exist: the gate Job fails with one line"
kubectl -n "$NS" delete job cnpe-gate-noapp --ignore-not-found >/dev/null
sed -e 's/^\(  \)generateName: cnpe-gate-$/\1name: cnpe-gate-noapp/' -e 's/^\( *\)- cnpe-shop$/\1- cnpe-no-such-app/' deploy/hook/job.yaml \
  | kubectl -n "$NS" apply -f - >/dev/null
kubectl -n "$NS" wait --for=condition=Failed --timeout=180s job/cnpe-gate-noapp >/dev/null \
  || fail "the gate Job for a missing Application did not fail"
noapp="$(kubectl -n "$NS" logs job/cnpe-gate-noapp 2>&1)"
echo "$noapp" >&2
[[ $(wc -l <<<"$noapp") -eq 1 && $noapp == *"does not exist"* ]] || fail "not a one-line reason: $noapp"
kubectl -n "$NS" delete job cnpe-gate-noapp >/dev/null

say "4b. an API server the gate cannot reach: the gate Job fails with one line, never approves"
kubectl -n "$NS" delete job cnpe-gate-noapi --ignore-not-found >/dev/null
# In-cluster configuration comes from these two variables: point them at a closed port.
sed -e 's/^\(  \)generateName: cnpe-gate-$/\1name: cnpe-gate-noapi/' \
  -e 's/^\( *\)- name: CNPE_ARGOCD_NAMESPACE$/\1- name: KUBERNETES_SERVICE_HOST\n\1  value: 127.0.0.1\n\1- name: KUBERNETES_SERVICE_PORT\n\1  value: "9"\n&/' deploy/hook/job.yaml \
  | kubectl -n "$NS" apply -f - >/dev/null
kubectl -n "$NS" wait --for=condition=Failed --timeout=180s job/cnpe-gate-noapi >/dev/null \
  || fail "the gate Job with an unreachable API server did not fail"
noapi="$(kubectl -n "$NS" logs job/cnpe-gate-noapi 2>&1)"
echo "$noapi" >&2
[[ $(wc -l <<<"$noapi") -eq 1 && $noapi != *APPROVED* ]] || fail "not a one-line reason: $noapi"
kubectl -n "$NS" delete job cnpe-gate-noapi >/dev/null

# with_canary PAGE: release.json plus an Argo Rollouts canary: Rollout web-canary (2 replicas,
# steps setWeight 50 and an endless pause; the Deployment's pod template serving PAGE) and its
# Service web-canary.
with_canary() {
  python3 - "$1" "$BODY" "$CNPE_GITOPS_DIR/app/release.json" <<'PY'
import copy, json, sys
page, body, path = sys.argv[1:4]
with open(path) as f:
    release = json.load(f)
items = [o for o in release["items"] if o["metadata"]["name"] != "web-canary"]
deploy = next(o for o in items if o["kind"] == "Deployment")
service = next(o for o in items if o["kind"] == "Service")
ns = deploy["metadata"]["namespace"]
template = copy.deepcopy(deploy["spec"]["template"])
template["metadata"]["labels"] = {"app": "web-canary"}
command = template["spec"]["containers"][0]["command"]
if f"'{body}'" not in command[-1]:
    sys.exit(f"the Deployment's command does not serve {body!r}: {command}")
command[-1] = command[-1].replace(f"'{body}'", f"'{page}'")
canary_service = copy.deepcopy(service)
canary_service["metadata"] = {"name": "web-canary", "namespace": ns, "labels": {"app": "web-canary"}}
canary_service["spec"]["selector"] = {"app": "web-canary"}
rollout = {
    "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
    "metadata": {"name": "web-canary", "namespace": ns, "labels": {"app": "web-canary"}},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web-canary"}}, "template": template,
             "strategy": {"canary": {"steps": [{"setWeight": 50}, {"pause": {}}]}}},
}
release["items"] = items + [rollout, canary_service]
with open(path, "w") as f:
    json.dump(release, f, indent=2)
    f.write("\n")
PY
}

say "5. an Argo Rollouts canary beside the Deployment, with the hook: the hook's gate approves both, the operation Succeeded"
if [[ -z $(kubectl get crd rollouts.argoproj.io -o name 2>/dev/null) ]]; then
  fail "Argo Rollouts' CRD is not served: ci/kind/up.sh installs it"
fi
kind_ok="$(kubectl -n "$ARGO_NS" get appproject "$PROJECT" -o jsonpath='{.spec.namespaceResourceWhitelist[?(@.kind=="Rollout")].group}')"
if [[ $kind_ok != argoproj.io ]]; then
  kubectl -n "$ARGO_NS" patch appproject "$PROJECT" --type json \
    -p '[{"op":"add","path":"/spec/namespaceResourceWhitelist/-","value":{"group":"argoproj.io","kind":"Rollout"}}]' >/dev/null
fi
with_canary "$BODY"
git_ commit -qam "hook-checks: an Argo Rollouts canary beside the Deployment, the same page"
release
[[ $PHASE == Succeeded && -n $HOOK ]] || fail "the release with a Rollout: operation $PHASE ($MESSAGE), hook Job ${HOOK:-none}; gate log: $JOB_LOG"
[[ $JOB_LOG == *APPROVED* && $JOB_LOG == *"Rollout $NS/web-canary"* ]] \
  || fail "the operation Succeeded, but the hook's log holds no approval naming Rollout $NS/web-canary: $JOB_LOG"
grep -F "Rollout $NS/web-canary" <<<"$JOB_LOG" | head -2 >&2 || true

say "5b. the canary's next page, paused at 50 %: Argo CD waits for the Rollout's health with no end (argo-cd#19422), the hook never runs; the gate beside it rejects, naming the pause"
jobs_before="$(gate_jobs)"
with_canary "$BODY-canary"
git_ commit -qam "hook-checks: the canary's next page (paused at 50 %)"
start_release
waiting_for_health argoproj.io/Rollout/web-canary "the Rollout's health"
status=0
verdict="$("${CNPE_LAB:-$ROOT/target/debug/cnpe-lab}" gate --app "$APP" --sha "$SHA" --expect-body "$BODY" --timeout 15 2>&1)" || status=$?
[[ $status -eq 1 && $verdict == *REJECTED* && $verdict == *"workload_paused Rollout $NS/web-canary"* ]] \
  || fail "the gate beside the paused canary did not reject naming the pause (exit $status): $verdict"
grep -E 'REJECTED|^  - workload_paused' <<<"$verdict" | head -2 >&2
[[ $(gate_jobs) == "$jobs_before" ]] || fail "a PostSync hook ran although the Rollout is paused"
echo "Argo CD after $((SECONDS - t0)) s: $(field '{.status.operationState.phase} {.status.operationState.message}'), health $(field '{.status.health.status}'); no hook Job was created" >&2
terminate_and_wait
say "all hook checks passed"
