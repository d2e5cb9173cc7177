#!/usr/bin/env bash
# Builds every part of the hermetic cluster into $CNPE_HERMETIC_CACHE (default
# /var/cache/cnpe-hermetic). Idempotent: a part whose output exists is skipped.
# Usage: build.sh [part...]   parts: debs k8s etcd argocd pause nginx rollouts traefik (default: all)
set -euo pipefail
. "$(dirname "$0")/common.sh"
# shellcheck source=go-progress.sh
. "$(dirname "$0")/go-progress.sh"
mkdir -p "$BIN" "$IMAGES" "$DEBS" "$GOMODCACHE" "$GOCACHE"

declare -A TOOK
timed() { # timed NAME FUNC
  local name="$1" t0; t0=$(date +%s)
  "$2"
  TOOK[$name]=$(( $(date +%s) - t0 ))
  log "part $name took ${TOOK[$name]}s"
}

# ---------------------------------------------------------------- Debian packages
APT_PKGS=(containerd runc containernetworking-plugins redis-server git busybox-static
          openssl iproute2 iptables ca-certificates curl gcc libc6-dev jq)
part_debs() {
  local missing=() p st
  for p in "${APT_PKGS[@]}"; do
    # captured, not piped into grep -q: under pipefail a writer killed by SIGPIPE fails the test
    st="$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)"
    [ "$st" = "install ok installed" ] || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then log "debs: all installed, skip"; return; fi
  log "debs: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # policy-rc.d keeps postinst scripts from starting redis/containerd on the host
  local prc=/usr/sbin/policy-rc.d had_prc=0
  [ -e $prc ] && had_prc=1
  [ $had_prc = 1 ] || { printf '#!/bin/sh\nexit 101\n' > $prc; chmod +x $prc; }
  apt-get -o DPkg::Lock::Timeout=600 update -qq || true
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}"
  [ $had_prc = 1 ] || rm -f $prc
  # policy-rc.d kept every postinst from starting a service, so nothing is killed here (no
  # pkill by name: it could end another job's redis)
}

