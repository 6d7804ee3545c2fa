"""ctest entry point for the Python tests: exits 77 (ctest SKIP) when a
required module is missing, and turns pytest's "no tests collected" (5) into
a failure so a broken collection never passes silently.

usage: run.py [--needs torch-cuda|MODULE]... PYTEST_ARGS...
"""

import importlib
import sys


def _skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def main(argv):
    needs_cuda, modules = False, ["numpy", "pytest"]
    while argv[:1] == ["--needs"] and len(argv) > 1:
        if argv[1] == "torch-cuda":
            needs_cuda = True
        else:
            modules.append(argv[1])
        argv = argv[2:]
    for mod in modules:
        try:
            importlib.import_module(mod)
        except ImportError:
            _skip("python module '%s' is not installed (python3 -m pip install %s)" % (mod, mod))
    if needs_cuda:
        try:
            import torch
        except ImportError:
            _skip("torch is not installed")
        if not torch.cuda.is_available():
            _skip("torch sees no CUDA device")
    import pytest

    class SkipCounter:
        skipped = 0

        def pytest_collectreport(self, report):
            self.skipped += report.skipped

        def pytest_runtest_logreport(self, report):
            self.skipped += report.skipped

    counter = SkipCounter()
    # No cache directory in the source tree.
    rc = pytest.main(["-p", "no:cacheprovider"] + argv, plugins=[counter])
    if rc == pytest.ExitCode.NO_TESTS_COLLECTED:
        if counter.skipped:  # a whole module skipped itself (e.g. no torch)
            return 77
        print("FAIL: pytest collected no tests")
        return 1
    return int(rc)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
