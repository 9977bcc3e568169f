#!/usr/bin/env python3
"""docker/docker-compose.online.yml under a real Docker engine (ctest -L docker).

Starts the private dockerd of scripts/docker_env.py, builds the runtime image
from this build's binaries and runs the online stack as documented, on a small
stream: the writer makes PARTITIONS partitions, the cluster trains each as it
completes and exports versions, `pstrain serve` serves the export volume. The
run must end with every container but `serve` exited 0, one partition line per
partition in the metrics with every row trained once, versions in the export
volume (a base, then deltas), `serve` serving the version LATEST names, and
a POST /predict of rows from the stream answered with a probability each.

Network safety as in compose_test.py: the project's network is `internal`,
every container's DNS points at 127.0.0.1, and the published port of `serve`
is bound to 127.0.0.1 only; the test reaches `serve` at its address on the
project's bridge.

Skips (exit 77) when not root or without docker.io / docker-compose / debootstrap.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import docker_env  # noqa: E402

SKIP = 77
COMPOSE = os.path.join(REPO, "docker", "docker-compose.online.yml")
PROJECT = "pstrain-onlinetest"
IMAGE = docker_env.TEST_IMAGE
UID = docker_env.IMAGE_UID
VOLUMES = {"stream": ["stream"], "coordinator": ["checkpoints"], "server0": ["checkpoints"],
           "server1": ["checkpoints"], "worker": ["stream", "export", "metrics"],
           "serve": ["export"]}


def log(msg):
    print("online_test: " + msg, flush=True)


class Failure(Exception):
    pass


def predict_over_http(docker, containers, work, rows):
    """POSTs rows of the first partition to serve at its address on the
    project's network (the host's side of that bridge reaches it); returns
    what it saw, or raises Failure on a bad answer."""
    import urllib.error
    import urllib.request
    cid = docker.docker("ps", "-q", "--filter", "label=com.docker.compose.project=" + PROJECT,
                        "--filter", "label=com.docker.compose.service=serve").split()[0]
    ip = docker.docker("inspect", "-f",
                       "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", cid).split()[0]
    part = sorted(d for d in os.listdir(os.path.join(work, "stream")))[0]
    path = os.path.join(work, "stream", part)
    path = os.path.join(path, sorted(os.listdir(path))[0], "part-0.tsv")
    with open(path) as f:
        lines = [next(f).split("\t", 1)[1] for _ in range(8)]
    body = "".join(lines).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(
                "http://%s:8500/predict" % ip, data=body), timeout=10) as r:
            answer = json.loads(r.read())
    except (urllib.error.URLError, OSError) as e:
        raise Failure("POST /predict to serve at %s:8500 failed: %s" % (ip, e))
    probs = answer.get("probabilities") or []
    if len(probs) != len(lines) or not all(0 < p < 1 for p in probs):
        raise Failure("POST /predict of %d rows answered %s" % (len(lines), answer))
    return "POST /predict: %d probabilities from version %s" % (len(probs),
                                                              answer.get("model_version"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--time-limit", type=float, default=600)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    why = docker_env.compose_missing_tools()
    if why:
        print("SKIP: " + "; ".join(why))
        return SKIP
    deadline = time.time() + args.time_limit
    work = docker_env.compose_work_dir("pstrain-online-", ("stream", "checkpoints", "export",
                                                           "metrics"), UID)
    env = {"WORKERS": "2", "PARTITIONS": str(args.partitions), "PARTITION_ROWS": str(args.rows),
           "PARTITION_INTERVAL_SECS": "5", "DRIFT": "0.05", "STREAM_IDLE_SECS": "20",
           "EXPORT_EVERY_SECS": "5", "CHECKPOINT_EVERY_SECS": "5", "MODEL": "dlrm",
           "BATCH_SIZE": "1024", "SERVE_PORT": str(20000 + os.getpid() % 20000)}
    ok = False
    try:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit("online_test: terminated"))
        with docker_env.PrivateDocker(deadline=deadline - 60) as docker:
            docker.probe_containers()
            mounts = docker.prebuilt_image(args.bin_dir, IMAGE)
            override = docker_env.write_compose_override(work, VOLUMES, mounts)
            denv = docker.env(dict(env, PSTRAIN_IMAGE=IMAGE))

            def compose(*a, timeout=120, check=True):
                cmd = ["docker-compose", "-p", PROJECT, "-f", COMPOSE, "-f", override] + list(a)
                r = subprocess.run(cmd, env=denv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   timeout=max(5, min(timeout, deadline - time.time())))
                text = r.stdout.decode(errors="replace")
                if check and r.returncode != 0:
                    raise Failure("`docker-compose %s` failed (exit %d):\n%s" % (
                        " ".join(a), r.returncode, text[-3000:]))
                return text

            def containers():
                ids = docker.docker("ps", "-aq", "--filter",
                                    "label=com.docker.compose.project=" + PROJECT).split()
                out = {}
                for cid in ids:
                    fmt = ('{{index .Config.Labels "com.docker.compose.service"}} '
                           '{{.State.Status}} {{.State.ExitCode}}')
                    svc, status, code = docker.docker("inspect", "-f", fmt, cid).split()
                    out.setdefault(svc, []).append((status, int(code)))
                return out

            compose("down", "-v", "--remove-orphans", "-t", "5", check=False)
            try:
                t0 = time.time()
                compose("up", "--no-build", "-d")
                log("stack up: %d partitions of %d rows, one every 5 s" % (args.partitions,
                                                                         args.rows))
                while True:
                    cs = containers()
                    job = {k: v for k, v in cs.items() if k != "serve"}
                    if job and all(s == "exited" for v in job.values() for s, _ in v):
                        break
                    if time.time() > deadline - 90:
                        raise Failure("the job did not end: %s" % cs)
                    time.sleep(1)
                wall = time.time() - t0
                logs = compose("logs", "--no-color", check=False)
                with open(os.path.join(work, "stack.log"), "w") as f:
                    f.write(logs)
                bad = {k: v for k, v in job.items() if any(c != 0 for _, c in v)}
                if bad:
                    raise Failure("containers did not exit 0: %s\n%s" % (bad, logs[-5000:]))
                if cs.get("serve", [("", 0)])[0][0] != "running":
                    raise Failure("serve is not running: %s\n%s" % (cs.get("serve"), logs[-3000:]))
                parts = [json.loads(l) for l in open(os.path.join(work, "metrics",
                                                                  "metrics.jsonl"))
                         if '"partition"' in l and '"event"' in l]
                rows = {p["partition"]: p["rows"] for p in parts}
                if len(rows) != args.partitions or any(r != args.rows for r in rows.values()):
                    raise Failure("rows trained per partition %s, want %d partitions of %d" % (
                        rows, args.partitions, args.rows))
                latest = open(os.path.join(work, "export", "LATEST")).read().strip()
                versions = sorted(n for n in os.listdir(os.path.join(work, "export"))
                                  if re.match(r"v\d+$", n))
                # The last version is taken up within serve's poll (1 s).
                served = None
                end = time.time() + 15
                while time.time() < end:
                    slog = compose("logs", "--no-color", "serve", check=False)
                    found = re.findall(r"serving model version (\S+)", slog)
                    served = found[-1] if found else None
                    if served == latest:
                        break
                    time.sleep(1)
                if served != latest:
                    raise Failure("serve serves %s, LATEST is %s:\n%s" % (served, latest,
                                                                         slog[-3000:]))
                predicted = predict_over_http(docker, containers, work, args.rows)
                aucs = ["%.4f" % p["progressive_auc"] for p in parts]
                log("job ended in %.0f s, every container exit 0; rows per partition %s; "
                    "progressive AUC %s; %d versions exported (%s), serve serves %s; %s" % (
                        wall, sorted(rows.values()), aucs, len(versions), ",".join(versions),
                        served, predicted))
                print(json.dumps({"name": "docker_online", "wall_s": round(wall, 1),
                                  "partitions": len(rows), "versions": len(versions),
                                  "served": served, "progressive_auc": aucs}))
                ok = True
            finally:
                compose("down", "-v", "--remove-orphans", "-t", "5", check=False)
    except docker_env.EngineUnavailable as e:
        print("SKIP: this machine cannot run Docker's engine or make the base image: %s" % e)
        return SKIP
    except (Failure, docker_env.DockerError, OSError, ValueError) as e:
        print("FAIL: %s\n(work folder %s)" % (e, work), flush=True)
        args.keep = True
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    log("PASS")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
