"""The Python package against a dict oracle, on the CPU backend (or the
device GPUHASH_PY_DEVICE names: cuda, wgpu).

Seeded with GPUHASH_TEST_SEED (default 2026) so any failure replays.
"""

import os

import numpy as np
import pytest

import gpuhash

SEED = int(os.environ.get("GPUHASH_TEST_SEED", "2026"))
DEVICE = os.environ.get("GPUHASH_PY_DEVICE", "cpu")
PAIRS = [(k, v) for k in gpuhash.KEY_DTYPES for v in gpuhash.VALUE_DTYPES]
# Keys the table stores out of band (0 and the two largest) are included on purpose.
EDGE = {"uint32": [0, 2**32 - 1, 2**32 - 2, 2**32 - 3], "uint64": [0, 2**64 - 1, 2**64 - 2, 2**64 - 3]}


def rng(*salt):
    return np.random.default_rng([SEED, *salt])


def random_keys(r, dtype, n, pool=None):
    info = np.iinfo(dtype)
    if pool is not None:
        return r.choice(pool, size=n)
    return r.integers(0, info.max, size=n, dtype=dtype, endpoint=True)


def random_values(r, dtype, n):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        # Small integers: sums stay exact in float32.
        return r.integers(-1000, 1000, size=n).astype(dtype)
    info = np.iinfo(dtype)
    return r.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)


def adopt_open_values(t, oracle, keys, vals, kept):
    """The library leaves open which of a batch's values a repeated key
    keeps (insert) or a new repeated key takes (insert_if_absent): the
    table's value must be one of them, and the oracle adopts it."""
    choices = {}
    for k, v in zip(keys.tolist(), vals.tolist()):
        if k not in kept:
            choices.setdefault(k, set()).add(v)
    got, found = t.find(np.array(list(choices), dtype=keys.dtype))
    for k, v, f in zip(choices, got.tolist(), found.tolist()):
        assert f and v in choices[k], f"key {k}: {v} is none of the batch's values {sorted(choices[k])[:5]}"
        oracle[k] = v


def check_against(t, oracle, key_dtype, value_dtype, probe):
    probe = np.asarray(probe, dtype=key_dtype)
    values, found = t.find(probe)
    assert values.dtype == np.dtype(value_dtype) and found.dtype == np.bool_
    for k, v, f in zip(probe.tolist(), values.tolist(), found.tolist()):
        assert f == (k in oracle), f"key {k}: found {f}"
        if f:
            assert v == oracle[k], f"key {k}: {v} != {oracle[k]}"
        else:
            assert v == 0
    assert np.array_equal(t.contains(probe), found)
    assert len(t) == len(oracle)
    keys, vals = t.export()
    assert keys.dtype == np.dtype(key_dtype) and vals.dtype == np.dtype(value_dtype)
    assert dict(zip(keys.tolist(), vals.tolist())) == oracle


@pytest.mark.parametrize("key_dtype,value_dtype", PAIRS)
def test_every_operation_matches_a_dict(key_dtype, value_dtype):
    r = rng(1, PAIRS.index((key_dtype, value_dtype)))
    t = gpuhash.HashTable(key_dtype, value_dtype, capacity=256, device=DEVICE)
    oracle = {}
    pool = np.concatenate([random_keys(r, key_dtype, 3000), np.array(EDGE[key_dtype], dtype=key_dtype)])

    keys = random_keys(r, key_dtype, 8000, pool)
    vals = random_values(r, value_dtype, len(keys))
    inserted, existing = t.insert(keys, vals)
    adopt_open_values(t, oracle, keys, vals, kept={})
    assert (inserted, existing) == (len(oracle), len(keys) - len(oracle))
    check_against(t, oracle, key_dtype, value_dtype, pool)

    keys = random_keys(r, key_dtype, 4000, pool)
    vals = random_values(r, value_dtype, len(keys))
    t.insert_if_absent(keys, vals)
    adopt_open_values(t, oracle, keys, vals, kept=dict(oracle))
    check_against(t, oracle, key_dtype, value_dtype, pool)

    for op in ("sum", "min", "max"):
        keys = random_keys(r, key_dtype, 4000, pool)
        vals = random_values(r, value_dtype, len(keys))
        t.insert_or_apply(keys, vals, op=op)
        width = np.dtype(value_dtype)
        for k, v in zip(keys.tolist(), vals.tolist()):
            if k not in oracle:
                oracle[k] = v
            elif op == "sum":
                s = np.array([oracle[k]], dtype=width) + np.array([v], dtype=width)  # wraps like the table
                oracle[k] = s.tolist()[0]
            else:
                oracle[k] = (min if op == "min" else max)(oracle[k], v)
        check_against(t, oracle, key_dtype, value_dtype, pool)

    gone = random_keys(r, key_dtype, 2000, pool)
    erased = t.erase(gone)
    assert erased == len(set(gone.tolist()) & set(oracle))
    for k in gone.tolist():
        oracle.pop(k, None)
    check_against(t, oracle, key_dtype, value_dtype, pool)


