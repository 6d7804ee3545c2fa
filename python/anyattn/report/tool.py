"""The `anyattn` CLI as the report uses it: found ($ANYATTN_CLI, beside the loaded library, in the
install prefix, on PATH), run as a child with its output streamed to the log and counted for the
progress bar, and its answers read (`bench --list`, `bench --json`, `info`).
"""

import json
import os
import shutil
import subprocess

class ToolError(Exception):
    pass


def find_cli():
    """Path of the anyattn CLI, or raise ToolError saying where it was looked for."""
    env = os.environ.get("ANYATTN_CLI")
    if env:
        if os.access(env, os.X_OK):
            return env
        raise ToolError("$ANYATTN_CLI is '%s', not an executable" % env)
    tried = []
    try:
        from .. import library_path
        libdir = os.path.dirname(os.path.abspath(library_path()))
        tried = [os.path.join(libdir, "anyattn"), os.path.join(libdir, "..", "bin", "anyattn")]
    except Exception:
        pass
    for p in tried:
        if os.access(p, os.X_OK):
            return os.path.normpath(p)
    found = shutil.which("anyattn")
    if found:
        return found
    raise ToolError("no anyattn CLI: set ANYATTN_CLI, or build it (make build), or put it on PATH "
                    "(looked in %s)" % ", ".join(tried + ["PATH"]))


def run(cli, args, log, on_line=None, env_extra=None, timeout=None):
    """Runs `cli args`, streaming stdout and stderr lines to the log (and stdout lines to on_line).
    Returns (exit code, stdout lines)."""
    env = dict(os.environ)
    env.update(env_extra or {})
    log.write("$ %s%s" % ("".join("%s=%s " % kv for kv in (env_extra or {}).items()), " ".join([cli] + args)))
    p = subprocess.Popen([cli] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=env, bufsize=1)
    lines = []
    try:
        for line in p.stdout:
            line = line.rstrip("\n")
            lines.append(line)
            log.write(line)
            if on_line:
                on_line(line)
        rc = p.wait(timeout=timeout)
    finally:   # an interrupt ends the child too
        if p.poll() is None:
            p.kill()
            p.wait()
    return rc, lines


def bench_list(cli, log, args):
    """The cases `anyattn bench ARGS --list` names: [{"case", "q_lens", "kv_lens", "skip"?}]."""
    rc, lines = run(cli, ["bench"] + args + ["--list"], log)
    if rc != 0:
        raise ToolError("anyattn bench %s --list exited %d: %s" % (" ".join(args), rc, lines[-1] if lines else ""))
    return [json.loads(x) for x in lines if x.startswith("{")]


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def version(cli, log):
    rc, lines = run(cli, ["--version"], log)
    return lines[0].split()[-1] if rc == 0 and lines else ""


def info(cli, log):
    """`anyattn info` as {"backends": {name: line}, "devices": [(backend, index, name, selection)],
    "best": backend}."""
    rc, lines = run(cli, ["info"], log)
    out = {"backends": {}, "devices": [], "best": "", "text": "\n".join(lines)}
    backend = None
    for line in lines:
        if line.startswith("backend "):
            backend = line.split()[1]
            out["backends"][backend] = line[len("backend "):].strip()
        elif line.strip().startswith("device ") and backend:
            idx, name = line.strip()[len("device "):].split(":", 1)
            out["devices"].append({"backend": backend, "index": int(idx), "name": name.strip(), "selection": ""})
        elif line.strip().startswith("config selection:") and out["devices"]:
            out["devices"][-1]["selection"] = line.split(":", 1)[1].strip()
        elif line.startswith("best backend:"):
            out["best"] = line.split(":", 1)[1].strip()
    return out
