//! What kind of memory a table's slots live in.

/// Where a table's slots are allocated (see [`Builder::memory`](crate::Builder::memory)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Memory {
    /// The device's own memory (the default): host memory for the CPU
    /// backend, GPU memory for CUDA.
    #[default]
    Device,
    /// CUDA managed (unified) memory: the slots can also be read by the
    /// host directly (`CudaTable::host_find`), migrating to the GPU before
    /// kernels run and to the host before host reads. CUDA only, and only
    /// up to the GPU's free memory (no oversubscription). Rehashes keep it.
    Unified,
}
