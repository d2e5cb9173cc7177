#!/usr/bin/env bash
# Done-when check for the hermetic cluster (run after up.sh). Uses a scratch bare repo
# ($BARE_BASE/smoke.git) and Application argocd/cnpe-smoke; cleans both up at the end.
# Project: least-privilege AppProject cnpe-smoke. 1) baseline commit -> Argo syncs, Synced+Healthy at the SHA, HTTP via the apiserver service
#    proxy returns exactly labhub-cnpe-v1;  2) /not-ready commit -> Synced+Degraded, 0 ready; 3) git revert -> Healthy again.
# Exit 0 when all checks pass.
set -euo pipefail
. "$(dirname "$0")/common.sh"
NS="${CNPE_SMOKE_NS:-cnpe-shop}"
APP=cnpe-smoke
REPO="$BARE_BASE/smoke.git"
URL="git://gitd.gitsrv.svc.cluster.local:9418/smoke.git"
K() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }
T0=$(date +%s)
ok() { printf 'ok   %s\n' "$*"; }
die() { # the app's status (first 60 lines) after the message; captured, never piped into head
  local y; y="$(K -n argocd get application "$APP" -o yaml 2>/dev/null || true)"
  printf 'FAIL %s\n' "$*" >&2
  printf '%s\n' "$y" | awk '/^status:/{p=1} p && n++ < 60' >&2
  exit 1
}

cleanup() {
  K -n argocd delete application "$APP" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  K -n argocd delete appproject "$APP" --ignore-not-found >/dev/null 2>&1 || true
  K -n "$NS" delete deployment/web service/web --ignore-not-found >/dev/null 2>&1 || true
  rm -rf "$REPO" "$WORK"
}
WORK="$(mktemp -d)"
trap cleanup EXIT
K -n argocd delete application "$APP" --ignore-not-found >/dev/null 2>&1 || true
rm -rf "$REPO"; mkdir -p "$BARE_BASE"; git init -q --bare -b main "$REPO"
git -C "$WORK" init -q -b main
git -C "$WORK" config user.email smoke@cnpe.invalid; git -C "$WORK" config user.name smoke
release() { # release READINESS_PATH
  mkdir -p "$WORK/app"
  cat > "$WORK/app/release.json" <<JSON
{"apiVersion":"v1","kind":"List","items":[
 {"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"$NS","labels":{"app":"web"}},
  "spec":{"replicas":1,"strategy":{"type":"Recreate"},"progressDeadlineSeconds":20,
   "selector":{"matchLabels":{"app":"web"}},
   "template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web",
    "image":"docker.io/library/nginx:1.27-alpine","imagePullPolicy":"IfNotPresent",
    "command":["/bin/sh","-c","printf %s labhub-cnpe-v1 > /usr/share/nginx/html/index.html && exec nginx -g 'daemon off;'"],
    "ports":[{"containerPort":80}],
    "readinessProbe":{"httpGet":{"path":"$1","port":80},"periodSeconds":2,"failureThreshold":1},
    "resources":{"requests":{"cpu":"25m","memory":"32Mi"},"limits":{"cpu":"200m","memory":"128Mi"}}}]}}}},
 {"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"$NS"},
  "spec":{"selector":{"app":"web"},"ports":[{"port":80,"targetPort":80}]}}]}
JSON
  git -C "$WORK" add app/release.json
  git -C "$WORK" commit -q -m "release readiness $1"
  git -C "$WORK" push -q "$REPO" main
  git -C "$WORK" rev-parse HEAD
}
appfield() { K -n argocd get application "$APP" -o "jsonpath=$1" 2>/dev/null; }
wait_state() { # wait_state SHA HEALTH TIMEOUT : poll the live Application until the deadline
  local sha="$1" want="$2" t="$3" s="" deadline
  deadline=$((SECONDS + t))
  while [ $SECONDS -lt $deadline ]; do
    s="$(appfield '{.spec.source.targetRevision} {.status.sync.revision} {.status.operationState.syncResult.revision} {.status.operationState.phase} {.status.sync.status} {.status.health.status}' || true)"
    [ "$s" = "$sha $sha $sha Succeeded Synced $want" ] && return 0
    sleep 1
  done
  die "app not '$sha Synced $want' after ${t}s (last: $s)"
}
proxy_get() { K get --raw "/api/v1/namespaces/$NS/services/web:80/proxy/" 2>&1; }
wait_body() { # wait_body WANT TIMEOUT : poll the service proxy until it answers exactly WANT
  local deadline=$((SECONDS + $2))
  body=""
  while [ $SECONDS -lt $deadline ]; do
    body="$(proxy_get)" && [ "$body" = "$1" ] && return 0
    sleep 1
  done
  return 1
}

