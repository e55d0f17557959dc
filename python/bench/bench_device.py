"""gpuhash from Python on a CUDA device, against the Rust bench and against
what Python users do without a hash table.

    python python/bench/bench_device.py --log2 26 --rust-csv results.csv

Measures, for each key type, on PyTorch CUDA tensors used in place:

* gpuhash ``insert`` of 2^log2 distinct keys into an empty table of twice
  as many slots (load 0.5), ``find`` of all of them (into ``out=``
  tensors), and ``insert_or_apply(sum)`` of a batch with 16 copies of each
  key;
* PyTorch without a hash table on the same keys: a sorted index
  (``torch.sort``) probed with ``torch.searchsorted``, and ``torch.unique``
  with ``scatter_add_`` for the aggregation;
* a Python ``dict`` on 2^dict_log2 keys (CPU, one thread).

Each figure is the median wall time of ``--reps`` calls after a warm-up,
with the device synchronised around each call (a gpuhash call returns once
its results are written). With ``--rust-csv`` (the ``results.csv`` of
``gpuhash bench --device cuda --ops insert,find_hit,apply_sum --loads 0.5
--sizes 2^(log2+1)`` in the same run) it reports the Python call's
overhead over the Rust call for the same operation and batch.
"""

import argparse
import csv
import statistics
import sys
import time

import numpy as np

import gpuhash

try:
    import torch
except ImportError:  # pragma: no cover - the bench needs PyTorch
    sys.exit("skipped: the device bench needs PyTorch with CUDA")

MIX64 = 0x9E3779B97F4A7C15 - (1 << 64)  # odd: multiplying by it permutes 64-bit words
MIX32 = 0x9E3779B1


def distinct_keys(n, dtype, device, salt):
    """n distinct keys, spread over the key space: a bijective mix of a range."""
    i = torch.arange(1, n + 1, device=device, dtype=torch.int64) + salt * n
    if dtype == "uint64":
        return (i * MIX64).view(torch.uint64)  # wraps: a bijection of the 64-bit words
    return _u32((i * MIX32) & 0xFFFFFFFF)


def _u32(x):
    # Low 32 bits of non-negative int64 values, as uint32 without a cast
    # PyTorch lacks: through int32 (two's complement) then a view.
    return (x - ((x >> 31) << 32)).to(torch.int32).view(torch.uint32)


def signed(x):
    """The same bits as a signed tensor (torch sorts and searches those)."""
    return x.view(torch.int64) if x.dtype == torch.uint64 else x.view(torch.int32)


