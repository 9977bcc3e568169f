#!/usr/bin/env python3
"""docker/docker-compose.yml under a real Docker engine (ctest -L docker).

Starts a private dockerd (scripts/docker_env.py: own socket and data root, no
default bridge, no iptables rules), makes the Debian 12 base image with
debootstrap when the cache lacks it, builds the runtime image from this
build's binaries (docker/Dockerfile, BINARIES=prebuilt) and runs the compose
stack, as documented, on a small generated job:

  clean        `docker-compose up` with the defaults (WORKERS=2): the job
               trains and ends, every container exits 0; the eval AUC is the
               baseline. A second `up` on the finished job says so and trains
               nothing.
  server       kill -9 of the process inside server0's container, mid-job: the
               restart policy restarts it and the job finishes
  worker       the same for one worker container
  coordinator  the same for the coordinator container

Each faulted job must end with every container exited 0 and an eval AUC
within --auc-tolerance of the clean run's; the time each recovery took is
printed (and written as JSON lines to --results when given).

Network safety: the stack runs on the compose project's own network, made
`internal` (no route out), every container's DNS points at 127.0.0.1 inside
the container, where nothing answers (Docker's embedded DNS still resolves the
services' names), and no port is published. The override file that does this
is written next to the job's data and printed with --verbose.

Skips (exit 77) when not root or without docker.io / debootstrap.
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

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import docker_env  # noqa: E402

SKIP = 77
COMPOSE = os.path.join(REPO, "docker", "docker-compose.yml")
PROJECT = "pstrain-dockertest"
IMAGE = docker_env.TEST_IMAGE
UID = docker_env.IMAGE_UID


class Failure(Exception):
    pass


def log(msg):
    print("compose_test: " + msg, flush=True)


class Stack:
    """One compose project on the private engine, its folders on the host."""

    def __init__(self, docker, work, mounts, env, deadline, verbose):
        self.docker = docker
        self.work = work
        self.deadline = deadline
        self.verbose = verbose
        self.data = os.path.join(work, "data")
        self.ckpt = os.path.join(work, "checkpoints")
        self.override = os.path.join(work, "override.yml")
        self.env = docker.env(dict(env, PSTRAIN_IMAGE=IMAGE))
        for d in (self.data, self.ckpt):
            os.makedirs(d, exist_ok=True)
            os.chown(d, UID, UID)
        self._write_override(mounts)

    def _write_override(self, mounts):
        vols = {"gen": ["data"], "coordinator": ["checkpoints"],
                "server0": ["checkpoints"], "server1": ["checkpoints"], "worker": ["data"]}
        docker_env.write_compose_override(self.work, vols, mounts)

    def remaining(self):
        return self.deadline - time.time()

    def compose(self, *args, timeout=120, check=True, out=None):
        cmd = ["docker-compose", "-p", PROJECT, "-f", COMPOSE, "-f", self.override] + list(args)
        timeout = min(timeout, max(5, self.remaining()))
        try:
            r = subprocess.run(cmd, env=self.env, timeout=timeout, stdout=out or subprocess.PIPE,
                               stderr=subprocess.STDOUT)
        except subprocess.TimeoutExpired:
            raise Failure("`docker-compose %s` did not end within %.0f s" % (" ".join(args),
                                                                            timeout))
        if out:
            out.flush()
            with open(out.name, "rb") as f:
                text = f.read().decode(errors="replace")
        else:
            text = r.stdout.decode(errors="replace")
        if check and r.returncode != 0:
            raise Failure("`docker-compose %s` failed (exit %d):\n%s" % (" ".join(args),
                                                                         r.returncode, text[-3000:]))
        return text

    def containers(self):
        """{service_n: (id, status, exit code, restarts)} of the project."""
        ids = self.docker.docker("ps", "-aq", "--filter",
                                 "label=com.docker.compose.project=" + PROJECT).split()
        out = {}
        for cid in ids:
            fmt = ('{{index .Config.Labels "com.docker.compose.service"}}_'
                   '{{index .Config.Labels "com.docker.compose.container-number"}} '
                   '{{.State.Status}} {{.State.ExitCode}} {{.RestartCount}}')
            name, status, code, restarts = self.docker.docker("inspect", "-f", fmt,
                                                              cid).split()
            out[name] = (cid, status, int(code), int(restarts))
        return out

    def wait_all_exited(self, timeout):
        """Until every container has exited (a restart counts as running)."""
        end = min(time.time() + timeout, self.deadline)
        while time.time() < end:
            cs = self.containers()
            if cs and all(s == "exited" for _, s, _, _ in cs.values()):
                time.sleep(1.5)  # a policy restart may be just about to begin
                again = self.containers()
                if all(s == "exited" for _, s, _, _ in again.values()):
                    return again
            time.sleep(0.5)
        raise Failure("containers still running after %.0f s: %s" % (
            timeout, {k: v[1] for k, v in self.containers().items() if v[1] != "exited"}))

    def container_of_rank(self, rank):
        """The worker container whose process took `rank`."""
        for name, (cid, _, _, _) in sorted(self.containers().items()):
            if name.startswith("worker_"):
                out = subprocess.run([docker_env.DOCKER, "logs", cid], env=self.env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     timeout=30).stdout.decode(errors="replace")
                if re.search(r"worker: worker %d of \d+ at " % rank, out):
                    return name
        raise Failure("no worker container took rank %d" % rank)

    def logs(self):
        return self.compose("logs", "--no-color", "--timestamps", check=False, timeout=60)

    def down(self):
        self.compose("down", "-v", "--remove-orphans", "-t", "5", check=False, timeout=120)

    def reset_job(self):
        """A new job on the same data: no checkpoints, no metrics."""
        shutil.rmtree(self.ckpt, ignore_errors=True)
        os.makedirs(self.ckpt)
        os.chown(self.ckpt, UID, UID)
        with_metrics = os.path.join(self.data, "metrics.jsonl")
        if os.path.exists(with_metrics):
            os.unlink(with_metrics)

    def checkpoints(self):
        """Complete checkpoints (those with their manifest)."""
        return sorted(n for n in os.listdir(self.ckpt) if n.startswith("ckpt-") and
                      os.path.exists(os.path.join(self.ckpt, n, "manifest.json")))

    def summary(self):
        """The job's last metrics line with an eval AUC."""
        path = os.path.join(self.data, "metrics.jsonl")
        best = None
        if os.path.exists(path):
            for line in open(path):
                with_auc = json.loads(line) if '"eval_auc"' in line else None
                if with_auc is not None:
                    best = with_auc
        if best is None:
            raise Failure("no eval_auc line in %s" % path)
        return best


