#!/usr/bin/env python3
"""Multi-host emulation of docker/docker-compose.yml with network namespaces.

Each compose service becomes a "host": a network namespace named after it,
with its own eth0 (a veth pair) plugged into a bridge that lives in a
namespace of its own (the switch), its own host name (a UTS namespace) and an
/etc/netns/<ns>/hosts file that makes the service names resolve, as Docker's
DNS does. Each host runs the SAME command and environment as its compose
service, read from the compose file (python3-yaml): docker/entrypoint.sh with
the service's environment and command, PSTRAIN_BIN_DIR pointing at this
build's binaries instead of the image's, and a temp folder per named volume
instead of the volume. Every link is shaped with tc (tbf, --rate, both
directions: this kernel has no netem).

Phase 1: the gen service writes the data, then the coordinator, the servers
and WORKERS workers train; their compose healthchecks (pstrain health) pass
inside their hosts while the job runs; everything exits 0. Prints the
training throughput and the traffic across the shaped links.

Phase 2: a longer job; once training runs, server1's link is cut
(`ip link set <veth> down` on the switch side) and the coordinator must
report server1 dead. Then (unless PSTRAIN_MULTIHOST_RECOVERY=0) the test
emulates compose's `restart: on-failure`, brings the link back and expects
the cluster to roll back to its latest checkpoint and the job to complete.

Needs root, `ip netns`, veth, bridge, tbf and unshare; exits 77 (skipped)
without them. Only touches namespaces it creates (names pstmh-<pid>-*), and
removes them, their /etc/netns folders and its processes on every exit path,
also on SIGTERM/SIGINT/SIGHUP; stale ones of dead runs are removed at start.

usage: multihost_test.py --bin-dir=BUILD/bin [--workers=2] [--rate=1gbit] [--gpu]
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "deploy"))
import deploy_lib as lib  # noqa: E402

PREFIX = "pstmh-"
SUBNET = "10.88.0."
RECOVERY = os.environ.get("PSTRAIN_MULTIHOST_RECOVERY", "1") == "1"


class Skip(Exception):
    pass


class Failure(Exception):
    pass


def sh(*cmd, check=True, timeout=30):
    p = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise Failure("%s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
    return p


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def delete_ns(name):
    """Kills what still runs in namespace `name` (only processes that a run
    of this test started there), then deletes it and its hosts folder."""
    pids = sh("ip", "netns", "pids", name, check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    sh("ip", "netns", "del", name, check=False)
    shutil.rmtree(os.path.join("/etc/netns", name), ignore_errors=True)


def remove_stale():
    """Namespaces and hosts folders of earlier runs whose process is gone
    (a run killed with SIGKILL cannot clean up after itself)."""
    names = sh("ip", "netns", "list", check=False).stdout.split("\n")
    names = [n.split()[0] for n in names if n.strip()]
    try:
        names += os.listdir("/etc/netns")
    except FileNotFoundError:
        pass
    for name in set(names):
        m = re.match(PREFIX + r"(\d+)-", name)
        if not m or pid_alive(int(m.group(1))):
            continue
        print("removing %s, left by a run that was killed" % name)
        delete_ns(name)


class Cluster:
    """The namespaces, links and processes of one run. cleanup() undoes all
    of it and may be called any number of times."""

    def __init__(self, args, bin_dir, tmp):
        self.args = args
        self.bin_dir = bin_dir
        self.tmp = tmp
        self.tag = "%s%d" % (PREFIX, os.getpid())
        self.switch = self.tag + "-switch"
        self.namespaces = []
        self.hosts = {}  # host name -> (namespace, ip, veth on the switch)
        self.procs = []  # (host, Popen, log path)
        self.volumes = {}
        self.deadline = time.monotonic() + args.time_limit

    # ---- network -----------------------------------------------------------
    def left(self):
        return self.deadline - time.monotonic()

    def add_ns(self, name):
        p = sh("ip", "netns", "add", name, check=False)
        if p.returncode != 0:
            raise Skip("ip netns add failed: " + p.stderr.strip())
        self.namespaces.append(name)
        sh("ip", "-n", name, "link", "set", "lo", "up")

    def build_network(self, host_names):
        self.add_ns(self.switch)
        p = sh("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge", check=False)
        if p.returncode != 0:
            raise Skip("no bridge support: " + p.stderr.strip())
        sh("ip", "-n", self.switch, "link", "set", "br0", "up")
        for i, host in enumerate(host_names):
            ns = "%s-%s" % (self.tag, host)
            ip = SUBNET + str(10 + i)
            veth = ("v-" + host)[:15]
            self.add_ns(ns)
            p = sh("ip", "-n", self.switch, "link", "add", veth, "type", "veth", "peer", "name",
                   "eth0", "netns", ns, check=False)
            if p.returncode != 0:
                raise Skip("no veth support: " + p.stderr.strip())
            sh("ip", "-n", self.switch, "link", "set", veth, "master", "br0")
            sh("ip", "-n", self.switch, "link", "set", veth, "up")
            sh("ip", "-n", ns, "addr", "add", ip + "/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            self.shape(ns, "eth0")            # host -> switch
            self.shape(self.switch, veth)     # switch -> host
            self.hosts[host] = (ns, ip, veth)
        hosts_file = "127.0.0.1 localhost\n" + "".join(
            "%s %s\n" % (ip, host) for host, (_, ip, _) in self.hosts.items())
        for ns, _, _ in self.hosts.values():
            d = os.path.join("/etc/netns", ns)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "hosts"), "w") as fh:
                fh.write(hosts_file)

    def shape(self, ns, dev):
        # tbf: rate-limited egress; the burst must hold a 64 KiB GSO segment.
        p = sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
               "rate", self.args.rate, "burst", "256kb", "latency", "20ms", check=False)
        if p.returncode != 0:
            raise Skip("tc tbf unavailable: " + p.stderr.strip())

    def link_bytes(self):
        """Bytes each host sent and received through its link (switch side)."""
        out = json.loads(sh("ip", "-n", self.switch, "-s", "-j", "link", "show").stdout)
        by_veth = {d["ifname"]: d["stats64"] for d in out if "stats64" in d}
        res = {}
        for host, (_, _, veth) in self.hosts.items():
            st = by_veth.get(veth)
            if st:  # the switch receives what the host sends
                res[host] = (st["rx"]["bytes"], st["tx"]["bytes"])
        return res

    def set_link(self, host, up):
        sh("ip", "-n", self.switch, "link", "set", self.hosts[host][2], "up" if up else "down")

    # ---- processes ---------------------------------------------------------
    def volume(self, name):
        if name not in self.volumes:
            self.volumes[name] = os.path.join(self.tmp, "volumes", name)
            os.makedirs(self.volumes[name], exist_ok=True)
        return self.volumes[name]

    def mounts(self, service):
        out = []
        for v in service.get("volumes", []):
            parts = str(v).split(":")
            if len(parts) >= 2:
                out.append((parts[1], self.volume(parts[0])))
        return out

    @staticmethod
    def subst(value, mounts):
        for target, local in mounts:
            if value == target or value.startswith(target + "/"):
                return local + value[len(target):]
        return value

    def start(self, host, service):
        """Starts `service` (a compose service) on `host`: its entrypoint,
        environment and command, as docker-compose would."""
        ns = self.hosts[host][0]
        mounts = self.mounts(service)
        env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
               "HOME": self.tmp, "PSTRAIN_BIN_DIR": self.bin_dir}
        for k, v in service["environment"].items():
            env[k] = self.subst(v, mounts)
        cmd = service.get("command") or []
        if isinstance(cmd, str):
            cmd = cmd.split()
        cmd = [self.subst(str(a), mounts) for a in cmd]
        log = os.path.join(self.tmp, "logs", "%s.%d.log" % (host, len(self.procs)))
        os.makedirs(os.path.dirname(log), exist_ok=True)
        argv = ["ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c",
                'hostname "$0" && exec "$@"', host, lib.ENTRYPOINT] + cmd
        with open(log, "w") as fh:
            p = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                 start_new_session=True)
        entry = {"host": host, "proc": p, "log": log, "service": service}
        self.procs.append(entry)
        return entry

    def health(self, host, service):
        """Runs the service's compose healthcheck inside its host."""
        test = (service.get("healthcheck") or {}).get("test") or []
        if test[:1] != ["CMD"] or len(test) < 2:
            raise Failure("%s: healthcheck %r is not CMD form" % (host, test))
        argv = [os.path.join(self.bin_dir, test[1])] + test[2:]
        p = sh("ip", "netns", "exec", self.hosts[host][0], *argv, check=False, timeout=30)
        return p.returncode

    def wait(self, entry, timeout):
        try:
            return entry["proc"].wait(timeout=max(0.1, min(timeout, self.left())))
        except subprocess.TimeoutExpired:
            return None

    def kill(self, entry):
        p = entry["proc"]
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def kill_all(self):
        for e in self.procs:
            self.kill(e)

    def cleanup(self):
        self.kill_all()
        for ns in reversed(self.namespaces):
            delete_ns(ns)
        self.namespaces = []


