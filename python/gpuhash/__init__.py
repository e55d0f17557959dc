"""gpuhash: GPU hash tables for Python arrays.

A ``HashTable`` maps keys (``uint32`` or ``uint64``) to values (``uint32``,
``uint64``, ``int32``, ``int64``, ``float32`` or ``float64``) on the CPU or a
GPU, with bulk operations over whole arrays::

    >>> import numpy as np, gpuhash
    >>> t = gpuhash.HashTable(np.uint64, np.float32, capacity=1 << 10, device="cpu")
    >>> t.insert(np.array([1, 2, 3], dtype=np.uint64), np.array([0.5, 1.5, 2.5], dtype=np.float32))
    (3, 0)
    >>> values, found = t.find(np.array([2, 7], dtype=np.uint64))
    >>> values.tolist(), found.tolist()
    ([1.5, 0.0], [True, False])
    >>> len(t)
    3

NumPy arrays of the table's exact dtypes go in without a copy (a
non-contiguous one is made contiguous first); results come back as NumPy
arrays. A dtype that differs from the table's raises ``TypeError`` and
arrays of different lengths ``ValueError``, before anything is stored.

With growth off, keys that find no slot raise ``TableFullError``, whose
``positions`` array lists them; everything else of the batch was stored.
"""

import numpy as np

from ._gpuhash import GrowthFailedError, Table as _Table, TableFullError, __version__

__all__ = ["HashTable", "TableFullError", "GrowthFailedError", "KEY_DTYPES", "VALUE_DTYPES", "__version__"]

#: Key dtypes a table takes.
KEY_DTYPES = ("uint32", "uint64")
#: Value dtypes a table takes.
VALUE_DTYPES = ("uint32", "uint64", "int32", "int64", "float32", "float64")

_REDUCTIONS = ("sum", "min", "max")


def _dtype_name(dtype, allowed, what):
    try:
        name = np.dtype(dtype).name
    except TypeError as e:
        raise TypeError(f"{what} dtype {dtype!r} is not a NumPy dtype") from e
    if name not in allowed:
        raise TypeError(f"{what} dtype {name} is not one of {', '.join(allowed)}")
    return name