def test_growth_off_reports_exactly_the_refused_positions():
    t = gpuhash.HashTable("uint64", "uint32", capacity=64, device=DEVICE, growth=False)
    keys = np.arange(1, 1001, dtype=np.uint64)
    with pytest.raises(gpuhash.TableFullError) as e:
        t.insert(keys, np.ones(len(keys), dtype=np.uint32))
    err = e.value
    assert isinstance(err.positions, np.ndarray) and err.positions.dtype == np.uint64
    refused = set(err.positions.tolist())
    stored = {int(k) for i, k in enumerate(keys) if i not in refused}
    assert err.inserted == len(stored) == len(t)
    assert set(t.export()[0].tolist()) == stored
    # Nothing already stored is lost by the next refused call.
    with pytest.raises(gpuhash.TableFullError):
        t.insert(np.arange(5000, 6000, dtype=np.uint64), np.ones(1000, dtype=np.uint32))
    assert stored <= set(t.export()[0].tolist())


def test_growth_stores_everything():
    t = gpuhash.HashTable(np.uint32, np.float64, capacity=16, device=DEVICE)
    keys = np.arange(100_000, dtype=np.uint32)
    t.insert(keys, keys.astype(np.float64) / 2)
    assert len(t) == 100_000 and t.capacity >= 100_000
    values, found = t.find(keys)
    assert found.all() and np.array_equal(values, keys / 2)


def test_bad_input_raises_before_anything_is_stored():
    t = gpuhash.HashTable("uint64", "int32", capacity=128, device=DEVICE)
    t.insert(np.array([1, 2], dtype=np.uint64), np.array([10, 20], dtype=np.int32))
    before = dict(zip(*(a.tolist() for a in t.export())))
    bad = [
        (TypeError, lambda: t.insert(np.array([3], dtype=np.int64), np.array([1], dtype=np.int32))),
        (TypeError, lambda: t.insert(np.array([3], dtype=np.uint64), np.array([1], dtype=np.int64))),
        (TypeError, lambda: t.find(np.array([1.5]))),
        (ValueError, lambda: t.insert(np.array([3, 4], dtype=np.uint64), np.array([1], dtype=np.int32))),
        (ValueError, lambda: t.insert(np.zeros((2, 2), dtype=np.uint64), np.zeros(4, dtype=np.int32))),
        (ValueError, lambda: t.insert([-1], [1])),
        (ValueError, lambda: t.insert_or_apply(np.array([3], dtype=np.uint64), np.array([1], dtype=np.int32), op="mul")),
    ]
    for kind, call in bad:
        with pytest.raises(kind):
            call()
    assert dict(zip(*(a.tolist() for a in t.export()))) == before
    with pytest.raises(TypeError):
        gpuhash.HashTable("int64", "int32", capacity=8)
    with pytest.raises(TypeError):
        gpuhash.HashTable("uint64", "complex64", capacity=8)
    with pytest.raises(ValueError):
        gpuhash.HashTable("uint64", "uint32", capacity=0)
    with pytest.raises(ValueError):
        gpuhash.HashTable("uint64", "uint32", capacity=8, device="tpu")
    with pytest.raises(ValueError):
        gpuhash.HashTable("uint64", "uint32", capacity=8, scheme="quadratic")


def test_lists_and_strided_arrays_are_accepted():
    t = gpuhash.HashTable("uint32", "uint32", capacity=64, device=DEVICE)
    t.insert([5, 6, 7], [50, 60, 70])
    strided = np.arange(10, dtype=np.uint32)[::2]
    t.insert(strided, strided * 3)
    values, found = t.find([5, 4, 9])
    assert values.tolist() == [50, 12, 0] and found.tolist() == [True, True, False]


@pytest.mark.parametrize("scheme", ["linear", "cuckoo", "robin-hood", "two-level", "hashinator"])
def test_every_scheme(scheme):
    try:
        t = gpuhash.HashTable("uint64", "uint64", capacity=1 << 12, device=DEVICE, scheme=scheme)
    except ValueError as e:
        # Every scheme runs on the CPU; a GPU backend may lack some, and says so.
        if DEVICE == "cpu" or "unsupported" not in str(e):
            raise
        pytest.skip(f"skipped: {e}")
    r = rng(2, len(scheme))
    keys = random_keys(r, "uint64", 3000)
    t.insert_or_apply(keys, np.ones(len(keys), dtype=np.uint64))
    counts = {}
    for k in keys.tolist():
        counts[k] = counts.get(k, 0) + 1
    check_against(t, counts, "uint64", "uint64", keys)
    assert scheme.replace("-", "") in t.scheme.replace("-", "").replace("_", "")
