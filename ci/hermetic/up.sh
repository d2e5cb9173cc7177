#!/usr/bin/env bash
# Starts the hermetic single-node Kubernetes + Argo CD cluster built by build.sh.
# Exit codes: 0 up; 3 build outputs missing (run build.sh); 1 a component failed (log tail shown).
# Env: CNPE_HERMETIC_CACHE, CNPE_HERMETIC_RUN, CNPE_NODE_IP, CNPE_NODE_NAME, CNPE_BARE_REPO,
#      CNPE_REDIS_PORT, CNPE_ARGOCD_RECONCILIATION (e.g. 180s), CNPE_UP_TIMEOUT (s, per wait),
#      CNPE_UP_SKIP_ADDONS=1 (no addons.sh up: Argo Rollouts and Traefik not started).
set -euo pipefail
. "$(dirname "$0")/common.sh"
T0=$(date +%s)
REDIS_PORT="${CNPE_REDIS_PORT:-6379}"
WAIT="${CNPE_UP_TIMEOUT:-180}"
PKI="$RUN/pki"
CTRD_SOCK=/run/cnpe-containerd/containerd.sock
KCTL() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }

# ------------------------------------------------------------------ preflight
missing=()
ARGO_BINS=argocd; [ "${CNPE_UP_SKIP_ARGOCD:-}" = 1 ] && ARGO_BINS=
ADDON_BINS="rollouts-controller kubectl-argo-rollouts traefik"   # build.sh rollouts traefik (addons.sh)
[ "${CNPE_UP_SKIP_ADDONS:-}" = 1 ] && ADDON_BINS=
for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl etcd $ARGO_BINS $ADDON_BINS; do
  [ -x "$BIN/$b" ] || missing+=("$BIN/$b")
done
ARGO_CRDS="$CACHE/manifests/argocd-$ARGOCD_VERSION"
ARGO_LIBEXEC="$CACHE/libexec/argocd-$ARGOCD_VERSION"   # git-verify-wrapper.sh, gpg-wrapper.sh (build.sh)
for f in "$IMAGES/pause.tar" "$IMAGES/nginx.tar" "$ARGO_CRDS/application-crd.yaml" "$ARGO_CRDS/appproject-crd.yaml"; do [ -s "$f" ] || missing+=("$f"); done
if [ -n "$ARGO_BINS" ]; then
  for f in git-verify-wrapper.sh gpg-wrapper.sh; do [ -x "$ARGO_LIBEXEC/$f" ] || missing+=("$ARGO_LIBEXEC/$f"); done
