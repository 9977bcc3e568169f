#!/usr/bin/env python3
"""A private Docker engine for pstrain's images and container tests.

Starts Debian's dockerd (package docker.io) on its own socket, data root and
exec root, with no default bridge and no iptables rules, so that it touches
neither a Docker the machine may already run nor the host's firewall. Its
data root is a cache (PSTRAIN_DOCKER_CACHE, default /var/cache/pstrain-docker):
the Debian 12 base image made with debootstrap and the layers of earlier
builds survive from one run to the next. No image registry is needed.

  scripts/docker_env.py image [--bin-dir=build/bin] [--tag=pstrain:test]
      the runtime image from already-built binaries (seconds)
  scripts/docker_env.py image --full [--tag=pstrain:cpu]
      the full multi-stage docker/Dockerfile build (CPU), from the sources
  scripts/docker_env.py run -- CMD...
      CMD with DOCKER_HOST pointing at the private engine, e.g.
      `scripts/docker_env.py run -- docker-compose -f docker/docker-compose.yml up`

Needs root. Used by tests/docker/compose_test.py and `make docker-image`.
"""
import argparse
import contextlib
import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CACHE = os.environ.get("PSTRAIN_DOCKER_CACHE", "/var/cache/pstrain-docker")
BASE_IMAGE = "pstrain-base:bookworm"
MIRROR = os.environ.get("PSTRAIN_DEBIAN_MIRROR", "http://deb.debian.org/debian")
SECURITY_MIRROR = os.environ.get("PSTRAIN_DEBIAN_SECURITY_MIRROR",
                                 "http://deb.debian.org/debian-security")
# Debian's engine and client (docker.io): a newer client elsewhere on PATH
# (Docker >= 23) would want the buildx plugin for BuildKit builds.
DOCKERD = "/usr/sbin/dockerd"
DOCKER = "/usr/bin/docker"
BINARIES = ("pstrain", "pstrain_coordinator", "pstrain_server", "pstrain_worker")
# Libraries the host build may link that no Debian package holds (the CUDA
# toolkit's, wherever the loader found them: /usr/local/cuda/lib through the
# binaries' RUNPATH, /usr/local/cuda-13.0/lib through ld.so.conf, ...):
# containers of an image made from such binaries mount their folders
# read-only at the same path and find them through LD_LIBRARY_PATH.
CUDA_LIB_PREFIX = "/usr/local/cuda"


def provided_lib_dirs(ldd_output):
    """The folders under CUDA_LIB_PREFIX* that ldd resolved libraries in,
    each as ldd named it and as its real path, in a stable order."""
    dirs = []
    for m in re.finditer(r"=> (/\S+)", ldd_output):
        lib = m.group(1)
        if not lib.startswith(CUDA_LIB_PREFIX):
            continue
        for d in (os.path.dirname(lib), os.path.dirname(os.path.realpath(lib))):
            if d not in dirs:
                dirs.append(d)
    return dirs


def log(msg):
    print("docker_env: " + msg, flush=True)


class DockerError(RuntimeError):
    pass


class EngineUnavailable(DockerError):
    """This machine cannot run the engine or make the base image (no
    overlay file system, no cgroups, no Debian mirror): the environment's
    lack, not the product's fault."""


def missing_tools():
    """What this machine lacks to run the private engine ([] when nothing)."""
    why = []
    if os.geteuid() != 0:
        why.append("not root (dockerd needs it)")
    for tool in (DOCKERD, DOCKER, "/usr/sbin/debootstrap"):
        if not os.access(tool, os.X_OK):
            why.append("no %s (scripts/install-deps.sh installs docker.io and debootstrap "
                       "with PSTRAIN_FULL_DEPS=1 or in CI)" % tool)
    return why


# The image the compose tests build from a build's binaries, and its user
# (docker/Dockerfile), who must own the folders bind-mounted into it.
TEST_IMAGE = "pstrain:test"
IMAGE_UID = 10001


def compose_missing_tools():
    """missing_tools(), and docker-compose for the compose tests."""
    why = missing_tools()
    if not shutil.which("docker-compose"):
        why.append("no docker-compose")
    return why


def compose_work_dir(prefix, folders, uid):
    """A fresh folder under /var/tmp with `folders` in it owned by `uid` (the
    image's user), for a compose project's bind mounts."""
    work = tempfile.mkdtemp(prefix=prefix, dir="/var/tmp")
    os.chmod(work, 0o755)
    for name in folders:
        path = os.path.join(work, name)
        os.makedirs(path, exist_ok=True)
        os.chown(path, uid, uid)
    return work


