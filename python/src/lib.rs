//! `gpuhash._gpuhash`: the Rust half of the Python package. `Table` holds a
//! `HashTable<K, V>` for the key and value types named at construction and
//! runs the bulk operations on 1-D NumPy arrays of exactly those types,
//! borrowing them as slices (no copy) with the GIL released. The Python
//! half (`gpuhash/__init__.py`) turns dtypes, array protocols and errors
//! into what Python users expect.

use gpuhash::backend::InsertMode;
use gpuhash::{Builder, Device, Error, HashTable, InsertReport, Key, NotStored, Reduce, Scheme, Value};
use numpy::{Element, PyArray1, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::{PyException, PyMemoryError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;

pyo3::create_exception!(_gpuhash, TableFullError, PyException, "Keys found no free slot (growth off); `positions` holds their batch positions.");
pyo3::create_exception!(
    _gpuhash,
    GrowthFailedError,
    TableFullError,
    "The table could not grow part-way through an insert; `positions` holds the batch positions not stored."
);

/// The Python exception for a library error. A refused batch becomes
/// `TableFullError` (or `GrowthFailedError`) carrying the positions of the
/// keys not stored as a NumPy array, and what was stored.
fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let message = e.to_string();
    let (err, not_stored) = match e {
        Error::TableFull(n) => (TableFullError::new_err(message), Some(n)),
        Error::GrowthFailed { not_stored, .. } => (GrowthFailedError::new_err(message), Some(not_stored)),
        Error::LengthMismatch { .. }
        | Error::ZeroCapacity
        | Error::CapacityTooLarge { .. }
        | Error::InvalidLoadFactor(_)
        | Error::InvalidProbeLimit
        | Error::Unsupported(_) => return PyValueError::new_err(message),
        Error::OutOfMemory { .. } => return PyMemoryError::new_err(message),
        _ => return PyRuntimeError::new_err(message),
    };
    if let Some(n) = not_stored {
        if let Err(set) = attach_not_stored(py, &err, &n) {
            return set;
        }
    }
    err
}

fn attach_not_stored(py: Python<'_>, err: &PyErr, n: &NotStored) -> PyResult<()> {
    let value = err.value(py);
    let positions: Vec<u64> = n.positions.iter().map(|&p| p as u64).collect();
    value.setattr("positions", PyArray1::from_vec(py, positions))?;
    value.setattr("inserted", n.report.inserted)?;
    value.setattr("existing", n.report.existing)?;
    Ok(())
}

/// The table, for each pair of key and value types.
enum AnyTable {
    U32U32(HashTable<u32, u32>),
    U32U64(HashTable<u32, u64>),
    U32I32(HashTable<u32, i32>),
    U32I64(HashTable<u32, i64>),
    U32F32(HashTable<u32, f32>),
    U32F64(HashTable<u32, f64>),
    U64U32(HashTable<u64, u32>),
    U64U64(HashTable<u64, u64>),
    U64I32(HashTable<u64, i32>),
    U64I64(HashTable<u64, i64>),
    U64F32(HashTable<u64, f32>),
    U64F64(HashTable<u64, f64>),
}

/// Runs `$body` with `$t` bound to the typed table, whichever it is.
macro_rules! each_table {
    ($table:expr, $t:ident => $body:expr) => {
        match $table {
            AnyTable::U32U32($t) => $body,
            AnyTable::U32U64($t) => $body,
            AnyTable::U32I32($t) => $body,
            AnyTable::U32I64($t) => $body,
            AnyTable::U32F32($t) => $body,
            AnyTable::U32F64($t) => $body,
            AnyTable::U64U32($t) => $body,
            AnyTable::U64U64($t) => $body,
            AnyTable::U64I32($t) => $body,
            AnyTable::U64I64($t) => $body,
            AnyTable::U64F32($t) => $body,
            AnyTable::U64F64($t) => $body,
        }
    };
}

impl AnyTable {
    fn build(b: Builder, key: &str, value: &str) -> PyResult<Result<AnyTable, Error>> {
        Ok(match (key, value) {
            ("uint32", "uint32") => b.build().map(AnyTable::U32U32),
            ("uint32", "uint64") => b.build().map(AnyTable::U32U64),
            ("uint32", "int32") => b.build().map(AnyTable::U32I32),
            ("uint32", "int64") => b.build().map(AnyTable::U32I64),
            ("uint32", "float32") => b.build().map(AnyTable::U32F32),
            ("uint32", "float64") => b.build().map(AnyTable::U32F64),
            ("uint64", "uint32") => b.build().map(AnyTable::U64U32),
            ("uint64", "uint64") => b.build().map(AnyTable::U64U64),
            ("uint64", "int32") => b.build().map(AnyTable::U64I32),
            ("uint64", "int64") => b.build().map(AnyTable::U64I64),
            ("uint64", "float32") => b.build().map(AnyTable::U64F32),
            ("uint64", "float64") => b.build().map(AnyTable::U64F64),
            _ => {
                return Err(PyTypeError::new_err(format!(
                    "unsupported key/value dtypes {key}/{value}: keys are uint32 or uint64, values uint32, uint64, int32, int64, float32 or float64"
                )))
            }
        })
    }
}

/// `x` as a contiguous 1-D array of `T`, or a `TypeError` naming `what`.
fn typed<'a, 'py, T: Element>(x: &'a Bound<'py, PyAny>, what: &str) -> PyResult<&'a Bound<'py, PyArray1<T>>> {
    let a = x.cast::<PyArray1<T>>().map_err(|_| {
        let dtype = x.getattr("dtype").map(|d| d.to_string()).unwrap_or_else(|_| x.get_type().to_string());
        PyTypeError::new_err(format!("{what} must be a 1-D array of {}, got {dtype}", T::get_dtype(x.py())))
    })?;
    if !a.is_c_contiguous() {
        return Err(PyValueError::new_err(format!("{what} must be contiguous")));
    }
    Ok(a)
}

fn check_len(op: &str, keys: usize, other: usize, what: &str) -> PyResult<()> {
    if keys != other {
        return Err(PyValueError::new_err(format!("{op}: {keys} keys but {other} {what}")));
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Insert {
    Assign,
    IfAbsent,
    Apply(Reduce),
}

fn insert<K, V>(py: Python<'_>, t: &mut HashTable<K, V>, keys: &Bound<'_, PyAny>, values: &Bound<'_, PyAny>, how: Insert) -> PyResult<(u64, u64)>
where
    K: Key + Element,
    V: Value + Element,
{
    let (k, v) = (typed::<K>(keys, "keys")?.readonly(), typed::<V>(values, "values")?.readonly());
    let (ks, vs) = (k.as_slice()?, v.as_slice()?);
    check_len("insert", ks.len(), vs.len(), "values")?;
    let r: Result<InsertReport, Error> = py.detach(|| match how {
        Insert::Assign => t.insert_or_assign(ks, vs),
        Insert::IfAbsent => t.insert_if_absent(ks, vs),
        Insert::Apply(op) => t.insert_or_apply(ks, vs, op),
    });
    let r = r.map_err(|e| to_py(py, e))?;
    Ok((r.inserted, r.existing))
}

fn find<'py, K, V>(py: Python<'py>, t: &HashTable<K, V>, keys: &Bound<'py, PyAny>) -> PyResult<(Bound<'py, PyArray1<V>>, Bound<'py, PyArray1<bool>>)>
where
    K: Key + Element,
    V: Value + Element,
{
    let k = typed::<K>(keys, "keys")?.readonly();
    let ks = k.as_slice()?;
    let values = PyArray1::<V>::zeros(py, ks.len(), false);
    let found = PyArray1::<bool>::zeros(py, ks.len(), false);
    {
        let (mut vw, mut fw) = (values.readwrite(), found.readwrite());
        let (vs, fs) = (vw.as_slice_mut()?, fw.as_slice_mut()?);
        py.detach(|| t.find_into(ks, vs, fs)).map_err(|e| to_py(py, e))?;
    }
    Ok((values, found))
}

fn contains<'py, K, V>(py: Python<'py>, t: &HashTable<K, V>, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<bool>>>
where
    K: Key + Element,
    V: Value + Element,
{
    let k = typed::<K>(keys, "keys")?.readonly();
    let ks = k.as_slice()?;
    let found = PyArray1::<bool>::zeros(py, ks.len(), false);
    {
        let mut fw = found.readwrite();
        let fs = fw.as_slice_mut()?;
        py.detach(|| t.contains_into(ks, fs)).map_err(|e| to_py(py, e))?;
    }
    Ok(found)
}

fn erase<K, V>(py: Python<'_>, t: &mut HashTable<K, V>, keys: &Bound<'_, PyAny>) -> PyResult<u64>
where
    K: Key + Element,
    V: Value + Element,
{
    let k = typed::<K>(keys, "keys")?.readonly();
    let ks = k.as_slice()?;
    py.detach(|| t.erase(ks)).map_err(|e| to_py(py, e))
}

fn export<'py, K, V>(py: Python<'py>, t: &HashTable<K, V>) -> PyResult<(Bound<'py, PyArray1<K>>, Bound<'py, PyArray1<V>>)>
where
    K: Key + Element,
    V: Value + Element,
{
    let (k, v) = py.detach(|| t.export()).map_err(|e| to_py(py, e))?;
    Ok((PyArray1::from_vec(py, k), PyArray1::from_vec(py, v)))
}

// ---- arrays in CUDA device memory (CuPy, PyTorch, ...), used in place ----
//
// The Python half passes each array's device address, the batch length and
// the caller's stream (a `CUstream` value; 0 or 1 for the legacy default
// stream, 2 for the per-thread one). The table's stream first waits for
// the caller's, so work the caller queued before (that wrote the keys)
// comes first; every call returns once its results are written.

fn not_cuda<K: Key, V: Value>(t: &HashTable<K, V>) -> Error {
    Error::Unsupported(format!("arrays in CUDA device memory need a CUDA table; this one is on {}", t.device()))
}

/// `Ok(())` after the table's stream waited for `stream`.
fn enter<K: Key, V: Value>(t: &HashTable<K, V>, stream: u64) -> Result<(), Error> {
    let c = t.cuda().ok_or_else(|| not_cuda(t))?;
    // Safety: `stream` is the caller's live stream (or 0, 1, 2).
    unsafe { c.wait_for_stream(stream) }
}

fn insert_dev<K: Key, V: Value>(t: &mut HashTable<K, V>, keys: u64, values: u64, n: usize, mode: InsertMode, stream: u64) -> Result<InsertReport, Error> {
    enter(t, stream)?;
    let c = t.cuda().ok_or_else(|| not_cuda(t))?;
    // Safety: the Python half holds both arrays (n elements each) for the call.
    let (k, v) = unsafe { (c.borrow_device::<K>(keys, n, "keys")?, c.borrow_device::<V>(values, n, "values")?) };
    t.insert_device(&k.view(), &v.view(), mode)
}

fn find_dev<K: Key, V: Value>(t: &HashTable<K, V>, keys: u64, n: usize, values: u64, found: u64, stream: u64) -> Result<u64, Error> {
    enter(t, stream)?;
    let c = t.cuda().ok_or_else(|| not_cuda(t))?;
    // Safety: the Python half holds the keys and both outputs (n elements each).
    let (k, mut v, mut f) = unsafe {
        (c.borrow_device::<K>(keys, n, "keys")?, c.borrow_device::<V>(values, n, "values")?, c.borrow_device::<u8>(found, n, "found")?)
    };
    c.find_device(&k.view(), &mut v.view_mut(), &mut f.view_mut())
}

fn contains_dev<K: Key, V: Value>(t: &HashTable<K, V>, keys: u64, n: usize, found: u64, stream: u64) -> Result<u64, Error> {
    enter(t, stream)?;
    let c = t.cuda().ok_or_else(|| not_cuda(t))?;
    // Safety: the Python half holds the keys and the output (n elements each).
    let (k, mut f) = unsafe { (c.borrow_device::<K>(keys, n, "keys")?, c.borrow_device::<u8>(found, n, "found")?) };
    c.contains_device(&k.view(), &mut f.view_mut())
}

fn erase_dev<K: Key, V: Value>(t: &mut HashTable<K, V>, keys: u64, n: usize, stream: u64) -> Result<u64, Error> {
    enter(t, stream)?;
    let c = t.cuda_mut().ok_or_else(|| Error::Unsupported("arrays in CUDA device memory need a CUDA table".into()))?;
    // Safety: the Python half holds the keys (n elements) for the call.
    let k = unsafe { c.borrow_device::<K>(keys, n, "keys")? };
    c.erase_device(&k.view())
}

fn insert_mode(how: &str) -> PyResult<InsertMode> {
    Ok(match how {
        "assign" => InsertMode::Assign,
        "if_absent" => InsertMode::IfAbsent,
        op => InsertMode::Apply(reduce(op)?),
    })
}

/// A gpuhash table; built by `gpuhash.HashTable`, which checks its arrays.
#[pyclass(module = "gpuhash._gpuhash", unsendable)]
struct Table {
    table: AnyTable,
}

fn parse<T: std::str::FromStr<Err = String>>(s: &str) -> PyResult<T> {
    s.parse().map_err(PyValueError::new_err)
}

fn reduce(op: &str) -> PyResult<Reduce> {
    match op {
        "sum" => Ok(Reduce::Sum),
        "min" => Ok(Reduce::Min),
        "max" => Ok(Reduce::Max),
        _ => Err(PyValueError::new_err(format!("unknown reduction '{op}' (expected sum, min or max)"))),
    }
}

#[pymethods]
impl Table {
    #[new]
    #[pyo3(signature = (key_dtype, value_dtype, capacity, device, scheme, growth, max_load_factor, seed))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        key_dtype: &str,
        value_dtype: &str,
        capacity: u64,
        device: &str,
        scheme: &str,
        growth: bool,
        max_load_factor: Option<f64>,
        seed: Option<u64>,
    ) -> PyResult<Self> {
        let mut b = HashTable::<u32, u32>::builder()
            .device(parse::<Device>(device)?)
            .scheme(parse::<Scheme>(scheme)?)
            .capacity(capacity)
            .growth(growth);
        if let Some(l) = max_load_factor {
            b = b.max_load_factor(l);
        }
        if let Some(s) = seed {
            b = b.seed(s);
        }
        let table = py.detach(|| AnyTable::build(b, key_dtype, value_dtype))?.map_err(|e| to_py(py, e))?;
        Ok(Table { table })
    }

    fn insert(&mut self, py: Python<'_>, keys: &Bound<'_, PyAny>, values: &Bound<'_, PyAny>) -> PyResult<(u64, u64)> {
        each_table!(&mut self.table, t => insert(py, t, keys, values, Insert::Assign))
    }

    fn insert_if_absent(&mut self, py: Python<'_>, keys: &Bound<'_, PyAny>, values: &Bound<'_, PyAny>) -> PyResult<(u64, u64)> {
        each_table!(&mut self.table, t => insert(py, t, keys, values, Insert::IfAbsent))
    }

    fn insert_or_apply(&mut self, py: Python<'_>, keys: &Bound<'_, PyAny>, values: &Bound<'_, PyAny>, op: &str) -> PyResult<(u64, u64)> {
        let how = Insert::Apply(reduce(op)?);
        each_table!(&mut self.table, t => insert(py, t, keys, values, how))
    }

    fn find<'py>(&self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<(Py<PyAny>, Py<PyAny>)> {
        each_table!(&self.table, t => find(py, t, keys).map(|(v, f)| (v.into_any().unbind(), f.into_any().unbind())))
    }

    fn contains<'py>(&self, py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Py<PyAny>> {
        each_table!(&self.table, t => contains(py, t, keys).map(|f| f.into_any().unbind()))
    }

    fn erase(&mut self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<u64> {
        each_table!(&mut self.table, t => erase(py, t, keys))
    }

    /// Inserts `n` pairs from device addresses; `how` is assign,
    /// if_absent, sum, min or max.
    fn insert_device(&mut self, py: Python<'_>, keys: u64, values: u64, n: usize, how: &str, stream: u64) -> PyResult<(u64, u64)> {
        let mode = insert_mode(how)?;
        let r = each_table!(&mut self.table, t => py.detach(|| insert_dev(t, keys, values, n, mode, stream)));
        let r = r.map_err(|e| to_py(py, e))?;
        Ok((r.inserted, r.existing))
    }

    /// Looks up `n` keys at a device address into the `values` and
    /// `found` (one byte each) outputs; returns how many were found.
    fn find_device(&self, py: Python<'_>, keys: u64, n: usize, values: u64, found: u64, stream: u64) -> PyResult<u64> {
        each_table!(&self.table, t => py.detach(|| find_dev(t, keys, n, values, found, stream))).map_err(|e| to_py(py, e))
    }

    fn contains_device(&self, py: Python<'_>, keys: u64, n: usize, found: u64, stream: u64) -> PyResult<u64> {
        each_table!(&self.table, t => py.detach(|| contains_dev(t, keys, n, found, stream))).map_err(|e| to_py(py, e))
    }

    fn erase_device(&mut self, py: Python<'_>, keys: u64, n: usize, stream: u64) -> PyResult<u64> {
        each_table!(&mut self.table, t => py.detach(|| erase_dev(t, keys, n, stream))).map_err(|e| to_py(py, e))
    }

    fn export(&self, py: Python<'_>) -> PyResult<(Py<PyAny>, Py<PyAny>)> {
        each_table!(&self.table, t => export(py, t).map(|(k, v)| (k.into_any().unbind(), v.into_any().unbind())))
    }

    fn clear(&mut self, py: Python<'_>) -> PyResult<()> {
        each_table!(&mut self.table, t => py.detach(|| t.clear()).map_err(|e| to_py(py, e)))
    }

    fn reserve(&mut self, py: Python<'_>, additional: u64) -> PyResult<()> {
        each_table!(&mut self.table, t => py.detach(|| t.reserve(additional)).map_err(|e| to_py(py, e)))
    }

    fn rehash(&mut self, py: Python<'_>, slots: u64) -> PyResult<()> {
        each_table!(&mut self.table, t => py.detach(|| t.rehash(slots)).map_err(|e| to_py(py, e)))
    }

    fn __len__(&self) -> usize {
        each_table!(&self.table, t => t.len() as usize)
    }

    #[getter]
    fn capacity(&self) -> u64 {
        each_table!(&self.table, t => t.capacity())
    }

    #[getter]
    fn load_factor(&self) -> f64 {
        each_table!(&self.table, t => t.load_factor())
    }

    #[getter]
    fn growth(&self) -> bool {
        each_table!(&self.table, t => t.growth())
    }

    #[setter]
    fn set_growth(&mut self, on: bool) {
        each_table!(&mut self.table, t => t.set_growth(on))
    }

    #[getter]
    fn device(&self) -> String {
        each_table!(&self.table, t => t.device().to_string())
    }

    #[getter]
    fn scheme(&self) -> String {
        each_table!(&self.table, t => t.scheme().to_string())
    }
}

#[pymodule]
fn _gpuhash(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Table>()?;
    m.add("TableFullError", m.py().get_type::<TableFullError>())?;
    m.add("GrowthFailedError", m.py().get_type::<GrowthFailedError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
