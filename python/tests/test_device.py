"""CuPy arrays and PyTorch CUDA tensors used in place by a CUDA table,
checked against a dict oracle (and, at scale, a NumPy one).

Every test needs a CUDA device and the array library it names; without
them it is skipped with the reason. Seeded with GPUHASH_TEST_SEED (default
2026); GPUHASH_TEST_SCALE=full runs the scale test at 2^24 keys.
"""

import os

import numpy as np
import pytest

import gpuhash

SEED = int(os.environ.get("GPUHASH_TEST_SEED", "2026"))
FULL = os.environ.get("GPUHASH_TEST_SCALE") == "full"
DEVICE = os.environ.get("GPUHASH_PY_CUDA", "cuda:0")


def _cuda_table_or_reason():
    try:
        gpuhash.HashTable(np.uint32, np.uint32, 64, device=DEVICE)
        return None
    except (RuntimeError, ValueError) as e:
        return f"no CUDA table on {DEVICE}: {e}"


CUDA_REASON = _cuda_table_or_reason()


class Torch:
    name = "torch"

    def __init__(self):
        import torch
        self.torch = torch
        if not torch.cuda.is_available():
            pytest.skip("skipped: PyTorch sees no CUDA device")

    def put(self, a):
        t = self.torch
        if a.dtype == np.uint64:
            return t.from_numpy(a.view(np.int64)).to(DEVICE).view(t.uint64)
        if a.dtype == np.uint32:
            return t.from_numpy(a.view(np.int32)).to(DEVICE).view(t.uint32)
        return t.from_numpy(a).to(DEVICE)

    def get(self, x):
        t = self.torch
        if x.dtype == t.uint64:
            return x.view(t.int64).cpu().numpy().view(np.uint64)
        if x.dtype == t.uint32:
            return x.view(t.int32).cpu().numpy().view(np.uint32)
        return x.cpu().numpy()

    def is_ours(self, x):
        return isinstance(x, self.torch.Tensor) and x.is_cuda

    def ptr(self, x):
        return x.data_ptr()

    def allocated(self):
        return self.torch.cuda.memory_allocated()

    def reset_peak(self):
        self.torch.cuda.synchronize()
        self.torch.cuda.reset_peak_memory_stats()

    def peak(self):
        return self.torch.cuda.max_memory_allocated()

    def side_stream(self):
        return self.torch.cuda.Stream()

    def on(self, stream):
        return self.torch.cuda.stream(stream)


class Cupy:
    name = "cupy"

    def __init__(self):
        import cupy
        self.cupy = cupy
        self.pool = cupy.get_default_memory_pool()

    def put(self, a):
        return self.cupy.asarray(a)

    def get(self, x):
        return self.cupy.asnumpy(x)

    def is_ours(self, x):
        return isinstance(x, self.cupy.ndarray)

    def ptr(self, x):
        return x.data.ptr

    def allocated(self):
        return self.pool.used_bytes()

    def reset_peak(self):
        self.cupy.cuda.Device().synchronize()
        self._base = self.pool.total_bytes()

    def peak(self):
        # Bytes the pool had to take from the device since reset_peak.
        return self.pool.total_bytes() - self._base + self.allocated()

    def side_stream(self):
        return self.cupy.cuda.Stream(non_blocking=True)

    def on(self, stream):
        return stream


def lib(name):
    if CUDA_REASON:
        pytest.skip(f"skipped: {CUDA_REASON}")
    pytest.importorskip(name, reason=f"skipped: {name} is not installed")
    return Torch() if name == "torch" else Cupy()


LIBS = ["torch", "cupy"]
PAIRS = [("uint32", "uint32"), ("uint64", "float32"), ("uint64", "int64"), ("uint32", "float64")]


def rng(*salt):
    return np.random.default_rng([SEED, *salt])


def keys_from(r, dtype, n, pool):
    return r.choice(pool, size=n).astype(dtype)


def values_for(r, dtype, n):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return r.integers(-1000, 1000, size=n).astype(dtype)  # exact sums
    return r.integers(-(10**6) if dtype.kind == "i" else 0, 10**6, size=n).astype(dtype)