fi
for c in containerd runc redis-server git openssl ctr; do command -v "$c" >/dev/null || missing+=("$c (apt)"); done
[ -x /usr/lib/cni/bridge ] || missing+=("/usr/lib/cni/bridge (apt containernetworking-plugins)")
if [ ${#missing[@]} -gt 0 ]; then
  echo "up.sh: build outputs missing, run ci/hermetic/build.sh first:" >&2
  printf '  %s\n' "${missing[@]}" >&2
  exit 3
fi
[ "$(id -u)" = 0 ] || { echo "up.sh: must run as root" >&2; exit 1; }

running() { kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
# A component paused by SIGSTOP (a fault trial's hung API server whose test process was killed
# before it could continue it) is alive but serves nothing: that cluster is not "already up".
serving() { running "$1" && case "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" in T|t) false ;; esac; }
pid_alive_all() {
  [ -s "$PIDFILE" ] || return 1
  local n p
  while read -r n p; do
    serving "$p" || { log "$n (pid $p) is not running or is stopped: restarting the cluster"; return 1; }
  done < "$PIDFILE"
}
if pid_alive_all && KCTL get --raw /readyz >/dev/null 2>&1; then
  log "cluster already up (pids in $PIDFILE)"
  if [ "${CNPE_UP_SKIP_ADDONS:-}" != 1 ] && [ "${CNPE_UP_SKIP_ARGOCD:-}" != 1 ]; then
    bash "$HERMETIC_DIR/addons.sh" up >&2 || { rc=$?; echo "up.sh: addons.sh up failed (exit $rc)" >&2; exit "$rc"; }
  fi
  echo "$KUBECONFIG_ADMIN"; exit 0
fi
# anything half-started or stale: clean first
bash "$HERMETIC_DIR/down.sh" >/dev/null 2>&1 || true
mkdir -p "$RUN" "$PKI"
rm -rf "$LOGS.prev"; [ -d "$LOGS" ] && mv "$LOGS" "$LOGS.prev"   # previous run's logs kept once
mkdir -p "$LOGS" "$RUN/argv"
rm -f "$RUN/argv/"*
: > "$PIDFILE"

fail() { # fail COMPONENT MESSAGE
  echo "up.sh: $1 failed: $2" >&2
  [ -f "$LOGS/$1.log" ] && { echo "---- last lines of $LOGS/$1.log" >&2; tail -n 40 "$LOGS/$1.log" >&2; }
  exit 1
}
start() { # start NAME CMD... : background daemon, own session, pid recorded
  local name="$1"; shift
  # the command line, NUL-separated, so component.sh can restart exactly this (fault tests)
  printf '%s\0' "$@" > "$RUN/argv/$name"
  setsid "$@" >>"$LOGS/$name.log" 2>&1 < /dev/null &
  echo "$name $!" >> "$PIDFILE"
  log "started $name (pid $!)"
}
alive() { local p; p=$(awk -v n="$1" '$1==n{print $2}' "$PIDFILE"); [ -n "$p" ] && running "$p"; }
waitfor() { # waitfor NAME TIMEOUT CMD... : poll CMD until it succeeds; NAME must stay alive
  local name="$1" t="$2" deadline; shift 2
  deadline=$((SECONDS + t))
  until "$@" >/dev/null 2>&1; do
    alive "$name" || fail "$name" "process exited"
    [ $SECONDS -lt $deadline ] || fail "$name" "not ready after ${t}s"
    sleep 0.5
  done
}

# ------------------------------------------------------------------ host prep
sysctl -qw net.ipv4.ip_forward=1
if [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; then
  sysctl -qw net.bridge.bridge-nf-call-iptables=1 || true
fi
mount --make-rshared /
# Argo CD's controller hard-codes its metrics listener to 0.0.0.0: accept it on loopback only
iptables -C INPUT -p tcp --dport 8082 ! -i lo -m comment --comment cnpe-hermetic -j DROP 2>/dev/null ||
  iptables -I INPUT -p tcp --dport 8082 ! -i lo -m comment --comment cnpe-hermetic -j DROP
HOSTIF=cnpe-node0
if ! ip link show "$HOSTIF" >/dev/null 2>&1; then
  # dummy when the kernel has it, else an empty bridge (same effect: a local /32 that is not loopback)
  ip link add "$HOSTIF" type dummy 2>/dev/null || ip link add "$HOSTIF" type bridge
fi
# captured, never `ip ... | grep -q`: under pipefail grep -q exiting at the first match can kill ip
# with SIGPIPE, the pipeline fails, and the add then runs on an address that is already there
hostif_addrs="$(ip -o -4 addr show dev "$HOSTIF")"
case "$hostif_addrs" in
  *" $NODE_IP/"*) ;;
  *) ip addr add "$NODE_IP/32" dev "$HOSTIF" ;;
esac
ip link set "$HOSTIF" up
grep -qE '^127\.0\.0\.1\s+gitd\.gitsrv\.svc\.cluster\.local(\s|$)' /etc/hosts ||
  echo '127.0.0.1 gitd.gitsrv.svc.cluster.local' >> /etc/hosts
grep -qE "\s$NODE_NAME(\s|$)" /etc/hosts || echo "$NODE_IP $NODE_NAME" >> /etc/hosts

# ------------------------------------------------------------------ certificates
cert() { # cert NAME SUBJ [SAN]
  local n="$1" subj="$2" san="${3:-}"
  [ -s "$PKI/$n.crt" ] && return
  openssl genrsa -out "$PKI/$n.key" 2048 2>/dev/null
  openssl req -new -key "$PKI/$n.key" -subj "$subj" -out "$PKI/$n.csr" 2>/dev/null
  local ext="$PKI/$n.ext"
  { echo "basicConstraints=CA:FALSE"; echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=serverAuth,clientAuth"; [ -n "$san" ] && echo "subjectAltName=$san"; } > "$ext"
  openssl x509 -req -in "$PKI/$n.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$ext" -out "$PKI/$n.crt" 2>/dev/null
  rm -f "$PKI/$n.csr" "$ext"
}
if [ ! -s "$PKI/ca.crt" ]; then
  openssl genrsa -out "$PKI/ca.key" 2048 2>/dev/null
  openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=cnpe-hermetic-ca" -days 3650 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -out "$PKI/ca.crt" 2>/dev/null
fi
cert apiserver "/CN=kube-apiserver" "IP:127.0.0.1,IP:$NODE_IP,IP:$SERVICE_IP1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert admin "/O=system:masters/CN=kubernetes-admin"
cert controller-manager "/CN=system:kube-controller-manager"
cert scheduler "/CN=system:kube-scheduler"
cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME"
cert kubelet-serving "/CN=$NODE_NAME" "IP:$NODE_IP,DNS:$NODE_NAME"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
[ -s "$PKI/sa.key" ] || { openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null; openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null; }
chmod 600 "$PKI"/*.key

APISERVER="https://$NODE_IP:6443"
kubeconfig() { # kubeconfig FILE CERTNAME [NAMESPACE]
  local f="$1" c="$2" ns="${3:-default}"
  [ -s "$f" ] && return
  local k="$BIN/kubectl --kubeconfig $f"
  $k config set-cluster cnpe --server="$APISERVER" --certificate-authority="$PKI/ca.crt" --embed-certs >/dev/null
  $k config set-credentials "$c" --client-certificate="$PKI/$c.crt" --client-key="$PKI/$c.key" --embed-certs >/dev/null
  $k config set-context cnpe --cluster=cnpe --user="$c" --namespace="$ns" >/dev/null
  $k config use-context cnpe >/dev/null
  chmod 600 "$f"
}
kubeconfig "$KUBECONFIG_ADMIN" admin
kubeconfig "$RUN/argocd.kubeconfig" admin argocd
kubeconfig "$RUN/controller-manager.kubeconfig" controller-manager
kubeconfig "$RUN/scheduler.kubeconfig" scheduler
kubeconfig "$RUN/kubelet.kubeconfig" kubelet

# ------------------------------------------------------------------ etcd
mkdir -p "$RUN/etcd"
start etcd "$BIN/etcd" --name cnpe --data-dir "$RUN/etcd" \
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster cnpe=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381 \
  --quota-backend-bytes 2147483648 --log-level warn
waitfor etcd 60 curl -fsS http://127.0.0.1:2381/health

# ------------------------------------------------------------------ control plane
start kube-apiserver "$BIN/kube-apiserver" --bind-address="$NODE_IP" --advertise-address="$NODE_IP" \
  --secure-port=6443 --etcd-servers=http://127.0.0.1:2379 \
  --service-cluster-ip-range="$SERVICE_CIDR" --allow-privileged=true \
  --authorization-mode=Node,RBAC --client-ca-file="$PKI/ca.crt" \
  --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
  --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority="$PKI/ca.crt" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
  --api-audiences=https://kubernetes.default.svc.cluster.local \
  --profiling=false --v=1
waitfor kube-apiserver "$WAIT" KCTL get --raw /readyz

start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig="$RUN/controller-manager.kubeconfig" \
  --authentication-kubeconfig="$RUN/controller-manager.kubeconfig" --authorization-kubeconfig="$RUN/controller-manager.kubeconfig" \
  --bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
  --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
  --root-ca-file="$PKI/ca.crt" --service-account-private-key-file="$PKI/sa.key" \
  --service-cluster-ip-range="$SERVICE_CIDR" --profiling=false --v=1
start kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$RUN/scheduler.kubeconfig" \
  --authentication-kubeconfig="$RUN/scheduler.kubeconfig" --authorization-kubeconfig="$RUN/scheduler.kubeconfig" \
  --bind-address=127.0.0.1 --leader-elect=false --profiling=false --v=1

# ------------------------------------------------------------------ CNI + containerd
mkdir -p "$RUN/cni/net.d" /run/cnpe-containerd "$RUN/containerd"
cat > "$RUN/cni/net.d/10-cnpe.conflist" <<JSON
{"cniVersion":"1.0.0","name":"cnpe","plugins":[
 {"type":"bridge","bridge":"cni0","isGateway":true,"ipMasq":false,"hairpinMode":true,
  "ipam":{"type":"host-local","ranges":[[{"subnet":"$POD_CIDR"}]],"routes":[{"dst":"0.0.0.0/0"}],
          "dataDir":"$RUN/cni/ipam"}}]}
JSON
cat > "$RUN/containerd.toml" <<TOML
version = 2
root = "$RUN/containerd"
state = "/run/cnpe-containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$CTRD_SOCK"
[ttrpc]
  address = "/run/cnpe-containerd/containerd.sock.ttrpc"
[debug]
  address = "/run/cnpe-containerd/debug.sock"
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10-cnpe"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  # this VM forbids lowering oom_score_adj (the sandbox default is -998): clamp to ours
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$RUN/cni/net.d"
TOML
start containerd containerd --config "$RUN/containerd.toml"
waitfor containerd 60 ctr -a "$CTRD_SOCK" version
for img in pause nginx; do
  ctr -a "$CTRD_SOCK" -n k8s.io images import "$IMAGES/$img.tar" >>"$LOGS/containerd.log" 2>&1 ||
    fail containerd "image import of $IMAGES/$img.tar"
done
log "images imported"

# ------------------------------------------------------------------ kubelet
mkdir -p /var/lib/kubelet
cat > "$RUN/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$CTRD_SOCK
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
serializeImagePulls: false
staticPodPath: ""
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
maxPods: 110
YAML
start kubelet "$BIN/kubelet" --config="$RUN/kubelet.yaml" --kubeconfig="$RUN/kubelet.kubeconfig" \
  --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --v=1
waitfor kubelet "$WAIT" curl -fsS http://127.0.0.1:10248/healthz
node_ready() { [ "$(KCTL get node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
waitfor kubelet "$WAIT" node_ready
log "node $NODE_NAME Ready"

# ------------------------------------------------------------------ redis + git daemon
mkdir -p "$RUN/redis"
start redis redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save '' --appendonly no \
  --dir "$RUN/redis" --protected-mode no --daemonize no
waitfor redis 30 redis-cli -p "$REDIS_PORT" ping
mkdir -p "$BARE_BASE"
start git-daemon git daemon --export-all --reuseaddr --base-path="$BARE_BASE" \
  --listen=127.0.0.1 --port=9418 --informative-errors
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
waitfor git-daemon 30 port_open 127.0.0.1 9418

# ------------------------------------------------------------------ Argo CD objects
if [ "${CNPE_UP_SKIP_ARGOCD:-}" = 1 ]; then log "CNPE_UP_SKIP_ARGOCD=1: stopping before Argo CD"; echo "$KUBECONFIG_ADMIN"; exit 0; fi
KCTL create namespace argocd --dry-run=client -o yaml | KCTL apply -f - >/dev/null
KCTL create namespace cnpe-shop --dry-run=client -o yaml | KCTL apply -f - >/dev/null
KCTL apply --server-side --force-conflicts -f "$ARGO_CRDS/application-crd.yaml" \
  -f "$ARGO_CRDS/appproject-crd.yaml" >/dev/null
# Not `kubectl wait --for=condition=Established`: right after the apply the CRD can have no
# status at all and kubectl wait fails (".status.conditions accessor error: <nil>"). Poll the
# condition, treating an absent status as not yet.
crd_established() { [ "$(KCTL get crd "$1" -o 'jsonpath={.status.conditions[?(@.type=="Established")].status}')" = True ]; }
for crd in applications.argoproj.io appprojects.argoproj.io; do
  waitfor kube-apiserver 60 crd_established "$crd"
done
SECRETKEY="$(openssl rand -base64 32)"
KCTL apply -f - >/dev/null <<YAML
apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cm, namespace: argocd, labels: {app.kubernetes.io/name: argocd-cm, app.kubernetes.io/part-of: argocd}}
data:
  timeout.reconciliation: "${CNPE_ARGOCD_RECONCILIATION:-180s}"
---
apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cmd-params-cm, namespace: argocd, labels: {app.kubernetes.io/name: argocd-cmd-params-cm, app.kubernetes.io/part-of: argocd}}
data: {}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-rbac-cm, namespace: argocd, labels: {app.kubernetes.io/name: argocd-rbac-cm, app.kubernetes.io/part-of: argocd}}
data: {}
---
apiVersion: v1
kind: Secret
metadata: {name: argocd-secret, namespace: argocd, labels: {app.kubernetes.io/name: argocd-secret, app.kubernetes.io/part-of: argocd}}
type: Opaque
stringData:
  server.secretkey: "$SECRETKEY"
---
apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata: {name: default, namespace: argocd}
spec:
  sourceRepos: ['*']
  destinations: [{server: '*', namespace: '*'}]
  clusterResourceWhitelist: [{group: '*', kind: '*'}]
YAML
log "argocd objects applied"

# ------------------------------------------------------------------ Argo CD processes
# The repo-server execs git-verify-wrapper.sh by name for EVERY manifest generation (v3.5.2
# calls VerifyCommitSignature unconditionally, even with ARGOCD_GPG_ENABLED=false); when the exec
# fails it answers gRPC "permission denied". So its PATH starts with the helper scripts build.sh
# copied from the argo-cd module. The ask-pass socket and GnuPG home default to /tmp and /app:
# both moved under $RUN.
ARGO_ENV=(env ARGOCD_FAKE_IN_CLUSTER=true KUBECONFIG="$RUN/argocd.kubeconfig" ARGOCD_GPG_ENABLED=false
          TMPDIR="$RUN/argocd-tmp" HOME="$RUN/argocd-home" ARGOCD_CONTROLLER_REPLICAS=1
          PATH="$ARGO_LIBEXEC:$PATH" ARGOCD_GNUPGHOME="$RUN/argocd-home/gnupg"
          ARGOCD_ASK_PASS_SOCK="$RUN/argocd-tmp/reposerver-ask-pass.sock")
mkdir -p "$RUN/argocd-tmp" "$RUN/argocd-home/gnupg"
chmod 700 "$RUN/argocd-home/gnupg"
# --client-ca-path "": v3.5 defaults it to /app/config/reposerver/mtls/client-ca.crt and refuses
# --disable-tls while it is set.
start argocd-repo-server "${ARGO_ENV[@]}" ARGOCD_BINARY_NAME=argocd-repo-server "$BIN/argocd" \
  --address 127.0.0.1 --port 8081 --metrics-address 127.0.0.1 --metrics-port 8084 \
  --disable-tls --client-ca-path "" --redis "127.0.0.1:$REDIS_PORT" --logformat text --loglevel info
waitfor argocd-repo-server 90 curl -fsS http://127.0.0.1:8084/healthz
start argocd-application-controller "${ARGO_ENV[@]}" ARGOCD_BINARY_NAME=argocd-application-controller "$BIN/argocd" \
  --namespace argocd --repo-server 127.0.0.1:8081 --repo-server-plaintext \
  --redis "127.0.0.1:$REDIS_PORT" --metrics-port 8082 --status-processors 4 --operation-processors 2 \
  --self-heal-timeout-seconds 5 --logformat text --loglevel info
waitfor argocd-application-controller 90 curl -fsS http://127.0.0.1:8082/healthz
log "argocd up"

# ------------------------------------------------------------------ add-ons (Argo Rollouts, Traefik)
# addons.sh keeps its own pid file ($RUN/addons.pids); its exit code (3: not built) is ours.
if [ "${CNPE_UP_SKIP_ADDONS:-}" != 1 ]; then
  bash "$HERMETIC_DIR/addons.sh" up >&2 || { rc=$?; echo "up.sh: addons.sh up failed (exit $rc)" >&2; exit "$rc"; }
fi

log "cluster up in $(( $(date +%s) - T0 ))s; kubeconfig: $KUBECONFIG_ADMIN; pids: $PIDFILE; logs: $LOGS"
echo "$KUBECONFIG_ADMIN"
