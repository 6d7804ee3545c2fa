"""pytest setup: test the package in this source tree (not an installed copy)
and give every test a seeded NumPy generator whose seed is printed."""

import os
import random
import sys

import pytest

sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(__file__), "..")))


@pytest.fixture
def seed(request):
    s = int(os.environ.get("ANYATTN_SEED", random.randrange(2**31)))
    print("seed %d (rerun with ANYATTN_SEED=%d) for %s" % (s, s, request.node.name))
    return s


@pytest.fixture
def rng(seed):
    import numpy as np
    return np.random.default_rng(seed)
