#!/usr/bin/env python3
"""`pstrain health` (the containers' healthcheck): exit 0 when a live
coordinator answers the Ping, 1 within about the timeout when nothing
listens, 2 on bad flags; with `--any_reply` (the compose workers'
healthcheck) a live worker is healthy.

usage: health_test.py --bin-dir=BUILD/bin
"""
import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def health(bin_dir, *args):
    start = time.monotonic()
    p = subprocess.run([os.path.join(bin_dir, "pstrain"), "health", *args],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, time.monotonic() - start, p.stdout + p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    bin_dir = ap.parse_args().bin_dir
    failures = []

    def expect(what, cond, detail=""):
        print(("ok: " if cond else "FAIL: ") + what + ("" if cond else "\n" + detail))
        if not cond:
            failures.append(what)

    env = {k: v for k, v in os.environ.items() if not k.startswith("PSTRAIN_")}
    with tempfile.TemporaryDirectory(prefix="pstrain-health-") as tmp:
        port = free_port()
        log = open(os.path.join(tmp, "coordinator.log"), "w")
        coord = subprocess.Popen(
            [os.path.join(bin_dir, "pstrain_coordinator"), "--bind=tcp://127.0.0.1:%d" % port,
             "--servers=1", "--workers=1", "--join_timeout=60"],
            stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            ep = "--endpoint=tcp://localhost:%d" % port
            rc, secs, out = 1, 0, ""
            for _ in range(50):  # the coordinator needs a moment to bind
                rc, secs, out = health(bin_dir, ep, "--timeout=2")
                if rc == 0:
                    break
                time.sleep(0.2)
            expect("a live coordinator is healthy", rc == 0 and "ok" in out, out)
            rc, _, out = health(bin_dir, ep, "--quiet")
            expect("--quiet prints nothing", rc == 0 and out == "", out)
        finally:
            coord.kill()
            coord.wait()
            log.close()

        dead = free_port()
        rc, secs, out = health(bin_dir, "--endpoint=tcp://127.0.0.1:%d" % dead, "--timeout=1")
        expect("nothing listening: exit 1 within the timeout (took %.1f s)" % secs,
               rc == 1 and secs < 5, out)
        rc, _, out = health(bin_dir, "--timeout=1")
        expect("no --endpoint: exit 2", rc == 2, out)
        rc, _, out = health(bin_dir, "--endpoint=tcp://127.0.0.1:1", "--bogus=1")
        expect("unknown flag: exit 2", rc == 2, out)

        # A worker: healthy with --any_reply whether it answers Ping with OK
        # or (workers that serve no requests) with an error reply. The
        # worker waits for a coordinator that never comes, its port bound
        # (its data is good: a worker checks it before it connects).
        data = os.path.join(tmp, "train.tsv")
        subprocess.run([os.path.join(bin_dir, "pstrain"), "gen", "--rows=20", "--out=" + data],
                       check=True, stdout=subprocess.DEVNULL, env=env)
        wport = free_port()
        log = open(os.path.join(tmp, "worker.log"), "w")
        worker = subprocess.Popen(
            [os.path.join(bin_dir, "pstrain_worker"), "--bind=tcp://127.0.0.1:%d" % wport,
             "--coordinator=tcp://127.0.0.1:%d" % dead, "--connect_timeout=60",
             "--train_data=" + data],
            stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            ep = "--endpoint=tcp://127.0.0.1:%d" % wport
            rc = 1
            for _ in range(50):
                rc, _, out = health(bin_dir, ep, "--timeout=2", "--any_reply")
                if rc == 0:
                    break
                time.sleep(0.2)
            expect("a live worker is alive with --any_reply", rc == 0, out)
            rc, _, out = health(bin_dir, ep, "--timeout=2")
            print("note: without --any_reply the worker is %s" %
                  ("healthy (it answers Ping with OK)" if rc == 0 else
                   "unhealthy (it answers Ping with an error): " + out.strip()))
        finally:
            worker.kill()
            worker.wait()
            log.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
