#!/usr/bin/env bash
# Add-ons of the hermetic cluster: Argo Rollouts (controller on the host) and Traefik v3 (on the
# host; providers kubernetesIngress and kubernetesGateway), built by build.sh parts rollouts and
# traefik. Called by up.sh at its end and by down.sh; works on its own against a running cluster.
# Usage: addons.sh up|down|status
#   up      server-side apply of the Rollouts and Gateway API (standard) CRDs, waits Established;
#           ServiceAccounts + ClusterRoles (Rollouts: upstream's, from install.yaml; Traefik: its
#           documented ingress + gateway rules) and a token kubeconfig for each; starts
#           rollouts-controller and traefik (pids in $RUN/addons.pids, logs in $RUN/logs/);
#           IngressClass `traefik`, GatewayClass `traefik`, Gateway cnpe-ingress/web (listener
#           http on the web entrypoint, routes from All namespaces); waits for the controller's
#           healthz, traefik's ping and the Gateway Accepted. Idempotent.
#   down    stops exactly the processes `up` recorded (SIGTERM, SIGKILL after 15 s), removes its
#           iptables rules. Leaves the cluster's objects (down.sh wipes etcd anyway). Idempotent.
#   status  each process and endpoint; exit 1 if one is not running/answering.
# Env: CNPE_TRAEFIK_PORT (web entrypoint on 127.0.0.1, default 18080), CNPE_TRAEFIK_PING_PORT
# (18081), CNPE_ROLLOUTS_METRICS_PORT (18090), CNPE_ROLLOUTS_HEALTHZ_PORT (18091),
# CNPE_UP_TIMEOUT (s per wait, default 180).
# Exit codes: 0 done; 1 a step failed (the log tail is printed); 2 usage; 3 build outputs missing.
set -euo pipefail
. "$(dirname "$0")/common.sh"
WEB_PORT="${CNPE_TRAEFIK_PORT:-18080}"
PING_PORT="${CNPE_TRAEFIK_PING_PORT:-18081}"
RO_METRICS_PORT="${CNPE_ROLLOUTS_METRICS_PORT:-18090}"
RO_HEALTHZ_PORT="${CNPE_ROLLOUTS_HEALTHZ_PORT:-18091}"
WAIT="${CNPE_UP_TIMEOUT:-180}"
APIDS="$RUN/addons.pids"
RO_MAN="$CACHE/manifests/rollouts-$ROLLOUTS_VERSION"
GW_MAN="$CACHE/manifests/gateway-api-$GATEWAY_API_VERSION"
ING_NS=cnpe-ingress
TRAEFIK_MANIFEST="$HERMETIC_DIR/../addons/traefik.yaml"
RO_NS=argo-rollouts
KCTL() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }
usage() { echo "usage: addons.sh up|down|status" >&2; exit 2; }
[ $# -eq 1 ] || usage

running() { kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
pid_of() { if [ -s "$APIDS" ]; then awk -v n="$1" '$1==n{p=$2} END{print p}' "$APIDS"; fi; }
alive() { local p; p="$(pid_of "$1")"; [ -n "$p" ] && running "$p"; }
fail() { # fail NAME MESSAGE
  echo "addons.sh: $1 failed: $2" >&2
  if [ "$1" != kube-apiserver ] && [ -f "$LOGS/$1.log" ]; then echo "---- last lines of $LOGS/$1.log" >&2; tail -n 40 "$LOGS/$1.log" >&2; fi
  exit 1
}
# iptables: rollouts-controller binds its metrics and healthz listeners to 0.0.0.0 (hard-coded
# upstream): accept them on loopback only, as up.sh does for Argo CD's 8082.
FW_COMMENT=cnpe-hermetic-addons
fw_rules() { # fw_rules add|del
  local port
  for port in "$RO_METRICS_PORT" "$RO_HEALTHZ_PORT"; do
    if [ "$1" = add ]; then
      iptables -C INPUT -p tcp --dport "$port" ! -i lo -m comment --comment "$FW_COMMENT" -j DROP 2>/dev/null ||
        iptables -I INPUT -p tcp --dport "$port" ! -i lo -m comment --comment "$FW_COMMENT" -j DROP
    else
      while iptables -D INPUT -p tcp --dport "$port" ! -i lo -m comment --comment "$FW_COMMENT" -j DROP 2>/dev/null; do :; done
    fi
  done
}
stop_pid() { # stop_pid NAME PID
  local n="$1" p="$2" deadline=$((SECONDS + 15))
  running "$p" || return 0
  kill -TERM "$p" 2>/dev/null || true
  kill -CONT "$p" 2>/dev/null || true
  while [ $SECONDS -lt $deadline ]; do
    running "$p" || { log "stopped $n ($p)"; return 0; }
    sleep 0.25
  done
  kill -KILL "$p" 2>/dev/null || true
  log "killed $n ($p)"
}

do_down() {
  local n p
  for n in traefik rollouts-controller; do
    p="$(pid_of "$n")"
    if [ -n "$p" ]; then stop_pid "$n" "$p"; fi
  done
  fw_rules del
  rm -f "$APIDS"
  log "addons down"
}

http_ok() { curl -fsS -m 5 -o /dev/null "$1"; }
do_status() {
  local rc=0 n
  for n in rollouts-controller traefik; do
    if alive "$n"; then echo "$n: running (pid $(pid_of "$n"))"; else echo "$n: not running"; rc=1; fi
  done
  if http_ok "http://127.0.0.1:$RO_HEALTHZ_PORT/healthz"; then echo "rollouts healthz 127.0.0.1:$RO_HEALTHZ_PORT: ok"; else echo "rollouts healthz 127.0.0.1:$RO_HEALTHZ_PORT: no answer"; rc=1; fi
  if http_ok "http://127.0.0.1:$PING_PORT/ping"; then echo "traefik ping 127.0.0.1:$PING_PORT: ok"; else echo "traefik ping 127.0.0.1:$PING_PORT: no answer"; rc=1; fi
  echo "traefik web entrypoint: http://127.0.0.1:$WEB_PORT (IngressClass traefik, Gateway $ING_NS/web)"
  return $rc
}

# waitfor NAME TIMEOUT DESCRIPTION CMD...: poll CMD (output captured) until it succeeds; a NAME
# that is one of our processes must stay alive. On timeout prints what CMD printed last.
waitfor() {
  local name="$1" t="$2" what="$3" deadline out=""; shift 3
  deadline=$((SECONDS + t))
  until out="$("$@" 2>&1)"; do
    case "$name" in rollouts-controller|traefik) alive "$name" || fail "$name" "process exited";; esac
    if [ $SECONDS -ge $deadline ]; then
      echo "addons.sh: $what: not after ${t}s; last: ${out:-<nothing>}" >&2
      fail "$name" "$what"
    fi
    sleep 0.5
  done
}
# crd_established CRD: Established=True; a CRD with no status yet is "not yet" (no kubectl wait).
crd_established() {
  local st
  st="$(KCTL get crd "$1" -o 'jsonpath={.status.conditions[?(@.type=="Established")].status}')" || return 1
  [ "$st" = True ] || { echo "CRD $1 Established='${st:-<no status>}'"; return 1; }
}
gateway_accepted() {
  local st
  st="$(KCTL -n "$ING_NS" get gateway web -o 'jsonpath={range .status.conditions[*]}{.type}={.status} {end}')" || return 1
  case " $st" in *" Accepted=True "*) ;; *) echo "Gateway $ING_NS/web conditions: '${st:-<no status>}'"; return 1 ;; esac
}
# token_kubeconfig SA NAMESPACE FILE: a kubeconfig that authenticates as the ServiceAccount
# (a bound token, 1 year; the cluster lives as long as one up.sh..down.sh).
token_kubeconfig() {
  local sa="$1" ns="$2" f="$3" token k
  token="$(KCTL -n "$ns" create token "$sa" --duration 8760h)"
  rm -f "$f"
  k=("$BIN/kubectl" --kubeconfig "$f")
  "${k[@]}" config set-cluster cnpe --server="https://$NODE_IP:6443" --certificate-authority="$RUN/pki/ca.crt" --embed-certs >/dev/null
  "${k[@]}" config set-credentials "$sa" --token="$token" >/dev/null
  "${k[@]}" config set-context cnpe --cluster=cnpe --user="$sa" --namespace="$ns" >/dev/null
  "${k[@]}" config use-context cnpe >/dev/null
  chmod 600 "$f"
}
start() { # start NAME CMD...: own session, pid recorded in $APIDS
  local name="$1"; shift
  setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
  echo "$name $!" >>"$APIDS"
  log "started $name (pid $!)"
}

