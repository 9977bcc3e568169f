#!/usr/bin/env python3
"""The README's commands run as written, and every link in the README and
docs/ resolves inside the repository.

  blocks  runs every ```sh block of README.md, in order, in one fresh
          temporary folder, with the build's binaries first on PATH and no
          PSTRAIN_* variable from the caller's environment. Each block runs
          as `bash -e -o pipefail`, in a process group of its own (killed
          when the block ends), bounded in time. A block fails the test when
          it exits with another status than expected; the failure shows the
          block's text and its output.
  links   every relative link of README.md and docs/*.md names a file (and,
          with #anchor, a heading) inside the repository.

A block is steered by an HTML comment on the line before its fence, e.g.
`<!-- readme-test: exit=2, expect -->` (comma-separated):

  skip: REASON     never run here (installs packages, runs the whole suite)
  needs docker     run only with PSTRAIN_README_DOCKER=1, a Docker engine that
                   answers and docker-compose; in the repository's folder
  needs kubectl    run only with PSTRAIN_README_K8S=1 and a cluster that
                   `kubectl cluster-info` reaches; in the repository's folder
  background port=N  start it and go on once port N answers; it is stopped at
                   the end. N is replaced in every block (and expected
                   output) by a free port.
  exit=N           the status the block must end with (default 0)
  expect           every line of the ```text block that follows must appear
                   in the block's output (numbers may differ; "..." matches
                   anything)
  timeout=S        seconds the block may take (default 60)

Exit codes: 0 passed, 1 failed. Skipped blocks are listed with the reason.
"""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MARK = re.compile(r"^<!--\s*readme-test:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^```(\S*)\s*$")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Failure(Exception):
    pass