def write_compose_override(work, volumes, mounts):
    """WORK/override.yml for a compose project under test: each service of
    `volumes` ({service: [folder, ...]}) gets WORK/folder bind-mounted at
    /folder and the host library folders `mounts` (read-only; the image's
    loader is told of them), DNS pointed at 127.0.0.1 where nothing answers,
    and the default network is made internal (no route out). Returns its path."""
    ro = ['"%s:%s:ro"' % (m, m) for m in mounts]
    lines = ['version: "3.8"', "services:"]
    for svc, names in volumes.items():
        binds = ['"%s:/%s"' % (os.path.join(work, n), n) for n in names]
        lines += ["  %s:" % svc, "    dns: [127.0.0.1]",
                  "    volumes: [%s]" % ", ".join(binds + ro)]
        if mounts:
            lines += ["    environment:", '      LD_LIBRARY_PATH: "%s"' % ":".join(mounts)]
    lines += ["networks:", "  default:", "    internal: true", ""]
    path = os.path.join(work, "override.yml")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path


class PrivateDocker:
    """dockerd on a private socket; a context manager that stops it."""

    def __init__(self, cache=CACHE, start_timeout=60.0, deadline=None):
        self.cache = cache
        # Wall-clock bound of the slow steps (debootstrap, builds); None: theirs.
        self.deadline = deadline
        self.start_timeout = start_timeout
        # Short paths: containerd's sockets live under the exec root.
        self.run_dir = "/run/pstrain-docker.%d" % os.getpid()
        self.socket = os.path.join(self.run_dir, "docker.sock")
        self.host = "unix://" + self.socket
        self.proc = None
        self.lock_file = None
        self.log_path = os.path.join(cache, "dockerd.log")

    def env(self, extra=None):
        env = dict(os.environ)
        env["DOCKER_HOST"] = self.host
        env["DOCKER_BUILDKIT"] = "1"
        env.pop("DOCKER_CONTEXT", None)
        # docker-compose v1 calls `docker` for builds: Debian's client.
        env["PATH"] = "/usr/bin:" + env.get("PATH", "")
        env["COMPOSE_DOCKER_CLI_BUILD"] = "1"
        if extra:
            env.update(extra)
        return env

    def docker(self, *args, check=True, capture=True, timeout=600, input_bytes=None):
        cmd = [DOCKER] + list(args)
        try:
            r = subprocess.run(cmd, env=self.env(), input=input_bytes, timeout=timeout,
                               stdout=subprocess.PIPE if capture else None,
                               stderr=subprocess.PIPE if capture else None)
        except subprocess.TimeoutExpired:
            raise DockerError("`docker %s` did not finish within %.0f s" % (" ".join(args), timeout))
        if check and r.returncode != 0:
            err = (r.stderr or b"").decode(errors="replace").strip()
            raise DockerError("`docker %s` failed (exit %d): %s" % (" ".join(args), r.returncode,
                                                                     err[-2000:]))
        return (r.stdout or b"").decode(errors="replace")

    def __enter__(self):
        os.makedirs(self.cache, exist_ok=True)
        # One engine per data root: a second run waits (bounded) for the first.
        self.lock_file = open(os.path.join(self.cache, "lock"), "w")
        deadline = time.time() + 900
        while True:
            try:
                fcntl.flock(self.lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.time() > deadline:
                    raise DockerError("%s is locked by another run for 900 s" % self.cache)
                time.sleep(1)
        self._stop_orphan()
        os.makedirs(self.run_dir, exist_ok=True)
        cmd = [DOCKERD, "--bridge=none", "--iptables=false", "--ip6tables=false",
               "--data-root", os.path.join(self.cache, "data"),
               "--exec-root", os.path.join(self.run_dir, "exec"),
               "--pidfile", os.path.join(self.cache, "dockerd.pid"),
               "-H", self.host]
        log("starting dockerd on %s (data root %s/data)" % (self.socket, self.cache))
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.time() + self.start_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self._fail_start("dockerd exited with %d" % self.proc.returncode)
            if os.path.exists(self.socket):
                r = subprocess.run([DOCKER, "version", "--format", "{{.Server.Version}}"],
                                   env=self.env(), stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL)
                if r.returncode == 0:
                    log("dockerd %s ready" % r.stdout.decode().strip())
                    return self
            time.sleep(0.2)
        self._fail_start("dockerd did not answer within %.0f s" % self.start_timeout)

    def _fail_start(self, why):
        tail = ""
        with contextlib.suppress(OSError):
            with open(self.log_path, "rb") as f:
                tail = f.read()[-3000:].decode(errors="replace")
        self.__exit__(None, None, None)
        raise EngineUnavailable("%s; end of %s:\n%s" % (why, self.log_path, tail))

    def _stop_orphan(self):
        """A dockerd left on this data root by a run that was killed."""
        pid_path = os.path.join(self.cache, "dockerd.pid")
        try:
            pid = int(open(pid_path).read().strip())
            cmdline = open("/proc/%d/cmdline" % pid, "rb").read()
        except (OSError, ValueError):
            return
        if b"dockerd" not in cmdline or self.cache.encode() not in cmdline:
            return
        log("stopping dockerd %d left by an earlier run" % pid)
        _terminate(pid, 30)

    def __exit__(self, *exc):
        if self.proc is not None and self.proc.poll() is None:
            _terminate(self.proc.pid, 30)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)
        shutil.rmtree(self.run_dir, ignore_errors=True)
        if self.lock_file:
            self.lock_file.close()
            self.lock_file = None
        return False

    # ---- images -----------------------------------------------------------

    def has_image(self, tag):
        return self.docker("image", "inspect", tag, check=False) not in ("", "[]\n")

    def image_size(self, tag):
        return int(self.docker("image", "inspect", "--format", "{{.Size}}", tag).strip())

    def ensure_base_image(self):
        """Debian 12 (minbase) made here by debootstrap, imported once."""
        if self.has_image(BASE_IMAGE):
            return
        rootfs = os.path.join(self.cache, "rootfs.tmp")
        shutil.rmtree(rootfs, ignore_errors=True)
        log("making %s with debootstrap from %s (a few minutes, once)" % (BASE_IMAGE, MIRROR))
        t0 = time.time()
        with open(os.path.join(self.cache, "debootstrap.log"), "wb") as out:
            try:
                r = subprocess.run(["debootstrap", "--variant=minbase", "bookworm", rootfs,
                                    MIRROR], stdout=out, stderr=subprocess.STDOUT,
                                   timeout=self._bounded(1800))
            except subprocess.TimeoutExpired:
                raise EngineUnavailable("debootstrap did not finish in time (a slow mirror?): "
                                        "see %s/debootstrap.log" % self.cache)
        if r.returncode != 0:
            raise EngineUnavailable("debootstrap failed (exit %d, no Debian mirror?): see "
                                    "%s/debootstrap.log" % (r.returncode, self.cache))
        with open(os.path.join(rootfs, "etc/apt/sources.list"), "w") as f:
            f.write("deb %s bookworm main\ndeb %s bookworm-updates main\n"
                    "deb %s bookworm-security main\n" % (MIRROR, MIRROR, SECURITY_MIRROR))
        for d in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for name in os.listdir(os.path.join(rootfs, d)):
                p = os.path.join(rootfs, d, name)
                if os.path.isfile(p) and name not in ("lock",):
                    os.unlink(p)
        tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
        imp = subprocess.run([DOCKER, "import", "-", BASE_IMAGE], stdin=tar.stdout,
                             env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        tar.wait()
        shutil.rmtree(rootfs, ignore_errors=True)
        if imp.returncode != 0 or tar.returncode != 0:
            raise DockerError("docker import of the base image failed: %s"
                              % imp.stderr.decode(errors="replace"))
        log("%s made in %.0f s" % (BASE_IMAGE, time.time() - t0))

    def probe_containers(self, timeout=120):
        """A container of the base image on an internal network, as compose
        makes them: EngineUnavailable when this engine cannot run one (no
        bridge or veth support in the kernel, no cgroups...), so that a
        machine that cannot is told apart from a stack that fails."""
        self.ensure_base_image()
        net = "pstrain-probe"
        self.docker("network", "rm", net, check=False)
        try:
            self.docker("network", "create", "--internal", net, timeout=timeout)
            self.docker("run", "--rm", "--network", net, "--dns", "127.0.0.1", BASE_IMAGE,
                        "true", timeout=timeout)
        except DockerError as e:
            raise EngineUnavailable("the engine cannot run a container on an internal network: %s"
                                    % e)
        finally:
            self.docker("network", "rm", net, check=False)

    def _bounded(self, timeout):
        if self.deadline is None:
            return timeout
        return max(10, min(timeout, self.deadline - time.time()))

    def build(self, context, tag, build_args, target="runtime", timeout=3600, quiet=True):
        cmd = ["build", "--network", "host", "-f", os.path.join(REPO, "docker", "Dockerfile"),
               "--target", target, "-t", tag]
        for k, v in build_args.items():
            cmd += ["--build-arg", "%s=%s" % (k, v)]
        cmd.append(context)
        t0 = time.time()
        if quiet:
            self.docker(*cmd, timeout=self._bounded(timeout))
        else:
            self.docker(*cmd, capture=False, timeout=self._bounded(timeout))
        return time.time() - t0

    def prebuilt_image(self, bin_dir, tag=TEST_IMAGE):
        """The runtime image around the binaries in `bin_dir`.

        Returns the host folders the containers must mount read-only at the
        same path and put on LD_LIBRARY_PATH (the CUDA toolkit's libraries,
        when the binaries link them).
        """
        self.ensure_base_image()
        provided = []
        with tempfile.TemporaryDirectory(prefix="pstrain-image-") as ctx:
            os.makedirs(os.path.join(ctx, "out", "bin"))
            os.makedirs(os.path.join(ctx, "docker"))
            for b in BINARIES:
                src = os.path.join(bin_dir, b)
                if not os.access(src, os.X_OK):
                    raise DockerError("%s is missing: build the binaries first" % src)
                subprocess.run(["strip", "-o", os.path.join(ctx, "out", "bin", b), src],
                               check=True)
            shutil.copy(os.path.join(REPO, "docker", "entrypoint.sh"),
                        os.path.join(ctx, "docker", "entrypoint.sh"))
            bins = [os.path.join(ctx, "out", "bin", b) for b in BINARIES]
            ldd = subprocess.run(["ldd"] + bins, stdout=subprocess.PIPE).stdout.decode()
            env = dict(os.environ)
            provided = provided_lib_dirs(ldd)
            if provided:
                env["RUNTIME_PACKAGES_PROVIDED"] = ":".join(provided)
                log("libraries no package holds, mounted from the host: %s"
                    % ", ".join(provided))
            with open(os.path.join(ctx, "out", "runtime-packages.txt"), "w") as out:
                subprocess.run([os.path.join(REPO, "docker", "runtime-packages.sh")] + bins,
                               stdout=out, env=env, check=True)
            secs = self.build(ctx, tag, {"BINARIES": "prebuilt",
                                         "DEBIAN_RUNTIME_IMAGE": BASE_IMAGE})
        log("image %s from %s in %.1f s (%.0f MB)" % (tag, bin_dir, secs,
                                                     self.image_size(tag) / 1e6))
        return provided

    def full_image(self, tag="pstrain:cpu"):
        """The whole docker/Dockerfile build (CPU flavor) from the sources."""
        self.ensure_base_image()
        log("building %s from the sources (docker/Dockerfile, every stage; ~15 min on 2 cores)"
            % tag)
        secs = self.build(REPO, tag, {"FLAVOR": "cpu", "DEBIAN_BUILD_IMAGE": BASE_IMAGE,
                                      "DEBIAN_RUNTIME_IMAGE": BASE_IMAGE},
                          timeout=7200, quiet=False)
        size = self.image_size(tag)
        log("image %s built in %.0f s, %.0f MB" % (tag, secs, size / 1e6))
        print('{"name": "docker_full_build", "seconds": %.0f, "image_bytes": %d}' % (secs, size))
        return secs, size


def _terminate(pid, timeout):
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    img = sub.add_parser("image", help="build an image")
    img.add_argument("--full", action="store_true", help="the full multi-stage build")
    img.add_argument("--bin-dir", default=os.path.join(REPO, "build", "bin"))
    img.add_argument("--tag", default=None)
    run = sub.add_parser("run", help="run a command against the private engine")
    run.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    why = missing_tools()
    if why:
        print("docker_env: cannot run: " + "; ".join(why), file=sys.stderr)
        return 2
    try:
        with PrivateDocker() as d:
            if args.cmd == "image":
                if args.full:
                    d.full_image(args.tag or "pstrain:cpu")
                else:
                    d.prebuilt_image(args.bin_dir, args.tag or TEST_IMAGE)
                return 0
            command = args.command[1:] if args.command[:1] == ["--"] else args.command
            if not command:
                print("docker_env: run needs a command", file=sys.stderr)
                return 2
            return subprocess.call(command, env=d.env())
    except DockerError as e:
        print("docker_env: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
