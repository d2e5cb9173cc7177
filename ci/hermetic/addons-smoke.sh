#!/usr/bin/env bash
# Smoke check of the add-ons (Argo Rollouts + Traefik) on the hermetic cluster (addons.sh up) or
# on the kind cluster (ci/kind/up.sh --offline). In its own namespace cnpe-addons-smoke, created
# here and deleted at the end:
#   1. a canary Rollout (setWeight 50, pause {}) of docker.io/library/nginx:1.27-alpine is Healthy;
#   2. a pod template change stops it at the pause: phase Paused, and the kubectl plugin's
#      `kubectl argo rollouts status --timeout` reports Paused;
#   3. `kubectl argo rollouts promote`, Healthy again (the plugin's status says Healthy);
#   4. a Service + an Ingress (class traefik, a Host) and an HTTPRoute (parent Gateway
#      cnpe-ingress/web, a hostname) answer HTTP 200 with nginx's page through traefik.
# Usage: addons-smoke.sh [hermetic|kind]   (default hermetic)
#   hermetic: curl http://127.0.0.1:$CNPE_TRAEFIK_PORT (default 18080), traefik on the host.
#   kind: `kubectl port-forward` to Service cnpe-ingress/traefik port web, then curl
#         with the Host header (the API server's service proxy would not carry the Host).
# Every wait follows live state with a deadline (CNPE_SMOKE_TIMEOUT, default 180 s) and prints
# the live state when it times out. Exit 0 passed, 1 failed.
set -euo pipefail
. "$(dirname "$0")/common.sh"
FLAVOUR="${1:-hermetic}"
NS=cnpe-addons-smoke
WEB_PORT="${CNPE_TRAEFIK_PORT:-18080}"
T="${CNPE_SMOKE_TIMEOUT:-180}"
ROOT="$(cd "$HERMETIC_DIR/../.." && pwd)"
case "$FLAVOUR" in
  hermetic) KUBECONFIG="$(bash "$HERMETIC_DIR/kubeconfig.sh")" ;;
  kind) KUBECONFIG="$(bash "$ROOT/ci/kind/kubeconfig.sh")" ;;
  *) echo "usage: addons-smoke.sh [hermetic|kind]" >&2; exit 2 ;;
esac
export KUBECONFIG
# kubectl and the plugin from the hermetic cache ($BIN is first on PATH: common.sh)
command -v kubectl-argo-rollouts >/dev/null || { echo "addons-smoke.sh: kubectl-argo-rollouts not on PATH ($BIN): build.sh rollouts" >&2; exit 1; }
K() { kubectl -n "$NS" "$@"; }
say() { log "addons-smoke: $*"; }
T0=$SECONDS
pf_pid=""
created=""
cleanup() {
  if [ -n "$pf_pid" ]; then kill "$pf_pid" 2>/dev/null || true; wait "$pf_pid" 2>/dev/null || true; fi
  if [ -n "$created" ]; then kubectl delete namespace "$NS" --wait=false >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

# waitfor DESCRIPTION SHOWCMD CMD...: poll CMD until it succeeds; on timeout print SHOWCMD's output.
waitfor() {
  local what="$1" show="$2" deadline=$((SECONDS + T)) out=""; shift 2
  until out="$("$@" 2>&1)"; do
    if [ $SECONDS -ge $deadline ]; then
      echo "addons-smoke.sh: FAILED: $what not within ${T}s; last check said: ${out:-<nothing>}" >&2
      echo "---- live state" >&2
      eval "$show" >&2 || true
      exit 1
    fi
    sleep 1
  done
}
phase_is() { # phase_is WANT: the Rollout's .status.phase (absent status: not yet)
  local st
  st="$(K get rollout web -o 'jsonpath={.status.phase}/{.status.observedGeneration}/{.metadata.generation}')" || return 1
  local phase="${st%%/*}" rest="${st#*/}"
  if [ "$phase" = "$1" ] && [ "${rest%%/*}" = "${rest#*/}" ]; then return 0; fi
  echo "phase=${phase:-<none>} observed/generation=$rest"
  return 1
}
SHOW_RO="K get rollout web -o wide; K get rs,pods -o wide; kubectl argo rollouts -n $NS get rollout web"

# a namespace left by an earlier run of this script is ours: remove it first
if kubectl get namespace "$NS" >/dev/null 2>&1; then
  say "deleting the $NS left by an earlier run"
  kubectl delete namespace "$NS" --wait=true --timeout="${T}s" >/dev/null
fi
kubectl create namespace "$NS" >/dev/null
created=1

# --- 1. Rollout Healthy
rollout() { # rollout REVISION_NOTE
  cat <<YAML
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web, namespace: $NS}
spec:
  replicas: 2
  revisionHistoryLimit: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
        - name: nginx
          image: docker.io/library/nginx:1.27-alpine
          imagePullPolicy: IfNotPresent
          env: [{name: CNPE_REVISION, value: "$1"}]
          ports: [{containerPort: 80}]
          readinessProbe: {httpGet: {path: /, port: 80}, periodSeconds: 2}
  strategy:
    canary:
      steps:
        - setWeight: 50
        - pause: {}
YAML
}
rollout one | K apply -f - >/dev/null
waitfor "Rollout $NS/web Healthy" "$SHOW_RO" phase_is Healthy
say "Rollout $NS/web Healthy (revision one)"

