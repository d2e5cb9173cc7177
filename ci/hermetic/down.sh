#!/usr/bin/env bash
# Stops exactly what up.sh started (pids recorded in $RUN/pids), removes pod containers,
# shims, mounts and runtime state (etcd data, containerd root, kubelet dir, CNI IPAM) so the
# next up.sh starts clean. Leaves caches (Go, binaries, images, certs). Idempotent.
set -euo pipefail
# Every step below tolerates "already gone" explicitly (`|| true`): down.sh must finish even on a
# half-started cluster, but an unexpected failure is not silently swallowed by a missing -e.
. "$(dirname "$0")/common.sh"
CTRD_SOCK=/run/cnpe-containerd/containerd.sock

running() { # alive and not a zombie
  kill -0 "$1" 2>/dev/null || return 1
  [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}
stop_pid() { # stop_pid NAME PID
  local n="$1" p="$2"
  local deadline=$((SECONDS + 15))
  running "$p" || return 0
  kill -TERM "$p" 2>/dev/null || true
  kill -CONT "$p" 2>/dev/null || true   # a SIGSTOPped one takes the TERM only once continued
  while [ $SECONDS -lt $deadline ]; do
    running "$p" || { log "stopped $n ($p)"; return 0; }
    sleep 0.25
  done
  kill -KILL "$p" 2>/dev/null || true; log "killed $n ($p)"
}
pid_of() { if [ -s "$PIDFILE" ]; then awk -v n="$1" '$1==n{p=$2} END{print p}' "$PIDFILE"; fi; }

# the add-ons first (their own pid file; addons.sh down stops only what addons.sh up started)
bash "$HERMETIC_DIR/addons.sh" down || log "addons.sh down failed (exit $?)"
if [ -s "$PIDFILE" ]; then
  # reverse start order, but keep containerd until its tasks are gone
  for n in argocd-application-controller argocd-repo-server git-daemon redis kubelet \
           kube-scheduler kube-controller-manager; do
    p=$(pid_of "$n"); if [ -n "$p" ]; then stop_pid "$n" "$p"; fi
  done
fi
# pod containers: kill and remove every task/container in containerd's k8s.io namespace
if [ -S "$CTRD_SOCK" ] && ctr -a "$CTRD_SOCK" version >/dev/null 2>&1; then
  C=(ctr -a "$CTRD_SOCK" -n k8s.io)
  for t in $("${C[@]}" tasks ls -q 2>/dev/null || true); do
    "${C[@]}" tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
  done
  # wait (bounded) until no task is RUNNING any more, then remove them all (-f covers the rest)
  running_tasks() { "${C[@]}" tasks ls 2>/dev/null | awk 'NR>1 && $3=="RUNNING"{n++} END{exit !n}'; }
  deadline=$((SECONDS + 10))
  while running_tasks && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
  for t in $("${C[@]}" tasks ls -q 2>/dev/null || true); do
    "${C[@]}" tasks rm -f "$t" >/dev/null 2>&1 || true
  done
  for c in $("${C[@]}" containers ls -q 2>/dev/null || true); do
    "${C[@]}" containers rm "$c" >/dev/null 2>&1 || true
  done
fi
if [ -s "$PIDFILE" ]; then
  for n in containerd kube-apiserver etcd; do
    p=$(pid_of "$n"); if [ -n "$p" ]; then stop_pid "$n" "$p"; fi
  done
fi
# shims started by OUR containerd (identified by its socket address on their command line)
for p in $(pgrep -f -- "-address $CTRD_SOCK" 2>/dev/null || true); do
  exe="$(readlink "/proc/$p/exe" 2>/dev/null || true)"
  [ "${exe##*/}" = containerd-shim-runc-v2 ] || continue
  if kill -KILL "$p" 2>/dev/null; then log "killed shim $p"; fi
done
# processes still inside the kubepods cgroup (pod processes whose shim died)
for f in /sys/fs/cgroup/pids/kubepods /sys/fs/cgroup/memory/kubepods; do
  if [ -d "$f" ]; then
    # cgroup.procs holds one PID per line; the file names themselves are never passed on
    # shellcheck disable=SC2038
    { find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null || true; } | xargs -r kill -KILL 2>/dev/null || true
  fi
done
# mounts: kubelet volumes, containerd rootfs/shm, netns bind mounts
umount_under() {
  local d="$1"
  # awk reads all of mountinfo and filters itself (no grep stage that can end the pipe early)
  awk -v d="$d" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
}
umount_under /var/lib/kubelet
umount_under "$RUN/containerd"
umount_under /run/cnpe-containerd
for ns in /run/netns/cni-*; do
  if [ -e "$ns" ]; then umount -l "$ns" 2>/dev/null || true; rm -f "$ns"; fi
done
if ip link show cni0 >/dev/null 2>&1; then ip link del cni0 || true; fi
# runtime state (not caches)
rm -rf "$RUN/etcd" "$RUN/containerd" "$RUN/cni/ipam" "$RUN/redis" "$RUN/argocd-tmp" /run/cnpe-containerd
rm -rf /var/lib/kubelet/pods /var/lib/kubelet/plugins* /var/lib/kubelet/pod-resources \
       /var/lib/kubelet/cpu_manager_state /var/lib/kubelet/memory_manager_state /var/lib/kubelet/dra_manager_state 2>/dev/null || true
# empty kubepods cgroups
for c in /sys/fs/cgroup/*/kubepods; do
  if [ -d "$c" ]; then find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null || true; fi
done
while iptables -D INPUT -p tcp --dport 8082 ! -i lo -m comment --comment cnpe-hermetic -j DROP 2>/dev/null; do :; done
rm -f "$PIDFILE"
log "down"
exit 0