do_up() {
  local missing=() f
  for f in rollouts-controller kubectl-argo-rollouts traefik kubectl; do [ -x "$BIN/$f" ] || missing+=("$BIN/$f"); done
  for f in "$RO_MAN/install.yaml" "$RO_MAN/rollout-crd.yaml" "$GW_MAN/gateway.networking.k8s.io_httproutes.yaml"; do
    [ -s "$f" ] || missing+=("$f")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "addons.sh: build outputs missing, run ci/hermetic/build.sh rollouts traefik:" >&2
    printf '  %s\n' "${missing[@]}" >&2
    exit 3
  fi
  KCTL get --raw /readyz >/dev/null || { echo "addons.sh: the hermetic API server does not answer (up.sh first)" >&2; exit 1; }
  mkdir -p "$LOGS"
  local t0=$SECONDS

  # CRDs (server-side: the Rollout CRD is large)
  local crds=() c
  mapfile -t crds < <(printf '%s\n' "$RO_MAN"/*-crd.yaml "$GW_MAN"/*.yaml)
  local fargs=()
  for c in "${crds[@]}"; do fargs+=(-f "$c"); done
  local names
  names="$(KCTL apply --server-side --force-conflicts "${fargs[@]}" -o name)"
  for c in $names; do
    case "$c" in customresourcedefinition.*) ;; *) continue ;; esac
    waitfor kube-apiserver 60 "$c Established" crd_established "${c#*/}"
  done
  log "CRDs Established (Rollouts $ROLLOUTS_VERSION, Gateway API $GATEWAY_API_VERSION standard)"

  # Rollouts: upstream's ServiceAccount, ClusterRoles and binding from install.yaml (not its
  # Deployment/Service: the controller runs on the host), in namespace argo-rollouts.
  KCTL create namespace "$RO_NS" --dry-run=client -o yaml | KCTL apply -f - >/dev/null
  python3 - "$RO_MAN/install.yaml" >"$RUN/addons-rollouts-rbac.yaml" <<'PY'
import sys, yaml
keep = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Secret"}
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d.get("kind") in keep]
if not any(d["kind"] == "ClusterRoleBinding" for d in docs):
    sys.exit("install.yaml has no ClusterRoleBinding")
