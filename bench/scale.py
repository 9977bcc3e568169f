#!/usr/bin/env python3
"""Scaling under fixed per-host compute: W workers and S = max(1, W/2) servers
(--servers_per_worker),
each on an emulated host of its own (issue 22).

Every host is a network namespace plugged into one bridge (tests/multihost's
Cluster: veth pairs, links shaped with tc tbf in both directions) and a
cgroup-v1 CPU group with a fixed quota (--host_cpu CPUs, e.g. 0.12: CFS quota
12 ms per 100 ms period, --cfs_period_ms), so that all hosts together fit inside this machine's cores
and none speeds up because another is idle. The coordinator has a host too.
The workers train DLRM (or --model) in ps mode on a generated file of
--rows_per_worker rows per worker (weak scaling: each worker has the same
work at every W).

Per point, one JSON line: samples/s (the job's, from worker 0's summary),
scaling efficiency = samples/s(W) / (W x samples/s(1)) at the same link rate,
bytes on the wire per sample by role (sent + received through each host's
link, summed per role, over the training samples), worker 0's step time
split (compute, wait, data seconds) and the servers' CPU use (cpuacct, as a
fraction of their quota).

What this measures: how throughput grows when each host's compute is fixed
and the hosts share only the emulated network. What it cannot show: memory
bandwidth and caches shared by the hosts of this one machine, NIC offloads,
interrupt placement, real switches and their buffers, and anything a quota
does not model (a throttled process is paused at the end of a period, not
slowed evenly).

Needs root, ip netns, veth, bridge, tc tbf and the cgroup-v1 cpu and cpuacct
controllers; exits 77 without them.

usage: bench/scale.py --bin-dir=build/bin [--workers=1,2,4,8] [--rates=10gbit,1gbit]
       [--host_cpu=0.12] [--rows_per_worker=100000] [--consistency=asp]
       [--servers_per_worker=0.5]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "multihost"))
import multihost_test as mh  # noqa: E402

CPU_ROOT = "/sys/fs/cgroup/cpu"
ACCT_ROOT = "/sys/fs/cgroup/cpuacct"


class Hosts(mh.Cluster):
    """tests/multihost's namespaces and links, plus a CPU group per host."""

    def __init__(self, args, bin_dir, tmp):
        super().__init__(args, bin_dir, tmp)
        self.groups = []

    def cpu_group(self, host):
        name = "%s-%s" % (self.tag, host)
        cpu, acct = os.path.join(CPU_ROOT, name), os.path.join(ACCT_ROOT, name)
        for d in (cpu, acct):
            os.makedirs(d, exist_ok=True)
            self.groups.append(d)
        period_us = int(self.args.cfs_period_ms * 1000)
        with open(os.path.join(cpu, "cpu.cfs_period_us"), "w") as fh:
            fh.write(str(period_us))
        with open(os.path.join(cpu, "cpu.cfs_quota_us"), "w") as fh:
            fh.write(str(int(self.args.host_cpu * period_us)))
        return cpu, acct

    def cpu_seconds(self, host):
        acct = os.path.join(ACCT_ROOT, "%s-%s" % (self.tag, host))
        with open(os.path.join(acct, "cpuacct.usage")) as fh:
            return int(fh.read()) / 1e9

    def run(self, host, argv):
        ns = self.hosts[host][0]
        cpu, acct = self.cpu_group(host)
        log = os.path.join(self.tmp, "logs", "%s.log" % host)
        os.makedirs(os.path.dirname(log), exist_ok=True)
        # Into the host's CPU group, then into its namespace (ip netns exec
        # mounts a sysfs of its own, without the cgroups): the process never
        # runs unlimited.
        wrap = ["sh", "-c", 'echo $$ > "$0/tasks" && echo $$ > "$1/tasks" && shift && exec "$@"', cpu,
                acct, "ip", "netns", "exec", ns] + argv
        with open(log, "w") as fh:
            p = subprocess.Popen(wrap, stdout=fh, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        entry = {"host": host, "proc": p, "log": log}
        self.procs.append(entry)
        return entry

    def cleanup(self):
        super().cleanup()
        for d in reversed(self.groups):
            try:
                os.rmdir(d)
            except OSError:
                pass
        self.groups = []


def remove_stale_groups():
    """CPU groups of a run that was killed before its cleanup (empty ones only)."""
    for root in (CPU_ROOT, ACCT_ROOT):
        for name in os.listdir(root):
            if name.startswith("pstmh-"):
                try:
                    os.rmdir(os.path.join(root, name))
                    print("removing CPU group %s, left by a run that was killed" % name,
                          file=sys.stderr)
                except OSError:
                    pass  # still has processes: another run's


def check_environment():
    if os.geteuid() != 0:
        raise mh.Skip("needs root (network namespaces, cgroups)")
    for root in (CPU_ROOT, ACCT_ROOT):
        if not os.path.exists(os.path.join(root, "tasks")):
            raise mh.Skip("no cgroup-v1 controller at %s" % root)
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise mh.Skip("%s not installed" % tool)


def gen(bin_dir, path, rows):
    subprocess.run([os.path.join(bin_dir, "pstrain"), "gen", "--rows=%d" % rows, "--out=" + path,
                    "--seed=3"], check=True, capture_output=True, timeout=300)


def point(args, bin_dir, tmp, workers, rate, data, servers=None):
    if servers is None:
        servers = max(1, int(workers * args.servers_per_worker))
    hosts = ["coord"] + ["server%d" % s for s in range(servers)] + \
        ["worker%d" % w for w in range(workers)]
    args.rate = rate
    c = Hosts(args, bin_dir, tmp)
    try:
        c.build_network(hosts)
        ip = {h: c.hosts[h][1] for h in hosts}
        coord = "tcp://%s:7000" % ip["coord"]
        b = lambda name: os.path.join(bin_dir, name)  # noqa: E731
        entries = [c.run("coord", [b("pstrain_coordinator"), "--bind=" + coord,
                                   "--servers=%d" % servers, "--workers=%d" % workers,
                                   "--consistency=" + args.consistency])]
        for s in range(servers):
            entries.append(c.run("server%d" % s, [
                b("pstrain_server"), "--coordinator=" + coord, "--rank=%d" % s,
                "--bind=tcp://%s:7100" % ip["server%d" % s]]))
        metrics = os.path.join(tmp, "w0-%d-%s.jsonl" % (workers, rate))
        for w in range(workers):
            argv = [b("pstrain_worker"), "--coordinator=" + coord, "--rank=%d" % w,
                    "--bind=tcp://%s:7200" % ip["worker%d" % w], "--train_data=" + data,
                    "--model=" + args.model, "--batch_size=%d" % args.batch_size,
                    ] + args.model_flags.split() + [
                    "--mode=" + args.mode,
                    "--log_every_secs=30"]
            if w == 0:
                argv.append("--metrics_out=" + metrics)
            entries.append(c.run("worker%d" % w, argv))
        before = c.link_bytes()
        t0 = time.monotonic()
        cpu_samples = []  # (seconds since start, {host: CPU seconds})
        while time.monotonic() - t0 < args.point_timeout:
            codes = [e["proc"].poll() for e in entries]
            if all(rc is not None for rc in codes) or any(rc not in (None, 0) for rc in codes):
                break
            cpu_samples.append((time.monotonic() - t0, {h: c.cpu_seconds(h) for h in hosts}))
            time.sleep(0.2)
        wall = time.monotonic() - t0
        after = c.link_bytes()
        bad = {e["host"]: e["proc"].poll() for e in entries if e["proc"].poll() != 0}
        if bad:
            raise mh.Failure("W=%d at %s: %s failed or timed out:\n%s" % (
                workers, rate, bad, "\n".join(mh.tail(e) for e in entries
                                              if e["host"] in bad)))
        s = mh.summary(metrics)
        if not s:
            raise mh.Failure("W=%d: no summary in %s" % (workers, metrics))
        samples = float(s["train_samples"]) or 1.0
        per_role = {}
        for h in hosts:
            role = h.rstrip("0123456789")
            tx = after[h][0] - before.get(h, (0, 0))[0]
            rx = after[h][1] - before.get(h, (0, 0))[1]
            sent, recv = per_role.get(role, (0, 0))
            per_role[role] = (sent + tx, recv + rx)
        # The steady window: the middle half of the point's wall time, when
        # every process trains (start-up and the end left out).
        lo = [x for x in cpu_samples if x[0] >= 0.25 * wall]
        hi = [x for x in cpu_samples if x[0] <= 0.75 * wall]
        window = {}
        if lo and hi and hi[-1][0] > lo[0][0]:
            span = hi[-1][0] - lo[0][0]
            rate_sps = float(s["samples_per_sec"])
            for role, n in (("server", servers), ("worker", workers)):
                used = sum(hi[-1][1]["%s%d" % (role, i)] - lo[0][1]["%s%d" % (role, i)]
                           for i in range(n))
                window[role + "_cpu_of_quota"] = round(used / (n * args.host_cpu * span), 3)
                window[role + "_cpu_us_per_sample"] = round(used / (rate_sps * span) * 1e6, 2)
            window["seconds"] = round(span, 2)
        server_cpu = sum(c.cpu_seconds("server%d" % i) for i in range(servers))
        worker_cpu = sum(c.cpu_seconds("worker%d" % i) for i in range(workers))
        return {
            "bench": "scale", "mode": args.mode, "consistency": args.consistency,
            "model": args.model, "model_flags": args.model_flags, "rate": rate,
            "host_cpu": args.host_cpu,
            "cfs_period_ms": args.cfs_period_ms,
            "workers": workers, "servers": servers, "batch_size": args.batch_size,
            "samples_per_sec": s["samples_per_sec"], "train_samples": int(samples),
            "wall_seconds": round(wall, 2),
            "bytes_per_sample": {r: {"sent": round(v[0] / samples, 1),
                                     "received": round(v[1] / samples, 1)}
                                 for r, v in sorted(per_role.items())},
            "worker0_seconds": {k: round(float(s.get(k + "_seconds", 0)), 2)
                                for k in ("compute", "wait", "data")},
            # Over the processes' lives (start to exit), as the quota counts.
            "server_cpu_of_quota": round(server_cpu / (servers * args.host_cpu * wall), 3),
            "worker_cpu_of_quota": round(worker_cpu / (workers * args.host_cpu * wall), 3),
            "server_cpu_us_per_sample": round(server_cpu / samples * 1e6, 2),
            "worker_cpu_us_per_sample": round(worker_cpu / samples * 1e6, 2),
            "window": window,
        }
    finally:
        c.cleanup()


def predict(args, bin_dir, calibration, rate, workers, servers):
    """`pstrain plan --hosts`'s prediction of a point from the calibration lines."""
    cmd = [os.path.join(bin_dir, "pstrain"), "plan", "--hosts=%d" % workers,
           "--servers=%d" % servers, "--host_cpus=%g" % args.host_cpu, "--bandwidth=" + rate,
           "--calibration=" + calibration, "--calibration_rate=" + rate, "--json",
           "--model=" + args.model, "--batch_size=%d" % args.batch_size,
           "--mode=" + args.mode, "--consistency=" + args.consistency] + args.model_flags.split()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise mh.Failure("pstrain plan failed: %s" % out.stderr.strip())
    return json.loads(out.stdout.strip().splitlines()[-1])


def add_prediction(args, bin_dir, calibration, line):
    p = predict(args, bin_dir, calibration, line["rate"], line["workers"], line["servers"])
    line["predicted_samples_per_sec"] = round(p["predicted_samples_per_sec"])
    # The least bound before the plan's drift allowance (launcher/plan_scale.h).
    if "undrifted_samples_per_sec" in p:
        line["predicted_undrifted_samples_per_sec"] = round(p["undrifted_samples_per_sec"])
    line["predicted_efficiency"] = p["predicted_efficiency"]
    line["predicted_bottleneck"] = p["bottleneck"]
    line["prediction_error"] = round(p["predicted_samples_per_sec"] / line["samples_per_sec"] - 1, 3)


def predict_only(args, bin_dir):
    with open(args.predict_only) as fh:
        lines = [json.loads(x) for x in fh if x.strip()]
    tmp = tempfile.mkdtemp(prefix="pstrain-scale-")
    try:
        for rate in sorted({x["rate"] for x in lines}):
            cal = [x for x in lines if x["rate"] == rate and x.get("calibration")]
            if not cal:
                print("no calibration line at %s in %s" % (rate, args.predict_only), file=sys.stderr)
                return 1
            path = os.path.join(tmp, "calibration-%s.jsonl" % rate)
            with open(path, "w") as fh:
                for x in cal:
                    fh.write(json.dumps(x) + "\n")
            args.host_cpu, args.model = cal[0]["host_cpu"], cal[0]["model"]
            args.mode = cal[0].get("mode", "ps")
            args.consistency = cal[0].get("consistency", "asp")
            args.model_flags = cal[0].get("model_flags", "")
            args.batch_size = cal[0]["batch_size"]
            for x in lines:
                if x["rate"] == rate and not x.get("calibration"):
                    add_prediction(args, bin_dir, path, x)
        for x in lines:
            print(json.dumps(x), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--workers", default="1,2,4,8")
    ap.add_argument("--rates", default="10gbit,1gbit")
    ap.add_argument("--host_cpu", type=float, default=0.12)
    ap.add_argument("--cfs_period_ms", type=float, default=100,
                    help="CFS period of the quota: a host runs host_cpu x this, then waits")
    ap.add_argument("--servers_per_worker", type=float, default=0.5,
                    help="servers = max(1, W x this): 0.5 gives the issue's S = max(1, W/2)")
    ap.add_argument("--rows_per_worker", type=int, default=100000)
    ap.add_argument("--batch_size", type=int, default=1024)
    ap.add_argument("--model", default="dlrm")
    ap.add_argument("--model_flags", default="",
                    help="more worker flags of the model, e.g. \"--tower_layers=4 --tower_width=256\" "
                    "for deep_tower (passed to `pstrain plan` too)")
    ap.add_argument("--mode", default="ps", help="ps or allreduce (dense gradients summed "
                    "between the workers, embeddings on the servers)")
    ap.add_argument("--consistency", default="asp")
    ap.add_argument("--point_timeout", type=float, default=600)
    ap.add_argument("--time_limit", type=float, default=3600)
    ap.add_argument("--calibrate", action="store_true",
                    help="first measure one host (W = 1) with one server and with two, twice, at "
                    "each rate (with --mode=allreduce or --consistency=bsp/ssp also two workers "
                    "with one server, twice, and four with two), "
                    "then add `pstrain plan --hosts`'s prediction from them to every point")
    ap.add_argument("--predict_only", default="",
                    help="no measuring: add the predictions to the lines of an earlier --calibrate "
                    "run (this file) from its own calibration lines, and print them")
    args = ap.parse_args()
    bin_dir = os.path.abspath(args.bin_dir)
    if args.predict_only:
        return predict_only(args, bin_dir)
    try:
        check_environment()
        mh.remove_stale()
        remove_stale_groups()
    except mh.Skip as e:
        print("SKIP: %s" % e)
        return 77
    counts = [int(w) for w in args.workers.split(",")]
    tmp = tempfile.mkdtemp(prefix="pstrain-scale-")
    try:
        data = {}
        for w in counts:
            data[w] = os.path.join(tmp, "train-%d.tsv" % w)
            gen(bin_dir, data[w], w * args.rows_per_worker)
        # The calibration's layouts (workers, servers): one host with one
        # server and with two, twice; in allreduce mode or under BSP/SSP
        # also two workers (twice) and four, for the collective's cost and
        # the wait for peers (launcher/plan_scale.h).
        layouts = [(1, 1), (1, 2), (1, 1), (1, 2)]
        if args.mode == "allreduce" or args.consistency != "asp":
            layouts += [(2, 1), (2, 1), (4, 2)]
        for w, _ in layouts if args.calibrate else []:
            if w not in data:
                data[w] = os.path.join(tmp, "train-%d.tsv" % w)
                gen(bin_dir, data[w], w * args.rows_per_worker)
        for rate in args.rates.split(","):
            calibration = None
            if args.calibrate:
                calibration = os.path.join(tmp, "calibration-%s.jsonl" % rate)
                # Two servers give a worker's cost of each extra server, two
                # and four workers the collective's; the plan takes the least
                # drifted run of each (launcher/plan_scale.h).
                with open(calibration, "w") as fh:
                    for workers, servers in layouts:
                        line = point(args, bin_dir, tmp, workers, rate, data[workers],
                                     servers=servers)
                        line["calibration"] = True
                        fh.write(json.dumps(line) + "\n")
                        print(json.dumps(line), flush=True)
            base = None
            for w in counts:
                line = point(args, bin_dir, tmp, w, rate, data[w])
                if w == counts[0]:
                    base = line["samples_per_sec"] / w
                line["efficiency"] = round(line["samples_per_sec"] / (w * base), 3)
                if calibration:
                    add_prediction(args, bin_dir, calibration, line)
                print(json.dumps(line), flush=True)
    except mh.Failure as e:
        print("FAILED: %s" % e, file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