def check(L, t, oracle, kd, vd, probe):
    """find and contains on device keys against the oracle, results in L's
    arrays on the device."""
    keys = L.put(np.asarray(probe, dtype=kd))
    values, found = t.find(keys)
    assert L.is_ours(values) and L.is_ours(found), "results must be the caller's array type"
    v, f = L.get(values), L.get(found)
    assert v.dtype == np.dtype(vd) and f.dtype == np.bool_
    for k, got, hit in zip(probe.tolist(), v.tolist(), f.tolist()):
        assert hit == (k in oracle), f"key {k}: found {hit}"
        assert got == (oracle[k] if hit else 0), f"key {k}: {got} != {oracle.get(k, 0)}"
    assert np.array_equal(L.get(t.contains(keys)), f)
    assert len(t) == len(oracle)


def adopt(L, t, oracle, keys, vals, kept):
    """A key repeated in one batch keeps one of its batch values (the
    library's contract): check it is one of them, then the oracle adopts it."""
    choices = {}
    for k, v in zip(keys.tolist(), vals.tolist()):
        if k not in kept:
            choices.setdefault(k, set()).add(v)
    probe = np.array(list(choices), dtype=keys.dtype)
    got, found = t.find(L.put(probe))
    for k, v, f in zip(probe.tolist(), L.get(got).tolist(), L.get(found).tolist()):
        assert f and v in choices[k], f"key {k}: {v} is none of its batch values"
        oracle[k] = v


@pytest.mark.parametrize("name", LIBS)
@pytest.mark.parametrize("kd,vd", PAIRS)
def test_every_operation_in_place_matches_a_dict(name, kd, vd):
    L = lib(name)
    r = rng(1, LIBS.index(name), PAIRS.index((kd, vd)))
    t = gpuhash.HashTable(kd, vd, capacity=1 << 12, device=DEVICE)
    pool = np.unique(r.integers(1, np.iinfo(kd).max - 3, size=6000, dtype=np.uint64).astype(kd))
    oracle = {}

    keys = keys_from(r, kd, 20000, pool)
    vals = values_for(r, vd, len(keys))
    t.insert(L.put(keys), L.put(vals))
    adopt(L, t, oracle, keys, vals, kept=set())
    absent = np.setdiff1d(r.integers(1, np.iinfo(kd).max, size=3000, dtype=np.uint64).astype(kd), pool)
    check(L, t, oracle, kd, vd, np.concatenate([keys[:4000], absent]))

    # if-absent: stored keys keep their values.
    keys = keys_from(r, kd, 5000, np.concatenate([pool, absent[:500]]))
    vals = values_for(r, vd, len(keys))
    stored = set(oracle)
    ins, ex = t.insert_if_absent(L.put(keys), L.put(vals))
    assert ins == len(set(keys.tolist()) - stored) and ins + ex > 0
    adopt(L, t, oracle, keys, vals, kept=stored)

    # insert-or-apply with every reduction.
    for op, f in (("sum", lambda a, b: a + b), ("min", min), ("max", max)):
        keys = keys_from(r, kd, 8000, pool[:800])
        vals = values_for(r, vd, len(keys))
        t.insert_or_apply(L.put(keys), L.put(vals), op=op)
        for k, v in zip(keys.tolist(), vals.tolist()):
            oracle[k] = f(oracle[k], v) if k in oracle else v
        if np.dtype(vd).kind == "i" or np.dtype(vd).kind == "u":
            info = np.iinfo(vd)  # sums wrap as the table's integers do
            oracle = {k: (v - info.min) % (info.max - info.min + 1) + info.min for k, v in oracle.items()}
        check(L, t, oracle, kd, vd, pool[:1200])

    # erase, with absent and repeated keys.
    gone = np.concatenate([pool[:700], pool[:100], absent[:300]])
    assert t.erase(L.put(gone)) == len(set(gone.tolist()) & set(oracle))
    for k in gone.tolist():
        oracle.pop(k, None)
    check(L, t, oracle, kd, vd, np.concatenate([pool[:1500], absent[:200]]))
    ek, ev = t.export()
    assert dict(zip(ek.tolist(), ev.tolist())) == oracle


