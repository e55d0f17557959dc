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
    /// kernels run and to the host before host reads. CUDA only. A table
    /// may take more than the GPU's free memory (other allocations crowd
    /// it; its pages then migrate on demand, evicting each other, which is
    /// slow) but not more than the whole GPU: for tables larger than the
    /// device, see [`Builder::paged`](crate::Builder::paged). Rehashes keep it.
    Unified,
}
