"""Memory: predictions over many rows and draws run in chunks of rows, so their peak memory
is the outputs plus a bound set by the chunk size, whatever the number of rows.

Each case runs in a fresh process, which reads its resident memory before the call and
its peak during it (Linux's ``VmRSS`` and ``VmHWM``, the high-water mark restarted just
before the call). Not ``getrusage``'s ``ru_maxrss``: Linux carries it over ``exec`` from
the process that forked, so under a large test worker it reports the worker's size.

The chunk budget is lowered from 64 MB to 4 MB there, so that a test-sized problem spans
many chunks: 1000 draws on 200,000 rows would hold 1.6 GB of network outputs unchunked,
against a bound of about 40 MB. (At the default budget, 4000 draws on 10^6 rows: doc/testing.md.)
"""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/status")

CHUNK = 4 * 2**20

#: the fresh process: a fit with many draws, then one call on many rows
_CALL = """
import json, sys
import numpy as np
import skbnn.posterior
from skbnn import BayesianMLPRegressor
from skbnn.methods import VariationalInference

def status(field):
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith(field + ":"))
    return int(line.split()[1]) * 1024

call, n_rows, n_draws, chunk = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(0)
X = rng.standard_normal((200, 2))
reg = BayesianMLPRegressor(
    hidden_layer_sizes=(3,), method=VariationalInference(max_iter=20), n_samples=n_draws,
    n_jobs=2, random_state=0,
).fit(X, np.sin(X[:, 0]))
skbnn.posterior._CHUNK_BYTES = chunk
X_new = rng.standard_normal((n_rows, 2))
run = {
    "predict": lambda X: reg.predict(X, return_std=True),
    "predict_interval": lambda X: reg.predict_interval(X, 0.9),
    "sample_y": lambda X: reg.sample_y(X, 5, random_state=0),
}[call]
run(X_new[:50])  # compile first: numba's own memory is not the prediction's
before = status("VmRSS")
try:  # restart the high-water mark here (Linux 4.0+); else it counts the fit's peak too
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
except OSError:
    pass
out = run(X_new)
peak = status("VmHWM")
outputs = sum(a.nbytes for a in (out if isinstance(out, tuple) else (out,)))
print(json.dumps({"before": before, "peak": peak, "outputs": outputs}))
"""


def peak_increase(call: str, n_rows: int, n_draws: int, chunk: int) -> dict:
    """Run ``call`` in a fresh process; its memory before, its peak after, its outputs."""
    run = subprocess.run(
        [sys.executable, "-c", _CALL, call, str(n_rows), str(n_draws), str(chunk)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


@pytest.mark.parametrize(
    "call, n_rows, n_draws",
    [
        ("predict", 200_000, 1000),  # 1.6 GB of outputs unchunked
        ("sample_y", 200_000, 1000),  # draws of the network: 8 MB per draw of y
        ("predict_interval", 5_000, 1000),  # 40 MB unchunked; its quantiles are slow
    ],
)
def test_peak_memory_is_the_outputs_plus_a_bound_set_by_the_chunk(call, n_rows, n_draws):
    m = peak_increase(call, n_rows, n_draws, CHUNK)
    # the outputs and their copy on the way to y's units, a few chunk-sized temporaries
    # (a chunk's outputs, their squares, the noise), and 16 MB for the allocator
    bound = 2 * m["outputs"] + 6 * CHUNK + 16 * 2**20
    assert m["peak"] - m["before"] <= bound, m