# ---------------------------------------------------------------- Go binaries
K8S_LDFLAGS() {
  local major=${K8S_VERSION#v}; major=${major%%.*}
  local minor=${K8S_VERSION#v*.}; minor=${minor%%.*}
  local f="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor"
    f+=" -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.gitTreeState=clean"
    f+=" -X $p.buildDate=2026-01-01T00:00:00Z"
  done
  echo "$f"
}
part_k8s() {
  local stamp="$BIN/.k8s-$K8S_VERSION" b ok=1
  for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
    [ -x "$BIN/$b" ] || ok=0
  done
  if [ $ok = 1 ] && [ -e "$stamp" ]; then log "k8s: built, skip"; return; fi
  log "k8s: building $K8S_VERSION"
  (cd "$HERMETIC_DIR/modules/kubernetes" &&
   CGO_ENABLED=0 go_build_progress k8s -trimpath -tags selinux,notest -ldflags "$(K8S_LDFLAGS)" -o "$BIN/" -- \
     k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
     k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl)
  touch "$stamp"
}
part_etcd() {
  if [ -x "$BIN/etcd" ] && [ -e "$BIN/.etcd-$ETCD_VERSION" ]; then log "etcd: built, skip"; return; fi
  log "etcd: building $ETCD_VERSION"
  (cd "$HERMETIC_DIR/modules/etcd" &&
   CGO_ENABLED=0 go_build_progress etcd -trimpath -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=${ETCD_VERSION}" \
     -o "$BIN/etcd" -- go.etcd.io/etcd/server/v3)
  touch "$BIN/.etcd-$ETCD_VERSION"
}
ARGO_SRC_FILES=(manifests/crds/application-crd.yaml manifests/crds/appproject-crd.yaml
                hack/git-verify-wrapper.sh hack/gpg-wrapper.sh)
argocd_files() { # files up.sh needs from the argo-cd module, copied so up.sh needs no Go module cache
  # CRDs -> $CACHE/manifests/argocd-$V/; the helper scripts the repo-server execs by name from
  # $PATH (the upstream image copies them to /usr/local/bin) -> $CACHE/libexec/argocd-$V/.
  local man="$CACHE/manifests/argocd-$ARGOCD_VERSION" lib="$CACHE/libexec/argocd-$ARGOCD_VERSION" src f ok=1
  for f in "$man/application-crd.yaml" "$man/appproject-crd.yaml" "$lib/git-verify-wrapper.sh" "$lib/gpg-wrapper.sh"; do
    [ -s "$f" ] || ok=0
  done
  [ $ok = 1 ] && return
  # On a cold module cache `go list -m` prints an empty Dir: download the module first.
  (cd "$HERMETIC_DIR/modules/argocd" && go mod download github.com/argoproj/argo-cd/v3)
  src="$(cd "$HERMETIC_DIR/modules/argocd" && go list -m -f '{{.Dir}}' github.com/argoproj/argo-cd/v3)"
  for f in "${ARGO_SRC_FILES[@]}"; do
    if [ -z "$src" ] || [ ! -s "$src/$f" ]; then
      echo "build.sh: $f not found in the argo-cd module (go list gave '$src')" >&2
      return 1
    fi
  done
  mkdir -p "$man" "$lib"
  cp "$src/manifests/crds/application-crd.yaml" "$src/manifests/crds/appproject-crd.yaml" "$man/"
  # the module cache is read-only (0444): install with modes of our own
  install -m 0755 "$src/hack/git-verify-wrapper.sh" "$src/hack/gpg-wrapper.sh" "$lib/"
}
ARGOCD_PKGS=(github.com/argoproj/argo-cd/v3/cmd)
part_argocd() {
  argocd_files
  if [ -x "$BIN/argocd" ] && [ -e "$BIN/.argocd-$ARGOCD_VERSION" ]; then log "argocd: built, skip"; return; fi
  log "argocd: building $ARGOCD_VERSION"
  local p=github.com/argoproj/argo-cd/v3/common
  (cd "$HERMETIC_DIR/modules/argocd" &&
   CGO_ENABLED=0 go_build_progress argocd -trimpath -ldflags "-s -w -X $p.version=${ARGOCD_VERSION#v} -X $p.buildDate=2026-01-01T00:00:00Z -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.gitTreeState=clean" \
     -o "$BIN/argocd" -- "${ARGOCD_PKGS[@]}")
  local n
  for n in argocd-repo-server argocd-application-controller argocd-git-ask-pass; do ln -sf argocd "$BIN/$n"; done
  touch "$BIN/.argocd-$ARGOCD_VERSION"
}

# ---------------------------------------------------------------- add-ons (addons.sh starts them)
# moddir MODULE VERSION (in wrapper DIR $3): the module's directory in the Go module cache,
# downloaded if missing (on a cold cache `go list -m` prints an empty Dir).
moddir() {
  local src
  (cd "$3" && go mod download "$1")
  src="$(cd "$3" && go list -m -f '{{.Dir}}' "$1")"
  [ -n "$src" ] && [ -d "$src" ] && { printf '%s\n' "$src"; return; }
  echo "build.sh: $1@$2 not in the module cache (go list gave '$src')" >&2
  return 1
}
# copy_manifests DEST FILE...: FILE copied into DEST (mode 0644; the module cache is 0444),
# all or nothing: DEST is replaced only when every file was found.
copy_manifests() {
  local dest="$1" f; shift
  for f in "$@"; do [ -s "$f" ] || { echo "build.sh: $f missing in the module cache" >&2; return 1; }; done
  rm -rf "$dest.tmp"; mkdir -p "$dest.tmp"
  install -m 0644 "$@" "$dest.tmp/"
  rm -rf "$dest"; mv "$dest.tmp" "$dest"
}
# Argo Rollouts: the controller and the kubectl plugin (kubectl finds `kubectl-argo-rollouts` on
# PATH: `kubectl argo rollouts ...`), both in $BIN; the CRDs and install.yaml from the module
# into $CACHE/manifests/rollouts-V/ (addons.sh and ci/kind/up.sh need no module cache then).
ROLLOUTS_MOD=github.com/argoproj/argo-rollouts
ROLLOUTS_PKGS=("$ROLLOUTS_MOD/cmd/rollouts-controller" "$ROLLOUTS_MOD/cmd/kubectl-argo-rollouts")
part_rollouts() {
  local mod="$HERMETIC_DIR/modules/rollouts" man="$CACHE/manifests/rollouts-$ROLLOUTS_VERSION" src f
  if [ ! -s "$man/install.yaml" ] || [ ! -s "$man/rollout-crd.yaml" ]; then
    src="$(moddir "$ROLLOUTS_MOD" "$ROLLOUTS_VERSION" "$mod")"
    copy_manifests "$man" "$src"/manifests/crds/*-crd.yaml "$src/manifests/install.yaml"
  fi
  if [ -x "$BIN/rollouts-controller" ] && [ -x "$BIN/kubectl-argo-rollouts" ] && [ -e "$BIN/.rollouts-$ROLLOUTS_VERSION" ]; then
    log "rollouts: built, skip"; return
  fi
  log "rollouts: building $ROLLOUTS_VERSION"
  local p=$ROLLOUTS_MOD/utils/version
  local ld="-s -w -X $p.version=${ROLLOUTS_VERSION#v} -X $p.buildDate=2026-01-01T00:00:00Z -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.gitTag=$ROLLOUTS_VERSION -X $p.gitTreeState=clean"
  (cd "$mod" &&
   CGO_ENABLED=0 go_build_progress rollouts -trimpath -ldflags "$ld" -o "$BIN/" -- \
     "${ROLLOUTS_PKGS[@]}")
  "$BIN/rollouts-controller" --version >/dev/null
  touch "$BIN/.rollouts-$ROLLOUTS_VERSION"
}
# Traefik v3 (providers kubernetesIngress and kubernetesGateway), and the Gateway API CRDs of
# the standard channel from sigs.k8s.io/gateway-api into $CACHE/manifests/gateway-api-V/ (the
# CRDs only; the channel's ValidatingAdmissionPolicy "safe upgrades" is left out).
TRAEFIK_MOD=github.com/traefik/traefik/v3
TRAEFIK_PKGS=("$TRAEFIK_MOD/cmd/traefik")
part_traefik() {
  local mod="$HERMETIC_DIR/modules/traefik" man="$CACHE/manifests/gateway-api-$GATEWAY_API_VERSION" src
  if [ ! -s "$man/gateway.networking.k8s.io_httproutes.yaml" ]; then
    (cd "$mod" && go mod download "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION")
    src="$(cd "$mod" && go mod download -json "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
    [ -n "$src" ] || { echo "build.sh: sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION not downloaded" >&2; return 1; }
    local crds=() f
    for f in "$src"/config/crd/standard/gateway.networking.k8s.io_*.yaml; do
      case "$f" in *_vap_*) ;; *) crds+=("$f") ;; esac
    done
    copy_manifests "$man" "${crds[@]}"
  fi
  if [ -x "$BIN/traefik" ] && [ -e "$BIN/.traefik-$TRAEFIK_VERSION" ]; then log "traefik: built, skip"; return; fi
  log "traefik: building $TRAEFIK_VERSION"
  local p=$TRAEFIK_MOD/pkg/version codename
  # the -X flags of upstream's Makefile (binary-linux-amd64); its CODENAME default read from it
  src="$(moddir "$TRAEFIK_MOD" "$TRAEFIK_VERSION" "$mod")"
  codename="$(sed -n 's/^CODENAME ?= *//p' "$src/Makefile")"
  [ -n "$codename" ] || { echo "build.sh: no CODENAME in $src/Makefile" >&2; return 1; }
  (cd "$mod" &&
   CGO_ENABLED=0 go_build_progress traefik -trimpath -ldflags "-s -w -X $p.Version=${TRAEFIK_VERSION} -X $p.Codename=$codename -X $p.BuildDate=2026-01-01T00:00:00Z" \
     -o "$BIN/traefik" -- "${TRAEFIK_PKGS[@]}")
  "$BIN/traefik" version >/dev/null
  touch "$BIN/.traefik-$TRAEFIK_VERSION"
}

# ---------------------------------------------------------------- images
# docker-archive tar written by hand: manifest.json + config json + one layer tar.
# write_image OUT.tar NAME:TAG ROOTFS_DIR CONFIG_JSON_FRAGMENT(for .config)
write_image() {
  local out="$1" ref="$2" rootfs="$3" cfg="$4" tmp
  tmp="$(mktemp -d)"
  tar --numeric-owner --owner=0 --group=0 -C "$rootfs" -cf "$tmp/layer.tar" .
  local diffid; diffid="sha256:$(sha256sum "$tmp/layer.tar" | cut -d' ' -f1)"
  mkdir -p "$tmp/out"
  local ldig=${diffid#sha256:}
  mkdir -p "$tmp/out/$ldig"; mv "$tmp/layer.tar" "$tmp/out/$ldig/layer.tar"
  printf '{"architecture":"amd64","os":"linux","created":"2026-01-01T00:00:00Z","config":%s,"rootfs":{"type":"layers","diff_ids":["%s"]},"history":[{"created":"2026-01-01T00:00:00Z","created_by":"cnpe ci/hermetic build.sh"}]}' \
    "$cfg" "$diffid" > "$tmp/config.json"
  local cdig; cdig="$(sha256sum "$tmp/config.json" | cut -d' ' -f1)"
  mv "$tmp/config.json" "$tmp/out/$cdig.json"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$cdig" "$ref" "$ldig" > "$tmp/out/manifest.json"
  tar -C "$tmp/out" -cf "$out.tmp" . && mv "$out.tmp" "$out"
  rm -rf "$tmp"
}
PAUSE_REF="registry.k8s.io/pause:3.10-cnpe"
part_pause() {
  local out="$IMAGES/pause.tar"
  if [ -s "$out" ]; then log "pause: exists, skip"; return; fi
  local src; src="$(cd "$HERMETIC_DIR/modules/kubernetes" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c"
  [ -f "$src" ] || (cd "$HERMETIC_DIR/modules/kubernetes" && go mod download k8s.io/kubernetes)
  local r; r="$(mktemp -d)"
  gcc -Os -static -DVERSION=3.10-cnpe -o "$r/pause" "$src"
  strip "$r/pause" || true
  write_image "$out" "$PAUSE_REF" "$r" '{"Entrypoint":["/pause"],"User":"65535:65535"}'
  rm -rf "$r"
}
NGINX_REF="docker.io/library/nginx:1.27-alpine"
part_nginx() {
  local out="$IMAGES/nginx.tar"
  if [ -s "$out" ]; then log "nginx: exists, skip"; return; fi
  local dl="$DEBS/nginx"; mkdir -p "$dl"
  if ! ls "$dl"/nginx*.deb >/dev/null 2>&1; then
    if ! (cd "$dl" && apt-get download nginx nginx-common 2>/dev/null); then
      apt-get -o DPkg::Lock::Timeout=600 update -qq
      (cd "$dl" && apt-get download nginx nginx-common)
    fi
    # Debian 12 splits the binary into nginx-core/nginx-light in some releases
    if ! ls "$dl"/nginx_*.deb >/dev/null 2>&1; then
      (cd "$dl" && { apt-get download nginx-light || apt-get download nginx-core; })
    fi
  fi
  local r; r="$(mktemp -d)"
  for d in "$dl"/*.deb; do dpkg -x "$d" "$r"; done
  local nb; nb="$(ls "$r"/usr/sbin/nginx)"
  # shared libraries of nginx (and its dynamic modules), copied with their paths
  local libs; libs="$( { ldd "$nb"; for m in "$r"/usr/lib/nginx/modules/*.so; do [ -e "$m" ] && ldd "$m"; done; true; } 2>/dev/null |
      awk '/=>/ {print $3} /^\s*\/lib/ {print $1}' | grep '^/' | sort -u)"
  local l
  for l in $libs /lib64/ld-linux-x86-64.so.2; do
    mkdir -p "$r$(dirname "$l")"; cp -L "$l" "$r$l"
  done
  # ld-linux path for /lib64 and usrmerge-style lib dirs
  mkdir -p "$r/bin" "$r/sbin" "$r/etc" "$r/run" "$r/var/lib/nginx" "$r/var/log/nginx" "$r/tmp" \
           "$r/usr/share/nginx/html" "$r/etc/nginx/conf.d"
  chmod 1777 "$r/tmp"
  cp /bin/busybox "$r/bin/busybox"
  for a in sh ls cat printf echo mkdir rm sleep wget env ps; do ln -sf busybox "$r/bin/$a"; done
  ln -sf /usr/sbin/nginx "$r/sbin/nginx"
  echo 'root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/sh
www-data:x:33:33:www-data:/var/www:/bin/sh
nginx:x:101:101:nginx:/var/cache/nginx:/bin/sh' > "$r/etc/passwd"
  echo 'root:x:0:
nogroup:x:65534:
www-data:x:33:
nginx:x:101:' > "$r/etc/group"
  echo 'hosts: files dns' > "$r/etc/nsswitch.conf"
  cat > "$r/etc/nginx/nginx.conf" <<'NGX'
user nginx;
worker_processes 1;
error_log /var/log/nginx/error.log notice;
pid /run/nginx.pid;
events { worker_connections 1024; }
http {
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log /var/log/nginx/access.log;
    sendfile on;
    keepalive_timeout 65;
    include /etc/nginx/conf.d/*.conf;
}
NGX
  cat > "$r/etc/nginx/conf.d/default.conf" <<'NGX'
server {
    listen 80;
    listen [::]:80;
    server_name localhost;
    location / {
        root /usr/share/nginx/html;
        index index.html index.htm;
    }
}
NGX
  rm -f "$r/etc/nginx/sites-enabled/default"
  printf '<!DOCTYPE html>\n<html><body><h1>Welcome to nginx!</h1></body></html>\n' > "$r/usr/share/nginx/html/index.html"
  rm -rf "$r/usr/share/doc" "$r/usr/share/man" "$r/etc/init.d" "$r/etc/logrotate.d" "$r/etc/ufw" "$r/lib/systemd"
  write_image "$out" "$NGINX_REF" "$r" \
    '{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Cmd":["nginx","-g","daemon off;"],"ExposedPorts":{"80/tcp":{}},"StopSignal":"SIGQUIT","WorkingDir":"/"}'
  rm -rf "$r"
}

# ---------------------------------------------------------------- module downloads ahead
# On a cold module cache a Go part first downloads its modules (network-bound: argocd 17 s,
# rollouts 10 s, traefik 26 s measured here) and then compiles on both cores. The later parts'
# downloads run in the background while the first parts compile. The module cache locks each
# module, so a part's own `go list -deps` waits for or reuses them; a failed download ahead costs
# nothing, the part downloads (and reports) it again.
AHEAD_PIDS=()
AHEAD_LOGS="$(mktemp -d /tmp/cnpe-build-ahead.XXXXXX)"
stop_ahead() { # only the downloads this script started
  local pid
  for pid in "${AHEAD_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$AHEAD_LOGS"
}
trap stop_ahead EXIT
ahead() { # ahead PART MODULE_DIR STAMP PACKAGE...: PART's downloads started unless it is built
  local part=$1 dir=$2 stamp=$3 p want=0; shift 3
  for p in "${parts[@]}"; do [ "$p" = "$part" ] && want=1; done
  [ $want = 1 ] && [ ! -e "$stamp" ] || return 0
  log "$part: downloading its modules in the background"
  (cd "$dir" && go list -deps "$@" >/dev/null 2>"$AHEAD_LOGS/$part.log") &
  AHEAD_PIDS+=($!)
}

ALL=(debs k8s etcd argocd pause nginx rollouts traefik)
parts=("$@"); [ ${#parts[@]} -gt 0 ] || parts=("${ALL[@]}")
T0=$(date +%s)
ahead argocd "$HERMETIC_DIR/modules/argocd" "$BIN/.argocd-$ARGOCD_VERSION" "${ARGOCD_PKGS[@]}"
ahead rollouts "$HERMETIC_DIR/modules/rollouts" "$BIN/.rollouts-$ROLLOUTS_VERSION" "${ROLLOUTS_PKGS[@]}"
ahead traefik "$HERMETIC_DIR/modules/traefik" "$BIN/.traefik-$TRAEFIK_VERSION" "${TRAEFIK_PKGS[@]}"
for p in "${parts[@]}"; do timed "$p" "part_$p"; done
log "build.sh done in $(( $(date +%s) - T0 ))s: $(for p in "${parts[@]}"; do printf '%s=%ss ' "$p" "${TOOK[$p]}"; done)"
