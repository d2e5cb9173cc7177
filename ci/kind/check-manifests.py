#!/usr/bin/env python3
"""Static checks of the kind CI path, which cannot run on machines without a container engine.

Usage: check-manifests.py VERSIONS_ENV KIND_CONFIG GITD_YAML SMOKE_YAML WORKFLOW BARE_PARENT REPO_URL
The three YAML files are given already rendered (ci/kind/common.sh kind_render). Parses them
(rejecting duplicate keys) and checks that they agree with each other and with versions.env:
the kind node mounts the bare repo's parent where the gitd pod serves it, the Service answers
the repo URL Argo CD uses, images and versions come from versions.env only, and the workflow
runs what the issue asks. Prints one line per failed check; exits 1 if any failed.
"""
import re
import shlex
import sys

import yaml

ERRORS = []


def check(ok, what):
    if not ok:
        ERRORS.append(what)
    return ok


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys (PyYAML keeps the last one silently)."""


def _mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load_all(path):
    try:
        with open(path, encoding="utf-8") as f:
            docs = [d for d in yaml.load_all(f, Loader=StrictLoader) if d is not None]
    except (OSError, yaml.YAMLError) as e:
        check(False, f"{path}: cannot parse: {e}")
        return []
    for d in docs:
        check(isinstance(d, dict), f"{path}: a document is not a mapping")
    return [d for d in docs if isinstance(d, dict)]


def dig(obj, *keys):
    for k in keys:
        if isinstance(obj, dict):
            obj = obj.get(k)
        elif isinstance(obj, list) and isinstance(k, int) and -len(obj) <= k < len(obj):
            obj = obj[k]
        else:
            return None
    return obj


def check_versions(path):
    env = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            # Sourced by bash AND copied verbatim into $GITHUB_ENV: no quotes, spaces, expansions.
            m = re.fullmatch(r"([A-Z][A-Z0-9_]*)=([^\s\"'$`\\]+)", line)
            if check(m, f"{path}:{n}: not a plain KEY=VALUE line: {line!r}"):
                check(m.group(1) not in env, f"{path}:{n}: {m.group(1)} set twice")
                env[m.group(1)] = m.group(2)
    patterns = {
        "KIND_VERSION": r"v\d+\.\d+\.\d+",
        # The lab VM runs Kubernetes 1.36 (k3s v1.36.4); kind node images must be digest-pinned.
        "KIND_NODE_IMAGE": r"kindest/node:v1\.36\.\d+@sha256:[0-9a-f]{64}",
        "KUBECTL_VERSION": r"v1\.36\.\d+",
        # The lab uses Argo CD v3.5.x.
        "ARGOCD_VERSION": r"v3\.5\.\d+",
        # A tag (or digest) that is not "latest".
        "GITD_IMAGE": r"[a-z0-9./_-]+(:(?!latest$)[A-Za-z0-9._-]+)?(@sha256:[0-9a-f]{64})?",
    }
    for key, pat in patterns.items():
        val = env.get(key)
        if check(val is not None, f"{path}: {key} missing"):
            check(re.fullmatch(pat, val), f"{path}: {key}={val} does not match {pat}")
    img = env.get("GITD_IMAGE", "")
    check(":" in img.split("@")[0] or "@" in img, f"{path}: GITD_IMAGE={img} is not pinned")
    return env


def check_kind_config(path, bare_parent):
    docs = load_all(path)
    if not check(len(docs) == 1, f"{path}: expected one document, got {len(docs)}"):
        return None
    cfg = docs[0]
    check(cfg.get("kind") == "Cluster", f"{path}: kind is {cfg.get('kind')!r}, not Cluster")
    check(cfg.get("apiVersion") == "kind.x-k8s.io/v1alpha4",
          f"{path}: apiVersion is {cfg.get('apiVersion')!r}, not kind.x-k8s.io/v1alpha4")
    known = {"kind", "apiVersion", "name", "nodes", "networking", "featureGates", "runtimeConfig",
             "kubeadmConfigPatches", "kubeadmConfigPatchesJSON6902", "containerdConfigPatches",
             "containerdConfigPatchesJSON6902"}
    check(set(cfg) <= known, f"{path}: unknown top-level keys {sorted(set(cfg) - known)}")
    nodes = cfg.get("nodes")
    if not check(isinstance(nodes, list) and nodes, f"{path}: no nodes"):
        return None
    roles = [n.get("role") if isinstance(n, dict) else None for n in nodes]
    check(roles.count("control-plane") == 1, f"{path}: expected one control-plane, roles {roles}")
    check(set(roles) <= {"control-plane", "worker"}, f"{path}: unknown roles {roles}")
    node_keys = {"role", "image", "extraMounts", "extraPortMappings", "labels",
                 "kubeadmConfigPatches", "kubeadmConfigPatchesJSON6902"}
    mount_keys = {"hostPath", "containerPath", "readOnly", "selinuxRelabel", "propagation"}
    container_paths = set()
    for i, node in enumerate(nodes):
        if not check(isinstance(node, dict), f"{path}: nodes[{i}] is not a mapping"):
            continue
        check(set(node) <= node_keys, f"{path}: nodes[{i}] unknown keys {sorted(set(node) - node_keys)}")
        check("image" not in node, f"{path}: nodes[{i}] sets image; it belongs in versions.env")
        mounts = node.get("extraMounts") or []
        check(isinstance(mounts, list), f"{path}: nodes[{i}].extraMounts is not a list")
        found = None
        for j, m in enumerate(mounts if isinstance(mounts, list) else []):
            if not check(isinstance(m, dict), f"{path}: nodes[{i}].extraMounts[{j}] not a mapping"):
                continue
            check(set(m) <= mount_keys,
                  f"{path}: nodes[{i}].extraMounts[{j}] unknown keys {sorted(set(m) - mount_keys)}")
            check(isinstance(m.get("readOnly", False), bool),
                  f"{path}: nodes[{i}].extraMounts[{j}].readOnly is not a bool")
            if m.get("hostPath") == bare_parent:
                found = m
        # gitd may be scheduled on any node: each one needs the mount.
        if check(found is not None,
                 f"{path}: nodes[{i}] has no extraMount with hostPath {bare_parent!r}"):
            cp = found.get("containerPath")
            check(isinstance(cp, str) and cp.startswith("/"),
                  f"{path}: nodes[{i}] mount containerPath {cp!r} is not absolute")
            container_paths.add(cp)
    check(len(container_paths) <= 1, f"{path}: nodes mount the repo at different paths {container_paths}")
    return container_paths.pop() if len(container_paths) == 1 else None


def named(docs, kind, name):
    hits = [d for d in docs if d.get("kind") == kind and dig(d, "metadata", "name") == name]
    return hits[0] if len(hits) == 1 else None


def check_gitd(path, env, node_path, repo_url):
    docs = load_all(path)
    m = re.fullmatch(r"git://([a-z0-9-]+)\.([a-z0-9-]+)\.svc\.cluster\.local:(\d+)/(\S+)", repo_url)
    if not check(m, f"repo URL {repo_url!r} is not git://SVC.NS.svc.cluster.local:PORT/REPO"):
        return
    svc_name, ns, port = m.group(1), m.group(2), int(m.group(3))

    kinds = sorted((d.get("kind"), dig(d, "metadata", "name")) for d in docs)
    check(kinds == sorted([("Namespace", ns), ("Deployment", svc_name), ("Service", svc_name)]),
          f"{path}: expected Namespace {ns}, Deployment and Service {svc_name}; got {kinds}")
    api = {"Namespace": "v1", "Service": "v1", "Deployment": "apps/v1"}
    for d in docs:
        check(api.get(d.get("kind")) == d.get("apiVersion"),
              f"{path}: {d.get('kind')} has apiVersion {d.get('apiVersion')!r}")
        if d.get("kind") != "Namespace":
            check(dig(d, "metadata", "namespace") == ns,
                  f"{path}: {d.get('kind')} is not in namespace {ns}")

    dep = named(docs, "Deployment", svc_name)
    svc = named(docs, "Service", svc_name)
    if not (check(dep, f"{path}: no Deployment {svc_name}") and check(svc, f"{path}: no Service {svc_name}")):
        return
    labels = dig(dep, "spec", "template", "metadata", "labels") or {}
    sel = dig(dep, "spec", "selector", "matchLabels") or {}
    check(sel and sel.items() <= labels.items(), f"{path}: Deployment selector {sel} does not match pod labels {labels}")
    check(dig(dep, "spec", "replicas") in (None, 1), f"{path}: gitd replicas should be 1")
    containers = dig(dep, "spec", "template", "spec", "containers") or []
    if not check(len(containers) == 1, f"{path}: gitd should have exactly one container"):
        return
    c = containers[0]
    check(c.get("image") == env.get("GITD_IMAGE"),
          f"{path}: gitd image {c.get('image')!r} is not GITD_IMAGE {env.get('GITD_IMAGE')!r}")
    cports = [p for p in c.get("ports") or [] if isinstance(p, dict)]
    check(any(p.get("containerPort") == port and p.get("protocol", "TCP") == "TCP" for p in cports),
          f"{path}: gitd container does not expose TCP {port}")

    # What git daemon actually runs: join command+args, then split like sh would.
    argv = [str(a) for a in (c.get("command") or []) + (c.get("args") or [])]
    script = argv[-1] if argv[:2] == ["sh", "-c"] and len(argv) == 3 else shlex.join(argv)
    words = shlex.split(script.replace("&&", " && "))
    if check("daemon" in words and "git" in words, f"{path}: gitd does not run git daemon: {script!r}"):
        daemon = words[words.index("daemon") + 1:]
        opts = {w.split("=", 1)[0]: (w.split("=", 1) + [None])[1] for w in daemon if w.startswith("--")}
        dirs = [w for w in daemon if not w.startswith("--")]
        check("--export-all" in opts, f"{path}: git daemon lacks --export-all")
        check(opts.get("--port", "9418") == str(port), f"{path}: git daemon port {opts.get('--port')} != {port}")
        check(not any(k == "--enable" and v == "receive-pack" for k, v in opts.items()),
              f"{path}: git daemon must stay read-only (no --enable=receive-pack)")
        base = opts.get("--base-path")
        check(base is not None, f"{path}: git daemon lacks --base-path")
        check(dirs == [base], f"{path}: git daemon should whitelist exactly its base path, got {dirs}")
        check("safe.directory" in words,
              f"{path}: gitd does not set safe.directory (host uid differs from the pod's)")
        # The base path must be the volume mounted from the node's copy of the bare repo parent.
        mounts = {vm.get("name"): vm.get("mountPath") for vm in c.get("volumeMounts") or []}
        vols = {v.get("name"): v for v in dig(dep, "spec", "template", "spec", "volumes") or []}
        vol_name = next((n for n, mp in mounts.items() if mp == base), None)
        if check(vol_name, f"{path}: no volume is mounted at --base-path {base}"):
            host = dig(vols.get(vol_name), "hostPath", "path")
            check(host == node_path,
                  f"{path}: volume {vol_name} hostPath {host!r} is not the kind node's mount {node_path!r}")
        # The repo's name in the URL resolves under the base path.
        check(m.group(4).endswith(".git"), f"repo URL path {m.group(4)!r} should name a bare repo")

    sports = dig(svc, "spec", "ports") or []
    ssel = dig(svc, "spec", "selector") or {}
    check(ssel and ssel.items() <= labels.items(), f"{path}: Service selector {ssel} does not select gitd pods")
    names = {p.get("name"): p.get("containerPort") for p in cports}
    ok = False
    for p in sports:
        tp = p.get("targetPort", p.get("port"))
        tp = names.get(tp) if isinstance(tp, str) else tp
        ok |= p.get("port") == port and tp == port
    check(ok, f"{path}: Service {svc_name} does not map port {port} to the container's {port}")
    check(dig(svc, "spec", "type") in (None, "ClusterIP"), f"{path}: Service should be ClusterIP")


def check_smoke(path, env, repo_url):
    docs = load_all(path)
    job = named(docs, "Job", "gitd-smoke") if len(docs) == 1 else None
    if not check(job, f"{path}: expected exactly one Job gitd-smoke"):
        return
    check(job.get("apiVersion") == "batch/v1", f"{path}: Job apiVersion {job.get('apiVersion')!r}")
    spec = dig(job, "spec", "template", "spec") or {}
    check(spec.get("restartPolicy") in ("Never", "OnFailure"), f"{path}: Job needs restartPolicy Never/OnFailure")
    c = dig(spec, "containers", 0) or {}
    check(c.get("image") == env.get("GITD_IMAGE"), f"{path}: image is not GITD_IMAGE")
    check(c.get("command") == ["git", "ls-remote", repo_url],
          f"{path}: command {c.get('command')} is not git ls-remote {repo_url}")


def steps_of(wf):
    for job in (wf.get("jobs") or {}).values():
        for step in job.get("steps") or []:
            if isinstance(step, dict):
                yield step


def check_workflow(path):
    docs = load_all(path)
    if not check(len(docs) == 1, f"{path}: expected one document"):
        return
    wf = docs[0]
    steps = list(steps_of(wf))
    runs = [str(s.get("run", "")) for s in steps]
    text = "\n".join(runs)
    for u in (s.get("uses") for s in steps if s.get("uses")):
        # "./" is this repository's own action (action.yml), at the checked-out commit.
        check(u == "./" or re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", u),
              f"{path}: action {u} is not pinned to a commit SHA")
    check("ci/kind/versions.env" in text, f"{path}: does not read ci/kind/versions.env")
    for var in ("CNPE_EVIDENCE_DIR", "CNPE_GITOPS_DIR", "CNPE_BARE_REPO"):
        check(re.search(rf"{var}=\$RUNNER_TEMP/", text), f"{path}: {var} is not set under $RUNNER_TEMP")
    for script in ("ci/kind/install-tools.sh", "ci/kind/up.sh", "ci/kind/diagnose.sh", "ci/kind/down.sh"):
        check(script in text, f"{path}: does not run {script}")
    check(any(r.strip() == "cargo test" for r in runs), f"{path}: no step runs `cargo test`")
    check(any(r.strip() == "cargo test --test lab" for r in runs), f"{path}: no step runs `cargo test --test lab`")
    diag = [s for s in steps if "diagnose.sh" in str(s.get("run", ""))]
    check(diag and all("failure()" in str(s.get("if", "")) for s in diag), f"{path}: diagnostics must run if: failure()")
    up = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    check(up and all("always()" in str(s.get("if", "")) for s in up), f"{path}: artifact upload must run if: always()")
    check(any("CNPE_EVIDENCE_DIR" in str(dig(s, "with", "path")) for s in up), f"{path}: evidence dir is not uploaded")
    with open(path, encoding="utf-8") as f:
        check(not re.search(r"\$\{\{[^}]*\bsecrets\.", f.read()), f"{path}: uses secrets")


def main(argv):
    if len(argv) != 8:
        print(__doc__, file=sys.stderr)
        return 2
    versions, kind_cfg, gitd, smoke, workflow, bare_parent, repo_url = argv[1:]
    env = check_versions(versions)
    node_path = check_kind_config(kind_cfg, bare_parent)
    check_gitd(gitd, env, node_path, repo_url)
    check_smoke(smoke, env, repo_url)
    check_workflow(workflow)
    for e in ERRORS:
        print(f"manifests: {e}")
    return 1 if ERRORS else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
