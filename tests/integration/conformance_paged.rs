//! The conformance suite on paged tables, once per scheme: every table of
//! every test is split into 8 pages with 2 (CPU) or 3 (CUDA) resident at a
//! time, so every bulk call brings pages in and evicts others (the default
//! policy, which keeps each call's busiest pages, for some schemes, FIFO
//! or LRU for the others, so every policy runs the suite).
//!
//! On the CPU both the plain residency and the pipelined one (write-backs
//! as soon as a call is done with a page, the next page brought in early)
//! run; on CUDA pages live in pinned host memory and stream through device
//! tables, pipelined; the `cuda_split_*` suites split every bulk
//! call (inserts with growth, lookups, erases) by page on the device
//! (`Paging::device_split(1)`), the others only batches of 65,536 keys or
//! more. Without a CUDA device the CUDA tests print
//! `skipped: ...` (`GPUHASH_REQUIRE_CUDA=1` makes that a failure).

use gpuhash::{Device, Paging, Residency, Scheme};

const HOT: Paging = Paging::new(8, 2);
const FIFO: Paging = HOT.residency(Residency::Fifo);
const LRU: Paging = HOT.residency(Residency::Lru);
const HOT_PIPELINED: Paging = Paging::new(8, 3).pipelined(true);
const FIFO_PIPELINED: Paging = HOT_PIPELINED.residency(Residency::Fifo);
const LRU_PIPELINED: Paging = LRU.pipelined(true);
const CUDA_HOT: Paging = Paging::new(8, 3);
const CUDA_FIFO: Paging = CUDA_HOT.residency(Residency::Fifo);
const CUDA_LRU: Paging = CUDA_HOT.residency(Residency::Lru);
// Every page not resident worked on where it lies (never brought in), and
// a threshold that mixes both (pages of these tables take a few KiB).
const SPARSE_ALL: Paging = Paging::new(8, 2).sparse(0);
const SPARSE_MIXED: Paging = Paging::new(8, 2).residency(Residency::Lru).sparse(256);
const CUDA_SPLIT_HOT: Paging = CUDA_HOT.device_split(1);
const CUDA_SPLIT_FIFO: Paging = CUDA_FIFO.device_split(1);
const CUDA_SPLIT_LRU: Paging = CUDA_LRU.device_split(1);

conformance_suite!(paged_linear, Device::Cpu, Scheme::Linear, paged: FIFO);
conformance_suite!(paged_linear_lru, Device::Cpu, Scheme::Linear, paged: LRU);
conformance_suite!(paged_hashinator, Device::Cpu, Scheme::Hashinator { team: 8 }, paged: LRU);
conformance_suite!(paged_robin_hood, Device::Cpu, Scheme::RobinHood, paged: HOT);
conformance_suite!(paged_cuckoo, Device::Cpu, Scheme::Cuckoo, paged: LRU);
conformance_suite!(paged_two_level, Device::Cpu, Scheme::TwoLevel, paged: HOT);
conformance_suite!(paged_two_level_fifo, Device::Cpu, Scheme::TwoLevel, paged: FIFO);
conformance_suite!(paged_linear_pipelined, Device::Cpu, Scheme::Linear, paged: HOT_PIPELINED);
conformance_suite!(paged_robin_hood_pipelined, Device::Cpu, Scheme::RobinHood, paged: FIFO_PIPELINED);
conformance_suite!(paged_cuckoo_pipelined, Device::Cpu, Scheme::Cuckoo, paged: LRU_PIPELINED);

conformance_suite!(cuda_paged_linear, Device::Cuda(0), Scheme::Linear, paged: CUDA_FIFO);
conformance_suite!(cuda_paged_linear_lru, Device::Cuda(0), Scheme::Linear, paged: CUDA_LRU);
conformance_suite!(cuda_paged_hashinator, Device::Cuda(0), Scheme::Hashinator { team: 8 }, paged: CUDA_FIFO);
conformance_suite!(cuda_paged_robin_hood, Device::Cuda(0), Scheme::RobinHood, paged: CUDA_LRU);
conformance_suite!(cuda_paged_cuckoo, Device::Cuda(0), Scheme::Cuckoo, paged: CUDA_HOT);
conformance_suite!(cuda_paged_two_level, Device::Cuda(0), Scheme::TwoLevel, paged: CUDA_LRU);

// The split is the same for every scheme (each page's own kernels run on
// its range of keys), so a few schemes and both policies cover it, cuckoo
// for the refusals of a bounded scheme; splitting every small call costs a
// few synchronisations each, which makes these suites slow.
conformance_suite!(cuda_split_linear, Device::Cuda(0), Scheme::Linear, paged: CUDA_SPLIT_FIFO);
conformance_suite!(cuda_split_robin_hood, Device::Cuda(0), Scheme::RobinHood, paged: CUDA_SPLIT_LRU);
conformance_suite!(cuda_split_cuckoo, Device::Cuda(0), Scheme::Cuckoo, paged: CUDA_SPLIT_HOT);

// Sparse pages worked on in place, on the host and split on the device.
conformance_suite!(paged_sparse_linear, Device::Cpu, Scheme::Linear, paged: SPARSE_ALL);
conformance_suite!(paged_sparse_two_level, Device::Cpu, Scheme::TwoLevel, paged: SPARSE_MIXED);
conformance_suite!(cuda_sparse_robin_hood, Device::Cuda(0), Scheme::RobinHood, paged: SPARSE_MIXED.device_split(1));
// Every lookup of a page not resident read by the GPU where the page lies
// (zero-copy); writes bring pages in. The bounded schemes, whose lookups
// also read their scheme words.
const ZERO_COPY_ALL: Paging = CUDA_FIFO.device_split(1).zero_copy(0).sparse(u64::MAX).host_lookups(false);
conformance_suite!(cuda_zero_copy_cuckoo, Device::Cuda(0), Scheme::Cuckoo, paged: ZERO_COPY_ALL);
conformance_suite!(cuda_zero_copy_two_level, Device::Cuda(0), Scheme::TwoLevel, paged: ZERO_COPY_ALL);
// The same pages shared with the host's cores while the GPU works on the
// others (the default; there a page it would bring in may go to the host
// too, which the cuda_split_* suites cover).
const BESIDE_ALL: Paging = CUDA_LRU.device_split(1).zero_copy(0).sparse(u64::MAX).host_lookups(true);
conformance_suite!(cuda_beside_linear, Device::Cuda(0), Scheme::Linear, paged: BESIDE_ALL);
conformance_suite!(cuda_beside_two_level, Device::Cuda(0), Scheme::TwoLevel, paged: BESIDE_ALL);
