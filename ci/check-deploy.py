#!/usr/bin/env python3
"""Static checks of deploy/ (the gate's RBAC), rendered, and deploy/hook/job.yaml (its PostSync Job).

Usage: check-deploy.py APP_NS ARGOCD_NS RBAC_YAML [HOOK_YAML]
RBAC_YAML is `kubectl kustomize deploy/` (or an overlay of it), HOOK_YAML deploy/hook/job.yaml
(a plain manifest: kustomize refuses its generateName). Why: a server-side dry run needs a
cluster, and RBAC that grows a verb or a resource is exactly what a review misses. Asserts the RBAC grants only get/list/watch on
exactly what the gate watches, in the right namespaces, to ServiceAccount cnpe-gate only; and the
Job's hook annotations, identity, image, arguments and securityContext. Prints one line per
failed check; exits 1 if any failed.
"""
import importlib.util
import sys
from pathlib import Path

# The strict YAML loading (duplicate keys refused), `check` and `dig` are check-manifests.py's:
# one loader for every manifest check; its ERRORS list collects this script's findings too.
_spec = importlib.util.spec_from_file_location(
    "check_manifests", Path(__file__).resolve().parent / "kind" / "check-manifests.py")
_manifests = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_manifests)
ERRORS, check, load_all, dig = _manifests.ERRORS, _manifests.check, _manifests.load_all, _manifests.dig

READ = {"get", "list", "watch"}
# What src/cluster/watch.rs watches (Kind::ALL, src/cluster/kind.rs): (apiGroup, resource) per namespace role, one
# literal pair each, so tests/deploy_rbac.rs can check this list against Kind::ALL.
APP_RULES = {
    ("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets"), ("apps", "daemonsets"),
    ("", "pods"), ("", "services"), ("discovery.k8s.io", "endpointslices"), ("argoproj.io", "rollouts"),
    ("networking.k8s.io", "ingresses"), ("gateway.networking.k8s.io", "httproutes"),
}
ARGOCD_RULES = {("argoproj.io", "applications")}
FORBIDDEN = {"secrets", "pods/proxy", "services/proxy", "nodes/proxy", "pods/exec", "pods/attach",
             "pods/portforward", "serviceaccounts/token", "*"}
SA = "cnpe-gate"


def ident(d):
    return (d.get("kind"), dig(d, "metadata", "namespace"), dig(d, "metadata", "name"))


def check_rbac(path, app_ns, argo_ns):
    docs = load_all(path)
    got = sorted(ident(d) for d in docs)
    want = sorted([("ServiceAccount", app_ns, SA), ("Role", app_ns, SA), ("RoleBinding", app_ns, SA),
                   ("Role", argo_ns, SA), ("RoleBinding", argo_ns, SA)])
    # Nothing else: no ClusterRole(Binding), no Secret, no Namespace.
    check(got == want, f"{path}: expected {want}, got {got}")
    for d in docs:
        kind, ns, name = ident(d)
        if kind == "Role":
            check(d.get("apiVersion") == "rbac.authorization.k8s.io/v1", f"{path}: Role {ns}/{name} apiVersion")
            granted = set()
            for i, rule in enumerate(d.get("rules") or []):
                where = f"{path}: Role {ns}/{name} rules[{i}]"
                verbs = set(rule.get("verbs") or [])
                check(verbs and verbs <= READ, f"{where}: verbs {sorted(verbs)} are not only get/list/watch")
                check(not rule.get("resourceNames"), f"{where}: resourceNames would break list/watch")
                check(not rule.get("nonResourceURLs"), f"{where}: nonResourceURLs in a Role")
                res = set(rule.get("resources") or [])
                bad = res & FORBIDDEN | {r for r in res if "/" in r}
                check(not bad, f"{where}: grants {sorted(bad)} (no secrets, subresources or wildcards)")
                check("*" not in (rule.get("apiGroups") or []), f"{where}: apiGroups wildcard")
                granted |= {(g, r) for g in rule.get("apiGroups") or [] for r in res}
            expected = APP_RULES if ns == app_ns else ARGOCD_RULES
            check(granted == expected,
                  f"{path}: Role {ns}/{name} grants {sorted(granted)}, expected {sorted(expected)}")
        elif kind == "RoleBinding":
            ref = d.get("roleRef") or {}
            check(ref == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SA},
                  f"{path}: RoleBinding {ns}/{name} roleRef {ref} is not Role {SA} in its namespace")
            subjects = d.get("subjects") or []
            # The subject's namespace is the ServiceAccount's, in both namespaces (deploy/link).
            check(subjects == [{"kind": "ServiceAccount", "name": SA, "namespace": app_ns}],
                  f"{path}: RoleBinding {ns}/{name} subjects {subjects} are not exactly {app_ns}/{SA}")


