//! The pure core: slot layout, hashing, probe sequence and capacity math.
//!
//! Nothing in here touches table memory, so every rule the backends share is
//! unit-testable on its own, and the CUDA sources receive the very same
//! constants (see [`constants::cuda_header`]).

pub mod capacity;
pub mod constants;
pub mod cuckoo;
pub mod hash;
pub mod keys;
pub mod layout;
pub mod probe;
pub mod scheme;
pub mod slab;
