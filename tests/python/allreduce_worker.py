"""One rank of test_ina's allreduce runs (started by `ina train-py`).

Every rank draws every rank's inputs from the same seeds, so it knows the
exact expected result: for floats decode(sum over ranks of encode(x, scale))
with the op's agreed scale (round half to even of x * scale, int64 sums,
times 1 / scale in double, rounded to float32: wire/quant.cpp), for int32 the
plain sum. Results must equal it bit for bit. Writes rank<R>.json into --out.
"""
import argparse
import json
import os
import sys
import threading
import time

import numpy as np

import ina


def inputs(seed, rank, size, kind):
    rng = np.random.default_rng([seed, rank, size, kind == "int32"])
    if kind == "int32":
        return rng.integers(-(1 << 20), 1 << 20, size=size, dtype=np.int32)
    # magnitudes over 12 binary orders: small values are where fixed point rounds
    return (rng.standard_normal(size) * np.exp2(rng.integers(-8, 4, size=size))).astype(np.float32)


def expected(seed, n, size, kind, scale, op, part=slice(None)):
    """The exact result for every rank's inputs(seed, r, size, kind)[part]."""
    xs = [inputs(seed, r, size, kind)[part] for r in range(n)]
    if kind == "int32":
        return np.sum(np.stack(xs).astype(np.int64), axis=0).astype(np.int32)
    total = np.sum(np.stack([np.rint(x.astype(np.float64) * scale) for x in xs]), axis=0)
    divisor = n if op == "average" else 1
    return (total * (1.0 / (scale * divisor))).astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--sizes", default="1,63,64,65,1000,4099")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--torch", action="store_true", help="also through CPU torch tensors")
    args = ap.parse_args()
    comm = ina.Communicator()
    n, rank = comm.size, comm.rank
    report = {"rank": rank, "workers": n, "payload": comm.payload_values, "checked": 0, "mismatches": [], "ops": 0}

    def check(name, got, want):
        report["checked"] += int(got.size)
        report["ops"] += 1
        if not np.array_equal(np.asarray(got), want):
            bad = np.flatnonzero(np.asarray(got) != want)
            report["mismatches"].append(f"{name}: {bad.size} values differ, first at {bad[0]}: {np.asarray(got)[bad[0]]} != {want[bad[0]]}")

    # the GIL is released while an allreduce waits: rank 1 joins the op 0.6 s late, and a
    # thread of rank 0 counts 1 ms sleeps meanwhile (it could not run if the wait held the GIL)
    x = np.ones(10, np.float32)
    if rank == 0:
        ticks, stop = [0], threading.Event()

        def ticker():
            while not stop.is_set():
                ticks[0] += 1
                time.sleep(0.001)

        t = threading.Thread(target=ticker)
        t.start()
        time.sleep(0.01)
        t0, before = time.monotonic(), ticks[0]
        comm.allreduce(x)
        report["gil_ticks"], report["gil_wait_s"] = ticks[0] - before, time.monotonic() - t0
        stop.set()
        t.join()
    else:
        time.sleep(0.6)
        comm.allreduce(x)
    if not np.array_equal(x, np.full(10, n, np.float32)):
        report["mismatches"].append(f"ones: {x}")
    # NaN on one rank: every rank's call raises ina.NonFiniteError (an ina.Error), buffers untouched
    y = np.arange(5, dtype=np.float32)
    if rank == 0:
        y[3] = np.nan
    before = y.copy()
    try:
        comm.allreduce(y)
        report["mismatches"].append("NaN: no error")
    except ina.NonFiniteError as e:
        if not isinstance(e, ina.Error) or not np.array_equal(y, before, equal_nan=True):
            report["mismatches"].append(f"NaN: {e!r}, buffer {y}")
    # bad buffers are refused before anything is sent (the ranks stay in step)
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    for bad, error, text in ((np.zeros(4), TypeError, "float32 or int32"), (np.zeros(8, np.float32)[::2], ValueError, "C-contiguous"),
                             (ro, ValueError, "read-only"), ([1.0, 2.0], TypeError, "numpy array")):
        try:
            comm.allreduce(bad)
            report["mismatches"].append(f"{bad!r} was accepted")
        except error as e:
            if text not in str(e):
                report["mismatches"].append(f"{bad!r}: {e}")
    sizes = [int(s) for s in args.sizes.split(",")]
    for size in sizes:  # blocking, float and int32, sum and average
        for kind in ("float32", "int32"):
            for op in ("sum", "average") if kind == "float32" else ("sum",):
                x = inputs(args.seed, rank, size, kind)
                info = comm.allreduce(x, op=op)
                check(f"{kind} {op} size {size}", x, expected(args.seed, n, size, kind, info["scale"], op))
    # async: two ops in flight at once, waited in reverse order
    a, b = inputs(args.seed, rank, sizes[-1], "float32"), inputs(args.seed + 1, rank, sizes[-2], "float32")
    ha, hb = comm.allreduce_async(a), comm.allreduce_async(b)
    hb.wait()
    ha.wait()
    check("async a", a, expected(args.seed, n, sizes[-1], "float32", ha.info["scale"], "sum"))
    check("async b", b, expected(args.seed + 1, n, sizes[-2], "float32", hb.info["scale"], "sum"))
    # a handle dropped before wait(): dropping it waits, so the array holds the whole result right after
    c = inputs(args.seed + 2, rank, sizes[-1], "int32")
    hc = comm.allreduce_async(c)
    del hc
    check("async handle dropped", c, expected(args.seed + 2, n, sizes[-1], "int32", 1, "sum"))
    # sparse: each rank its own keys out of 0..999 (key_space for dense schemes; zebra and ps-lite ignore it)
    def pairs(r):
        rng = np.random.default_rng([args.seed, r, 99])
        keys = np.sort(rng.choice(1000, size=100 + 50 * r, replace=False)).astype(np.uint64)
        return keys, inputs(args.seed + 4, r, keys.size, "float32")

    keys, values = pairs(rank)
    got_keys, got_values, info = comm.allreduce_sparse(keys, values, key_space=1000)
    dense = np.zeros(1000)
    for r in range(n):
        k, v = pairs(r)
        dense[k.astype(np.int64)] += np.rint(v.astype(np.float64) * info["scale"])
    union = np.unique(np.concatenate([pairs(r)[0] for r in range(n)]))
    check("sparse keys", got_keys, union)
    check("sparse values", got_values, (dense[union.astype(np.int64)] * (1.0 / info["scale"])).astype(np.float32))
    try:
        comm.allreduce_sparse(keys, values.astype(np.float64), key_space=1000)
        report["mismatches"].append("sparse float64 values were accepted")
    except TypeError:
        pass
    if comm.scheme == "zebra":
        # a hot set (keys past 2^32, clear of the dense ops' 0..n-1) and the same pairs there: the switch
        # aggregates every one of them
        report["hot_version"] = comm.set_hot_keys(np.arange(1000, dtype=np.uint64) + np.uint64(2**32))
        hot_keys, hot_values, hot_info = comm.allreduce_sparse(keys + np.uint64(2**32), values)
        report["hot_pairs"] = int(keys.size)
        check("hot sparse keys", hot_keys, union + np.uint64(2**32))
        dense = np.zeros(1000)
        for r in range(n):
            k, v = pairs(r)
            dense[k.astype(np.int64)] += np.rint(v.astype(np.float64) * hot_info["scale"])
        check("hot sparse values", hot_values, (dense[union.astype(np.int64)] * (1.0 / hot_info["scale"])).astype(np.float32))
    if args.torch:
        import torch

        t = torch.from_numpy(inputs(args.seed, rank, sizes[-1], "float32").copy())
        ptr = t.data_ptr()
        info = comm.allreduce(t)
        if t.data_ptr() != ptr:
            report["mismatches"].append("torch: the tensor's storage moved")
        check("torch tensor", t.numpy(), expected(args.seed, n, sizes[-1], "float32", info["scale"], "sum"))
        u = torch.from_numpy(inputs(args.seed + 2, rank, sizes[-1], "float32").copy())
        h = comm.allreduce_async(u[1:], op="average")  # a contiguous view at an offset, in place
        h.wait()
        check("torch view async", u[1:].numpy(),
              expected(args.seed + 2, n, sizes[-1], "float32", h.info["scale"], "average", slice(1, None)))
        if u[0].item() != inputs(args.seed + 2, rank, sizes[-1], "float32")[0]:
            report["mismatches"].append("torch view: the value before the view changed")
        # ina.torch.average_gradients: the gradient of sum(p * c_r) is c_r, rank r's inputs
        import ina.torch as ina_torch

        p = torch.zeros(sizes[-2], requires_grad=True)
        (p * torch.from_numpy(inputs(args.seed + 3, rank, sizes[-2], "float32"))).sum().backward()
        info = ina_torch.average_gradients([p], comm)
        check("average_gradients", p.grad.numpy(), expected(args.seed + 3, n, sizes[-2], "float32", info["scale"], "average"))
    report["stats"] = comm.stats()
    comm.close()
    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
        json.dump(report, f)
    return 3 if report["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