def timed(fn, reps, sync):
    fn()  # warm-up
    times = []
    for _ in range(reps):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--log2", type=int, default=26, help="keys per batch: 2^log2")
    p.add_argument("--keys", default="uint32,uint64")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--dict-log2", type=int, default=20, help="keys of the dict baseline: 2^dict_log2")
    p.add_argument("--rust-csv", help="results.csv of the Rust bench run on the same device")
    p.add_argument("--out", help="write the rows here as CSV")
    a = p.parse_args()

    dev = torch.device(a.device)
    sync = torch.cuda.synchronize
    n = 1 << a.log2
    rows = []

    def row(impl, op, key, count, ms):
        rows.append({"impl": impl, "op": op, "key": key, "n": count, "median_ms": ms, "gops": count / ms / 1e6})
        print(f"{impl:<16} {op:<10} {key:<7} n=2^{int(np.log2(count)):<3} {ms:10.3f} ms {count / ms / 1e6:9.3f} G/s",
              flush=True)

    print(f"gpuhash {gpuhash.__version__} on {torch.cuda.get_device_name(dev)}, torch {torch.__version__}", flush=True)
    for key in a.keys.split(","):
        keys = distinct_keys(n, key, dev, 0)
        vals = torch.arange(n, device=dev, dtype=torch.int32).view(torch.uint32)
        t = gpuhash.HashTable(key, "uint32", capacity=2 * n, device=a.device)

        # clear() is outside the timed call: time only insert.
        t.insert(keys, vals)
        times = []
        for _ in range(a.reps):
            t.clear()
            sync()
            start = time.perf_counter()
            t.insert(keys, vals)
            times.append((time.perf_counter() - start) * 1e3)
        row("gpuhash", "insert", key, n, statistics.median(times))
        vo = torch.empty(n, device=dev, dtype=torch.uint32)
        fo = torch.empty(n, device=dev, dtype=torch.bool)
        row("gpuhash", "find_hit", key, n, timed(lambda: t.find(keys, out=(vo, fo)), a.reps, sync))
        assert bool(fo.all()) and torch.equal(vo.view(torch.int32), vals.view(torch.int32)), "gpuhash find"

        # Aggregation: 16 copies of each of n/16 keys (the Rust bench's apply_sum batch).
        # (Shuffled through the signed view: PyTorch does not index unsigned tensors.)
        agg = signed(distinct_keys(n // 16, key, dev, 1)).repeat(16)[torch.randperm(n, device=dev)]
        agg = agg.view(keys.dtype)
        ones = torch.ones(n, device=dev, dtype=torch.int32).view(torch.uint32)
        times = []
        for _ in range(a.reps + 1):
            t.clear()
            sync()
            start = time.perf_counter()
            t.insert_or_apply(agg, ones, op="sum")
            times.append((time.perf_counter() - start) * 1e3)
        row("gpuhash", "apply_sum", key, n, statistics.median(times[1:]))
        assert len(t) == n // 16
        del t

        # PyTorch without a hash table: a sorted index and searchsorted.
        sk = signed(keys)
        index = {}

        def build():
            index["k"], perm = torch.sort(sk)
            index["v"] = vals.view(torch.int32)[perm]

        def lookup():
            pos = torch.searchsorted(index["k"], sk).clamp_(max=n - 1)
            hit = index["k"][pos] == sk
            return torch.where(hit, index["v"][pos], 0), hit

        row("torch sort", "insert", key, n, timed(build, a.reps, sync))
        row("torch search", "find_hit", key, n, timed(lookup, a.reps, sync))
        v, hit = lookup()
        assert bool(hit.all()) and torch.equal(v, vals.view(torch.int32)), "torch baseline"
        sa = signed(agg)

        def unique_sum():
            u, inv = torch.unique(sa, return_inverse=True)
            return u, torch.zeros(len(u), device=dev, dtype=torch.int64).scatter_add_(0, inv, torch.ones_like(inv))

        row("torch unique", "apply_sum", key, n, timed(unique_sum, a.reps, sync))
        del index, sk, sa, agg, keys, vals, ones, vo, fo
        torch.cuda.empty_cache()

    # A dict on the CPU, one thread.
    m = 1 << a.dict_log2
    dk = np.random.default_rng(1).permutation(m).astype(np.uint64) * np.uint64(MIX64 % (1 << 64))
    dkl, dvl = dk.tolist(), list(range(m))
    d = {}

    def dict_build():
        d.clear()
        d.update(zip(dkl, dvl))

    row("dict", "insert", "uint64", m, timed(dict_build, a.reps, lambda: None))
    row("dict", "find_hit", "uint64", m, timed(lambda: [d.get(k) for k in dkl], a.reps, lambda: None))

    if a.rust_csv:
        print("\nPython call over the Rust bench (same op, keys, batch and device):")
        with open(a.rust_csv) as f:
            rust = [r for r in csv.DictReader(f) if r["scheme"] == "linear" and r["op"] in ("insert", "find_hit", "apply_sum")]
        for r in rows:
            if r["impl"] != "gpuhash":
                continue
            bits = "32" if r["key"] == "uint32" else "64"
            match = [x for x in rust if x["op"] == r["op"] and x["key_bits"] == bits and int(x["n"]) == r["n"]]
            if match:
                ms = float(match[0]["median_ms"])
                r["rust_ms"], r["overhead"] = ms, r["median_ms"] / ms - 1
                print(f"  {r['op']:<10} {r['key']:<7} python {r['median_ms']:9.3f} ms  rust {ms:9.3f} ms  "
                      f"overhead {100 * r['overhead']:+.1f}%")
            else:
                print(f"  {r['op']:<10} {r['key']:<7} no Rust row with n={r['n']}")
    print("\nSpeedups (gpuhash over the alternative, same keys):")
    for op, other in (("insert", "torch sort"), ("find_hit", "torch search"), ("apply_sum", "torch unique")):
        for key in a.keys.split(","):
            g = [r for r in rows if r["impl"] == "gpuhash" and r["op"] == op and r["key"] == key]
            o = [r for r in rows if r["impl"] == other and r["op"] == op and r["key"] == key]
            if g and o:
                print(f"  {op:<10} {key:<7} {g[0]['gops'] / o[0]['gops']:6.2f}x {other}")
    for op in ("insert", "find_hit"):
        g = [r for r in rows if r["impl"] == "gpuhash" and r["op"] == op and r["key"] == "uint64"]
        o = [r for r in rows if r["impl"] == "dict" and r["op"] == op]
        if g and o:
            print(f"  {op:<10} uint64  {g[0]['gops'] / o[0]['gops']:6.0f}x dict (2^{a.dict_log2} keys, CPU)")
    if a.out:
        fields = ["impl", "op", "key", "n", "median_ms", "gops", "rust_ms", "overhead"]
        with open(a.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields)
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
