#!/usr/bin/env python3
"""scripts/gpu-check.sh on a machine without a GPU, as CI runs it.

A fake nvidia-smi first on PATH stands for the GPU (or its absence), so the
test behaves the same on a machine that has one: it never runs the real
check. With BIN_DIR (the build's binaries) one case runs every step for
real against the fake GPU: the CPU steps pass, the CUDA ones fail naming
why, and every line written is JSON.
Usage: gpu_check_test.py PATH/TO/gpu-check.sh [BIN_DIR]
"""
import json
import os
import stat
import subprocess
import sys
import tempfile
import unittest

SCRIPT = sys.argv.pop(1) if len(sys.argv) > 1 else "scripts/gpu-check.sh"
BIN_DIR = sys.argv.pop(1) if len(sys.argv) > 1 else ""

NO_DRIVER = """#!/bin/sh
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." >&2
exit 9
"""

H100 = """#!/bin/sh
case "$*" in
  *--query-gpu=name*) echo "NVIDIA H100 80GB HBM3, 9.0, 81559, 580.159.04" ;;
  *utilization.gpu*) while true; do echo 37; sleep 0.1; done ;;
  *) echo "fake nvidia-smi" ;;
esac
"""


class GpuCheckTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.bin = os.path.join(self.tmp.name, "bin")
        os.mkdir(self.bin)
        self.out = os.path.join(self.tmp.name, "out")

    def fake_smi(self, text):
        path = os.path.join(self.bin, "nvidia-smi")
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)

    def run_script(self, *args):
        env = dict(os.environ, PATH=self.bin + os.pathsep + os.environ.get("PATH", ""))
        return subprocess.run(["bash", SCRIPT, *args], env=env, capture_output=True, text=True,
                              timeout=200)

    def lines(self):
        with open(os.path.join(self.out, "gpu-check.jsonl")) as f:
            return [json.loads(line) for line in f if line.strip()]

    def test_without_a_gpu_it_says_so_and_exits_zero_with_gpu_false(self):
        self.fake_smi(NO_DRIVER)
        r = self.run_script("--out", self.out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("no GPU here", r.stdout)
        lines = self.lines()
        self.assertEqual(len(lines), 1, lines)
        self.assertEqual(lines[0]["check"], "gpu")
        self.assertIs(lines[0]["gpu"], False)
        self.assertIn("couldn't communicate with the NVIDIA driver", lines[0]["reason"])

    def test_with_a_gpu_the_dry_run_plans_every_step_for_its_architecture(self):
        self.fake_smi(H100)
        r = self.run_script("--out=" + self.out, "--dry-run", "--jobs", "16")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        lines = self.lines()
        gpu = lines[0]
        self.assertEqual((gpu["check"], gpu["gpu"], gpu["name"]), ("gpu", True, "NVIDIA H100 80GB HBM3"))
        self.assertEqual((gpu["compute_cap"], gpu["cuda_arch"], gpu["memory_mib"]), ("9.0", "90", 81559))
        self.assertEqual([l["check"] for l in lines][-1], "summary")
        self.assertIs(lines[-1]["dry_run"], True)
        planned = [l for l in r.stdout.splitlines() if l.startswith("would run: ")]
        configure = [l for l in planned if " -S " in l]
        self.assertEqual(len(configure), 1, planned)
        self.assertIn("-DCMAKE_CUDA_ARCHITECTURES=90", configure[0])
        build = [l for l in planned if "--build" in l]
        self.assertIn("-j 16", build[0])
        for target in ("gpu_tests", "pstrain_bench", "pstrain_worker"):
            self.assertIn(target, build[0])
        self.assertTrue(any(l.endswith("gpu_tests --gtest_output=json:%s/gpu_tests.json" % self.out)
                            for l in planned), planned)
        bench = [l for l in planned if "pstrain_bench train" in l]
        self.assertEqual(len(bench), 12, bench)  # 3 batch sizes x local, ps x cuda, cpu
        for batch in (1024, 8192, 32768):
            for device in ("cuda", "cpu"):
                self.assertTrue(any("--batch_size=%d" % batch in l and "--device=" + device in l
                                    for l in bench), (batch, device))
        jobs = [l for l in planned if "pstrain local" in l]
        self.assertTrue(any("--device=cuda" in l and "--mode=allreduce" in l for l in jobs), jobs)
        self.assertTrue(any("--device=cpu" in l for l in jobs), jobs)

    def test_a_prebuilt_bundle_skips_the_build(self):
        self.fake_smi(H100)
        bundle = os.path.join(self.tmp.name, "bundle")
        os.makedirs(os.path.join(bundle, "bin"))
        r = self.run_script("--out", self.out, "--dry-run", "--prebuilt", bundle, "--batches", "256")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertNotIn(" -S ", r.stdout)
        build = [l for l in self.lines() if l["check"] == "build"]
        self.assertEqual(build[0]["prebuilt"], bundle)
        self.assertIn(bundle + "/bin/gpu_tests", r.stdout)
        self.assertEqual(r.stdout.count("pstrain_bench train"), 4)

    @unittest.skipUnless(BIN_DIR, "no BIN_DIR given: the build's binaries")
    def test_every_step_runs_and_reports_against_a_gpu_the_binaries_cannot_use(self):
        # The fake nvidia-smi finds an H100 the binaries cannot reach (none is
        # here, or the machine's is not the fake's): CUDA steps fail, CPU
        # steps run, and the summary lists what failed.
        self.fake_smi(H100)
        bundle = os.path.join(self.tmp.name, "bundle")
        os.mkdir(bundle)
        os.symlink(os.path.abspath(BIN_DIR), os.path.join(bundle, "bin"))
        os.mkdir(os.path.join(bundle, "lib"))
        r = self.run_script("--out", self.out, "--prebuilt", bundle, "--batches", "256")
        lines = self.lines()
        by_check = {}
        for l in lines:
            by_check.setdefault(l["check"], []).append(l)
        self.assertEqual(set(by_check) >= {"gpu", "toolkit", "build", "gpu_tests", "bench", "job",
                                           "summary"}, True, by_check.keys())
        bench = by_check["bench"]
        self.assertEqual(len(bench), 4, bench)
        for b in bench:
            if b["device"] == "cpu":
                self.assertEqual(b["bench"], "train")
                self.assertGreater(b["samples_per_sec"], 0)
            else:
                self.assertIs(b["ok"], False)
                self.assertTrue(b["error"], b)
        jobs = {j["name"]: j for j in by_check["job"]}
        self.assertIs(jobs["ps-cpu"]["ok"], True, jobs)
        self.assertGreater(jobs["ps-cpu"]["eval_auc"], 0.6)
        summary = by_check["summary"][0]
        self.assertIn("ps-cuda", summary["failed"])
        if by_check["gpu_tests"][0]["passed"] == 0:  # no real GPU here
            self.assertEqual(r.returncode, 1, r.stdout[-2000:])
            self.assertIs(summary["ok"], False)
        for name in ("gpu_tests.log", "job-ps-cpu.log", "bench-local-cpu-256.log"):
            self.assertTrue(os.path.exists(os.path.join(self.out, name)), name)

    @unittest.skipUnless(BIN_DIR, "no BIN_DIR given: the build's binaries")
    def test_the_bench_refuses_an_unknown_device_at_once(self):
        # The check passes --device to pstrain_bench: a wrong one fails before
        # any data is written or cluster started, naming the flag.
        r = subprocess.run([os.path.join(BIN_DIR, "pstrain_bench"), "train", "--mode=ps",
                            "--device=gpu"], capture_output=True, text=True, timeout=5)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--device=gpu: want cpu or cuda", r.stderr)

    def test_bad_arguments_exit_two_naming_what_is_wrong(self):
        self.fake_smi(NO_DRIVER)
        for args, says in (((), "--out DIR is required"),
                           (("--out",), "--out needs a value"),
                           (("--out", self.out, "--frob"), "unknown argument '--frob'"),
                           (("--out", self.out, "--jobs=0"), "--jobs=0: want a whole number"),
                           (("--out", self.out, "--batches", "1024 lots"), "'lots' is not a batch size"),
                           (("--out", self.out, "--prebuilt", "/nonexistent/b.tar.gz"),
                            "no such folder or file")):
            r = self.run_script(*args)
            self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
            self.assertIn(says, r.stderr, args)
        self.assertFalse(os.path.exists(os.path.join(self.out, "gpu-check.jsonl")))

    def test_help_explains_the_steps_and_the_device_command(self):
        r = self.run_script("--help")
        self.assertEqual(r.returncode, 0)
        for needed in ("--out DIR", "--prebuilt", "ctest -L gpu", "compute capability",
                       "allreduce", '"gpu":false', "scripts/gpu-bundle.sh"):
            self.assertIn(needed, r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
