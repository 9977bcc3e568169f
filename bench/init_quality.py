#!/usr/bin/python3
"""Embedding initializers on one data set: pstrain's DLRM and PyTorch's, seed by seed.

For each seed and each candidate embedding initializer, `pstrain train` (one
process) and bench/torch_dlrm.py train one pass in file order over the same
rows with the same DLRM shape, batch size and Adagrad learning rates, then
score the eval rows. One JSON line per run, then one summary line per (side,
initializer): the mean eval AUC over the seeds and its spread.

Data (--data):
  gen   `pstrain gen` worlds: seed s writes world s (--rows training rows,
        a tenth as many later rows for eval); the model seed is --model_seed.
  DIR   a prepared set (bench/datasets/prepare.sh): DIR/train.tsv, eval.tsv
        and schema.json (label, dense columns, categorical columns); the rows
        are fixed and seed s is both sides' model seed.

Initializers (--inits, both sides unless --torch_inits says otherwise):
  dim       U(+-1/sqrt(dim))                 (pstrain's default until 2026-12)
  u:S       U(+-S)
  n:S       N(0, S^2)
  rows      U(+-sqrt(1/rows)), rows = the table's vocabulary (every distinct
            token of the column in train and eval): TorchRec's default and the
            DLRM reference's. pstrain takes it as a model file's table_init.

    bench/torch_setup.sh        # Debian's python3-torch, once (root)
    bench/datasets/prepare.sh /tmp/real
    bench/init_quality.py --data=/tmp/real/flights --inits=dim,u:0.05,rows

Not part of `make test`: it needs PyTorch and minutes a run.
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from quality import last_summary, run  # noqa: E402


def columns(schema_path):
    """(dense count, sparse count) of a prepared set's schema."""
    with open(schema_path) as f:
        text = re.sub(r"^\s*//.*$", "", f.read(), flags=re.M)
    s = json.loads(text)
    return len(s["dense"]), len(s["sparse"])


def vocab_sizes(paths, num_dense, num_sparse):
    seen = [set() for _ in range(num_sparse)]
    for path in paths:
        with open(path) as f:
            for line in f:
                cols = line.rstrip("\n").split("\t")
                for j in range(num_sparse):
                    seen[j].add(cols[1 + num_dense + j])
    return [len(s) for s in seen]


def table_names(pstrain, flags):
    out = subprocess.run([pstrain, "model", "show", "dlrm"] + flags, capture_output=True,
                         text=True)
    if out.returncode != 0:
        sys.exit(f"init_quality: pstrain model show dlrm failed:\n{out.stderr}")
    return [m.group(1) for m in re.finditer(r"^(emb\.\S+)\s+sparse", out.stdout, flags=re.M)]


def pstrain_model_file(init, names, vocab, path):
    """examples/models/dlrm.json with the embedding initializer `init`."""
    with open(os.path.join(ROOT, "examples/models/dlrm.json")) as f:
        text = f.read()
    extra = ""
    if init.startswith("u:"):
        extra = f'"embedding_init": {{"uniform": {float(init[2:])}}},'
    elif init.startswith("n:"):
        extra = f'"embedding_init": {{"normal": {float(init[2:])}}},'
    elif init == "rows":
        entries = ", ".join(f'"{n}": {{"uniform": {(1.0 / max(1, v)) ** 0.5:.6g}}}'
                            for n, v in zip(names, vocab))
        extra = f'"table_init": {{{entries}}},'
    elif init != "dim":
        sys.exit(f"init_quality: unknown initializer {init!r} (dim, u:S, n:S, rows)")
    with open(path, "w") as f:
        f.write(text.replace('"name": "dlrm",', '"name": "dlrm",\n  ' + extra, 1))


