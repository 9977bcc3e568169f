#!/usr/bin/env python3
"""examples/k8s/*.yaml parse, hold the expected kinds with the expected
apiVersions, and fit together: every PSTRAIN_* variable a container gets
(its env, and the ConfigMaps it names in envFrom, if any: the example sets
its flags inline) is a flag of the binary its role runs (or the
entrypoint's own), the coordinator's server and worker counts match the
StatefulSet and the Job, endpoints and probes name the right Service and
ports, selectors match their pod labels. Needs no cluster.

usage: k8s_manifests_test.py --bin-dir=BUILD/bin
"""
import argparse
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_lib as lib  # noqa: E402

K8S_DIR = os.path.join(lib.REPO, "examples", "k8s")
API_VERSIONS = {
    "ConfigMap": "v1",
    "Service": "v1",
    "PersistentVolumeClaim": "v1",
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "Job": "batch/v1",
}
# The workload kind that runs each role.
ROLE_KIND = {"coordinator": "Deployment", "server": "StatefulSet", "worker": "Job"}


def load_docs(yaml):
    docs = []
    files = sorted(glob.glob(os.path.join(K8S_DIR, "*.yaml")))
    if not files:
        raise SystemExit("FAIL: no manifests in " + K8S_DIR)
    for path in files:
        with open(path) as fh:
            try:
                found = [d for d in yaml.safe_load_all(fh) if d is not None]
            except yaml.YAMLError as e:
                raise SystemExit("FAIL: %s does not parse: %s" % (path, e))
        for d in found:
            docs.append((os.path.basename(path), d))
    return docs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    bin_dir = ap.parse_args().bin_dir
    yaml = lib.import_yaml()
    own = lib.entrypoint_variables()
    errors = []
    docs = load_docs(yaml)
    by_kind = {}
    for f, d in docs:
        kind, api = d.get("kind"), d.get("apiVersion")
        name = (d.get("metadata") or {}).get("name")
        if kind not in API_VERSIONS:
            errors.append("%s: unexpected kind %r" % (f, kind))
            continue
        if api != API_VERSIONS[kind]:
            errors.append("%s: %s %s has apiVersion %r, want %r" %
                          (f, kind, name, api, API_VERSIONS[kind]))
        if not name:
            errors.append("%s: a %s without metadata.name" % (f, kind))
        by_kind.setdefault(kind, {})[name] = d
    configmaps = {n: (d.get("data") or {}) for n, d in by_kind.get("ConfigMap", {}).items()}
    services = by_kind.get("Service", {})

    role_env = {}  # role -> resolved env of its main container
    for kind in ("Deployment", "StatefulSet", "Job"):
        for name, d in by_kind.get(kind, {}).items():
            spec = d.get("spec") or {}
            tmpl = spec.get("template") or {}
            labels = (tmpl.get("metadata") or {}).get("labels") or {}
            if kind != "Job":
                sel = (spec.get("selector") or {}).get("matchLabels") or {}
                if not sel or any(labels.get(k) != v for k, v in sel.items()):
                    errors.append("%s %s: selector %s does not match pod labels %s" %
                                  (kind, name, sel, labels))
            pod = tmpl.get("spec") or {}
            for c in (pod.get("initContainers") or []) + (pod.get("containers") or []):
                where = "%s %s container %s" % (kind, name, c.get("name"))
                env = {e["name"]: e.get("value", "") for e in c.get("env") or []}
                for ref in c.get("envFrom") or []:
                    cm = (ref.get("configMapRef") or {}).get("name")
                    if cm not in configmaps:
                        errors.append("%s: envFrom names a missing ConfigMap %r" % (where, cm))
                        continue
                    for k, v in configmaps[cm].items():
                        env.setdefault(k, str(v))
                role = env.get("PSTRAIN_ROLE", "")
                if role not in lib.ROLE_BINARY and role not in ("gen", "shell"):
                    errors.append("%s: PSTRAIN_ROLE=%r is not a role" % (where, role))
                    continue
                errors += lib.check_env_names(where, role, env.keys(), bin_dir, own)
                if role in ROLE_KIND:
                    if ROLE_KIND[role] != kind:
                        errors.append("%s: role %s should run in a %s" % (where, role,
                                                                           ROLE_KIND[role]))
                    role_env[role] = (kind, d, c, env)

    for role in ROLE_KIND:
        if role not in role_env:
            errors.append("no %s runs role %s" % (ROLE_KIND[role], role))
    if errors:
        print("\n".join("FAIL: " + e for e in errors))
        return 1

    _, _, _, cenv = role_env["coordinator"]
    coord_port = lib.port_of(cenv.get("PSTRAIN_BIND", "tcp://0.0.0.0:7000"))
    for role, (kind, d, c, env) in role_env.items():
        where = "%s %s" % (kind, d["metadata"]["name"])
        port = lib.port_of(env.get("PSTRAIN_BIND", ""))
        if role != "coordinator":
            m = re.match(r"tcp://([^:]+):(\d+)$", env.get("PSTRAIN_COORDINATOR", ""))
            svc = services.get(m.group(1)) if m else None
            if not svc or int(m.group(2)) != coord_port or \
                    not any(p.get("port") == coord_port for p in svc["spec"].get("ports", [])):
                errors.append("%s: PSTRAIN_COORDINATOR=%r is not the coordinator Service at "
                              "port %s" % (where, env.get("PSTRAIN_COORDINATOR"), coord_port))
        for probe in ("readinessProbe", "livenessProbe"):
            cmd = ((c.get(probe) or {}).get("exec") or {}).get("command")
            if cmd and "--endpoint=tcp://localhost:%s" % port not in cmd:
                errors.append("%s: %s does not probe port %s: %r" % (where, probe, port, cmd))
        if role in ("coordinator", "server") and not c.get("readinessProbe"):
            errors.append("%s: no readinessProbe (pstrain health)" % where)
    _, sts, _, _ = role_env["server"]
    if str(sts["spec"].get("replicas")) != cenv.get("PSTRAIN_SERVERS"):
        errors.append("StatefulSet replicas %s != coordinator PSTRAIN_SERVERS %s" %
                      (sts["spec"].get("replicas"), cenv.get("PSTRAIN_SERVERS")))
    headless = services.get(sts["spec"].get("serviceName"))
    if not headless or headless["spec"].get("clusterIP") != "None":
        errors.append("StatefulSet serviceName %r is not a headless Service" %
                      sts["spec"].get("serviceName"))
    _, job, _, _ = role_env["worker"]
    for key in ("parallelism", "completions"):
        if str(job["spec"].get(key)) != cenv.get("PSTRAIN_WORKERS"):
            errors.append("worker Job %s %s != coordinator PSTRAIN_WORKERS %s" %
                          (key, job["spec"].get(key), cenv.get("PSTRAIN_WORKERS")))
    if errors:
        print("\n".join("FAIL: " + e for e in errors))
        return 1
    print("k8s: %d documents (%s); every PSTRAIN_* variable is a flag of its role's binary" %
          (len(docs), ", ".join("%d %s" % (len(v), k) for k, v in sorted(by_kind.items()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