def check_hook(path, argo_ns):
    docs = load_all(path)
    # No name and no namespace: Argo CD names each sync's hook from generateName (a fixed name
    # lets a stale cached Job of the previous sync decide, gitops-engine#446) and creates it in
    # the Application's destination namespace.
    if not check([ident(d) for d in docs] == [("Job", None, None)],
                 f"{path}: expected exactly one Job with neither name nor namespace, got {[ident(d) for d in docs]}"):
        return
    job = docs[0]
    check(dig(job, "metadata", "generateName") == f"{SA}-",
          f"{path}: generateName {dig(job, 'metadata', 'generateName')!r} is not {SA}-")
    check(job.get("apiVersion") == "batch/v1", f"{path}: Job apiVersion {job.get('apiVersion')!r}")
    ann = dig(job, "metadata", "annotations") or {}
    check(ann.get("argocd.argoproj.io/hook") == "PostSync", f"{path}: not a PostSync hook: {ann}")
    check(ann.get("argocd.argoproj.io/hook-delete-policy") == "BeforeHookCreation",
          f"{path}: hook-delete-policy is not BeforeHookCreation: {ann}")
    spec = job.get("spec") or {}
    check(spec.get("backoffLimit") == 0, f"{path}: backoffLimit {spec.get('backoffLimit')!r} is not 0")
    ttl = spec.get("ttlSecondsAfterFinished")
    # Unique names accumulate: the TTL removes them, after the verdict's log was there to read.
    check(isinstance(ttl, int) and 3600 <= ttl <= 7 * 86400,
          f"{path}: ttlSecondsAfterFinished {ttl!r} not in [3600, 604800]")
    ads = spec.get("activeDeadlineSeconds")
    # Longer than the gate's --timeout 120, so the gate, not the kubelet, says why.
    check(isinstance(ads, int) and 120 < ads <= 900, f"{path}: activeDeadlineSeconds {ads!r} not in (120, 900]")
    pod = dig(spec, "template", "spec") or {}
    check(pod.get("serviceAccountName") == SA, f"{path}: serviceAccountName {pod.get('serviceAccountName')!r}")
    check(pod.get("automountServiceAccountToken") is not False, f"{path}: the gate needs its token")
    check(pod.get("restartPolicy") == "Never", f"{path}: restartPolicy {pod.get('restartPolicy')!r}")
    for k in ("hostNetwork", "hostPID", "hostIPC"):
        check(not pod.get(k), f"{path}: {k} is set")
    psc = pod.get("securityContext") or {}
    check(psc.get("runAsNonRoot") is True and psc.get("runAsUser") == 65532,
          f"{path}: pod securityContext is not runAsNonRoot/65532: {psc}")
    check(dig(psc, "seccompProfile", "type") == "RuntimeDefault", f"{path}: pod seccompProfile {psc}")
    containers = pod.get("containers") or []
    if not check(len(containers) == 1 and not pod.get("initContainers"), f"{path}: expected one container"):
        return
    c = containers[0]
    check(c.get("image") == "cnpe.local/cnpe-gate:0.1.0", f"{path}: image {c.get('image')!r}")
    check(c.get("imagePullPolicy") == "IfNotPresent", f"{path}: imagePullPolicy {c.get('imagePullPolicy')!r}")
    args = [str(a) for a in c.get("args") or []]
    check(args == ["gate", "--app", "cnpe-shop", "--sha-from-operation", "--expect-body", "labhub-cnpe-v1",
                   "--timeout", "120", "--probe", "direct"], f"{path}: args {args}")
    env = {e.get("name"): e.get("value") for e in c.get("env") or []}
    check(env == {"CNPE_ARGOCD_NAMESPACE": argo_ns}, f"{path}: env {env} is not CNPE_ARGOCD_NAMESPACE={argo_ns}")
    sc = c.get("securityContext") or {}
    want = {"runAsNonRoot": True, "runAsUser": 65532, "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False}
    for k, v in want.items():
        check(sc.get(k) is v if isinstance(v, bool) else sc.get(k) == v,
              f"{path}: container securityContext.{k} is {sc.get(k)!r}, not {v!r}")
    check(not sc.get("privileged"), f"{path}: container is privileged")
    check(dig(sc, "capabilities", "drop") == ["ALL"] and not dig(sc, "capabilities", "add"),
          f"{path}: capabilities {sc.get('capabilities')} are not drop [ALL]")
    check(dig(sc, "seccompProfile", "type") == "RuntimeDefault", f"{path}: container seccompProfile {sc}")


def main(argv):
    if len(argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        return 2
    app_ns, argo_ns, rbac = argv[1:4]
    check(app_ns != argo_ns, f"the Application's namespace must not be Argo CD's ({app_ns})")
    check_rbac(rbac, app_ns, argo_ns)
    if len(argv) == 5:
        check_hook(argv[4], argo_ns)
    for e in ERRORS:
        print(f"deploy: {e}")
    return 1 if ERRORS else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