K get ns "$NS" >/dev/null 2>&1 || K create ns "$NS" >/dev/null
GOOD=$(release /)
ok "baseline commit $GOOD pushed to $REPO"
# a least-privilege project like the lab's: one repo, one destination, two namespaced kinds
K apply -f - >/dev/null <<YAML
apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata: {name: $APP, namespace: argocd}
spec:
  sourceRepos: ["$URL"]
  destinations: [{server: "https://kubernetes.default.svc", namespace: $NS}]
  namespaceResourceWhitelist: [{group: apps, kind: Deployment}, {group: "", kind: Service}]
  clusterResourceWhitelist: []
YAML
K apply -f - >/dev/null <<YAML
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: $APP, namespace: argocd}
spec:
  project: $APP
  source: {repoURL: "$URL", path: app, targetRevision: "$GOOD"}
  destination: {server: "https://kubernetes.default.svc", namespace: $NS}
  syncPolicy: {automated: {prune: true, selfHeal: true}}
YAML
wait_state "$GOOD" Healthy 180
ok "Application Synced+Healthy at $GOOD ($(( $(date +%s) - T0 ))s)"
[ "$(K -n "$NS" get deploy web -o jsonpath='{.status.readyReplicas}')" = 1 ] || die "deployment not ready"
wait_body labhub-cnpe-v1 20 || die "service proxy body: $body"
ok "service proxy body is exactly labhub-cnpe-v1"

sed -i 's#"path":"/"#"path":"/not-ready"#' "$WORK/app/release.json"
git -C "$WORK" commit -q -am "readiness /not-ready"; git -C "$WORK" push -q "$REPO" main
BAD=$(git -C "$WORK" rev-parse HEAD)
K -n argocd patch application "$APP" --type merge -p "{\"spec\":{\"source\":{\"targetRevision\":\"$BAD\"}}}" >/dev/null
K -n argocd annotate application "$APP" argocd.argoproj.io/refresh=normal --overwrite >/dev/null
wait_state "$BAD" Degraded 120
ok "bad release $BAD: Synced+Degraded"
[ -z "$(K -n "$NS" get deploy web -o jsonpath='{.status.readyReplicas}')" ] || die "deployment unexpectedly ready"
reason="$(K -n "$NS" get deploy web -o jsonpath='{.status.conditions[?(@.type=="Progressing")].reason}')"
[ "$reason" = ProgressDeadlineExceeded ] || die "no ProgressDeadlineExceeded (Progressing reason: '$reason')"
out="$(proxy_get || true)"
case "$out" in *"no endpoints available"*|*ServiceUnavailable*|*503*) ok "service proxy fails while unready: ${out:0:80}";;
  *) die "unexpected proxy answer while unready: $out";; esac
git -C "$WORK" revert --no-edit HEAD >/dev/null; git -C "$WORK" push -q "$REPO" main
REC=$(git -C "$WORK" rev-parse HEAD)
K -n argocd patch application "$APP" --type merge -p "{\"spec\":{\"source\":{\"targetRevision\":\"$REC\"}}}" >/dev/null
wait_state "$REC" Healthy 120
wait_body labhub-cnpe-v1 20 || die "service proxy body after revert: $body"
ok "reverted release $REC: Synced+Healthy, body labhub-cnpe-v1"
echo "smoke: all checks passed in $(( $(date +%s) - T0 ))s"
