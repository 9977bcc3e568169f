#!/usr/bin/env python3
"""docker/entrypoint.sh outside a container (PSTRAIN_BIN_DIR pointing at the
build): role gen writes one world (train and eval with the same seed and
disjoint row ranges, plus meta files) and skips it the second time; the
role may come from the first argument; an unknown role exits 2.

usage: entrypoint_test.py --bin-dir=BUILD/bin
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_lib as lib  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    bin_dir = os.path.abspath(ap.parse_args().bin_dir)
    failures = []

    def expect(what, cond, detail=""):
        print(("ok: " if cond else "FAIL: ") + what + ("" if cond else "\n" + str(detail)))
        if not cond:
            failures.append(what)

    base = {k: v for k, v in os.environ.items() if not k.startswith("PSTRAIN_")}
    base["PSTRAIN_BIN_DIR"] = bin_dir

    def run(env, *args):
        p = subprocess.run([lib.ENTRYPOINT, *args], env=dict(base, **env), capture_output=True,
                           text=True, timeout=120)
        return p.returncode, p.stdout + p.stderr

    with tempfile.TemporaryDirectory(prefix="pstrain-entrypoint-") as tmp:
        world = {"PSTRAIN_ROLE": "gen", "PSTRAIN_GEN_DIR": tmp, "PSTRAIN_GEN_SEED": "5",
                 "PSTRAIN_GEN_TRAIN_ROWS": "3000", "PSTRAIN_GEN_EVAL_ROWS": "700"}
        rc, out = run(world)
        expect("gen writes a world", rc == 0, out)
        metas = {}
        for name in ("train", "eval"):
            path = os.path.join(tmp, name + ".tsv")
            with open(path + ".meta.json") as fh:
                metas[name] = json.loads(fh.readline())
            with open(path) as fh:
                lines = sum(1 for _ in fh)
            expect("%s.tsv has its rows" % name, lines == metas[name]["rows"], (lines, metas[name]))
        t, e = metas["train"], metas["eval"]
        expect("same seed, disjoint row ranges",
               t["seed"] == e["seed"] == 5 and t["first_row"] == 0 and t["rows"] == 3000 and
               e["first_row"] == 3000 and e["rows"] == 700, metas)
        mtime = os.path.getmtime(os.path.join(tmp, "train.tsv"))
        rc, out = run(world)
        expect("a second run keeps the world", rc == 0 and "already holds" in out and
               os.path.getmtime(os.path.join(tmp, "train.tsv")) == mtime, out)
        rc, out = run(dict(world, PSTRAIN_GEN_EVAL_ROWS="800"))
        expect("another size regenerates", rc == 0 and "already holds" not in out, out)

        rc, out = run({}, "gen", "--rows=10", "--out=" + os.path.join(tmp, "x.tsv"))
        expect("role from the first argument, arguments passed on", rc == 0 and
               os.path.exists(os.path.join(tmp, "x.tsv.meta.json")), out)
        rc, out = run({"PSTRAIN_ROLE": "worker"}, "--helpfull")
        expect("role worker runs pstrain_worker", "--train_data" in out, out)
        rc, out = run({"PSTRAIN_ROLE": "nonsense"})
        expect("unknown role: exit 2", rc == 2 and "PSTRAIN_ROLE" in out, out)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
