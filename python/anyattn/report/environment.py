"""What the report was measured on: the device and its driver, the anyattn library and CLI, the
commit ($ANYATTN_COMMIT, else git), Python and the version of every package a peer comes from, and
the decision tree that picks anyattn's configs on the device (`anyattn info`).
"""

import importlib
import os
import platform
import subprocess
import time

PACKAGES = ("numpy", "torch", "triton", "flashinfer", "vllm", "flash_attn", "flash_attn_interface", "matplotlib")


def package_versions():
    """{package: version or "absent"}, importing each (a package that fails to import is absent)."""
    out = {}
    for name in PACKAGES:
        try:
            mod = importlib.import_module(name)
            out[name] = str(getattr(mod, "__version__", "") or "present")
        except Exception:
            out[name] = "absent"
    return out


def commit():
    """$ANYATTN_COMMIT (the device machines have no git), else git's HEAD with -dirty for changes."""
    env = os.environ.get("ANYATTN_COMMIT")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=here, timeout=10).returncode != 0
        return head.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def nvidia_smi(index):
    """{name, driver, memory} of GPU `index` from nvidia-smi, {} where it is absent."""
    try:
        r = subprocess.run(["nvidia-smi", "-i", str(index), "--query-gpu=name,driver_version,memory.total",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return {}
    parts = [x.strip() for x in r.stdout.strip().split(",")] if r.returncode == 0 else []
    return dict(zip(("name", "driver", "memory"), parts)) if len(parts) == 3 else {}


def torch_device(index):
    try:
        import torch
        if not torch.cuda.is_available():
            return {}
        p = torch.cuda.get_device_properties(index)
        return {"torch_name": p.name, "sms": p.multi_processor_count, "capability": "%d.%d" % (p.major, p.minor),
                "cuda_runtime": torch.version.cuda or "", "cudnn": str(torch.backends.cudnn.version() or "")}
    except Exception:
        return {}


def collect(info, cli_version, backend, device, argv):
    """The facts every report opens with."""
    dev = next((d for d in info["devices"] if d["backend"] == backend and d["index"] == device), {})
    env = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit(),
           "command": "python -m anyattn.report " + " ".join(argv), "backend": backend, "device_index": device,
           "device": dev.get("name", ""), "selection": dev.get("selection", ""),
           "python": platform.python_version(), "platform": platform.platform(),
           "anyattn_cli": cli_version, "packages": package_versions(),
           "omp_num_threads": os.environ.get("OMP_NUM_THREADS", ""), "cpus": os.cpu_count()}
    try:
        import anyattn
        env["anyattn_binding"] = anyattn.version()
        env["library"] = anyattn.library_path()
    except Exception as e:
        env["anyattn_binding"] = "does not load: %s" % str(e).splitlines()[0]
    if backend != "cpu":
        env.update(nvidia_smi(device))
        env.update(torch_device(device))
    return env


def tree_missing(env):
    """On a GPU: the line saying no tuned tree serves this device, else ""."""
    sel = env.get("selection", "")
    if env["backend"] == "cpu" or not sel:
        return ""
    if sel.startswith("none") or "UNTUNED" in sel:
        return ("No tuned decision tree is compiled in for %s: anyattn picks its configs by %s. "
                "`--tune` measures this GPU and fits one." % (env["device"], sel))
    return ""
