"""Time ``crfsdca.kernels.numerics.fastmath`` against numba's libm ``np.log``/``np.exp`` and
numpy's.

Reports ns per element, median (and minimum) of ``--repeat`` runs, for

* a map loop ``out[i] = f(x[i])`` on ``--n`` elements (default 1e7, i.e. streaming from memory;
  this is close to the memory-bandwidth floor, shown by the copy loop ``out[i] = abs(x[i])``),
* the same loop on ``--n-cache`` elements repeated until ``--n`` elements are done (data in L1,
  so this is the arithmetic cost),
* the reduction ``sum(c*d*(a - f(m)) where d != 0)`` (the SDCA line-search shape) on ``--n``
  elements, with the sum accumulated by ``add_reassoc`` (vectorizes) and by plain ``s += ...``
  (stays scalar); numpy's row evaluates ``np.sum(c*d*(a - f(m)), where=d != 0)``.

The numba kernels are built by ``fastmath.make_map`` / ``fastmath.make_weighted_sum`` so that
numba stays inside ``crfsdca/kernels``. Timings on a shared machine are noisy: the load average
is printed, and ``--repeat`` can be raised.

    python benchmarks/bench_fastmath.py [--n 10000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from crfsdca.kernels.numerics import fastmath as fm


def timing(call, n_elements: int, repeat: int, inner: int = 1) -> str:
    """``"median (min)"`` over ``repeat`` runs of ``inner`` calls, in ns per element."""
    call()  # compile / warm up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(inner):
            call()
        times.append(time.perf_counter() - t0)
    ns = np.array(times) / (n_elements * inner) * 1e9
    return f"{np.median(ns):6.2f} ({ns.min():5.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--n-cache", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    n, repeat = args.n, args.repeat
    rng = np.random.default_rng(args.seed)

    # log arguments spread over many binades; exp arguments with finite, non-tiny results
    x_log = np.exp(rng.uniform(-700.0, 700.0, n))
    x_exp = rng.uniform(-700.0, 700.0, n)
    out = np.empty(n)

    kernels = {
        "log": {
            "fast_log (numba)": fm.make_map(fm.fast_log),
            "np.log (numba, libm)": fm.make_map(np.log),
        },
        "exp": {
            "fast_exp (numba)": fm.make_map(fm.fast_exp),
            "np.exp (numba, libm)": fm.make_map(np.exp),
        },
        "log1p": {"fast_log1p (numba)": fm.make_map(fm.fast_log1p)},
        "expm1": {"fast_expm1 (numba)": fm.make_map(fm.fast_expm1)},
    }
    numpy_funcs = {"log": np.log, "exp": np.exp, "log1p": np.log1p, "expm1": np.expm1}
    inputs = {"log": x_log, "exp": x_exp, "log1p": x_log, "expm1": x_exp}

    print(f"n = {n:,}, repeat = {repeat}, load average {os.getloadavg()[0]:.2f}")
    copy = fm.make_map(np.abs)
    ns = timing(lambda: copy(x_exp, out), n, repeat)
    print(f"memory floor, copy out[i] = abs(x[i]) (numba): {ns} ns/element")
    nc = args.n_cache
    inner = max(1, n // nc)
    print("\nmap loop out[i] = f(x[i]), ns/element, median (min)")
    print(f"  {'':32s} {f'{n:,} elements':>14s} | {nc} elements (in cache) x {inner} calls")
    out_c = np.empty(nc)
    for name, ks in kernels.items():
        x = inputs[name]
        xc = x[:nc].copy()
        rows = dict(ks)
        func = numpy_funcs[name]
        rows[f"{func.__name__} (numpy)"] = lambda x, o, func=func: func(x, out=o)
        for label, k in rows.items():
            big = timing(lambda k=k, x=x: k(x, out), n, repeat)
            small = timing(lambda k=k, xc=xc: k(xc, out_c), nc, repeat, inner)
            print(f"  {label:32s} {big} | {small}")

    print(f"\nreduction sum(c*d*(a - f(m)) where d != 0), ns/element, median (min), {n:,} elements")
    c = rng.uniform(-1.0, 1.0, n)
    d = np.where(rng.random(n) < 0.8, rng.uniform(-1.0, 1.0, n), 0.0)
    a = rng.normal(size=n)
    for name, m, fast, libm in [
        ("log", x_log, fm.fast_log, np.log),
        ("exp", x_exp, fm.fast_exp, np.exp),
    ]:
        m = np.abs(m) if name == "log" else m / 10.0
        rows = {
            f"fast_{name} + add_reassoc": fm.make_weighted_sum(fast, reassoc=True),
            f"fast_{name} + plain s +=": fm.make_weighted_sum(fast, reassoc=False),
            f"np.{name} (numba, libm) + s +=": fm.make_weighted_sum(libm, reassoc=False),
        }
        for label, k in rows.items():
            ns = timing(lambda k=k, m=m: k(c, d, a, m), n, repeat)
            print(f"  {label:32s} {ns}   sum = {k(c, d, a, m):.10g}")
        cd = c * d
        mask = d != 0.0

        def numpy_sum(libm=libm, m=m, cd=cd, mask=mask):
            return np.sum(cd * (a - libm(m)), where=mask)

        ns = timing(numpy_sum, n, repeat)
        print(f"  {'np.' + name + ' (numpy expression)':32s} {ns}   sum = {numpy_sum():.10g}")


if __name__ == "__main__":
    main()