@pytest.mark.parametrize("name", LIBS)
def test_no_copy_outputs_written_in_place(name):
    """The table reads the caller's device memory and writes the caller's
    outputs: out= arrays come back as themselves, and the array library
    allocates nothing during the call (no staging copy of the keys)."""
    L = lib(name)
    r = rng(2, LIBS.index(name))
    t = gpuhash.HashTable("uint64", "uint32", capacity=1 << 16, device=DEVICE)
    keys = np.unique(r.integers(1, 2**63, size=20000, dtype=np.uint64))
    dk, dv = L.put(keys), L.put(np.arange(len(keys), dtype=np.uint32))
    t.insert(dk, dv)
    vo, fo = L.put(np.zeros(len(keys), np.uint32)), L.put(np.zeros(len(keys), np.bool_))
    ptrs = (L.ptr(dk), L.ptr(vo), L.ptr(fo))
    L.reset_peak()
    before = L.allocated()
    values, found = t.find(dk, out=(vo, fo))
    assert values is vo and found is fo
    assert (L.ptr(dk), L.ptr(values), L.ptr(found)) == ptrs
    assert L.peak() == before, "the array library allocated memory during find (a copy)"
    assert L.get(found).all() and np.array_equal(L.get(values), np.arange(len(keys), dtype=np.uint32))
    f2 = L.put(np.zeros(len(keys), np.bool_))
    assert t.contains(dk, out=f2) is f2 and L.get(f2).all()


