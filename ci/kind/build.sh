#!/usr/bin/env bash
# Builds everything the offline kind path needs into $CNPE_KIND_CACHE (default
# /var/cache/cnpe-kind), from Debian packages and Go modules only: no registry is contacted.
# Idempotent: a part whose output exists is skipped; each part is timed.
# Usage: build.sh [part...]   parts: host hermetic gobin rootfs images addons node (default: all, in order)
#   host      Debian podman/netavark/mmdebstrap/umoci/skopeo; podman settings for this VM
#             ($KIND_CACHE/containers.conf, used through CONTAINERS_CONF); the `kind` network.
#   hermetic  ci/hermetic/build.sh's k8s etcd argocd pause nginx rollouts traefik parts (shared).
#   gobin     kind, kubeadm, kube-proxy, coredns (same GOMODCACHE/GOCACHE as ci/hermetic).
#   rootfs    Debian 12 root filesystems (mmdebstrap): the node, and one base for the app images.
#   images    pod images as docker-archive tars (umoci + skopeo): control plane, kube-proxy, etcd,
#             coredns, pause (from ci/hermetic), argocd, redis, gitd, nginx (from ci/hermetic).
#   addons    images of Argo Rollouts' controller and Traefik (from ci/hermetic's binaries).
#   node      the kind node image (Debian 12 + kind's base files + the k8s images), into podman.
#   gate      (only when named) the gate's image, cnpe.local/cnpe-gate:0.1.0, from cargo's binaries.
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ROOT="$(cd "$KIND_DIR/../.." && pwd)"
HERMETIC="$ROOT/ci/hermetic"
# K8S_VERSION, ETCD_VERSION, ARGOCD_VERSION of the hermetic cluster: the binaries are shared.
K8S_VERSION="$(sed -n 's/^K8S_VERSION=//p' "$HERMETIC/versions.env")"
ETCD_VERSION="$(sed -n 's/^ETCD_VERSION=//p' "$HERMETIC/versions.env")"
HERMETIC_ARGOCD="$(sed -n 's/^ARGOCD_VERSION=//p' "$HERMETIC/versions.env")"
# The add-ons are the hermetic cluster's binaries too (ci/hermetic/versions.env pins them).
ROLLOUTS_VERSION="$(sed -n 's/^ROLLOUTS_VERSION=//p' "$HERMETIC/versions.env")"
TRAEFIK_VERSION="$(sed -n 's/^TRAEFIK_VERSION=//p' "$HERMETIC/versions.env")"
[[ $HERMETIC_ARGOCD == "$ARGOCD_VERSION" ]] \
  || die "ci/hermetic pins Argo CD $HERMETIC_ARGOCD but ci/kind pins $ARGOCD_VERSION: they must agree"
HCACHE="${CNPE_HERMETIC_CACHE:-/var/cache/cnpe-hermetic}"
HBIN="$HCACHE/bin"
export GOMODCACHE="$HCACHE/gomod" GOCACHE="$HCACHE/gocache"
export GOFLAGS="-mod=mod -buildvcs=false" GOTOOLCHAIN="${GOTOOLCHAIN:-local}" CGO_ENABLED=0
PATH="/usr/local/go/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"
BIN="$KIND_CACHE/bin"
IMAGES="$KIND_CACHE/images"
ROOTFS="$KIND_CACHE/rootfs"
OCI="$KIND_CACHE/oci"
mkdir -p "$BIN" "$IMAGES" "$ROOTFS"

declare -A TOOK
timed() { # timed NAME FUNC
  local name="$1" t0
  t0=$(date +%s)
  "$2"
  TOOK[$name]=$(($(date +%s) - t0))
  log "part $name took ${TOOK[$name]}s"
}

# moddir MODULE@VERSION: the module's source in the Go module cache (downloaded if missing).
moddir() {
  local dir
  dir="$(cd / && go mod download -json "$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [[ -n $dir && -d $dir ]] || die "module $1 is not in the Go module cache (go mod download failed)"
  printf '%s\n' "$dir"
}

# ---------------------------------------------------------------- host
HOST_PKGS=(podman netavark aardvark-dns conmon crun runc golang-github-containers-common
           mmdebstrap umoci skopeo fuse-overlayfs jq)
