"""Times numpy's DGEMM (OpenBLAS) in a process of its own, pinned to the given cores; prints one JSON line.

Run by ``reference.measure_numpy``, never inside a kernel's process (a BLAS's spinning threads would disturb the
kernel timed after it). Every timed product is checked with a Freivalds product, so a BLAS build that computes
wrong results on this CPU is reported instead of trusted.

Run: ``python -m hpcrl_core.bench.numpy_ref --n 512 --threads 1``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--min-reps", type=int, default=5)
    ap.add_argument("--max-reps", type=int, default=200)
    ap.add_argument("--quantile", type=float, default=0.5, help="GFLOPS from this quantile of the call times")
    a = ap.parse_args(argv)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    import numpy as np  # after the thread settings
    from threadpoolctl import threadpool_info, threadpool_limits

    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    n = a.n
    with threadpool_limits(limits=a.threads, user_api="blas"):
        out = np.empty((n, n))
        times: list[float] = []
        for call in range(a.max_reps + 1):
            A, B = rng.uniform(-1, 1, (n, n)), rng.uniform(-1, 1, (n, n))
            t0 = time.perf_counter()
            np.matmul(A, B, out=out)
            t = time.perf_counter() - t0
            r = rng.uniform(-1, 1, n)
            err = np.abs(out @ r - A @ (B @ r)).max()
            if not np.isfinite(err) or err > 1e-8 * n * n:
                print(json.dumps({"error": f"numpy's DGEMM gave a wrong result (error {err:g})"}))
                return 1
            if call == 0:
                continue  # warm-up
            times.append(t)
            if len(times) >= a.min_reps and sum(times) >= a.min_time:
                break
        blas = [{k: d.get(k) for k in ("internal_api", "version", "architecture", "num_threads")}
                for d in threadpool_info() if d.get("user_api") == "blas"]
    med = statistics.median(times)
    fast = float(np.quantile(times, a.quantile))
    print(json.dumps({"gflops": 2 * n**3 / fast / 1e9, "gflops_median": 2 * n**3 / med / 1e9,
                      "cv": statistics.pstdev(times) / statistics.fmean(times),
                      "reps": len(times), "median_s": med, "blas": blas, "numpy": np.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
