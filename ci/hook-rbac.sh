#!/usr/bin/env bash
# What the gate's ServiceAccount may do, asked of a live API server (usage, on a running cluster:
#   KUBECONFIG=$(bash ci/hermetic/kubeconfig.sh) bash ci/hook-rbac.sh).
# ci/check-deploy.py checks the rendered YAML; only the API server's authorizer says what the
# bindings really grant (aggregation, other bindings of the same subject, a typo in a group).
#  1. creates the namespaces deploy/ uses (cnpe-shop, argocd) only if absent;
#  2. `kubectl apply -k deploy/`, unless its objects already exist: then it only checks that
#     `kubectl diff -k deploy/` is empty, and refuses to overwrite what it did not create;
#  3. a `kubectl auth can-i --as=system:serviceaccount:cnpe-shop:cnpe-gate` matrix: yes for
#     get/list/watch of what the gate watches, no for everything else it asks (writes, secrets,
#     proxy, exec, the wrong namespace, cluster scope); prints a table;
#  4. deletes what it created (objects, then namespaces), and only that, even on failure.
# Exits 1 on any mismatch (or 2 on a usage or cluster error).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# deploy/'s default namespaces (ci/check-deploy.py asserts the rendered YAML uses these).
APP_NS=cnpe-shop
ARGO_NS=argocd
SA=cnpe-gate
AS="system:serviceaccount:$APP_NS:$SA"

say() { printf 'hook-rbac: %s\n' "$*" >&2; }
die() { say "$*"; exit 2; }

[[ -n ${KUBECONFIG:-} ]] || die "set KUBECONFIG (e.g. KUBECONFIG=\$(bash ci/hermetic/kubeconfig.sh)); ~/.kube/config is never used by default"
command -v kubectl >/dev/null || die "kubectl not found"
kubectl version --request-timeout=10s >/dev/null || die "the API server does not answer (KUBECONFIG=$KUBECONFIG)"

created_ns=()   # namespaces this script created
created_obj=()  # "NAMESPACE KIND/NAME" this script created
errors="$(mktemp)"  # stderr of one `kubectl auth can-i`
cleanup() {
  local status=$? entry
  trap - EXIT
  rm -f "$errors"
  # Objects first (those in a namespace we created go with it anyway), then our namespaces.
  for entry in ${created_obj[@]+"${created_obj[@]}"}; do
    say "deleting ${entry#* } in ${entry%% *} (created here)"
    kubectl delete -n "${entry%% *}" "${entry#* }" --ignore-not-found --wait=false >/dev/null || status=2
  done
  for entry in ${created_ns[@]+"${created_ns[@]}"}; do
    say "deleting namespace $entry (created here)"
    kubectl delete namespace "$entry" --ignore-not-found --timeout=120s >/dev/null || status=2
  done
  exit "$status"
}
trap cleanup EXIT

# --- 1. namespaces, only if absent
for ns in "$APP_NS" "$ARGO_NS"; do
  if [[ -z "$(kubectl get namespace "$ns" -o name --ignore-not-found)" ]]; then
    kubectl create namespace "$ns" >/dev/null
    created_ns+=("$ns")
    say "created namespace $ns"
  fi
done

# --- 2. deploy/, without overwriting anything that was there before
objects=("$APP_NS serviceaccount/$SA" "$APP_NS role.rbac.authorization.k8s.io/$SA"
         "$APP_NS rolebinding.rbac.authorization.k8s.io/$SA"
         "$ARGO_NS role.rbac.authorization.k8s.io/$SA" "$ARGO_NS rolebinding.rbac.authorization.k8s.io/$SA")