@pytest.mark.parametrize("name", LIBS)
def test_ordered_after_the_callers_stream(name):
    """Keys written on a side stream and handed over without a host
    synchronisation: the table waits for that stream (current stream by
    default, or stream=)."""
    L = lib(name)
    t = gpuhash.HashTable("uint32", "uint32", capacity=1 << 22, device=DEVICE)
    n = 1 << 21
    for explicit in (False, True):
        s = L.side_stream()
        with L.on(s):
            # Long enough on the side stream that a table not waiting for it
            # would read keys not yet written.
            if name == "torch":
                torch = L.torch
                base = torch.arange(n, device=DEVICE, dtype=torch.int64)
                for _ in range(20):
                    base = (base * 3 + 1) % (2**31)
                keys = ((base // 3) * 0 + torch.arange(n, device=DEVICE) + 1 + explicit * n).to(torch.int32).view(torch.uint32)
                vals = keys.clone()
            else:
                cp = L.cupy
                base = cp.arange(n, dtype=cp.int64)
                for _ in range(20):
                    base = (base * 3 + 1) % (2**31)
                keys = (base * 0 + cp.arange(n) + 1 + explicit * n).astype(cp.uint32)
                vals = keys.copy()
            if explicit:
                t.insert(keys, vals, stream=s)
                values, found = t.find(keys, stream=s)
            else:
                t.insert(keys, vals)
                values, found = t.find(keys)
        assert L.get(found).all()
        assert np.array_equal(L.get(values), L.get(keys))
    assert len(t) == 2 * n


@pytest.mark.parametrize("name", LIBS)
def test_bad_input_raises_before_storing(name):
    L = lib(name)
    t = gpuhash.HashTable("uint64", "float32", capacity=1024, device=DEVICE)
    good_k = L.put(np.arange(1, 11, dtype=np.uint64))
    good_v = L.put(np.ones(10, np.float32))
    t.insert(good_k, good_v)
    with pytest.raises(TypeError, match="view"):
        t.insert(L.put(np.arange(1, 11, dtype=np.int64)), good_v)  # int64 keys for a uint64 table
    with pytest.raises(TypeError):
        t.insert(good_k, L.put(np.ones(10, np.float64)))
    with pytest.raises(ValueError):
        t.insert(good_k, L.put(np.ones(9, np.float32)))
    with pytest.raises(ValueError):
        t.find(L.put(np.arange(1, 11, dtype=np.uint64).reshape(2, 5)))
    with pytest.raises(TypeError):
        t.insert(good_k, np.ones(10, np.float32))  # values on the host
    with pytest.raises(ValueError):
        t.find(good_k, out=(L.put(np.zeros(3, np.float32)), L.put(np.zeros(10, np.bool_))))
    assert len(t) == 10
    cpu = gpuhash.HashTable("uint64", "float32", capacity=1024, device="cpu")
    with pytest.raises(TypeError, match="CUDA"):
        cpu.insert(good_k, good_v)
    assert len(cpu) == 0
    # Non-contiguous keys are made contiguous (by the array's library) first.
    strided = L.put(np.arange(1, 41, dtype=np.uint64))[::2]
    values, found = t.find(strided)
    assert L.get(found).tolist() == [k <= 10 for k in range(1, 41, 2)]


@pytest.mark.parametrize("name", LIBS)
def test_growth_and_refusals(name):
    L = lib(name)
    r = rng(3, LIBS.index(name))
    # Growth on: a small table takes a large batch with repeats.
    t = gpuhash.HashTable("uint32", "uint32", capacity=1024, device=DEVICE)
    keys = r.integers(1, 2**32 - 3, size=300000, dtype=np.uint64).astype(np.uint32)
    vals = r.integers(0, 100, size=len(keys)).astype(np.uint32)
    t.insert_or_apply(L.put(keys), L.put(vals), op="sum")
    uniq, inv = np.unique(keys, return_inverse=True)
    sums = np.bincount(inv, weights=vals).astype(np.uint64).astype(np.uint32)
    assert len(t) == len(uniq) and t.capacity > 1024
    values, found = t.find(L.put(uniq))
    assert L.get(found).all() and np.array_equal(L.get(values), sums)

    # Growth off: refused keys are reported by position, the rest stored.
    t = gpuhash.HashTable("uint64", "uint32", capacity=1024, device=DEVICE, growth=False)
    keys = np.unique(r.integers(1, 2**63, size=3000, dtype=np.uint64))
    dk = L.put(keys)
    with pytest.raises(gpuhash.TableFullError) as e:
        t.insert(dk, L.put(np.arange(len(keys), dtype=np.uint32)))
    pos = e.value.positions
    assert pos.dtype == np.uint64 and 0 < len(pos) <= len(keys) - e.value.inserted
    refused = np.zeros(len(keys), bool)
    refused[pos.astype(np.int64)] = True
    _, found = t.find(dk)
    assert np.array_equal(L.get(found), ~refused), "every key is stored or reported"
    assert len(t) == e.value.inserted == (~refused).sum()


@pytest.mark.parametrize("name", LIBS)
def test_at_scale_against_numpy(name):
    """Millions of keys (2^24 with GPUHASH_TEST_SCALE=full): aggregation and
    lookups against NumPy, on the device, with fresh keys per seed."""
    L = lib(name)
    r = rng(4, LIBS.index(name))
    n = 1 << (24 if FULL else 21)
    t = gpuhash.HashTable("uint64", "uint64", capacity=n // 2, device=DEVICE)
    distinct = np.unique(r.integers(1, 2**64 - 4, size=n // 4, dtype=np.uint64))
    keys = r.choice(distinct, size=n)
    vals = r.integers(0, 1000, size=n).astype(np.uint64)
    t.insert_or_apply(L.put(keys), L.put(vals), op="sum")
    uniq, inv = np.unique(keys, return_inverse=True)
    sums = np.bincount(inv, weights=vals).astype(np.uint64)
    assert len(t) == len(uniq)
    probe = np.concatenate([uniq, distinct[~np.isin(distinct, uniq)]])
    values, found = t.find(L.put(probe))
    f, v = L.get(found), L.get(values)
    assert f[: len(uniq)].all() and not f[len(uniq):].any()
    assert np.array_equal(v[: len(uniq)], sums)
    assert t.erase(L.put(uniq[::2])) == len(uniq[::2])
    assert len(t) == len(uniq) - len(uniq[::2])