def log_text(entry):
    try:
        with open(entry["log"], errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def tail(entry, n=15):
    lines = log_text(entry).splitlines()[-n:]
    return "\n".join("    [%s] %s" % (entry["host"], l) for l in lines)


def summary(path):
    last = None
    try:
        with open(path) as fh:
            for line in fh:
                if '"samples_per_sec"' in line:
                    try:
                        last = json.loads(line)
                    except ValueError:
                        pass
    except OSError:
        pass
    return last


COMPOSE_FILES = [lib.COMPOSE]


def plan(compose_env):
    """The compose services and the hosts that run them (a scaled worker
    service becomes worker-1 .. worker-N)."""
    services = lib.load_compose(COMPOSE_FILES, compose_env)["services"]
    n = int(compose_env["WORKERS"])
    layout = []  # (host, service name)
    for name, svc in services.items():
        if lib.role_of(svc) == "worker":
            layout += [("%s-%d" % (name, i + 1), name) for i in range(n)]
        else:
            layout.append((name, name))
    return services, layout


def by_role(services, layout, role):
    return [(h, s) for h, s in layout if lib.role_of(services[s]) == role]


def run_job(c, services, layout, on_running=None, restart=False):
    """Starts coordinator, servers and workers as compose would (after gen)
    and waits for the job. Returns the process entries by host."""
    entries = {}
    for role in ("coordinator", "server", "worker"):
        for host, s in by_role(services, layout, role):
            entries[host] = c.start(host, services[s])
    if on_running:
        on_running(entries)
    restarts = 0
    while c.left() > 0:
        for host, e in list(entries.items()):
            rc = e["proc"].poll()
            if rc not in (None, 0) and restart and restarts < 20 and \
                    e["service"].get("restart") == "on-failure":
                print("  %s exited %d: restarting it (restart: on-failure)" % (host, rc))
                entries[host] = c.start(host, e["service"])
                restarts += 1
        codes = [e["proc"].poll() for e in entries.values()]
        if all(rc is not None for rc in codes):
            break
        if not restart and any(rc not in (None, 0) for rc in codes):
            break
        time.sleep(0.2)
    return entries


def phase1(c, args, compose_env):
    services, layout = plan(compose_env)
    gen_hosts = by_role(services, layout, "gen")
    print("phase 1: %s" % ", ".join(h for h, _ in layout))
    for host, s in gen_hosts:
        e = c.start(host, services[s])
        rc = c.wait(e, 120)
        if rc != 0:
            raise Failure("gen on %s exited %s:\n%s" % (host, rc, tail(e)))
        print("  %s: %s" % (host, log_text(e).strip().splitlines()[-1]))
    before = c.link_bytes()
    health = {}

    def probe(entries):
        # The compose healthchecks, run inside each host while the job runs.
        t0 = time.monotonic()
        for host, e in entries.items():
            svc = e["service"]
            rc = 1
            while time.monotonic() - t0 < 30 and e["proc"].poll() is None:
                rc = c.health(host, svc)
                if rc == 0:
                    break
                time.sleep(0.3)
            health[host] = "healthy" if rc == 0 else (
                "exited before the probe" if e["proc"].poll() == 0 else "UNHEALTHY")

    t0 = time.monotonic()
    entries = run_job(c, services, layout, on_running=probe)
    wall = time.monotonic() - t0
    after = c.link_bytes()
    bad = {h: e["proc"].poll() for h, e in entries.items() if e["proc"].poll() != 0}
    if bad:
        raise Failure("phase 1: processes failed or timed out %s:\n%s" % (
            bad, "\n".join(tail(entries[h]) for h in bad)))
    unhealthy = [h for h, v in health.items() if v == "UNHEALTHY"]
    for h, v in sorted(health.items()):
        print("  healthcheck %-12s %s" % (h, v))
    if unhealthy:
        raise Failure("phase 1: healthchecks failed on %s" % unhealthy)
    workers = by_role(services, layout, "worker")
    metrics = services[workers[0][1]]["environment"].get("PSTRAIN_METRICS_OUT")
    s = summary(Cluster.subst(metrics, c.mounts(services[workers[0][1]])))
    if not s:
        raise Failure("phase 1: no summary in %s" % metrics)
    print("  links shaped to %s (tbf, both directions); traffic during the job (%.1f s):" %
          (args.rate, wall))
    print("    %-12s %10s %10s %12s" % ("host", "sent MB", "recv MB", "avg Mbit/s"))
    for host in sorted(after):
        tx = (after[host][0] - before.get(host, (0, 0))[0]) / 1e6
        rx = (after[host][1] - before.get(host, (0, 0))[1]) / 1e6
        print("    %-12s %10.1f %10.1f %12.1f" % (host, tx, rx, (tx + rx) * 8 / wall))
    sps = s.get("samples_per_sec", 0)
    print("THROUGHPUT: %s workers x %s servers over %s links: %.0f samples/s "
          "(eval AUC %.4f, oracle %.4f, training %.1f s)" % (
              args.workers, len(by_role(services, layout, "server")), args.rate, sps,
              s.get("eval_auc", float("nan")), s.get("oracle_auc", float("nan")),
              s.get("wall_seconds", float("nan"))))
    if not sps > 0:
        raise Failure("phase 1: samples_per_sec is %r" % sps)


def phase2(c, args, compose_env):
    env = dict(compose_env, EPOCHS=str(args.phase2_epochs))
    if RECOVERY:
        # A job that can finish after the rollback, checkpointed often.
        env.update(EPOCHS=str(args.recovery_epochs), CHECKPOINT_EVERY_SECS="2")
    # A new job: phase 1's final checkpoint must not be resumed.
    ckpt = c.volume("checkpoints")
    shutil.rmtree(ckpt)
    os.makedirs(ckpt)
    services, layout = plan(env)
    cut = args.cut
    if cut not in services or lib.role_of(services[cut]) != "server":
        raise Failure("--cut=%s is not a server service" % cut)
    coord_host = by_role(services, layout, "coordinator")[0][0]
    timeout = float(services[coord_host]["environment"].get("PSTRAIN_HEARTBEAT_TIMEOUT", "10"))
    print("phase 2: cut %s's link once training runs (heartbeat timeout %.0f s)%s" %
          (cut, timeout, "; recovery expected" if RECOVERY else ""))
    state = {}

    def cut_when_training(entries):
        coord = entries[coord_host]
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60 and coord["proc"].poll() is None:
            if "tables created" in log_text(coord):
                break
            time.sleep(0.2)
        else:
            raise Failure("phase 2: training did not start:\n" + tail(coord))
        time.sleep(args.cut_after)
        c.set_link(cut, False)
        state["cut_at"] = time.monotonic()
        print("  %.1f s after the tables were created: ip link set %s down" %
              (args.cut_after, c.hosts[cut][2]))
        # The coordinator must name the dead server: role, address, host.
        pattern = re.compile(r"server \d+ \(tcp://%s:\d+, host %s.*is dead" % (cut, cut))
        while time.monotonic() - state["cut_at"] < timeout + 15:
            m = pattern.search(log_text(coord))
            if m:
                state["detected"] = time.monotonic() - state["cut_at"]
                state["line"] = m.group(0)
                break
            time.sleep(0.2)
        if RECOVERY:
            c.set_link(cut, True)
            print("  link of %s up again" % cut)

    entries = run_job(c, services, layout, on_running=cut_when_training, restart=RECOVERY)
    coord = entries[coord_host]
    if "detected" not in state:
        raise Failure("phase 2: the coordinator did not report %s dead within %.0f s:\n%s" %
                      (cut, timeout + 15, tail(coord, 25)))
    print("  detected after %.1f s: %s" % (state["detected"], state["line"]))
    if not RECOVERY:
        m = re.search(r"job ends: .*", log_text(coord))
        print("  coordinator: %s" % (m.group(0) if m else "(still running)"))
        return
    # Recovery (PSTRAIN_MULTIHOST_RECOVERY=1): with restarts on failure the
    # job completes, and the server that was cut off restored its shard.
    bad = {h: e["proc"].poll() for h, e in entries.items() if e["proc"].poll() != 0}
    if bad:
        raise Failure("phase 2 (recovery): did not complete %s:\n%s" % (
            bad, "\n".join(tail(entries[h]) for h in bad)))
    restored = [e for e in c.procs if e["host"] == cut and
                re.search(r"restor", log_text(e), re.I)]
    if not restored:
        raise Failure("phase 2 (recovery): %s never logged a restore" % cut)
    print("  recovered: job completed after the cut")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--train-rows", type=int, default=300000)
    ap.add_argument("--eval-rows", type=int, default=30000)
    ap.add_argument("--phase2-epochs", type=int, default=100)
    ap.add_argument("--recovery-epochs", type=int, default=2,
                    help="phase 2 epochs when recovery is expected")
    ap.add_argument("--cut", default="server1", help="server service whose link is cut")
    ap.add_argument("--cut-after", type=float, default=2.0)
    ap.add_argument("--time-limit", type=float, default=170,
                    help="seconds for the whole test (CTest's TIMEOUT is above this)")
    ap.add_argument("--keep", action="store_true", help="keep the temp folder (logs)")
    ap.add_argument("--gpu", action="store_true",
                    help="also apply docker/docker-compose.gpu.yml (needs a CUDA build and GPUs)")
    args = ap.parse_args()
    if args.gpu:
        COMPOSE_FILES.append(lib.COMPOSE_GPU)
    bin_dir = os.path.abspath(args.bin_dir)
    start = time.monotonic()
    try:
        if os.geteuid() != 0:
            raise Skip("needs root (network namespaces)")
        for tool in ("ip", "tc", "unshare", "hostname"):
            if not shutil.which(tool):
                raise Skip("%s is not installed" % tool)
        if sh("ip", "netns", "list", check=False).returncode != 0:
            raise Skip("ip netns is unavailable")
        lib.import_yaml()
    except Skip as e:
        lib.skip(str(e))
    for b in ("pstrain", "pstrain_coordinator", "pstrain_server", "pstrain_worker"):
        if not os.access(os.path.join(bin_dir, b), os.X_OK):
            print("FAIL: %s/%s is not built" % (bin_dir, b))
            return 1

    remove_stale()
    tmp = tempfile.mkdtemp(prefix="pstrain-multihost-")
    c = Cluster(args, bin_dir, tmp)

    def on_signal(sig, frame):
        c.cleanup()
        print("multihost: stopped by signal %d; cleaned up; logs in %s" % (sig, tmp))
        os._exit(128 + sig)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    # Interpolation as docker-compose would do it with these variables set
    # (e.g. `WORKERS=2 TRAIN_ROWS=300000 docker-compose up --scale worker=2`).
    compose_env = {k: v for k, v in os.environ.items() if not k.startswith("PSTRAIN_")}
    compose_env.update(WORKERS=str(args.workers), TRAIN_ROWS=str(args.train_rows),
                       EVAL_ROWS=str(args.eval_rows))
    code = 1
    try:
        _, layout = plan(compose_env)
        c.build_network([h for h, _ in layout])
        phase1(c, args, compose_env)
        c.kill_all()
        phase2(c, args, compose_env)
        code = 0
    except Skip as e:
        c.cleanup()
        lib.skip(str(e))
    except Failure as e:
        print("FAIL: %s" % e)
    finally:
        c.cleanup()
        left = [n for n in sh("ip", "netns", "list", check=False).stdout.split("\n")
                if n.startswith(c.tag)]
        if left:
            print("FAIL: namespaces left behind: %s" % left)
            code = 1
        if code == 0 and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("logs kept in %s" % tmp)
    print("multihost: %s in %.1f s" % ("passed" if code == 0 else "FAILED",
                                       time.monotonic() - start))
    return code


if __name__ == "__main__":
    sys.exit(main())
