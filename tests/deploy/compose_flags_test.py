#!/usr/bin/env python3
"""Every PSTRAIN_* variable that docker/docker-compose.yml (alone and with
the GPU overlay) sets is a real flag of the binary its service runs (asked
from the binary: --helpfull), or one of docker/entrypoint.sh's own; and the
services fit together: endpoints point at the coordinator's port,
healthchecks probe the port each service binds, the coordinator expects
the servers the file defines and WORKERS workers, worker ranks come from the
coordinator, restart policies and volumes are in place.

usage: compose_flags_test.py --bin-dir=BUILD/bin
"""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_lib as lib  # noqa: E402


def health_flags(bin_dir):
    out = subprocess.run([os.path.join(bin_dir, "pstrain"), "health", "--help"],
                         capture_output=True, text=True, timeout=30)
    flags = set(re.findall(r"^\s+--([a-z0-9_]+) \(default", out.stdout, re.M))
    if out.returncode != 0 or "endpoint" not in flags:
        raise SystemExit("FAIL: `pstrain health --help` does not list --endpoint:\n" + out.stdout +
                         out.stderr)
    return flags


def check_services(label, compose, bin_dir, own, errors):
    services = compose["services"]
    roles = {name: lib.role_of(svc) for name, svc in services.items()}
    hflags = health_flags(bin_dir)
    coordinators = [n for n, r in roles.items() if r == "coordinator"]
    servers = [n for n, r in roles.items() if r == "server"]
    workers = [n for n, r in roles.items() if r == "worker"]
    gens = [n for n, r in roles.items() if r == "gen"]
    if len(coordinators) != 1 or not servers or not workers or not gens:
        errors.append("%s: want 1 coordinator, servers, workers and a gen job; roles are %s" %
                      (label, roles))
        return
    coord = services[coordinators[0]]
    coord_port = lib.port_of(coord["environment"].get("PSTRAIN_BIND", "tcp://0.0.0.0:7000"))
    server_ranks = {}

    for name, svc in services.items():
        where = "%s: service %s" % (label, name)
        role = roles[name]
        env = svc["environment"]
        if role not in lib.ROLE_BINARY and role != "gen":
            errors.append("%s: unknown role '%s'" % (where, role))
            continue
        errors += lib.check_env_names(where, role, env.keys(), bin_dir, own)
        cmd = svc.get("command") or []
        if isinstance(cmd, str):
            cmd = cmd.split()
        if role in lib.ROLE_BINARY:
            flags = lib.binary_flags(bin_dir, lib.ROLE_BINARY[role])
            for arg in cmd:
                m = re.match(r"--([A-Za-z0-9_]+)", arg)
                if m and m.group(1) not in flags:
                    errors.append("%s: command flag --%s is not a flag of %s" %
                                  (where, m.group(1), lib.ROLE_BINARY[role]))
        if role == "gen":
            if svc.get("restart", "no") != "no":
                errors.append("%s: the data job must not restart" % where)
            continue
        if svc.get("restart") != "on-failure":
            errors.append("%s: restart is %r, want on-failure" % (where, svc.get("restart")))
        # Peers reach the coordinator on the port it binds.
        if role != "coordinator":
            ep = env.get("PSTRAIN_COORDINATOR", "")
            m = re.match(r"tcp://([^:]+):(\d+)$", ep)
            if not m or m.group(1) not in coordinators or int(m.group(2)) != coord_port:
                errors.append("%s: PSTRAIN_COORDINATOR=%r does not name the coordinator "
                              "service at port %s" % (where, ep, coord_port))
            bind = env.get("PSTRAIN_BIND", "")
            if not bind.startswith("tcp://0.0.0.0:") or lib.port_of(bind) in (None, 0):
                errors.append("%s: PSTRAIN_BIND=%r: bind tcp://0.0.0.0:PORT with a fixed port" %
                              (where, bind))
        # The healthcheck probes this service's own port with known flags.
        test = (svc.get("healthcheck") or {}).get("test") or []
        if test[:3] != ["CMD", "pstrain", "health"]:
            errors.append("%s: healthcheck is not [CMD, pstrain, health, ...]: %r" % (where, test))
        else:
            port = lib.port_of(env.get("PSTRAIN_BIND", ""))
            want = "--endpoint=tcp://localhost:%s" % port
            if want not in test:
                errors.append("%s: healthcheck does not probe %s: %r" % (where, want, test))
            for arg in test[3:]:
                m = re.match(r"--([a-z0-9_]+)", arg)
                if not m or m.group(1) not in hflags:
                    errors.append("%s: healthcheck argument %r is not a pstrain health flag" %
                                  (where, arg))
        if role == "server" and not env.get("PSTRAIN_ADVERTISE_HOST"):
            errors.append("%s: servers advertise their service name (PSTRAIN_ADVERTISE_HOST)" %
                          where)
        if role == "server":
            # A restarted server replaces its old self at once only under a
            # fixed rank (else its slot stays taken until the old one times out).
            rank = env.get("PSTRAIN_RANK", "")
            if not rank.isdigit():
                errors.append("%s: a server needs a fixed PSTRAIN_RANK, got %r" % (where, rank))
            elif rank in server_ranks:
                errors.append("%s: PSTRAIN_RANK=%s is also %s's" % (where, rank,
                                                                   server_ranks[rank]))
            else:
                server_ranks[rank] = name
        if role == "worker":
            if "PSTRAIN_RANK" in env or "container_name" in svc:
                errors.append("%s: a scalable worker sets neither PSTRAIN_RANK nor "
                              "container_name (ranks come from the coordinator)" % where)
            mounts = [str(v).split(":")[1] for v in svc.get("volumes", []) if ":" in str(v)]
            for key in ("PSTRAIN_TRAIN_DATA", "PSTRAIN_EVAL_DATA", "PSTRAIN_EVAL_META"):
                path = env.get(key, "")
                if not any(path.startswith(m + "/") for m in mounts):
                    errors.append("%s: %s=%r is not on a mounted volume %s" %
                                  (where, key, path, mounts))
            dep = svc.get("depends_on") or {}
            if not isinstance(dep, dict) or \
                    (dep.get(gens[0]) or {}).get("condition") != "service_completed_successfully":
                errors.append("%s: workers must wait for the data job to complete" % where)
        if role in ("coordinator", "server"):
            vols = [str(v) for v in svc.get("volumes", [])]
            if not any(v.startswith("checkpoints:") for v in vols):
                errors.append("%s: the checkpoints volume is not mounted" % where)

    env = coord["environment"]
    if env.get("PSTRAIN_SERVERS") != str(len(servers)):
        errors.append("%s: coordinator expects PSTRAIN_SERVERS=%s, the file defines %d servers" %
                      (label, env.get("PSTRAIN_SERVERS"), len(servers)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    args = ap.parse_args()
    lib.import_yaml()
    own = lib.entrypoint_variables()
    if "PSTRAIN_ROLE" not in own:
        raise SystemExit("FAIL: docker/entrypoint.sh documents no variables of its own")
    errors = []
    # The entrypoint's own variables reach the binaries too (they read every
    # PSTRAIN_* variable): none may be one of their flags.
    for name in sorted(own):
        for binary in lib.ROLE_BINARY.values():
            if name[len("PSTRAIN_"):].lower() in lib.binary_flags(args.bin_dir, binary):
                errors.append("entrypoint variable %s is also a flag of %s" % (name, binary))
    clean = {k: v for k, v in os.environ.items()
             if k not in ("WORKERS", "PSTRAIN_IMAGE", "PSTRAIN_GPU_IMAGE")}
    for label, files in (("compose", [lib.COMPOSE]),
                         ("compose+gpu", [lib.COMPOSE, lib.COMPOSE_GPU])):
        compose = lib.load_compose(files, clean)
        check_services(label, compose, args.bin_dir, own, errors)
    # The online stack: every PSTRAIN_* variable a flag of its binary too.
    online = lib.load_compose([lib.COMPOSE_ONLINE], clean)["services"]
    for name, svc in online.items():
        errors += lib.check_env_names("compose online: service " + name, lib.role_of(svc),
                                      svc.get("environment", {}).keys(), args.bin_dir, own)
    # WORKERS sizes the job: the coordinator waits for that many workers.
    scaled = lib.load_compose([lib.COMPOSE], dict(clean, WORKERS="5"))
    # ... and, the same variable, the number of worker containers.
    for name, svc in scaled["services"].items():
        if lib.role_of(svc) == "coordinator" and svc["environment"].get("PSTRAIN_WORKERS") != "5":
            errors.append("compose: coordinator PSTRAIN_WORKERS does not follow ${WORKERS}")
        if lib.role_of(svc) == "worker" and str(svc.get("scale")) != "5":
            errors.append("compose: worker scale %r does not follow ${WORKERS}" %
                          svc.get("scale"))
        if lib.role_of(svc) == "coordinator" and \
                svc["environment"].get("PSTRAIN_ELASTIC_WORKERS") not in ("1", "true"):
            errors.append("compose: elastic workers are off: a restarted worker container "
                          "could not rejoin")
    gpu = lib.load_compose([lib.COMPOSE, lib.COMPOSE_GPU], clean)["services"]
    for name, svc in gpu.items():
        if lib.role_of(svc) != "worker":
            continue
        if svc["environment"].get("PSTRAIN_DEVICE") != "cuda":
            errors.append("compose+gpu: %s does not set PSTRAIN_DEVICE=cuda" % name)
        devices = (((svc.get("deploy") or {}).get("resources") or {}).get("reservations")
                   or {}).get("devices") or []
        if not any("gpu" in (d.get("capabilities") or []) for d in devices):
            errors.append("compose+gpu: %s reserves no GPU" % name)
        if (svc.get("build") or {}).get("args", {}).get("FLAVOR") != "gpu":
            errors.append("compose+gpu: %s is not built with FLAVOR=gpu" % name)
    # Variables left commented until their flag exists: say when it does.
    for path in (lib.COMPOSE, lib.COMPOSE_GPU):
        with open(path) as fh:
            for line in fh:
                m = re.match(r"\s*#\s*(PSTRAIN_[A-Z0-9_]+):", line)
                if m:
                    flag = m.group(1)[len("PSTRAIN_"):].lower()
                    for binary in lib.ROLE_BINARY.values():
                        if flag in lib.binary_flags(args.bin_dir, binary):
                            print("NOTE: %s is commented out in %s but %s now has --%s" %
                                  (m.group(1), os.path.basename(path), binary, flag))
    if errors:
        print("\n".join("FAIL: " + e for e in errors))
        return 1
    print("compose files: every PSTRAIN_* variable is a flag of its service's binary "
          "(entrypoint's own: %s)" % ", ".join(sorted(own)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
