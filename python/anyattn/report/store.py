"""results.json: everything the report measured, written after every case so an interrupted run
leaves its data, and read back by a later run into the same folder, which keeps the workloads
already done (--fresh measures everything again). The tables, plots and CSV are made from it.
"""

import json
import os

FORMAT = 1


def atomic_write(path, text):
    tmp = path + ".part"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


class Store:
    def __init__(self, out):
        self.out = out
        self.path = os.path.join(out, "results.json")
        self.data = {"format": FORMAT, "env": {}, "options": {}, "peers": {}, "workloads": {}, "tune": {},
                     "status": "running", "history": []}

    @classmethod
    def open(cls, out, fresh):
        s = cls(out)
        if not fresh and os.path.exists(s.path):
            with open(s.path, encoding="utf-8") as f:
                old = json.load(f)
            if old.get("format") == FORMAT:
                s.data.update(old)
        return s

    def save(self):
        atomic_write(self.path, json.dumps(self.data, indent=1, sort_keys=False))

    @property
    def workloads(self):
        return self.data["workloads"]

    def workload_done(self, name):
        return self.workloads.get(name, {}).get("status") == "done"

    def start_workload(self, name, bench, cases):
        self.workloads[name] = {"status": "running", "bench": bench, "cases": cases}
        self.save()

    def finish_workload(self, name, status):
        self.workloads[name]["status"] = status
        self.save()

    def ceilings(self):
        """(bandwidth GB/s, peak GFLOP/s) of the latest anyattn bench run in this folder, or None."""
        for w in reversed(list(self.workloads.values())):
            b = w.get("bench", {})
            if b.get("bandwidth_gbs"):
                return b["bandwidth_gbs"], b["peak_gflops"]
        return None