absent=()
present=()
for entry in "${objects[@]}"; do
  if [[ -z "$(kubectl get -n "${entry%% *}" "${entry#* }" -o name --ignore-not-found)" ]]; then
    absent+=("$entry")
  else
    present+=("$entry")
  fi
done
if [[ ${#present[@]} -eq 0 ]]; then
  # Recorded before the apply, so a partial apply is still cleaned up.
  created_obj=("${absent[@]}")
  kubectl apply -k deploy/ >/dev/null
  say "applied deploy/ (created: ${absent[*]})"
else
  say "already present: ${present[*]}; checking they are deploy/'s, unchanged"
  diff_status=0
  kubectl diff -k deploy/ || diff_status=$?
  case $diff_status in
    0) say "deploy/ is installed as is: not applying" ;;
    1) say "the cluster's objects differ from deploy/ (diff above): not overwriting what this script did not create"; exit 1 ;;
    *) die "kubectl diff -k deploy/ failed ($diff_status)" ;;
  esac
fi

# --- 3. the matrix
# The RBAC authorizer reads bindings from an informer: wait until the new ones are visible.
for ((i = 0; ; i++)); do
  [[ "$(kubectl auth can-i list pods -n "$APP_NS" --as="$AS" 2>/dev/null || true)" == yes ]] && break
  ((i < 30)) || { say "RBAC never allowed list pods in $APP_NS for $AS (30 s)"; exit 1; }
  sleep 1
done

read_verbs=(get list watch)
write_verbs=(create update patch delete deletecollection)
app_resources=(deployments.apps replicasets.apps statefulsets.apps daemonsets.apps pods services
               endpointslices.discovery.k8s.io rollouts.argoproj.io ingresses.networking.k8s.io
               httproutes.gateway.networking.k8s.io)
# kubectl cannot map a resource the server does not serve, and then answers "no" whatever the
# Role says: where an add-on's CRD is absent (Argo Rollouts, Gateway API; the gate does not
# watch that kind there), its rows are left out, said once.
crds="$(kubectl get crd -o name 2>/dev/null || true)"
for crd in rollouts.argoproj.io httproutes.gateway.networking.k8s.io; do
  if [[ $'\n'"$crds"$'\n' != *$'\n'customresourcedefinition.apiextensions.k8s.io/$crd$'\n'* ]]; then
    say "the CRD $crd is not served here: it is left out of the matrix"
    app_resources=("${app_resources[@]/$crd/}")
  fi
done
rows=()      # "WANT NAMESPACE VERB RESOURCE [SUBRESOURCE]"; namespace "-" = cluster scope
want() { rows+=("$*"); }

for r in "${app_resources[@]}"; do
  [[ -n $r ]] || continue
  for v in "${read_verbs[@]}"; do want yes "$APP_NS" "$v" "$r"; want no "$ARGO_NS" "$v" "$r"; done
  for v in "${write_verbs[@]}"; do want no "$APP_NS" "$v" "$r"; done
  want no default list "$r"       # another namespace
  want no - list "$r"             # all namespaces
done
for v in "${read_verbs[@]}"; do
  want yes "$ARGO_NS" "$v" applications.argoproj.io
  want no "$APP_NS" "$v" applications.argoproj.io
  want no "$APP_NS" "$v" secrets
  want no "$ARGO_NS" "$v" secrets
  want no "$ARGO_NS" "$v" appprojects.argoproj.io
  want no "$APP_NS" "$v" configmaps
done
for v in "${write_verbs[@]}"; do want no "$ARGO_NS" "$v" applications.argoproj.io; done
for sub in proxy exec attach portforward; do
  want no "$APP_NS" create pods "$sub"
  want no "$APP_NS" get pods "$sub"
done
want no "$APP_NS" get services proxy
want no "$APP_NS" create services proxy
want no "$APP_NS" create serviceaccounts token
want no "$APP_NS" impersonate serviceaccounts
want no "$APP_NS" create jobs.batch
want no "$APP_NS" create pods
want no - list namespaces
want no - list nodes
want no - get nodes proxy
want no - create clusterrolebindings.rbac.authorization.k8s.io
want no - list applications.argoproj.io

mismatches=0
printf '%-6s %-12s %-16s %-34s %-5s %-5s %s\n' RESULT NAMESPACE VERB RESOURCE WANT GOT AS
for row in "${rows[@]}"; do
  read -r expect ns verb res sub <<<"$row"
  args=("$verb" "$res" "--as=$AS")
  if [[ $ns == - ]]; then args+=(--all-namespaces); else args+=(-n "$ns"); fi
  if [[ -n $sub ]]; then args+=("--subresource=$sub"); fi
  # stdout is exactly "yes" or "no"; anything else (an error, a timeout) is a mismatch too.
  got="$(kubectl auth can-i "${args[@]}" 2>"$errors" || true)"
  case $got in
    yes | no) ;;
    *) got="ERR"; say "kubectl auth can-i ${args[*]}: $(head -c 300 "$errors")" ;;
  esac
  result=ok
  if [[ $got != "$expect" ]]; then result=FAIL; mismatches=$((mismatches + 1)); fi
  printf '%-6s %-12s %-16s %-34s %-5s %-5s %s\n' "$result" "${ns/#-/(cluster)}" "$verb" \
    "$res${sub:+/$sub}" "$expect" "$got" "$AS"
done

if ((mismatches)); then
  say "FAILED: $mismatches of ${#rows[@]} answers differ from deploy/'s intent"
  exit 1
fi
say "OK: ${#rows[@]} answers as intended (${created_obj[*]:+created and deleted: ${created_obj[*]}; }namespaces created: ${created_ns[*]:-none})"
