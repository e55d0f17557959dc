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

On a CUDA table, CuPy arrays and PyTorch CUDA tensors (anything with
``__cuda_array_interface__``, or CUDA memory through DLPack) are used in
place on the device: the table reads the caller's memory, results come back
as arrays of the caller's library on the same device (or in ``out=``
arrays), and the call is ordered after the work queued on the caller's
stream (the current stream of the array's library, or ``stream=``)::

    >>> import torch                                         # doctest: +SKIP
    >>> t = gpuhash.HashTable(np.uint64, np.float32, 1 << 20, device="cuda:0")  # doctest: +SKIP
    >>> keys = torch.arange(1000, device="cuda").view(torch.uint64)             # doctest: +SKIP
    >>> t.insert(keys, torch.ones(1000, device="cuda"))      # doctest: +SKIP
    (1000, 0)
    >>> values, found = t.find(keys)                          # torch tensors  # doctest: +SKIP
"""

import numpy as np

from ._gpuhash import GrowthFailedError, Table as _Table, TableFullError, __version__

__all__ = ["HashTable", "TableFullError", "GrowthFailedError", "KEY_DTYPES", "VALUE_DTYPES", "__version__"]

#: Key dtypes a table takes.
KEY_DTYPES = ("uint32", "uint64")
#: Value dtypes a table takes.
VALUE_DTYPES = ("uint32", "uint64", "int32", "int64", "float32", "float64")

_REDUCTIONS = ("sum", "min", "max")

# DLPack's device type of CUDA memory.
_DL_CUDA = 2


def _cuda_interface(x):
    """``x.__cuda_array_interface__``, or ``None`` for host arrays."""
    if isinstance(x, np.ndarray):
        return None
    try:
        return x.__cuda_array_interface__
    except (AttributeError, RuntimeError, TypeError):
        pass
    # DLPack-only producers (JAX, ...): viewed through CuPy or PyTorch, no copy.
    try:
        on_cuda = x.__dlpack_device__()[0] == _DL_CUDA
    except (AttributeError, RuntimeError, TypeError):
        return None
    if not on_cuda:
        return None
    for lib in ("cupy", "torch"):
        try:
            mod = __import__(lib)
        except ImportError:
            continue
        return mod.from_dlpack(x).__cuda_array_interface__
    raise TypeError("a DLPack array in CUDA memory needs CuPy or PyTorch installed to be used in place")


def _library(x):
    """``"torch"``, ``"cupy"`` or ``None``: whose arrays the results are."""
    root = type(x).__module__.split(".")[0]
    return root if root in ("torch", "cupy") else None


def _stream_handle(stream, x):
    """The ``CUstream`` value the call waits for: ``stream=`` (an integer, a
    ``torch.cuda.Stream`` or a CuPy stream), else the current stream of
    ``x``'s library, else the legacy default stream (0)."""
    if stream is not None:
        for attr in ("cuda_stream", "ptr"):
            if hasattr(stream, attr):
                return int(getattr(stream, attr))
        if isinstance(stream, (int, np.integer)) and not isinstance(stream, bool):
            return int(stream)
        raise TypeError(f"stream must be an integer CUstream, a torch.cuda.Stream or a CuPy stream, got {type(stream).__name__}")
    lib = _library(x)
    if lib == "torch":
        import torch
        return int(torch.cuda.current_stream(x.device).cuda_stream)
    if lib == "cupy":
        import cupy
        return int(cupy.cuda.get_current_stream().ptr)
    cai = _cuda_interface(x)
    s = cai.get("stream") if cai else None
    return int(s) if s else 0


class _DeviceArray:
    """A 1-D array in CUDA device memory: its address, length and owner."""

    def __init__(self, x, cai, dtype, what):
        got = np.dtype(cai["typestr"])
        if got != dtype:
            hint = ""
            if got.kind in "iu" and dtype.kind == "u" and got.itemsize == dtype.itemsize:
                hint = f" (reinterpret without a copy: .view({dtype.name}))"
            raise TypeError(f"{what} must be {dtype.name} for this table, got {got.name}{hint}")
        shape = tuple(cai["shape"])
        if len(shape) != 1:
            raise ValueError(f"{what} must be 1-D, got shape {shape}")
        strides = cai.get("strides")
        if strides is not None and shape[0] > 1 and tuple(strides) != (dtype.itemsize,):
            # Not contiguous: a contiguous copy, made by the array's own library.
            lib = _library(x)
            if lib == "torch":
                x = x.contiguous()
            elif lib == "cupy":
                import cupy
                x = cupy.ascontiguousarray(x)
            else:
                raise ValueError(f"{what} must be contiguous")
            cai = x.__cuda_array_interface__
        self.array = x  # keeps the memory alive for the call
        self.ptr = int(cai["data"][0])
        self.readonly = bool(cai["data"][1])
        self.n = shape[0]

    def empty(self, n, dtype):
        """An output of ``n`` elements of ``dtype`` in the same library and
        on the same device as this array."""
        lib = _library(self.array)
        if lib == "torch":
            import torch
            return torch.empty(n, dtype=_torch_dtype(torch, dtype), device=self.array.device)
        try:
            import cupy
        except ImportError:
            raise TypeError("outputs for this array type need CuPy; pass out= arrays instead") from None
        device = getattr(getattr(self.array, "device", None), "id", None)
        with cupy.cuda.Device(device):
            return cupy.empty(n, dtype=dtype)


def _torch_dtype(torch, dtype):
    return {"bool": torch.bool, "uint32": torch.uint32, "uint64": torch.uint64, "int32": torch.int32,
            "int64": torch.int64, "float32": torch.float32, "float64": torch.float64}[np.dtype(dtype).name]


def _dtype_name(dtype, allowed, what):
    try:
        name = np.dtype(dtype).name
    except TypeError as e:
        raise TypeError(f"{what} dtype {dtype!r} is not a NumPy dtype") from e
    if name not in allowed:
        raise TypeError(f"{what} dtype {name} is not one of {', '.join(allowed)}")
    return name


def _ptr(x):
    return int(x.__cuda_array_interface__["data"][0])


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

    # -- device arrays ------------------------------------------------------

    def _device(self, x, dtype, what):
        """``x`` as a ``_DeviceArray`` if it lives in CUDA memory, else None."""
        cai = _cuda_interface(x)
        if cai is None:
            return None
        if not self.device.startswith("cuda"):
            raise TypeError(f"{what} are in CUDA device memory but this table is on {self.device}: "
                            "pass NumPy arrays, or build the table with device=\"cuda:N\"")
        return _DeviceArray(x, cai, dtype, what)

    def _output(self, keys, out, n, dtype, what):
        """A caller's ``out`` array checked for in-place use, or a new one."""
        if out is None:
            return keys.empty(n, dtype)
        d = self._device(out, np.dtype(dtype), what)
        if d is None:
            raise TypeError(f"{what} must be in CUDA device memory like the keys")
        if d.n != n:
            raise ValueError(f"{n} keys but {d.n} {what}")
        if d.readonly:
            raise ValueError(f"{what} is read-only")
        if d.array is not out:
            raise ValueError(f"{what} must be contiguous to be written in place")
        return out

    def _insert(self, keys, values, how, stream):
        k = self._device(keys, self.key_dtype, "keys")
        if k is None:
            k, v = self._pairs(keys, values)
            if how == "assign":
                return self._t.insert(k, v)
            if how == "if_absent":
                return self._t.insert_if_absent(k, v)
            return self._t.insert_or_apply(k, v, how)
        v = self._device(values, self.value_dtype, "values")
        if v is None:
            raise TypeError("keys are in CUDA device memory but values are not: pass both from one device")
        if k.n != v.n:
            raise ValueError(f"{k.n} keys but {v.n} values")
        if k.n == 0:
            return (0, 0)
        return self._t.insert_device(k.ptr, v.ptr, k.n, how, _stream_handle(stream, keys))

    # -- bulk operations -------------------------------------------------------

    def insert(self, keys, values, stream=None):
        """Insert-or-assign: each key gets its value (one of the batch's
        values where a key repeats in it). Returns ``(inserted, existing)``."""
        return self._insert(keys, values, "assign", stream)

    def insert_if_absent(self, keys, values, stream=None):
        """Inserts the keys not stored yet (a new key repeated in the batch
        takes one of its values); stored keys keep theirs. Returns
        ``(inserted, existing)``."""
        return self._insert(keys, values, "if_absent", stream)

    def insert_or_apply(self, keys, values, op="sum", stream=None):
        """Inserts new keys and reduces the values of stored (and repeated)
        ones with ``op``: ``"sum"``, ``"min"`` or ``"max"``. Returns
        ``(inserted, existing)``."""
        if op not in _REDUCTIONS:
            raise ValueError(f"op must be one of {', '.join(_REDUCTIONS)}, got {op!r}")
        return self._insert(keys, values, op, stream)

    def find(self, keys, stream=None, out=None):
        """Returns ``(values, found)``: each key's value (0 where absent) and
        whether it is stored. For device keys, ``out=(values, found)``
        writes into the caller's arrays (``found`` of ``bool``)."""
        k = self._device(keys, self.key_dtype, "keys")
        if k is None:
            return self._t.find(self._keys(keys))
        vo, fo = (None, None) if out is None else out
        values = self._output(k, vo, k.n, self.value_dtype, "values output")
        found = self._output(k, fo, k.n, np.bool_, "found output")
        if k.n:
            self._t.find_device(k.ptr, k.n, _ptr(values), _ptr(found), _stream_handle(stream, keys))
        return values, found

    def contains(self, keys, stream=None, out=None):
        """Whether each key is stored, as a ``bool`` array (``out=`` for
        device keys: the caller's array, written in place)."""
        k = self._device(keys, self.key_dtype, "keys")
        if k is None:
            return self._t.contains(self._keys(keys))
        found = self._output(k, out, k.n, np.bool_, "found output")
        if k.n:
            self._t.contains_device(k.ptr, k.n, _ptr(found), _stream_handle(stream, keys))
        return found

    def erase(self, keys, stream=None):
        """Erases the keys; returns how many were stored."""
        k = self._device(keys, self.key_dtype, "keys")
        if k is None:
            return self._t.erase(self._keys(keys))
        return self._t.erase_device(k.ptr, k.n, _stream_handle(stream, keys)) if k.n else 0

    def export(self):
        """Every stored pair, as ``(keys, values)`` NumPy arrays in no set order."""
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