# --- 2. a new pod template: the canary stops at pause {}
rollout two | K apply -f - >/dev/null
waitfor "Rollout $NS/web Paused at its pause step" "$SHOW_RO" phase_is Paused
rc=0
out="$(kubectl argo rollouts -n "$NS" status web --timeout 5s 2>&1)" || rc=$?
last="$(printf '%s\n' "$out" | awk 'NF{l=$0} END{print l}')"
case "$out" in
  *Paused*) say "kubectl argo rollouts status: '$(printf '%s' "$out" | awk 'NF && !/exceeded/{l=$0} END{print l}')' (exit $rc: '$last')" ;;
  *) echo "addons-smoke.sh: FAILED: kubectl argo rollouts status did not report Paused (exit $rc):" >&2; printf '%s\n' "$out" >&2; eval "$SHOW_RO" >&2 || true; exit 1 ;;
esac

# --- 3. promote: Healthy again
kubectl argo rollouts -n "$NS" promote web >/dev/null
waitfor "Rollout $NS/web Healthy after promote" "$SHOW_RO" phase_is Healthy
out="$(kubectl argo rollouts -n "$NS" status web --timeout "${T}s" 2>&1)" ||
  { echo "addons-smoke.sh: FAILED: kubectl argo rollouts status after promote:" >&2; printf '%s\n' "$out" >&2; exit 1; }
say "promoted: Rollout Healthy; kubectl argo rollouts status: '$(printf '%s\n' "$out" | awk 'NF{l=$0} END{print l}')'"

# --- 4. Ingress and HTTPRoute through traefik
K apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Service
metadata: {name: web, namespace: $NS}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 80}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: $NS}
spec:
  ingressClassName: traefik
  rules:
    - host: ingress.cnpe-addons-smoke.test
      http:
        paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: $NS}
spec:
  parentRefs: [{name: web, namespace: cnpe-ingress, sectionName: http}]
  hostnames: [route.cnpe-addons-smoke.test]
  rules:
    - matches: [{path: {type: PathPrefix, value: /}}]
      backendRefs: [{name: web, port: 80}]
YAML
if [ "$FLAVOUR" = kind ]; then
  lport=$((20000 + RANDOM % 20000))
  svc_port="$(kubectl -n cnpe-ingress get svc traefik -o 'jsonpath={.spec.ports[?(@.name=="web")].port}')"
  [ -n "$svc_port" ] || { echo "addons-smoke.sh: Service cnpe-ingress/traefik has no port named web" >&2; exit 1; }
  kubectl -n cnpe-ingress port-forward svc/traefik "$lport:$svc_port" >"$(mktemp)" 2>&1 &
  pf_pid=$!
  URL="http://127.0.0.1:$lport/"
else
  URL="http://127.0.0.1:$WEB_PORT/"
fi
http_200() { # http_200 HOST: traefik answers 200 with nginx's page for that Host
  local code body
  body="$(mktemp)"
  code="$(curl -sS -m 5 -o "$body" -w '%{http_code}' -H "Host: $1" "$URL" 2>&1)" || { rm -f "$body"; echo "curl: $code"; return 1; }
  if [ "$code" = 200 ] && grep -q 'Welcome to nginx' "$body"; then rm -f "$body"; return 0; fi
  echo "HTTP $code: $(head -c 200 "$body")"; rm -f "$body"; return 1
}
SHOW_NET="K get svc,endpointslices,ingress,httproute -o wide; K get httproute web -o jsonpath='{.status}'; echo"
waitfor "Ingress (Host ingress.cnpe-addons-smoke.test) HTTP 200 via traefik" "$SHOW_NET" http_200 ingress.cnpe-addons-smoke.test
say "Ingress class traefik: HTTP 200 'Welcome to nginx' for Host ingress.cnpe-addons-smoke.test via $URL"
waitfor "HTTPRoute (Host route.cnpe-addons-smoke.test) HTTP 200 via traefik" "$SHOW_NET" http_200 route.cnpe-addons-smoke.test
say "HTTPRoute on Gateway cnpe-ingress/web: HTTP 200 'Welcome to nginx' for Host route.cnpe-addons-smoke.test via $URL"

say "PASSED on $FLAVOUR in $((SECONDS - T0))s"
