"""The first code block of python/README.md, run as written on the CPU (NumPy
only), its output checked against the float64 reference of test_cpu.py."""

import os
import re

import numpy as np

from test_cpu import TOL, reference

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def first_python_block():
    with open(README, encoding="utf-8") as f:
        m = re.search(r"```python\n(.*?)```", f.read(), re.S)
    assert m, "python/README.md has no ```python block"
    return m.group(1)


def test_readme_opens_with_a_cpu_example_that_runs(capsys):
    code = first_python_block()
    assert "numpy" in code and "cuda" not in code  # runs where there is no GPU
    ns = {}
    exec(compile(code, README, "exec"), ns)
    printed = capsys.readouterr().out
    assert printed.strip(), "the example prints its result"
    want, _ = reference(ns["q"], ns["k_cache"], ns["v_cache"], ns["cu_seqlens_q"], ns["seqused_k"],
                        ns["block_table"], np.float32(ns["d"] ** -0.5), True, (-1, -1))
    np.testing.assert_allclose(ns["out"], want, **TOL["float32"])