# The kind network: away from podman's 10.88.0.0/16 default, which the hermetic cni0 uses.
KIND_SUBNET="${CNPE_KIND_SUBNET:-10.250.0.0/24}"
part_host() {
  local missing=() p s
  for p in "${HOST_PKGS[@]}"; do
    s="$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)"
    [[ $s == "install ok installed" ]] || missing+=("$p")
  done
  if ((${#missing[@]})); then
    log "host: installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
      --no-install-recommends "${missing[@]}" >/dev/null \
      || { apt-get -o DPkg::Lock::Timeout=600 update -qq \
        && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
          --no-install-recommends "${missing[@]}" >/dev/null; }
  fi
  # kind mounts /lib/modules into every node; podman does not create a missing bind source and
  # this kernel has no loadable modules.
  mkdir -p /lib/modules
  # podman on this VM: PID 1 is not systemd (cgroupfs, file events); no CAP_SYS_RESOURCE, so a
  # container may not ask for rlimits above the hard limits in force (runc: "error setting rlimit
  # type 7: operation not permitted"); kind's nodes run many processes (no pids limit); the
  # default network is moved off 10.88.0.0/16 (the hermetic cluster's pod range).
  local nofile nproc pidmax conf="$KIND_CACHE/containers.conf"
  nofile="$(ulimit -Hn)"
  nproc="$(ulimit -Hu)"
  [[ $nofile == unlimited ]] && nofile=1048576
  [[ $nproc == unlimited ]] && nproc=4194304
  # measured here: conmon (which starts runc) runs with RLIMIT_NPROC lowered to kernel.pid_max
  pidmax="$(cat /proc/sys/kernel/pid_max)"
  ((nproc <= pidmax)) || nproc=$pidmax
  cat >"$conf.tmp" <<EOF
# Written by ci/kind/build.sh (part host); used through CONTAINERS_CONF by ci/kind/*.sh.
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
pids_limit = 0

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"

[network]
default_subnet = "10.250.255.0/24"
default_subnet_pools = [{"base" = "10.250.128.0/17", "size" = 24}]
EOF
  mv "$conf.tmp" "$conf"
  export CONTAINERS_CONF="$conf"
  if ! podman network exists kind; then
    log "host: creating podman network kind ($KIND_SUBNET)"
    podman network create --subnet "$KIND_SUBNET" kind >/dev/null
  fi
  s="$(podman network inspect kind --format '{{range .Subnets}}{{.Subnet}} {{end}}')"
  [[ $s == "$KIND_SUBNET " ]] || die "podman network kind has subnets '$s', not $KIND_SUBNET: podman network rm kind"
}

# ---------------------------------------------------------------- hermetic parts (shared)
part_hermetic() {
  # Idempotent and cached there; builds only what is missing.
  bash "$HERMETIC/build.sh" debs k8s etcd argocd pause nginx rollouts traefik
  [[ -e $HBIN/.argocd-$ARGOCD_VERSION ]] || die "ci/hermetic did not build argocd $ARGOCD_VERSION"
  [[ -e $HBIN/.rollouts-$ROLLOUTS_VERSION ]] || die "ci/hermetic did not build rollouts $ROLLOUTS_VERSION"
  [[ -e $HBIN/.traefik-$TRAEFIK_VERSION ]] || die "ci/hermetic did not build traefik $TRAEFIK_VERSION"
}

# ---------------------------------------------------------------- Go binaries
k8s_ldflags() { # the same -X flags as ci/hermetic/build.sh, so versions print the same way
  local major minor f="-s -w" p
  major=${K8S_VERSION#v}
  major=${major%%.*}
  minor=${K8S_VERSION#v*.}
  minor=${minor%%.*}
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor"
    f+=" -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.gitTreeState=clean"
    f+=" -X $p.buildDate=2026-01-01T00:00:00Z"
  done
  printf '%s\n' "$f"
}
part_gobin() {
  local stamp="$BIN/.gobin-$KIND_VERSION-$K8S_VERSION-$KIND_OFFLINE_COREDNS_VERSION"
  if [[ -e $stamp ]]; then log "gobin: built, skip"; return; fi
  log "gobin: kind $KIND_VERSION"
  GOBIN="$BIN" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kind@$KIND_VERSION"
  log "gobin: coredns $KIND_OFFLINE_COREDNS_VERSION"
  GOBIN="$BIN" go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@$KIND_OFFLINE_COREDNS_VERSION"
  # kubeadm and kube-proxy from the hermetic wrapper module (a copy: -mod=mod may add to it).
  log "gobin: kubeadm, kube-proxy $K8S_VERSION"
  local mod="$KIND_CACHE/modules/kubernetes"
  mkdir -p "$mod"
  cp "$HERMETIC/modules/kubernetes/go.mod" "$HERMETIC/modules/kubernetes/go.sum" \
    "$HERMETIC/modules/kubernetes/tools.go" "$mod/"
  (cd "$mod" && go build -trimpath -tags selinux,notest -ldflags "$(k8s_ldflags)" -o "$BIN/" \
    k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/cmd/kube-proxy)
  "$BIN/kind" version
  "$BIN/kubeadm" version -o short
  touch "$stamp"
}

# ---------------------------------------------------------------- root filesystems
# The node: kind's base image package set (images/base/Dockerfile) on Debian 12, whose systemd 252
# still runs on cgroup v1 (kind's trixie base has systemd 257), with Debian's containerd, runc and
# CNI plugins instead of kind's source builds.
NODE_PKGS=(systemd systemd-sysv dbus conntrack iptables nftables iproute2 ethtool util-linux mount
           kmod libseccomp2 pigz e2fsprogs bash ca-certificates jq procps containerd runc
           containernetworking-plugins)
# One base for the app images (argocd, redis, gitd, kube-proxy): same layer blob in each.
APPS_PKGS=(git tini ca-certificates gpg gpg-agent redis-server nftables iptables conntrack)
debstrap() { # debstrap DIR PKG...
  local dir="$1"
  shift
  rm -rf "$dir.tmp"
  mmdebstrap --quiet --variant=minbase --include="$(IFS=,; echo "$*")" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    bookworm "$dir.tmp"
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
}
part_rootfs() {
  if [[ -e $ROOTFS/node/usr/bin/containerd ]]; then log "rootfs: node exists, skip"; else
    log "rootfs: node (Debian 12)"
    debstrap "$ROOTFS/node" "${NODE_PKGS[@]}"
  fi
  if [[ -e $ROOTFS/apps/usr/bin/redis-server ]]; then log "rootfs: apps exists, skip"; else
    log "rootfs: apps (Debian 12)"
    debstrap "$ROOTFS/apps" "${APPS_PKGS[@]}"
  fi
}

# ---------------------------------------------------------------- images
# oci_new TAG: an empty image TAG in the layout $OCI.
oci_new() {
  [[ -d $OCI ]] || umoci init --layout "$OCI"
  umoci rm --image "$OCI:$1" 2>/dev/null || true
  umoci new --image "$OCI:$1"
}
# oci_insert TAG DIR: a layer with DIR's content at /.
oci_insert() { umoci insert --image "$OCI:$1" "$2" /; }
# oci_config TAG ARGS...: umoci config with a fixed history entry.
oci_config() {
  local tag="$1"
  shift
  umoci config --image "$OCI:$tag" --history.created_by "ci/kind/build.sh" \
    --history.created 2026-01-01T00:00:00Z "$@"
}
# oci_export TAG OUT.tar REF: docker-archive (what ctr import and kind load take).
oci_export() {
  rm -f "$2.tmp"
  skopeo copy --quiet "oci:$OCI:$1" "docker-archive:$2.tmp:$3"
  mv "$2.tmp" "$2"
}
# base_files DIR: /etc/passwd, group, nsswitch and /tmp for a static-binary image.
base_files() {
  mkdir -p "$1/etc" "$1/tmp" "$1/usr/local/bin"
  chmod 1777 "$1/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' >"$1/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$1/etc/group"
  echo 'hosts: files dns' >"$1/etc/nsswitch.conf"
}
PATH_ENV="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# static_image NAME REF BINARY [ENTRYPOINT [USER]]: one binary in /usr/local/bin (static pods run
# it by name).
static_image() {
  local name="$1" ref="$2" bin="$3" dir
  dir="$(mktemp -d)"
  base_files "$dir"
  cp -L "$bin" "$dir/usr/local/bin/"
  oci_new "$name"
  oci_insert "$name" "$dir"
  if [[ -n ${4:-} ]]; then
    oci_config "$name" --config.env "$PATH_ENV" --config.entrypoint "$4"
  else
    oci_config "$name" --config.env "$PATH_ENV"
  fi
  [[ -z ${5:-} ]] || oci_config "$name" --config.user "$5"
  oci_export "$name" "$IMAGES/$name.tar" "$ref"
  rm -rf "$dir"
}
# apps_image NAME: a tag NAME holding the apps base layer (shared blob).
apps_image() {
  if ! umoci stat --image "$OCI:apps-base" >/dev/null 2>&1; then
    oci_new apps-base
    oci_insert apps-base "$ROOTFS/apps"
  fi
  umoci rm --image "$OCI:$1" 2>/dev/null || true
  umoci tag --image "$OCI:apps-base" "$1"
}
KUBE_REF=registry.k8s.io
image_argocd() {
  local dir src n
  dir="$(mktemp -d)"
  src="$(moddir "github.com/argoproj/argo-cd/v3@$ARGOCD_VERSION")"
  # The layout of upstream's Dockerfile (user 999, /home/argocd, /app/config, wrappers, one
  # multi-call binary with its names), minus helm, kustomize, git-lfs and ssh (the lab reads a
  # plain directory over git://).
  mkdir -p "$dir/usr/local/bin" "$dir/home/argocd" "$dir/app/config/ssh" "$dir/app/config/tls" \
    "$dir/app/config/gpg/source" "$dir/app/config/gpg/keys" "$dir/etc/ssh"
  cp -L "$HBIN/argocd" "$dir/usr/local/bin/argocd"
  for n in server repo-server cmp-server application-controller dex notifications \
    applicationset-controller k8s-auth commit-server; do
    ln -s argocd "$dir/usr/local/bin/argocd-$n"
  done
  for n in gpg-wrapper.sh git-verify-wrapper.sh; do
    install -m 0755 "$src/hack/$n" "$dir/usr/local/bin/$n"
  done
  [[ ! -f $src/entrypoint.sh ]] || install -m 0755 "$src/entrypoint.sh" "$dir/usr/local/bin/entrypoint.sh"
  : >"$dir/app/config/ssh/ssh_known_hosts"
  ln -s /app/config/ssh/ssh_known_hosts "$dir/etc/ssh/ssh_known_hosts"
  cp "$ROOTFS/apps/etc/passwd" "$ROOTFS/apps/etc/group" "$dir/etc/"
  echo 'argocd:x:999:999::/home/argocd:/bin/sh' >>"$dir/etc/passwd"
  echo 'argocd:x:999:' >>"$dir/etc/group"
  chown 999:0 "$dir/home/argocd"
  chown 999:999 "$dir/app/config/gpg/keys"
  chmod 0700 "$dir/app/config/gpg/keys"
  apps_image argocd
  oci_insert argocd "$dir"
  oci_config argocd --config.env "$PATH_ENV" --config.env USER=argocd \
    --config.env GRPC_ENABLE_TXT_SERVICE_CONFIG=false --config.user 999 \
    --config.workingdir /home/argocd --config.entrypoint /usr/bin/tini --config.entrypoint --
  oci_export argocd "$IMAGES/argocd.tar" "cnpe.local/argocd:$ARGOCD_VERSION"
  rm -rf "$dir"
}
part_images() {
  local stamp="$IMAGES/.images-$K8S_VERSION-$ETCD_VERSION-$ARGOCD_VERSION-$KIND_OFFLINE_COREDNS_VERSION"
  if [[ -e $stamp ]]; then log "images: built, skip"; return; fi
  local b
  for b in kube-apiserver kube-controller-manager kube-scheduler; do
    log "images: $b"
    static_image "$b" "$KUBE_REF/$b:$K8S_VERSION" "$HBIN/$b"
  done
  log "images: etcd"
  static_image etcd "$KUBE_REF/etcd:${ETCD_VERSION#v}-0" "$HBIN/etcd"
  log "images: coredns"
  local dir
  dir="$(mktemp -d)"
  base_files "$dir"
  cp "$BIN/coredns" "$dir/coredns"
  oci_new coredns
  oci_insert coredns "$dir"
  oci_config coredns --config.env "$PATH_ENV" --config.entrypoint /coredns
  oci_export coredns "$IMAGES/coredns.tar" "$KUBE_REF/coredns/coredns:$KIND_OFFLINE_COREDNS_VERSION"
  rm -rf "$dir"
  log "images: kube-proxy (Debian nft, iptables)"
  dir="$(mktemp -d)"
  mkdir -p "$dir/usr/local/bin"
  cp "$BIN/kube-proxy" "$dir/usr/local/bin/"
  apps_image kube-proxy
  oci_insert kube-proxy "$dir"
  oci_config kube-proxy --config.env "$PATH_ENV"
  oci_export kube-proxy "$IMAGES/kube-proxy.tar" "$KUBE_REF/kube-proxy:$K8S_VERSION"
  rm -rf "$dir"
  log "images: argocd $ARGOCD_VERSION"
  image_argocd
  # Argo CD's redis runs `args: [--save, "", --appendonly, no, --requirepass ...]`, as uid 999.
  log "images: redis (Debian redis-server)"
  apps_image redis
  oci_config redis --config.env "$PATH_ENV" --config.entrypoint redis-server \
    --config.workingdir /tmp --config.user 999
  oci_export redis "$IMAGES/redis.tar" "$KIND_OFFLINE_REDIS_IMAGE"
  log "images: gitd (Debian git, git-daemon)"
  apps_image gitd
  oci_config gitd --config.env "$PATH_ENV"
  oci_export gitd "$IMAGES/gitd.tar" "$KIND_OFFLINE_GITD_IMAGE"
  # pause and nginx: ci/hermetic's docker-archives as they are.
  cp "$HCACHE/images/pause.tar" "$IMAGES/pause.tar"
  cp "$HCACHE/images/nginx.tar" "$IMAGES/nginx.tar"
  umoci gc --layout "$OCI"
  touch "$stamp"
}

# ---------------------------------------------------------------- add-on images
# Argo Rollouts' controller and Traefik: one static binary each (ci/hermetic's build), as
# upstream's images run them. Rollouts: entrypoint rollouts-controller, user 999 (its Deployment
# says runAsNonRoot); Traefik: entrypoint traefik (ci/kind/traefik.yaml sets the user).
part_addons() {
  local stamp="$IMAGES/.addons-$ROLLOUTS_VERSION-$TRAEFIK_VERSION"
  if [[ -e $stamp ]]; then log "addons: built, skip"; return; fi
  log "addons: argo-rollouts $ROLLOUTS_VERSION"
  static_image argo-rollouts "$KIND_OFFLINE_ROLLOUTS_IMAGE_REPO:$ROLLOUTS_VERSION" \
    "$HBIN/rollouts-controller" /usr/local/bin/rollouts-controller 999
  log "addons: traefik $TRAEFIK_VERSION"
  static_image traefik "$KIND_OFFLINE_TRAEFIK_IMAGE_REPO:$TRAEFIK_VERSION" "$HBIN/traefik" /usr/local/bin/traefik
  umoci gc --layout "$OCI"
  touch "$stamp"
}

# ---------------------------------------------------------------- node image
# Images the node imports into containerd at boot (containerd.service ExecStartPost): what
# kubeadm v1.36.3 pulls (control plane, kube-proxy, etcd, coredns) and the sandbox image.
NODE_IMAGES=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd coredns pause)
# The sandbox image ci/hermetic builds (k8s build/pause/linux/pause.c).
PAUSE_REF="registry.k8s.io/pause:3.10-cnpe"
part_node() {
  local stamp="$KIND_CACHE/.node-${KIND_OFFLINE_NODE_IMAGE//[\/:]/_}"
  if [[ -e $stamp ]] && podman image exists "$KIND_OFFLINE_NODE_IMAGE"; then
    log "node: $KIND_OFFLINE_NODE_IMAGE exists, skip"
    return
  fi
  local kindsrc r f
  kindsrc="$(moddir "sigs.k8s.io/kind@$KIND_VERSION")/images/base"
  r="$KIND_CACHE/work/node"
  rm -rf "$r"
  mkdir -p "$(dirname "$r")"
  cp -a "$ROOTFS/node" "$r"
  # kind's base files, with the modes its Dockerfile gives (the module cache is read-only 0444)
  cp -r --no-preserve=mode "$kindsrc/files/." "$r/"
  chmod 0755 "$r"/usr/local/bin/* "$r/kind" "$r/kind/bin" "$r"/kind/bin/*
  # the systemd edits of kind's Dockerfile
  find "$r/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
  rm -f "$r"/lib/systemd/system/multi-user.target.wants/* "$r"/etc/systemd/system/*.wants/* \
    "$r"/lib/systemd/system/local-fs.target.wants/* "$r"/lib/systemd/system/sockets.target.wants/*udev* \
    "$r"/lib/systemd/system/sockets.target.wants/*initctl* "$r"/lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >>"$r/etc/systemd/journald.conf"
  ln -sf /usr/lib/systemd/systemd "$r/sbin/init"
  mkdir -p "$r/etc/systemd/system/multi-user.target.wants"
  for f in kubelet containerd undo-mount-hacks; do
    ln -sf "/etc/systemd/system/$f.service" "$r/etc/systemd/system/multi-user.target.wants/$f.service"
  done
  ln -sf /dev/null "$r/etc/systemd/system/systemd-binfmt.service"
  mkdir -p "$r/etc/kubernetes/manifests"
  # Debian's containerd, CNI plugins where kind's units and containerd's defaults look for them
  ln -sf /usr/bin/containerd "$r/usr/local/bin/containerd"
  mkdir -p "$r/opt/cni"
  ln -sfn /usr/lib/cni "$r/opt/cni/bin"
  # containerd: kind's config, minus the fuse-overlayfs proxy (rootless only), with our sandbox
  # image and restrict_oom_score_adj (no CAP_SYS_RESOURCE here: runc may not lower oom_score_adj)
  sed -e '/^\[proxy_plugins/,/^$/d' -e '/fuse-overlayfs/d' \
    -e "s|sandbox_image = .*|sandbox_image = \"$PAUSE_REF\"|" \
    -e 's|restrict_oom_score_adj = false|restrict_oom_score_adj = true|' \
    "$kindsrc/files/etc/containerd/config.toml" >"$r/etc/containerd/config.toml"
  grep -q 'restrict_oom_score_adj = true' "$r/etc/containerd/config.toml" \
    || die "kind's containerd config changed: restrict_oom_score_adj not set"
  rm -f "$r/etc/systemd/system/containerd-fuse-overlayfs.service"
  ctr oci spec \
    | jq '.hooks.createContainer[.hooks.createContainer|length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \
    | jq 'del(.process.rlimits)' >"$r/etc/containerd/cri-base.json"
  # Kubernetes
  install -m 0755 "$BIN/kubeadm" "$HBIN/kubelet" "$HBIN/kubectl" "$r/usr/bin/"
  printf '%s' "$K8S_VERSION" >"$r/kind/version"
  # The images kubeadm needs, imported into containerd when it first starts (no registry)
  mkdir -p "$r/kind/images"
  for f in "${NODE_IMAGES[@]}"; do cp "$IMAGES/$f.tar" "$r/kind/images/"; done
  cat >"$r/kind/bin/cnpe-import-images.sh" <<'EOF'
#!/bin/sh
# Imports /kind/images/*.tar (ci/kind/build.sh) into containerd's k8s.io namespace, once per node.
set -eu
stamp=/var/lib/cnpe-images-imported
[ ! -e "$stamp" ] || exit 0
n=0
until ctr --namespace k8s.io version >/dev/null 2>&1; do
  n=$((n + 1))
  [ "$n" -lt 60 ] || { echo "cnpe-import-images: containerd does not answer" >&2; exit 1; }
  sleep 1
done
for t in /kind/images/*.tar; do
  ctr --namespace k8s.io images import "$t"
done
touch "$stamp"
EOF
  chmod 0755 "$r/kind/bin/cnpe-import-images.sh"
  mkdir -p "$r/etc/systemd/system/containerd.service.d"
  printf '[Service]\nExecStartPost=/kind/bin/cnpe-import-images.sh\nTimeoutStartSec=600\n' \
    >"$r/etc/systemd/system/containerd.service.d/20-cnpe-images.conf"
  # kubelet starts only after containerd (and so the import) is up
  mkdir -p "$r/etc/systemd/system/kubelet.service.d"
  printf '[Unit]\nAfter=containerd.service\nWants=containerd.service\n' \
    >"$r/etc/systemd/system/kubelet.service.d/20-cnpe-after-containerd.conf"
  log "node: packing $KIND_OFFLINE_NODE_IMAGE"
  oci_new node
  oci_insert node "$r"
  oci_config node --config.env container=docker --config.stopsignal SIGRTMIN+3 \
    --config.entrypoint /usr/local/bin/entrypoint --config.entrypoint /sbin/init
  podman rmi --force "$KIND_OFFLINE_NODE_IMAGE" >/dev/null 2>&1 || true
  skopeo copy --quiet "oci:$OCI:node" "containers-storage:$KIND_OFFLINE_NODE_IMAGE"
  umoci rm --image "$OCI:node"
  umoci gc --layout "$OCI"
  rm -rf "$r"
  touch "$stamp"
}

# ---------------------------------------------------------------- the gate's image (opt-in)
# cnpe-lab and release-gate as cargo built them (stripped), the four libraries they link, taken
# from the apps root filesystem (Debian 12, the same glibc as the build host), and a nonroot
# user: no shell, no package manager. Built from $CNPE_GATE_BIN_DIR (default: the CI target's
# debug binaries; a release build makes it smaller), so run `cargo build` first.
GATE_IMAGE="${CNPE_GATE_IMAGE:-cnpe.local/cnpe-gate:0.1.0}"
part_gate() {
  local bins="${CNPE_GATE_BIN_DIR:-${CARGO_TARGET_DIR:-/var/cache/cnpe-lab/target}/debug}" dir lib b
  [[ -x $bins/cnpe-lab && -x $bins/release-gate ]] \
    || die "no cnpe-lab/release-gate in $bins: run cargo build first (or set CNPE_GATE_BIN_DIR)"
  [[ -e $ROOTFS/apps/usr/bin/redis-server ]] || die "no apps root filesystem: build.sh rootfs first"
  dir="$(mktemp -d)"
  chmod 0755 "$dir" # the layer's / (mktemp makes it 0700: uid 65532 could not reach its binary)
  base_files "$dir"
  echo 'nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin' >>"$dir/etc/passwd"
  echo 'nonroot:x:65532:' >>"$dir/etc/group"
  for b in cnpe-lab release-gate; do
    strip -o "$dir/usr/local/bin/$b" "$bins/$b"
  done
  # CA certificates: reqwest's TLS setup loads the system roots even for plain-HTTP probes,
  # and its client does not build without them.
  mkdir -p "$dir/etc/ssl/certs"
  cp -L "$ROOTFS/apps/etc/ssl/certs/ca-certificates.crt" "$dir/etc/ssl/certs/"
  # The libraries the dynamic linker resolves for cnpe-lab, copied from the apps rootfs.
  while read -r lib; do
    [[ -e $ROOTFS/apps$lib ]] || die "$lib (linked by cnpe-lab) is not in the apps rootfs"
    mkdir -p "$dir$(dirname "$lib")"
    cp -L "$ROOTFS/apps$lib" "$dir$lib"
  done < <(ldd "$bins/cnpe-lab" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
  oci_new cnpe-gate
  oci_insert cnpe-gate "$dir"
  oci_config cnpe-gate --config.env "$PATH_ENV" --config.user 65532:65532 \
    --config.entrypoint /usr/local/bin/cnpe-lab
  oci_export cnpe-gate "$IMAGES/cnpe-gate.tar" "$GATE_IMAGE"
  rm -rf "$dir"
  log "gate image $GATE_IMAGE: $(du -h "$IMAGES/cnpe-gate.tar" | cut -f1) (docker-archive), $(du -sh "$bins/cnpe-lab" | cut -f1) unstripped cnpe-lab"
}

ALL=(host hermetic gobin rootfs images addons node)
OPTIONAL=(gate)
parts=("$@")
((${#parts[@]})) || parts=("${ALL[@]}")
for p in "${parts[@]}"; do
  [[ " ${ALL[*]} ${OPTIONAL[*]} " == *" $p "* ]] || die "unknown part $p (parts: ${ALL[*]} ${OPTIONAL[*]})"
done
T0=$(date +%s)
for p in "${parts[@]}"; do timed "$p" "part_$p"; done
log "build.sh done in $(($(date +%s) - T0))s: $(for p in "${parts[@]}"; do printf '%s=%ss ' "$p" "${TOOK[$p]}"; done)"