def torch_init_flags(init):
    if init == "dim":
        return ["--embedding_init=uniform"]
    if init.startswith("u:"):
        return ["--embedding_init=uniform", f"--embedding_scale={float(init[2:])}"]
    if init.startswith("n:"):
        return ["--embedding_init=normal", f"--embedding_scale={float(init[2:])}"]
    if init == "rows":
        return ["--embedding_init=dlrm"]
    sys.exit(f"init_quality: unknown initializer {init!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--bin-dir", default="build/bin")
    ap.add_argument("--data", default="gen", help="gen, or a prepared set's folder")
    ap.add_argument("--name", default="", help="the set's name in the output (default: --data)")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--rows", type=int, default=1000000, help="gen: training rows per world")
    ap.add_argument("--model_seed", type=int, default=1, help="gen: both sides' model seed")
    ap.add_argument("--inits", default="dim,u:0.05,rows", help="pstrain's candidates")
    ap.add_argument("--torch_inits", default="",
                    help="PyTorch's (default: --inits; none: pstrain only)")
    ap.add_argument("--embedding_dim", type=int, default=16)
    ap.add_argument("--bottom_mlp", default="64,16")
    ap.add_argument("--top_mlp", default="64,32")
    ap.add_argument("--batch_size", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--work", default="", help="keep data and logs here (default: a temp dir)")
    a = ap.parse_args()

    work = a.work or tempfile.mkdtemp(prefix="pstrain-init.")
    os.makedirs(work, exist_ok=True)
    pstrain = os.path.join(a.bin_dir, "pstrain")
    name = a.name or os.path.basename(a.data.rstrip("/"))
    shared = [f"--embedding_dim={a.embedding_dim}", f"--bottom_mlp={a.bottom_mlp}",
              f"--top_mlp={a.top_mlp}", f"--batch_size={a.batch_size}", f"--lr={a.lr}"]
    dense_lr = a.lr / 5  # pstrain's default dense learning rate; PyTorch gets the same
    results = {}
    for seed in [int(s) for s in a.seeds.split(",")]:
        if a.data == "gen":
            train = os.path.join(work, f"train{seed}.tsv")
            evalf = os.path.join(work, f"eval{seed}.tsv")
            if not os.path.exists(evalf):
                run([pstrain, "gen", f"--rows={a.rows}", f"--out={train}", f"--seed={seed}"],
                    os.path.join(work, f"gen{seed}.log"))
                run([pstrain, "gen", f"--rows={a.rows // 10}", f"--first_row={a.rows}",
                     f"--out={evalf}", f"--seed={seed}"], os.path.join(work, f"gen{seed}e.log"))
            data_flags, num_dense, num_sparse, model_seed = [], 13, 26, a.model_seed
        else:
            train, evalf = os.path.join(a.data, "train.tsv"), os.path.join(a.data, "eval.tsv")
            schema = os.path.join(a.data, "schema.json")
            data_flags = [f"--schema={schema}"]
            num_dense, num_sparse = columns(schema)
            model_seed = seed
        vocab = vocab_sizes([train, evalf], num_dense, num_sparse)
        names = table_names(pstrain, data_flags + shared)
        for init in a.inits.split(","):
            model_file = os.path.join(work, f"dlrm-{init.replace(':', '')}-{seed}.json")
            pstrain_model_file(init, names, vocab, model_file)
            metrics = os.path.join(work, f"pstrain-{init.replace(':', '')}-{seed}.jsonl")
            if os.path.exists(metrics):
                os.remove(metrics)
            start = time.time()
            run([pstrain, "train", f"--train_data={train}", f"--eval_data={evalf}",
                 f"--metrics_out={metrics}", f"--seed={model_seed}", "--log_every_secs=600",
                 f"--model_file={model_file}"] + data_flags + shared,
                os.path.join(work, f"pstrain-{init.replace(':', '')}-{seed}.log"))
            s = last_summary(metrics)
            rec = {"bench": "init_quality", "data": name, "seed": seed, "side": "pstrain",
                   "init": init, "eval_auc": round(s["eval_auc"], 5),
                   "eval_logloss": round(s.get("eval_logloss", float("nan")), 5),
                   "wall_s": round(time.time() - start, 1)}
            results.setdefault(("pstrain", init), []).append(rec["eval_auc"])
            print(json.dumps(rec), flush=True)
        for init in (a.torch_inits or a.inits).split(","):
            if init == "none":
                continue
            start = time.time()
            out = subprocess.run(
                ["/usr/bin/python3", os.path.join(HERE, "torch_dlrm.py"), f"--train={train}",
                 f"--eval={evalf}", f"--seed={model_seed}", f"--dense_lr={dense_lr}",
                 f"--dense_fields={num_dense}", f"--sparse_fields={num_sparse}", "--init=torch"]
                + shared + torch_init_flags(init), capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"init_quality: torch_dlrm.py failed:\n{out.stderr[-3000:]}")
            pt = json.loads(out.stdout.strip().splitlines()[-1])
            rec = {"bench": "init_quality", "data": name, "seed": seed, "side": "pytorch",
                   "init": init, "eval_auc": pt["eval_auc"], "eval_logloss": pt["eval_logloss"],
                   "wall_s": round(time.time() - start, 1)}
            results.setdefault(("pytorch", init), []).append(rec["eval_auc"])
            print(json.dumps(rec), flush=True)
    for (side, init), aucs in results.items():
        print(json.dumps({"bench": "init_quality", "summary": True, "data": name, "side": side,
                          "init": init, "seeds": a.seeds, "mean_auc": round(statistics.mean(aucs), 5),
                          "min_auc": min(aucs), "max_auc": max(aucs),
                          "stdev": round(statistics.stdev(aucs), 5) if len(aucs) > 1 else 0,
                          "work": work}), flush=True)


if __name__ == "__main__":
    main()