def docker_time(stamp):
    """Seconds since the epoch of Docker's RFC 3339 time (nanoseconds, Z)."""
    import calendar
    m = re.match(r"(\d+-\d+-\d+T\d+:\d+:\d+)(\.\d+)?Z", stamp)
    if not m:
        raise Failure("unexpected time from docker inspect: %r" % stamp)
    return calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")) + \
        float(m.group(2) or 0)


def check_clean_end(stack, cs, what):
    bad = {k: (s, c) for k, (_, s, c, _) in cs.items() if c != 0}
    if bad:
        logs = stack.logs()
        raise Failure("%s: containers did not all exit 0: %s\n--- logs (end) ---\n%s" %
                      (what, bad, logs[-6000:]))


def run_clean(stack, args):
    log("clean run: docker-compose up (WORKERS=%s, %s train rows, %s epochs)" % (
        stack.env["WORKERS"], stack.env["TRAIN_ROWS"], stack.env["EPOCHS"]))
    t0 = time.time()
    out_path = os.path.join(stack.work, "clean-up.log")
    with open(out_path, "wb") as out:
        try:
            stack.compose("up", "--no-build", timeout=args.job_timeout, out=out)
        except Failure as e:
            raise Failure("%s\n--- containers ---\n%s--- logs (end) ---\n%s" % (
                e, stack.docker.docker("ps", "-a", check=False), stack.logs()[-4000:]))
    wall = time.time() - t0
    cs = stack.wait_all_exited(30)
    check_clean_end(stack, cs, "clean run")
    workers = [k for k in cs if k.startswith("worker_")]
    if len(workers) != int(stack.env["WORKERS"]):
        raise Failure("WORKERS=%s started %d worker containers" % (stack.env["WORKERS"],
                                                                   len(workers)))
    s = stack.summary()
    log("clean run: eval AUC %.4f, %.1f s for `up` (all %d containers exited 0)" % (
        s["eval_auc"], wall, len(cs)))
    if args.skip_second_up:
        return {"auc": s["eval_auc"], "wall_s": wall}
    # A second `up` on the finished job: says so, trains nothing.
    t1 = time.time()
    text = stack.compose("up", "--no-build", timeout=args.job_timeout)
    again = time.time() - t1
    cs = stack.wait_all_exited(30)
    check_clean_end(stack, cs, "second up")
    if not re.search(r"coordinator: the job journaled in \S+ finished", text):
        raise Failure("a second `up` on the finished job did not say it had finished:\n" +
                      text[-3000:])
    after = stack.summary()
    if after != s:
        raise Failure("a second `up` on the finished job wrote a new summary: %s" % after)
    log("second up: the finished job is reported as finished (%.1f s), nothing retrained" % again)
    return {"auc": s["eval_auc"], "wall_s": wall}


