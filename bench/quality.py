#!/usr/bin/python3
"""pstrain's DLRM against the same DLRM in PyTorch, seed by seed.

For each seed: `pstrain gen` writes a train file (--rows) and an eval file
(a tenth of it, later rows of the same world); `pstrain train` (one process:
coordinator, one server, one worker) and bench/torch_dlrm.py each train one
pass over the train file in file order with the same architecture, embedding
size, batch size and Adagrad learning rates, then score the eval file. One
JSON line per seed with both AUCs and loglosses and their difference, then a
summary line (the smallest difference over the seeds).

    bench/torch_setup.sh              # Debian's python3-torch, once (root)
    bench/quality.py --bin-dir=build/bin --seeds=1,2,3 --rows=1000000

The settings shared by both sides are this script's flags; --pstrain_flags
and --torch_flags add to one side only (e.g. --pstrain_flags=--bias_init=zeros
--torch_flags=--zero_bias). Both sides use the same dense learning rate:
--dense_lr, else pstrain's default (--lr / 5). Each seed runs PyTorch from
pstrain's exact initial values (--torch_inits=pstrain: the two must agree to
rounding) and from its own random draws (torch: the spread of the init).
Not part of `make test`: it needs PyTorch and a few minutes a seed.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, log):
    with open(log, "w") as f:
        p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        with open(log) as f:
            tail = f.read()[-3000:]
        sys.exit(f"quality: {shlex.join(cmd)} failed (exit {p.returncode}):\n{tail}")


def last_summary(path):
    summary = None
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if "eval_auc" in rec:
                summary = rec
    if summary is None:
        sys.exit(f"quality: no eval_auc in {path}")
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--bin-dir", default="build/bin")
    ap.add_argument("--seeds", default="1,2,3", help="data worlds (pstrain gen --seed)")
    ap.add_argument("--rows", type=int, default=1000000, help="training rows per seed")
    ap.add_argument("--model_seed", type=int, default=1, help="both sides' initializer seed")
    ap.add_argument("--embedding_dim", type=int, default=16)
    ap.add_argument("--bottom_mlp", default="64,16")
    ap.add_argument("--top_mlp", default="64,32")
    ap.add_argument("--batch_size", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--dense_lr", type=float, default=-1,
                    help="MLP learning rate on both sides (default: pstrain's own default)")
    ap.add_argument("--gen_flags", default="", help="extra `pstrain gen` flags")
    ap.add_argument("--pstrain_flags", default="", help="extra `pstrain train` flags")
    ap.add_argument("--torch_flags", default="", help="extra bench/torch_dlrm.py flags")
    ap.add_argument("--torch_inits", default="pstrain,torch",
                    help="PyTorch runs per seed: pstrain (start from pstrain's exact initial "
                         "values: any difference is the implementations'), torch (PyTorch's own "
                         "random draws: adds the initialization's seed-to-seed spread)")
    ap.add_argument("--work", default="", help="keep data and logs here (default: a temp dir)")
    a = ap.parse_args()

    work = a.work or tempfile.mkdtemp(prefix="pstrain-quality.")
    os.makedirs(work, exist_ok=True)
    pstrain = os.path.join(a.bin_dir, "pstrain")
    shared = [f"--embedding_dim={a.embedding_dim}", f"--bottom_mlp={a.bottom_mlp}",
              f"--top_mlp={a.top_mlp}", f"--batch_size={a.batch_size}", f"--lr={a.lr}"]
    if a.dense_lr >= 0:
        shared.append(f"--dense_lr={a.dense_lr}")
    diffs = []
    for seed in [int(s) for s in a.seeds.split(",")]:
        train = os.path.join(work, f"train{seed}.tsv")
        evalf = os.path.join(work, f"eval{seed}.tsv")
        if not os.path.exists(evalf):
            gen = shlex.split(a.gen_flags)
            run([pstrain, "gen", f"--rows={a.rows}", f"--out={train}", f"--seed={seed}"] + gen,
                os.path.join(work, f"gen{seed}.log"))
            run([pstrain, "gen", f"--rows={a.rows // 10}", f"--first_row={a.rows}",
                 f"--out={evalf}", f"--seed={seed}"] + gen, os.path.join(work, f"gen{seed}e.log"))
        metrics = os.path.join(work, f"pstrain{seed}.jsonl")
        if os.path.exists(metrics):
            os.remove(metrics)
        start = time.time()
        run([pstrain, "train", f"--train_data={train}", f"--eval_data={evalf}",
             f"--metrics_out={metrics}", f"--seed={a.model_seed}", "--log_every_secs=600"]
            + shared + shlex.split(a.pstrain_flags), os.path.join(work, f"pstrain{seed}.log"))
        ps_s = time.time() - start
        ps = last_summary(metrics)
        # pstrain's default dense learning rate is --lr / 5 (`pstrain train
        # --help`); PyTorch is given the same.
        dense_lr = a.dense_lr if a.dense_lr >= 0 else a.lr / 5
        for init in a.torch_inits.split(","):
            out = subprocess.run(
                ["/usr/bin/python3", os.path.join(HERE, "torch_dlrm.py"), f"--train={train}",
                 f"--eval={evalf}", f"--seed={a.model_seed}", f"--dense_lr={dense_lr}",
                 f"--init={init}"] + shared + shlex.split(a.torch_flags),
                capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"quality: torch_dlrm.py failed:\n{out.stderr[-3000:]}")
            pt = json.loads(out.stdout.strip().splitlines()[-1])
            diff = ps["eval_auc"] - pt["eval_auc"]
            diffs.append(diff)
            print(json.dumps({
                "bench": "quality", "model": "dlrm", "data_seed": seed, "train_rows": a.rows,
                "torch_init": init, "pstrain_auc": round(ps["eval_auc"], 5),
                "torch_auc": pt["eval_auc"], "auc_diff": round(diff, 5),
                "pstrain_logloss": round(ps.get("eval_logloss", float("nan")), 5),
                "torch_logloss": pt["eval_logloss"], "oracle_auc": ps.get("oracle_auc"),
                "lr": a.lr, "dense_lr": dense_lr, "pstrain_flags": a.pstrain_flags,
                "torch_flags": a.torch_flags, "pstrain_wall_s": round(ps_s, 1),
                "torch_samples_per_sec": pt["samples_per_sec"]}), flush=True)
    print(json.dumps({"bench": "quality", "summary": True, "seeds": a.seeds,
                      "min_auc_diff": round(min(diffs), 5),
                      "mean_auc_diff": round(sum(diffs) / len(diffs), 5),
                      "work": work}))


if __name__ == "__main__":
    main()