yaml.safe_dump_all(docs, sys.stdout)
PY
  KCTL -n "$RO_NS" apply -f "$RUN/addons-rollouts-rbac.yaml" >/dev/null
  # Traefik: namespace, ServiceAccount, ClusterRole, IngressClass, GatewayClass, Gateway
  # (ci/addons/traefik.yaml, shared with ci/kind/up.sh), its listener on our web port.
  sed "s/@TRAEFIK_WEB_PORT@/$WEB_PORT/g" "$TRAEFIK_MANIFEST" | KCTL apply -f - >/dev/null

  fw_rules add
  if alive rollouts-controller; then log "rollouts-controller already running (pid $(pid_of rollouts-controller))"; else
    token_kubeconfig argo-rollouts "$RO_NS" "$RUN/rollouts.kubeconfig"
    # POD_NAMESPACE: where upstream's controller reads its ConfigMap and notification Secret
    start rollouts-controller env -u KUBERNETES_SERVICE_HOST -u KUBERNETES_SERVICE_PORT POD_NAMESPACE="$RO_NS" \
      "$BIN/rollouts-controller" --kubeconfig "$RUN/rollouts.kubeconfig" --leader-elect=false \
      --metricsPort "$RO_METRICS_PORT" --healthzPort "$RO_HEALTHZ_PORT" --loglevel info --logformat text
  fi
  if alive traefik; then log "traefik already running (pid $(pid_of traefik))"; else
    token_kubeconfig traefik "$ING_NS" "$RUN/traefik.kubeconfig"
    # KUBECONFIG makes both providers use the ServiceAccount's kubeconfig (cluster-external client)
    start traefik env -u KUBERNETES_SERVICE_HOST -u KUBERNETES_SERVICE_PORT KUBECONFIG="$RUN/traefik.kubeconfig" \
      "$BIN/traefik" --global.checknewversion=false --global.sendanonymoususage=false \
      --entrypoints.web.address="127.0.0.1:$WEB_PORT" --entrypoints.traefik.address="127.0.0.1:$PING_PORT" \
      --ping=true --ping.entrypoint=traefik \
      --providers.kubernetesingress=true --providers.kubernetesingress.ingressendpoint.ip=127.0.0.1 \
      --providers.kubernetesgateway=true --providers.kubernetesgateway.statusaddress.ip=127.0.0.1 \
      --log.level=INFO
  fi
  waitfor rollouts-controller "$WAIT" "rollouts-controller healthz on 127.0.0.1:$RO_HEALTHZ_PORT" http_ok "http://127.0.0.1:$RO_HEALTHZ_PORT/healthz"
  waitfor rollouts-controller "$WAIT" "rollouts-controller metrics on 127.0.0.1:$RO_METRICS_PORT" http_ok "http://127.0.0.1:$RO_METRICS_PORT/metrics"
  waitfor traefik "$WAIT" "traefik ping on 127.0.0.1:$PING_PORT" http_ok "http://127.0.0.1:$PING_PORT/ping"
  waitfor traefik "$WAIT" "Gateway $ING_NS/web Accepted" gateway_accepted
  log "addons up in $((SECONDS - t0))s: rollouts-controller (healthz :$RO_HEALTHZ_PORT), traefik web http://127.0.0.1:$WEB_PORT, IngressClass traefik, Gateway $ING_NS/web"
}

case "$1" in
  up) do_up ;;
  down) do_down ;;
  status) do_status ;;
  *) usage ;;
esac