# The log line that says the job has taken the restarted process back.
RECOVERED = {
    "server": r"coordinator: recovered in [0-9.]+s",
    "worker": r"coordinator: worker \d+ re-admitted at step",
    "coordinator": r"coordinator: job taken back in [0-9.]+s: .*no rollback",
}


def recovered_at(logs, pattern):
    """Docker's time stamp of the first log line matching `pattern`."""
    for line in logs.splitlines():
        if re.search(pattern, line):
            m = re.search(r"\| (\d+-\d+-\d+T[0-9:.]+Z) ", line)
            if m:
                return docker_time(m.group(1))
    return None


SERVICE_OF = {"server": "server0_1", "worker": "worker_1", "coordinator": "coordinator_1"}


def run_fault(stack, args, fault, baseline):
    container = SERVICE_OF[fault]
    stack.reset_job()
    log("%s run: up -d, kill -9 inside the %s's container after the first checkpoint" % (
        fault, "worker 1" if fault == "worker" else fault))
    t0 = time.time()
    stack.compose("up", "--no-build", "-d", timeout=120)
    # Mid-job: after the first complete checkpoint, with training going on.
    end = time.time() + args.job_timeout
    while not stack.checkpoints():
        if time.time() > end or stack.remaining() < 0:
            raise Failure("%s run: no checkpoint within %.0f s" % (fault, args.job_timeout))
        cs = stack.containers()
        if cs.get("coordinator_1", (0, "running"))[1] == "exited":
            raise Failure("%s run: the job ended before its first checkpoint" % fault)
        time.sleep(0.2)
    time.sleep(args.kill_after)
    if fault == "worker":
        # Worker 1, not 0: worker 0 leads the job and is not re-admitted (its
        # lead role moves on: docs/checkpoints-and-recovery.md, "Worker failure"); this run checks
        # re-admission under the container's host name.
        container = stack.container_of_rank(1)
    cid = stack.containers()[container][0]
    t_kill = time.time()
    # Inside the container: `docker kill` counts as a manual stop, which the
    # restart policy does not undo. kill -1 reaches every process of the
    # container's user except the shell and PID 1 (docker-init), which then
    # exits with the process's 137.
    stack.docker.docker("exec", cid, "sh", "-c", "kill -9 -1", check=False)
    try:
        cs = stack.wait_all_exited(args.job_timeout)
    finally:
        wall = time.time() - t0
        logs = stack.logs()
        with open(os.path.join(stack.work, "%s.log" % fault), "w") as f:
            f.write(logs)
    killed = cs[container]
    if killed[3] < 1:
        raise Failure("%s run: %s was not restarted (restart count 0): the kill did not "
                      "happen or the policy did not act" % (fault, container))
    check_clean_end(stack, cs, "%s run" % fault)
    started = stack.docker.docker("inspect", "-f", "{{.State.StartedAt}}", cid).strip()
    s = stack.summary()
    marker = recovered_at(logs, RECOVERED[fault])
    rec = {"fault": fault, "auc": s["eval_auc"], "auc_delta": s["eval_auc"] - baseline["auc"],
           "wall_s": round(wall, 1), "extra_s": round(wall - baseline["wall_s"], 1),
           "restart_s": round(docker_time(started) - t_kill, 2), "restarts": killed[3],
           "recovered_s": None if marker is None else round(marker - t_kill, 2)}
    steps = re.findall(r"resum\w* (?:from|at) step (\d+)", logs)
    if steps:
        rec["resumed_at_step"] = int(steps[-1])
    log("%s run: eval AUC %.4f (%+.4f vs clean), job %.1f s (%+.1f s); %s restarted %.1f s "
        "after the kill, %s" % (fault, rec["auc"], rec["auc_delta"], wall, rec["extra_s"],
                                container, rec["restart_s"],
                                "job recovered %.1f s after it" % rec["recovered_s"]
                                if marker else "no recovery line in the logs"))
    if marker is None:
        raise Failure("%s run: no line matching %r in the logs (see %s/%s.log)" % (
            fault, RECOVERED[fault], stack.work, fault))
    if fault == "coordinator" and re.search(r"rolls back|restoring /checkpoints", logs):
        raise Failure("coordinator run: the cluster rolled back (only the coordinator died)")
    if abs(rec["auc_delta"]) > args.auc_tolerance:
        raise Failure("%s run: eval AUC %.4f is not within %.3f of the clean run's %.4f" % (
            fault, rec["auc"], args.auc_tolerance, baseline["auc"]))
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--runs", default="clean,server,worker,coordinator")
    ap.add_argument("--time-limit", type=float, default=1000)
    ap.add_argument("--job-timeout", type=float, default=180)
    ap.add_argument("--train-rows", type=int, default=2000000,
                    help="2 M rows, one epoch: a killed worker costs 0.000-0.001 AUC")
    ap.add_argument("--eval-rows", type=int, default=100000)
    ap.add_argument("--epochs", type=int, default=1,
                    help="one: a second epoch over-fits (AUC falls at its start, then climbs "
                         "back), so the final AUC depends on where each worker is in it and a "
                         "worker's restart, which shifts that, moved it by 0.005 with nothing "
                         "lost (local BSP, 2 M rows: -0.0044 at 2 epochs, +0.0002 at 1)")
    ap.add_argument("--consistency", default="bsp",
                    help="bsp: runs comparable step for step (asp varies by ~0.003 AUC "
                         "from one unbroken run to the next)")
    ap.add_argument("--kill-after", type=float, default=1.0,
                    help="seconds after the first checkpoint")
    ap.add_argument("--auc-tolerance", type=float, default=0.005)
    ap.add_argument("--skip-second-up", action="store_true",
                    help="do not check a second `up` on the finished job")
    ap.add_argument("--results", help="append the runs as JSON lines here")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    why = docker_env.compose_missing_tools()
    if why:
        print("SKIP: " + "; ".join(why))
        return SKIP
    deadline = time.time() + args.time_limit
    work = docker_env.compose_work_dir("pstrain-compose-", (), UID)
    # Every variable docker-compose.yml reads, so that none comes from the
    # caller's environment.
    env = {"WORKERS": "2", "TRAIN_ROWS": str(args.train_rows), "EVAL_ROWS": str(args.eval_rows),
           "EPOCHS": str(args.epochs), "CHECKPOINT_EVERY_SECS": "2",
           "CONSISTENCY": args.consistency, "MODEL": "dlrm", "BATCH_SIZE": "1024",
           "DATA_SEED": "1"}
    results = []
    stack = None
    try:
        # SIGTERM (CTest's timeout) unwinds like an error: containers and the
        # engine are stopped on the way out.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit("compose_test: terminated"))
        with docker_env.PrivateDocker(deadline=deadline - 60) as docker:
            docker.probe_containers()
            mounts = docker.prebuilt_image(args.bin_dir, IMAGE)
            stack = Stack(docker, work, mounts, env, deadline, args.verbose)
            if args.verbose:
                log("override file:\n" + open(stack.override).read())
            stack.down()  # a project left by a killed run
            try:
                runs = args.runs.split(",")
                baseline = run_clean(stack, args)
                results.append(dict(baseline, fault="none"))
                for fault in runs:
                    if fault == "clean":
                        continue
                    if fault not in SERVICE_OF:
                        raise Failure("unknown run %r" % fault)
                    stack.down()
                    results.append(run_fault(stack, args, fault, baseline))
            finally:
                stack.down()
                left = docker.docker("ps", "-aq").split()
                if left:
                    docker.docker("rm", "-f", *left, check=False)
    except docker_env.EngineUnavailable as e:
        print("SKIP: this machine cannot run Docker's engine or make the base image: %s" % e)
        return SKIP
    except (Failure, docker_env.DockerError) as e:
        print("FAIL: %s" % e, flush=True)
        if stack:
            print("(work folder %s)" % work)
            args.keep = True
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    for r in results:
        print(json.dumps(dict(r, name="docker_compose")))
    if args.results:
        with open(args.results, "a") as f:
            for r in results:
                f.write(json.dumps(dict(r, name="docker_compose")) + "\n")
    log("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