class HashTable:
    """A hash table of ``key_dtype`` keys and ``value_dtype`` values.

    Parameters
    ----------
    key_dtype, value_dtype
        Anything ``numpy.dtype`` accepts (``np.uint64``, ``"float32"``, ...).
    capacity
        Slots to allocate (rounded up to whole buckets).
    device
        ``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"wgpu"`` or ``"wgpu:N"``.
    scheme
        Placement scheme: ``"linear"`` (default), ``"cuckoo"``,
        ``"robin-hood"``, ``"two-level"``, ``"hashinator"`` or
        ``"slab-list"`` (CPU and wgpu).
    growth
        Grow when an insert would pass ``max_load_factor`` (default on); off,
        keys without a slot raise ``TableFullError``.
    max_load_factor
        Load at which the table grows (the scheme's default if ``None``).
    seed
        Hash seed (the library's default if ``None``).
    """

    def __init__(self, key_dtype, value_dtype, capacity, device="cpu", scheme="linear", growth=True,
                 max_load_factor=None, seed=None):
        self.key_dtype = np.dtype(_dtype_name(key_dtype, KEY_DTYPES, "key"))
        self.value_dtype = np.dtype(_dtype_name(value_dtype, VALUE_DTYPES, "value"))
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)):
            raise TypeError(f"capacity must be an integer, got {type(capacity).__name__}")
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1 slot, got {capacity}")
        self._t = _Table(self.key_dtype.name, self.value_dtype.name, int(capacity), str(device), str(scheme),
                         bool(growth), max_load_factor, seed)

    # -- arrays in -----------------------------------------------------------

    def _array(self, x, dtype, what):
        """``x`` as a contiguous 1-D NumPy array of exactly ``dtype``."""
        if isinstance(x, np.ndarray):
            if x.dtype != dtype:
                raise TypeError(f"{what} must be {dtype.name} for this table, got {x.dtype.name}")
        else:
            # Lists and scalars: converted, but never by a lossy cast (a
            # negative key for a uint64 table raises here).
            try:
                x = np.asarray(x)
            except (TypeError, ValueError) as e:
                raise TypeError(f"{what} must be an array of {dtype.name}") from e
            if x.dtype.kind not in "iuf" or (x.dtype.kind == "f" and dtype.kind != "f"):
                raise TypeError(f"{what} must be {dtype.name} for this table, got {x.dtype.name}")
            if x.size and dtype.kind in "iu":
                info = np.iinfo(dtype)
                if x.min() < info.min or x.max() > info.max:
                    raise ValueError(f"{what} out of range for {dtype.name}")
            x = x.astype(dtype)
        if x.ndim != 1:
            raise ValueError(f"{what} must be 1-D, got shape {x.shape}")
        return np.ascontiguousarray(x)

    def _keys(self, keys):
        return self._array(keys, self.key_dtype, "keys")

    def _pairs(self, keys, values):
        k, v = self._keys(keys), self._array(values, self.value_dtype, "values")
        if len(k) != len(v):
            raise ValueError(f"{len(k)} keys but {len(v)} values")
        return k, v

    # -- bulk operations -------------------------------------------------------

    def insert(self, keys, values):
        """Insert-or-assign: each key gets its value (one of the batch's
        values where a key repeats in it). Returns ``(inserted, existing)``."""
        return self._t.insert(*self._pairs(keys, values))

    def insert_if_absent(self, keys, values):
        """Inserts the keys not stored yet (a new key repeated in the batch
        takes one of its values); stored keys keep theirs. Returns
        ``(inserted, existing)``."""
        return self._t.insert_if_absent(*self._pairs(keys, values))

    def insert_or_apply(self, keys, values, op="sum"):
        """Inserts new keys and reduces the values of stored (and repeated)
        ones with ``op``: ``"sum"``, ``"min"`` or ``"max"``. Returns
        ``(inserted, existing)``."""
        if op not in _REDUCTIONS:
            raise ValueError(f"op must be one of {', '.join(_REDUCTIONS)}, got {op!r}")
        return self._t.insert_or_apply(*self._pairs(keys, values), op)

    def find(self, keys):
        """Returns ``(values, found)``: each key's value (0 where absent) and
        whether it is stored."""
        return self._t.find(self._keys(keys))

    def contains(self, keys):
        """Whether each key is stored, as a ``bool`` array."""
        return self._t.contains(self._keys(keys))

    def erase(self, keys):
        """Erases the keys; returns how many were stored."""
        return self._t.erase(self._keys(keys))

    def export(self):
        """Every stored pair, as ``(keys, values)`` arrays in no set order."""
        return self._t.export()

    # -- maintenance -------------------------------------------------------------

    def clear(self):
        """Removes every key; the capacity stays."""
        self._t.clear()

    def reserve(self, additional):
        """Grows, if needed, so that ``additional`` more keys fit below the
        maximum load factor."""
        self._t.reserve(int(additional))

    def rehash(self, slots):
        """Rebuilds the table into ``slots`` slots."""
        self._t.rehash(int(slots))

    def __len__(self):
        return len(self._t)

    @property
    def capacity(self):
        """Slots the table has."""
        return self._t.capacity

    @property
    def load_factor(self):
        """Stored keys over slots."""
        return self._t.load_factor

    @property
    def growth(self):
        """Whether inserts grow the table (settable)."""
        return self._t.growth

    @growth.setter
    def growth(self, on):
        self._t.growth = bool(on)

    @property
    def device(self):
        return self._t.device

    @property
    def scheme(self):
        return self._t.scheme

    def __repr__(self):
        return (f"gpuhash.HashTable({self.key_dtype.name} -> {self.value_dtype.name}, {len(self)} keys, "
                f"capacity={self.capacity}, device={self.device!r}, scheme={self.scheme!r})")