def log(msg):
    print("[readme_test %s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


class Block:
    def __init__(self, line, section, lang, text, marks):
        self.line = line          # 1-based line of the opening fence
        self.section = section
        self.lang = lang
        self.text = text
        self.marks = marks        # {key: value or True}
        self.expected = None      # the ```text block after it, with `expect`


def parse_marks(text):
    marks = {}
    if "skip:" in text:  # the reason runs to the end and may hold commas
        text, reason = text.split("skip:", 1)
        marks["skip"] = reason.strip()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if part.startswith("needs "):
            marks["needs"] = part[len("needs "):].strip()
        elif part.startswith("background"):
            marks["background"] = True
            m = re.search(r"port=(\d+)", part)
            if not m:
                raise Failure("background needs port=N: %r" % text)
            marks["port"] = m.group(1)
        elif "=" in part:
            k, v = part.split("=", 1)
            marks[k.strip()] = v.strip()
        else:
            marks[part] = True
    unknown = set(marks) - {"skip", "needs", "background", "port", "exit", "expect", "timeout"}
    if unknown:
        raise Failure("unknown readme-test marks %s in %r" % (sorted(unknown), text))
    return marks


def parse(path):
    """The fenced blocks of a Markdown file, with their marks."""
    blocks = []
    section = ""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    pending = None  # marks of the comment just before a fence
    while i < len(lines):
        line = lines[i]
        m = FENCE.match(line)
        if m:
            start = i
            body = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise Failure("%s:%d: a fence that is never closed" % (path, start + 1))
            b = Block(start + 1, section, m.group(1), "\n".join(body) + "\n", pending or {})
            if blocks and blocks[-1].marks.get("expect") and blocks[-1].expected is None and \
                    b.lang == "text":
                blocks[-1].expected = b.text
            blocks.append(b)
            pending = None
        else:
            mm = MARK.match(line.strip())
            if mm:
                pending = parse_marks(mm.group(1))
            elif line.startswith("#"):
                section = line.lstrip("#").strip()
                pending = None
            elif line.strip():
                pending = None
        i += 1
    for b in blocks:
        if b.marks.get("expect") and b.expected is None:
            raise Failure("README.md:%d: `expect` but no ```text block follows" % b.line)
    return blocks


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", int(port)), timeout=0.5):
            return True
    except OSError:
        return False


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def line_pattern(line):
    """A regex for one expected output line: numbers and hex ids (a model's
    version) may differ, "..." is anything."""
    out = []
    pos = 0
    for m in re.finditer(r"\.\.\.|[0-9a-f]*\d[0-9a-f]*", line):
        out.append(re.escape(line[pos:m.start()]))
        tok = m.group(0)
        if tok == "...":
            out.append(".*")
        elif re.fullmatch(r"\d+", tok):
            out.append(r"\d+")
        else:
            out.append(r"[0-9a-f]+")
        pos = m.end()
    out.append(re.escape(line[pos:]))
    return re.compile("".join(out))


def check_expected(expected, output):
    out_lines = [ANSI.sub("", l).split("\r")[-1] for l in output.split("\n")]
    missing = []
    for want in expected.split("\n"):
        want = want.strip()
        if not want or want == "...":
            continue
        pat = line_pattern(want)
        if not any(pat.search(l) for l in out_lines):
            missing.append(want)
    return missing


def needs_ok(what):
    """None when the block can run, else why not."""
    if what == "docker":
        if os.environ.get("PSTRAIN_README_DOCKER") != "1":
            return "needs a Docker engine (set PSTRAIN_README_DOCKER=1 to run it: it builds the image)"
        if not shutil.which("docker-compose"):
            return "needs docker-compose"
        r = subprocess.run(["docker", "info"], capture_output=True, timeout=30)
        return None if r.returncode == 0 else "no Docker engine answers `docker info`"
    if what == "kubectl":
        if os.environ.get("PSTRAIN_README_K8S") != "1":
            return ("needs a Kubernetes cluster (set PSTRAIN_README_K8S=1 to apply the example "
                    "to the one kubectl points at)")
        if not shutil.which("kubectl"):
            return "needs kubectl"
        try:
            r = subprocess.run(["kubectl", "cluster-info"], capture_output=True, timeout=15)
        except subprocess.TimeoutExpired:
            return "`kubectl cluster-info` did not answer"
        return None if r.returncode == 0 else "no cluster answers `kubectl cluster-info`"
    return "needs %s (unknown to this test)" % what


def run_blocks(args):
    blocks = [b for b in parse(args.readme) if b.lang == "sh"]
    if not blocks:
        raise Failure("no ```sh blocks in " + args.readme)
    work = tempfile.mkdtemp(prefix="readme_test.")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PSTRAIN_")}
    env["PATH"] = os.path.abspath(args.bin_dir) + os.pathsep + env.get("PATH", "")
    env["HOME"] = os.environ.get("HOME", work)
    ports = {}  # README port -> the free port used instead
    background = []
    ran, skipped = 0, []
    t0 = time.time()
    try:
        for b in blocks:
            where = "%s:%d (%s)" % (os.path.basename(args.readme), b.line, b.section)
            if "skip" in b.marks:
                skipped.append("%s: %s" % (where, b.marks["skip"]))
                continue
            cwd = work
            if "needs" in b.marks:
                why = needs_ok(b.marks["needs"])
                if why:
                    skipped.append("%s: %s" % (where, why))
                    continue
                cwd = REPO
            if "port" in b.marks and b.marks["port"] not in ports:
                ports[b.marks["port"]] = str(free_port())
            text = b.text
            expected = b.expected
            for old, new in ports.items():
                text = re.sub(r"\b%s\b" % old, new, text)
                if expected:
                    expected = re.sub(r"\b%s\b" % old, new, expected)
            timeout = float(b.marks.get("timeout", args.block_timeout))
            if time.time() - t0 + min(timeout, 5) > args.time_limit:
                raise Failure("the blocks ran past --time-limit=%d s before %s" %
                              (args.time_limit, where))
            log("%s: %s" % (where, text.strip().split("\n")[0][:100]))
            cmd = ["bash", "-e", "-o", "pipefail", "-c", text]
            if b.marks.get("background"):
                out_path = os.path.join(work, ".background-%d.log" % b.line)
                out = open(out_path, "w")
                p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
                background.append((b, p, out_path))
                port = ports[b.marks["port"]]
                deadline = time.time() + timeout
                while not port_open(port):
                    if p.poll() is not None or time.time() > deadline:
                        raise Failure("%s: the background block %s before port %s answered:\n"
                                      "%s\n--- output:\n%s" %
                                      (where, "exited %s" % p.returncode if p.poll() is not None
                                       else "ran %.0f s" % timeout, port, text,
                                       open(out_path).read()))
                    time.sleep(0.1)
                ran += 1
                continue
            p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, start_new_session=True)
            try:
                output, _ = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                kill_group(p)
                output, _ = p.communicate()
                raise Failure("%s: the block ran past %.0f s:\n%s\n--- output:\n%s" %
                              (where, timeout, text, output.decode(errors="replace")))
            kill_group(p)  # whatever it left running in the background
            output = output.decode(errors="replace")
            if args.show:
                print(output, end="", flush=True)
            want = int(b.marks.get("exit", 0))
            if p.returncode != want:
                raise Failure("%s: the block exited %d, expected %d:\n%s\n--- output:\n%s" %
                              (where, p.returncode, want, text, output))
            if expected:
                missing = check_expected(expected, output)
                if missing:
                    raise Failure("%s: the output lacks what the README shows:\n  %s\n"
                                  "--- block:\n%s\n--- output:\n%s" %
                                  (where, "\n  ".join(missing), text, output))
            ran += 1
    finally:
        for b, p, out_path in background:
            kill_group(p)
        if args.keep:
            log("kept " + work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    for s in skipped:
        log("skipped " + s)
    log("%d blocks ran, %d skipped, in %.1f s" % (ran, len(skipped), time.time() - t0))


def heading_anchor(heading):
    """GitHub's anchor of a heading."""
    a = heading.strip().lower()
    a = re.sub(r"[^\w\- ]", "", a)
    return a.replace(" ", "-")


def anchors(path):
    out = set()
    in_code = False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            out.add(heading_anchor(line.lstrip("#")))
    return out


def check_links(args):
    files = [os.path.join(REPO, "README.md")]
    docs = os.path.join(REPO, "docs")
    if os.path.isdir(docs):
        files += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    errors = []
    count = 0
    for path in files:
        rel = os.path.relpath(path, REPO)
        text = open(path, encoding="utf-8").read()
        text = re.sub(r"```.*?```", "", text, flags=re.S)  # links in code blocks do not count
        text = re.sub(r"`[^`\n]*`", "", text)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            count += 1
            if re.match(r"^[a-z]+:", target):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                if file_part else path
            if not (dest + os.sep).startswith(REPO + os.sep) and dest != REPO:
                errors.append("%s: %s leaves the repository" % (rel, target))
                continue
            if not os.path.exists(dest):
                errors.append("%s: %s: no such file" % (rel, target))
                continue
            if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                errors.append("%s: %s: no heading #%s in %s" %
                              (rel, target, anchor, os.path.relpath(dest, REPO)))
    if errors:
        raise Failure("links that do not resolve:\n  " + "\n  ".join(errors))
    log("%d links in %d files resolve" % (count, len(files)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["blocks", "links"])
    ap.add_argument("--bin-dir", default=os.path.join(REPO, "build", "bin"))
    ap.add_argument("--readme", default=os.path.join(REPO, "README.md"))
    ap.add_argument("--block-timeout", type=float, default=60)
    ap.add_argument("--time-limit", type=float, default=240)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--show", action="store_true", help="print every block's output")
    args = ap.parse_args()
    try:
        if args.what == "blocks":
            if not os.path.exists(os.path.join(args.bin_dir, "pstrain")):
                raise Failure("no pstrain in --bin-dir=" + args.bin_dir)
            run_blocks(args)
        else:
            check_links(args)
    except Failure as e:
        print("FAIL: %s" % e, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
