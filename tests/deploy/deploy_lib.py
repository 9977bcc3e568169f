"""Helpers of the deployment tests: compose files as docker-compose reads
them, the flags each pstrain binary really has, and the variables that
belong to docker/entrypoint.sh.

Used by tests/deploy/*.py and tests/multihost/multihost_test.py.
"""
import os
import re
import subprocess
import sys

SKIP = 77  # CTest SKIP_RETURN_CODE of these tests

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOCKER_DIR = os.path.join(REPO, "docker")
COMPOSE = os.path.join(DOCKER_DIR, "docker-compose.yml")
COMPOSE_GPU = os.path.join(DOCKER_DIR, "docker-compose.gpu.yml")
COMPOSE_ONLINE = os.path.join(DOCKER_DIR, "docker-compose.online.yml")
ENTRYPOINT = os.path.join(DOCKER_DIR, "entrypoint.sh")

# The binary each entrypoint role runs (gen reads no PSTRAIN_* flag variables).
ROLE_BINARY = {
    "coordinator": "pstrain_coordinator",
    "server": "pstrain_server",
    "worker": "pstrain_worker",
}


def skip(why):
    print("SKIP: " + why)
    sys.exit(SKIP)


def import_yaml():
    try:
        import yaml  # noqa: F401
        return yaml
    except ImportError:
        skip("python3-yaml is not installed")


_VAR = re.compile(r"\$(?:(\$)"                                      # $$
                  r"|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}"  # ${VAR...}
                  r"|([A-Za-z_][A-Za-z0-9_]*))")                        # $VAR


def interpolate(value, env):
    """Compose-style ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?err}, $VAR, $$."""
    def repl(m):
        if m.group(1):
            return "$"
        name = m.group(2) or m.group(5)
        op, arg = m.group(3), m.group(4)
        val = env.get(name)
        if op == ":-":
            return val if val else arg
        if op == "-":
            return val if val is not None else arg
        if op in (":?", "?"):
            if (op == ":?" and not val) or val is None:
                raise ValueError("variable %s is required: %s" % (name, arg))
            return val
        return val if val is not None else ""
    return _VAR.sub(repl, value)


def _interpolate_tree(node, env):
    if isinstance(node, dict):
        return {k: _interpolate_tree(v, env) for k, v in node.items()}
    if isinstance(node, list):
        return [_interpolate_tree(v, env) for v in node]
    if isinstance(node, str):
        return interpolate(node, env)
    return node


def _merge(base, over):
    """Overlay merge as docker-compose does it for the keys used here:
    mappings merge key by key, everything else is replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(base[k], v) if k in base else v
        return out
    return over


def _normalize_env(env):
    if env is None:
        return {}
    if isinstance(env, list):
        out = {}
        for item in env:
            k, _, v = str(item).partition("=")
            out[k] = v
        return out
    return {k: "" if v is None else str(v) for k, v in env.items()}


def load_compose(files, env=None):
    """The services of `files` (later files overlay earlier ones), with
    variables interpolated from `env` (default: os.environ) and each
    service's `environment` normalized to a dict of strings."""
    yaml = import_yaml()
    env = dict(os.environ if env is None else env)
    merged = {}
    for f in files:
        with open(f) as fh:
            doc = yaml.safe_load(fh)
        doc = _interpolate_tree(doc, env)
        merged = _merge(merged, doc)
    services = merged.get("services", {})
    for svc in services.values():
        svc["environment"] = _normalize_env(svc.get("environment"))
    return merged


def entrypoint_variables():
    """PSTRAIN_* names that docker/entrypoint.sh documents as its own (the
    block after 'Variables of this script')."""
    names, inside = set(), False
    with open(ENTRYPOINT) as fh:
        for line in fh:
            if "Variables of this script" in line:
                inside = True
                continue
            if inside:
                if not line.startswith("#") or line.strip() == "#":
                    break
                m = re.match(r"#\s+(PSTRAIN_[A-Z0-9_]+)\b", line)
                if m:
                    names.add(m.group(1))
    return names


_flag_cache = {}


def binary_flags(bin_dir, binary):
    """The flag names `binary --helpfull` lists."""
    if binary in _flag_cache:
        return _flag_cache[binary]
    path = os.path.join(bin_dir, binary)
    if not os.access(path, os.X_OK):
        raise SystemExit("FAIL: %s is not built (run the build first)" % path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PSTRAIN_")}
    out = subprocess.run([path, "--helpfull"], capture_output=True, text=True, env=env,
                         timeout=60)
    flags = set(re.findall(r"^\s+--([A-Za-z0-9_]+) \(", out.stdout + out.stderr, re.M))
    if not flags:
        raise SystemExit("FAIL: %s --helpfull listed no flags:\n%s" %
                         (path, out.stdout + out.stderr))
    _flag_cache[binary] = flags
    return flags


def role_of(service):
    """The entrypoint role a compose service runs."""
    env = service.get("environment", {})
    if env.get("PSTRAIN_ROLE"):
        return env["PSTRAIN_ROLE"]
    cmd = service.get("command")
    if isinstance(cmd, str):
        cmd = cmd.split()
    return cmd[0] if cmd else ""


def check_env_names(where, role, names, bin_dir, own):
    """Errors for the PSTRAIN_* `names` set on a `role` container that are
    neither the entrypoint's own (`own`) nor flags of the role's binary."""
    errors = []
    binary = ROLE_BINARY.get(role)
    flags = binary_flags(bin_dir, binary) if binary else set()
    for name in sorted(names):
        if not name.startswith("PSTRAIN_") or name in own:
            continue
        flag = name[len("PSTRAIN_"):].lower()
        if flag not in flags:
            errors.append("%s: %s is not a flag of %s (role %s)" %
                          (where, name, binary or "any binary", role or "?"))
    return errors


def port_of(endpoint):
    m = re.search(r":(\d+)$", endpoint or "")
    return int(m.group(1)) if m else None
