//! The wgpu device a table runs on: adapter, device and queue (opened once
//! per process and shared by every table), the compiled pipelines, and the
//! buffer work the table does (allocations, uploads, dispatches,
//! read-backs). Every call into wgpu that can fail runs inside error scopes,
//! so a device error comes back as [`Error::Device`] or
//! [`Error::OutOfMemory`] instead of wgpu's default panic.
//!
//! The work is written once, as `async` functions that await what the GPU
//! reports (error scopes, buffer mapping): a browser delivers those through
//! its event loop, so there they must be awaited, while native callers block
//! on the same futures (they are ready once `device.poll` has waited).

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};

use wgpu::util::DeviceExt;

use crate::core::constants::wgsl_header;
use crate::core::keys::{Key, Reduce, Value, ValueKind};
use crate::core::layout::Word;
use crate::core::scheme::Scheme;
use crate::core::slab::SLABS_PER_HEAD;
use crate::{Device, Error, Result};

use super::slab_list;

/// Invocations per workgroup of every entry point (`@workgroup_size(256)`).
pub(crate) const WORKGROUP: u32 = 256;

/// The WGSL shared by every scheme (`kernels/wgsl/common.wgsl`).
pub const COMMON_SOURCE: &str = include_str!("../../../kernels/wgsl/common.wgsl");
/// The linear scheme's probe sequence and claims (`kernels/wgsl/linear.wgsl`).
pub const LINEAR_SOURCE: &str = include_str!("../../../kernels/wgsl/linear.wgsl");
/// The single-pass insert of 16-byte slots on adapters with 64-bit
/// atomics, over a scheme's claim of a key field (`kernels/wgsl/wide.wgsl`).
pub const WIDE_SOURCE: &str = include_str!("../../../kernels/wgsl/wide.wgsl");
/// The linear scheme's claim of a 16-byte slot's key field on adapters with
/// 64-bit atomics (`kernels/wgsl/linear_wide.wgsl`).
pub const LINEAR_WIDE_SOURCE: &str = include_str!("../../../kernels/wgsl/linear_wide.wgsl");
/// The slab-list scheme's chains and second passes (`kernels/wgsl/slab_list.wgsl`).
pub const SLAB_LIST_SOURCE: &str = include_str!("../../../kernels/wgsl/slab_list.wgsl");
/// The cuckoo and two-level schemes' candidates, spill areas (stash,
/// overflow) and placement (`kernels/wgsl/cuckoo.wgsl`).
pub const CUCKOO_SOURCE: &str = include_str!("../../../kernels/wgsl/cuckoo.wgsl");
/// The cuckoo and two-level schemes' claim of a 16-byte slot's key field
/// on adapters with 64-bit atomics (`kernels/wgsl/cuckoo_wide.wgsl`).
pub const CUCKOO_WIDE_SOURCE: &str = include_str!("../../../kernels/wgsl/cuckoo_wide.wgsl");
/// Lookups reading whole buckets, for the linear and cuckoo schemes
/// (`kernels/wgsl/lines.wgsl`).
pub const LINES_SOURCE: &str = include_str!("../../../kernels/wgsl/lines.wgsl");
/// The bulk operations' entry points (`kernels/wgsl/bulk.wgsl`).
pub const BULK_SOURCE: &str = include_str!("../../../kernels/wgsl/bulk.wgsl");
/// Insert-or-apply's reductions, one atomic per value (`kernels/wgsl/fold.wgsl`).
pub const FOLD_SOURCE: &str = include_str!("../../../kernels/wgsl/fold.wgsl");
/// The same with subgroup operations, combining a subgroup's copies of a
/// key first (`kernels/wgsl/fold_subgroups.wgsl`).
pub const FOLD_SUBGROUPS_SOURCE: &str = include_str!("../../../kernels/wgsl/fold_subgroups.wgsl");

/// "No slot" in the shaders' results (`GH_NONE`): the key is absent, or
/// found no free slot.
pub(crate) const NONE: u32 = u32::MAX;
/// In a flags list entry: the position holds an out-of-band key, not a refused one.
pub(crate) const SPECIAL_BIT: u32 = 1 << 31;
/// A claim the scheme decides in its second pass (`GH_DEFERRED`): never a
/// slot (a slot index has at most 31 bits) nor [`NONE`].
pub(crate) const DEFERRED: u32 = u32::MAX - 1;

/// The schemes this backend implements: each is one WGSL module (its probe
/// sequence and claims, and any entry points of its own) between the shared
/// code and the bulk entry points.
pub const SCHEMES: [Scheme; 4] = [Scheme::Linear, Scheme::SlabList, Scheme::Cuckoo, Scheme::TwoLevel];

/// The scheme's own WGSL (`kernels/wgsl/<scheme>.wgsl`), or `None` for a
/// scheme this backend does not implement.
pub fn scheme_source(scheme: Scheme) -> Option<&'static str> {
    match scheme {
        Scheme::Linear => Some(LINEAR_SOURCE),
        Scheme::SlabList => Some(SLAB_LIST_SOURCE),
        Scheme::Cuckoo | Scheme::TwoLevel => Some(CUCKOO_SOURCE),
        _ => None,
    }
}

/// What a pipeline is compiled for: the scheme, the slot width and the
/// widths (in 32-bit words) of the caller's key and value arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    /// One of [`SCHEMES`].
    pub scheme: Scheme,
    /// Bytes per slot: 8 (32-bit key and value) or 16.
    pub slot_bytes: usize,
    /// Words per key in the caller's arrays: 1 (`u32`) or 2 (`u64`).
    pub key_words: u32,
    /// Words per value in the caller's arrays: 1 or 2.
    pub value_words: u32,
    /// Compiled with 64-bit atomics ([`Variant::atomics64_apply`]).
    pub atomics64: bool,
    /// Compiled with subgroup operations (insert-or-apply's reductions).
    pub subgroups: bool,
}

/// The optional device capabilities a table's kernels may use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// 64-bit integers and every 64-bit atomic: a single-pass insert for
    /// the linear scheme's 16-byte slots, and the cuckoo scheme's first
    /// phase without representatives.
    pub atomics64: bool,
    /// Subgroup operations: an insert-or-apply combines the values of a
    /// subgroup's copies of a key before one atomic reduces them.
    pub subgroups: bool,
}

/// Every (slot bytes, key words, value words) a table can have.
const WIDTHS: [(usize, u32, u32); 4] = [(8, 1, 1), (16, 1, 2), (16, 2, 1), (16, 2, 2)];

impl Variant {
    /// Every combination a table can have.
    pub fn all() -> impl Iterator<Item = Variant> {
        SCHEMES.into_iter().flat_map(|scheme| {
            WIDTHS.into_iter().flat_map(move |(slot_bytes, key_words, value_words)| {
                let v = Variant { scheme, slot_bytes, key_words, value_words, atomics64: false, subgroups: false };
                let wide = Variant { atomics64: true, ..v };
                std::iter::once(v)
                    .chain(Variant::atomics64_apply(scheme, slot_bytes).then_some(wide))
                    .flat_map(|v| [v, Variant { subgroups: true, ..v }])
            })
        })
    }

    /// The variant of a `scheme` table with keys `K` and values `V` on a
    /// device with `caps` (64-bit atomics where they apply to it).
    pub fn of<K: Key, V: Value>(scheme: Scheme, caps: Capabilities) -> Variant {
        let slot_bytes = <K::Word<V> as Word>::BYTES;
        Variant {
            scheme,
            slot_bytes,
            key_words: K::BITS / 32,
            value_words: V::KIND.bits() / 32,
            atomics64: caps.atomics64 && Variant::atomics64_apply(scheme, slot_bytes),
            subgroups: caps.subgroups,
        }
    }

    /// Whether tables of `scheme` with `slot_bytes`-byte slots have kernels
    /// for 64-bit atomics: the linear and cuckoo schemes' 16-byte slots
    /// (two-level included), whose keys 32-bit atomics cannot claim whole.
    pub fn atomics64_apply(scheme: Scheme, slot_bytes: usize) -> bool {
        matches!(scheme, Scheme::Linear | Scheme::Cuckoo | Scheme::TwoLevel) && slot_bytes == 16
    }

    /// Whether `scheme`'s lookups read whole buckets (`kernels/wgsl/lines.wgsl`).
    pub fn reads_lines(scheme: Scheme) -> bool {
        matches!(scheme, Scheme::Linear | Scheme::Cuckoo | Scheme::TwoLevel)
    }

    /// Whether `scheme` runs the cuckoo module (`kernels/wgsl/cuckoo.wgsl`):
    /// candidate buckets, a spill area and a second phase of eviction paths.
    pub fn cuckoo(scheme: Scheme) -> bool {
        matches!(scheme, Scheme::Cuckoo | Scheme::TwoLevel)
    }

    fn index(self) -> usize {
        Variant::all().position(|v| v == self).expect("every table's variant is listed")
    }
}

/// Compiled variants at most (each with and without 64-bit atomics and
/// subgroup operations).
const VARIANTS: usize = SCHEMES.len() * WIDTHS.len() * 4;

/// The complete WGSL module of a variant: the constants emitted from the
/// Rust core and this backend, then the shared code, the scheme and the
/// entry points.
pub fn shader_source(v: Variant) -> String {
    let header = if v.slot_bytes == 8 { wgsl_header::<u64>() } else { wgsl_header::<u128>() };
    let (empty, tomb) = if v.key_words == 1 { (u32::MAX as u64, (u32::MAX - 1) as u64) } else { (u64::MAX, u64::MAX - 1) };
    let mut c = String::new();
    let mut def = |name: &str, x: u64| c += &format!("const {name}: u32 = 0x{:08x}u;\n", x as u32);
    def("GH_NONE", NONE as u64);
    def("GH_KEY_WORDS", v.key_words as u64);
    def("GH_VALUE_WORDS", v.value_words as u64);
    def("GH_KEY_EMPTY_LO", empty);
    def("GH_KEY_EMPTY_HI", empty >> 32);
    def("GH_KEY_TOMBSTONE_LO", tomb);
    def("GH_KEY_TOMBSTONE_HI", tomb >> 32);
    def("GH_SPECIAL_BIT", SPECIAL_BIT as u64);
    def("GH_NEW_BIT", 1 << 31);
    def("GH_SPECIAL_ITEM", NONE as u64);
    def("GH_REP_BIT", 1 << 31);
    def("GH_REP_NEW", 1 << 30);
    def("GH_REP_SLOT", (1 << 30) - 1);
    def("GH_REP_PENDING", (1 << 31) | ((1 << 30) - 1));
    def("GH_REP_REFUSED", (1 << 31) | ((1 << 30) - 2));
    def("GH_REP_NO_PATH", (1 << 31) | ((1 << 30) - 3));
    def("GH_DEFERRED", DEFERRED as u64);
    // The cuckoo schemes defer keys with every candidate full to their phase 2.
    let defers = !slab_list::later_passes(v.scheme, Kernel::InsertDirect).is_empty() || Variant::cuckoo(v.scheme);
    def("GH_DEFERS", defers as u64);
    def("GH_SLABS_PER_HEAD", SLABS_PER_HEAD);
    def("GH_MODE_ASSIGN", MODE_ASSIGN as u64);
    def("GH_MODE_IF_ABSENT", MODE_IF_ABSENT as u64);
    def("GH_MODE_APPLY", MODE_APPLY as u64);
    for op in [Reduce::Sum, Reduce::Min, Reduce::Max] {
        def(&format!("GH_REDUCE_{}", format!("{op:?}").to_uppercase()), op.code() as u64);
    }
    for (name, kind) in [
        ("U32", ValueKind::U32),
        ("I32", ValueKind::I32),
        ("F32", ValueKind::F32),
        ("U64", ValueKind::U64),
        ("I64", ValueKind::I64),
        ("F64", ValueKind::F64),
    ] {
        def(&format!("GH_KIND_{name}"), kind.code() as u64);
    }
    if Variant::cuckoo(v.scheme) {
        c += &super::cuckoo::wgsl_constants(v.slot_bytes, v.scheme == Scheme::TwoLevel);
    }
    let scheme = scheme_source(v.scheme).expect("a variant's scheme is one of SCHEMES");
    let wide = match v.scheme {
        _ if !v.atomics64 => String::new(),
        Scheme::Cuckoo | Scheme::TwoLevel => format!("{WIDE_SOURCE}\n{CUCKOO_WIDE_SOURCE}"),
        _ => format!("{WIDE_SOURCE}\n{LINEAR_WIDE_SOURCE}"),
    };
    // Naga takes the subgroup builtins with the device feature alone (it
    // rejects `enable subgroups;`, the standard's directive, so far).
    let fold = if v.subgroups { FOLD_SUBGROUPS_SOURCE } else { FOLD_SOURCE };
    let lines = if Variant::reads_lines(v.scheme) { LINES_SOURCE } else { "" };
    format!("{header}{c}\n{COMMON_SOURCE}\n{fold}\n{scheme}\n{lines}\n{BULK_SOURCE}\n{wide}")
}

/// `Params::mode` of an insert.
pub(crate) const MODE_ASSIGN: u32 = 0;
pub(crate) const MODE_IF_ABSENT: u32 = 1;
pub(crate) const MODE_APPLY: u32 = 2;

/// The entry points of a module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    FillEmpty,
    Find,
    InsertDirect,
    Fold,
    EraseDirect,
    Dedupe,
    LocateReps,
    ClaimReps,
    Settle,
    EraseLocate,
    /// Releases the slots `EraseLocate` found (the scheme's `release_slot`).
    EraseRelease,
    /// Linear and cuckoo, 16-byte slots, 64-bit atomics: the single-pass
    /// insert (the cuckoo scheme's phase 1).
    InsertWide,
    /// The slab list's second passes (`kernels/wgsl/slab_list.wgsl`).
    InsertRetry,
    InsertCarry,
    InsertDeferred,
    ClaimRepsRetry,
    ClaimRepsCarry,
    ClaimRepsDeferred,
    // The cuckoo module's own (Scheme::Cuckoo, Scheme::TwoLevel).
    DedupePending,
    CollectPending,
    PlanPaths,
    ApplyPaths,
    RetryNoPath,
    StashNoPath,
    EvictSerial,
    Relocate,
}

impl Kernel {
    /// The entry points of bulk.wgsl, in every module.
    pub(super) const BULK: [Kernel; 11] = [
        Kernel::FillEmpty,
        Kernel::Find,
        Kernel::InsertDirect,
        Kernel::Fold,
        Kernel::EraseDirect,
        Kernel::Dedupe,
        Kernel::LocateReps,
        Kernel::ClaimReps,
        Kernel::Settle,
        Kernel::EraseLocate,
        Kernel::EraseRelease,
    ];
    /// The entry points of a variant's module: the bulk ones, then the
    /// scheme's own; pipelines are compiled and found in this order.
    fn of(v: Variant) -> &'static [Kernel] {
        const LINEAR_WIDE: [Kernel; 12] = Kernel::bulk_then(&[Kernel::InsertWide]);
        match v.scheme {
            Scheme::Linear if v.atomics64 => &LINEAR_WIDE,
            Scheme::SlabList => &slab_list::KERNELS,
            Scheme::Cuckoo | Scheme::TwoLevel if v.atomics64 => &Kernel::CUCKOO_WIDE,
            Scheme::Cuckoo | Scheme::TwoLevel => &Kernel::CUCKOO,
            _ => &Kernel::BULK,
        }
    }

    const CUCKOO: [Kernel; 19] = Kernel::bulk_then(&[
        Kernel::DedupePending,
        Kernel::CollectPending,
        Kernel::PlanPaths,
        Kernel::ApplyPaths,
        Kernel::RetryNoPath,
        Kernel::StashNoPath,
        Kernel::EvictSerial,
        Kernel::Relocate,
    ]);
    /// The cuckoo kernels and the 64-bit claim of 16-byte slots.
    const CUCKOO_WIDE: [Kernel; 20] = Kernel::concat(&Kernel::CUCKOO, &[Kernel::InsertWide]);

    /// The shared bulk kernels followed by a scheme's own.
    pub(super) const fn bulk_then<const N: usize>(own: &[Kernel]) -> [Kernel; N] {
        Kernel::concat(&Kernel::BULK, own)
    }

    /// `first` then `then`, as one list of `N` kernels.
    const fn concat<const N: usize>(first: &[Kernel], then: &[Kernel]) -> [Kernel; N] {
        assert!(first.len() + then.len() == N);
        let mut all = [Kernel::FillEmpty; N];
        let mut i = 0;
        while i < N {
            all[i] = if i < first.len() { first[i] } else { then[i - first.len()] };
            i += 1;
        }
        all
    }

    fn entry(self) -> &'static str {
        match self {
            Kernel::FillEmpty => "fill_empty",
            Kernel::Find => "find",
            Kernel::InsertDirect => "insert_direct",
            Kernel::Fold => "fold",
            Kernel::EraseDirect => "erase_direct",
            Kernel::Dedupe => "dedupe",
            Kernel::LocateReps => "locate_reps",
            Kernel::ClaimReps => "claim_reps",
            Kernel::Settle => "settle",
            Kernel::EraseLocate => "erase_locate",
            Kernel::EraseRelease => "erase_release",
            Kernel::InsertWide => "insert_wide",
            Kernel::InsertRetry => "insert_retry",
            Kernel::InsertCarry => "insert_carry",
            Kernel::InsertDeferred => "insert_deferred",
            Kernel::ClaimRepsRetry => "claim_reps_retry",
            Kernel::ClaimRepsCarry => "claim_reps_carry",
            Kernel::ClaimRepsDeferred => "claim_reps_deferred",
            Kernel::DedupePending => "dedupe_pending",
            Kernel::CollectPending => "collect_pending",
            Kernel::PlanPaths => "plan_paths",
            Kernel::ApplyPaths => "apply_paths",
            Kernel::RetryNoPath => "retry_no_path",
            Kernel::StashNoPath => "stash_no_path",
            Kernel::EvictSerial => "evict_serial",
            Kernel::Relocate => "relocate",
        }
    }
}

/// One opened adapter, shared by the tables on it.
pub(crate) struct Gpu {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) info: wgpu::AdapterInfo,
    pub(crate) limits: wgpu::Limits,
    /// What the device was opened with: 64-bit integers and every 64-bit
    /// atomic, subgroup operations (each enabled when the adapter offers
    /// it; neither in a browser).
    pub(crate) caps: Capabilities,
    layout: wgpu::BindGroupLayout,
    pipeline_layout: wgpu::PipelineLayout,
    /// Pipelines per [`Variant`], compiled on first use.
    pipelines: [OnceLock<std::result::Result<Vec<wgpu::ComputePipeline>, String>>; VARIANTS],
    /// Bound where an entry point reads nothing (every binding must be bound).
    placeholder: wgpu::Buffer,
    /// Bound where an entry point writes nothing: one per writable binding,
    /// so no buffer is bound writable twice.
    placeholder_rw: [wgpu::Buffer; 5],
}

fn instance() -> wgpu::Instance {
    wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends: wgpu::Backends::all(),
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    })
}

/// The adapters wgpu finds on this machine; `Device::WgpuAdapter(i)` opens
/// the `i`th. (`Device::Wgpu` picks among them: a discrete or integrated
/// GPU before a CPU implementation such as lavapipe.)
pub fn adapters() -> Vec<wgpu::AdapterInfo> {
    pollster::block_on(instance().enumerate_adapters(wgpu::Backends::all())).iter().map(|a| a.get_info()).collect()
}

/// What `device` (`Device::Wgpu` or `Device::WgpuAdapter(i)`) runs on: the
/// adapter's name, driver and graphics backend, opening it if need be.
pub fn adapter_info(device: Device) -> Result<wgpu::AdapterInfo> {
    Ok(gpu(adapter_index(device)?)?.info.clone())
}

/// Whether `device` (a wgpu device) offers 64-bit integers and atomics, which
/// its tables with 16-byte slots use unless built portable.
pub fn offers_atomics64(device: Device) -> Result<bool> {
    Ok(offered(device)?.atomics64)
}

/// The optional capabilities `device` (a wgpu device) was opened with,
/// which its tables use unless built portable.
pub fn offered(device: Device) -> Result<Capabilities> {
    Ok(gpu(adapter_index(device)?)?.caps)
}

/// The adapter index `device` names (`None`: the default adapter).
pub(crate) fn adapter_index(device: Device) -> Result<Option<usize>> {
    match device {
        Device::Wgpu => Ok(None),
        Device::WgpuAdapter(i) => Ok(Some(i)),
        other => Err(Error::Unsupported(format!("{other} is not a wgpu device"))),
    }
}

type Opened = std::result::Result<Arc<Gpu>, String>;

/// Adapters opened so far (`None`: the default one), each once per process.
static OPENED: Mutex<Vec<(Option<usize>, Opened)>> = Mutex::new(Vec::new());

/// The default adapter (`None`) or adapter `index` of [`adapters`], opened
/// on first use and shared by every table on it; the reason when it cannot be.
pub(crate) fn gpu(index: Option<usize>) -> Result<Arc<Gpu>> {
    pollster::block_on(gpu_async(index))
}

/// [`gpu`], awaiting the adapter and device (as a browser must).
pub(crate) async fn gpu_async(index: Option<usize>) -> Result<Arc<Gpu>> {
    let device = index.map_or(Device::Wgpu, Device::WgpuAdapter);
    let cached = |opened: &[(Option<usize>, Opened)]| opened.iter().find(|(i, _)| *i == index).map(|(_, r)| r.clone());
    let lock = || OPENED.lock().unwrap_or_else(|p| p.into_inner());
    let known = cached(&lock());
    let found = match known {
        Some(r) => r,
        // Opened without the lock held (the lock is not held across an
        // await); if two callers race, the first one stored wins.
        None => {
            let r = open(index).await.map(Arc::new);
            let mut opened = lock();
            match cached(&opened) {
                Some(first) => first,
                None => {
                    opened.push((index, r.clone()));
                    r
                }
            }
        }
    };
    found.map_err(|reason| Error::Unavailable { device: device.to_string(), reason })
}

async fn open(index: Option<usize>) -> std::result::Result<Gpu, String> {
    let instance = instance();
    let adapter = match index {
        Some(i) => {
            let all = instance.enumerate_adapters(wgpu::Backends::all()).await;
            let found = all.len();
            all.into_iter().nth(i).ok_or_else(|| format!("no wgpu adapter with index {i} ({found} found)"))?
        }
        // A hardware adapter if there is one, else a CPU implementation.
        None => {
            let mut chosen = None;
            for fallback in [false, true] {
                let options = wgpu::RequestAdapterOptions {
                    power_preference: wgpu::PowerPreference::HighPerformance,
                    force_fallback_adapter: fallback,
                    ..Default::default()
                };
                if let Ok(a) = instance.request_adapter(&options).await {
                    chosen = Some(a);
                    break;
                }
            }
            chosen.ok_or_else(|| "no wgpu adapter (no Vulkan, Metal, DX12 or WebGPU implementation found)".to_string())?
        }
    };
    let info = adapter.get_info();
    // Everything the adapter offers: the largest tables it can hold. The
    // shaders need only 32-bit atomics; 64-bit ones, where offered, give
    // 16-byte slots a single-pass insert (wide.wgsl).
    let limits = adapter.limits();
    let wide = wgpu::Features::SHADER_INT64 | wgpu::Features::SHADER_INT64_ATOMIC_ALL_OPS;
    let offered = adapter.features();
    let caps = Capabilities { atomics64: offered.contains(wide), subgroups: offered.contains(wgpu::Features::SUBGROUP) };
    let mut required = wgpu::Features::empty();
    required.set(wide, caps.atomics64);
    required.set(wgpu::Features::SUBGROUP, caps.subgroups);
    let (device, queue) = adapter
        .request_device(&wgpu::DeviceDescriptor {
            label: Some("gpuhash"),
            required_features: required,
            required_limits: limits.clone(),
            ..Default::default()
        })
        .await
        .map_err(|e| format!("{} ({:?}): {e}", info.name, info.backend))?;
    // Errors are caught by scopes around each call; anything that escapes
    // them is reported, never a panic.
    device.on_uncaptured_error(Arc::new(|e: wgpu::Error| eprintln!("gpuhash: uncaptured wgpu error: {e}")));

    let storage = |binding: u32, read_only: bool| wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    };
    let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("gpuhash bindings"),
        entries: &[
            wgpu::BindGroupLayoutEntry {
                binding: 0,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            },
            storage(1, false),
            storage(2, false),
            storage(3, true),
            storage(4, true),
            storage(5, false),
            storage(6, false),
            storage(7, false),
            storage(8, false),
        ],
    });
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some("gpuhash pipeline layout"),
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    let placeholder = |label| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: 16,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        })
    };
    let placeholder_rw = std::array::from_fn(|_| placeholder("gpuhash placeholder rw"));
    let placeholder = placeholder("gpuhash placeholder");
    Ok(Gpu {
        device,
        queue,
        info,
        limits,
        caps,
        layout,
        pipeline_layout,
        pipelines: std::array::from_fn(|_| OnceLock::new()),
        placeholder,
        placeholder_rw,
    })
}

/// A byte range of a buffer, bound to one binding of a dispatch.
#[derive(Clone, Copy)]
pub(crate) struct Range<'a> {
    pub(crate) buffer: &'a wgpu::Buffer,
    pub(crate) offset: u64,
    pub(crate) bytes: u64,
}

impl<'a> Range<'a> {
    /// The whole of `buffer`.
    pub(crate) fn all(buffer: &'a wgpu::Buffer) -> Self {
        Range { buffer, offset: 0, bytes: buffer.size() }
    }

    /// Words `first..first + count` of `buffer`, `width` words per item
    /// (a binding of at least 4 bytes).
    pub(crate) fn items(buffer: &'a wgpu::Buffer, first: usize, count: usize, width: u32) -> Self {
        let w = width as u64 * 4;
        Range { buffer, offset: first as u64 * w, bytes: (count as u64 * w).max(4) }
    }
}

/// The buffers one dispatch binds (`kernels/wgsl/common.wgsl`); `None`
/// binds a placeholder.
#[derive(Clone, Copy)]
pub(crate) struct Bindings<'a> {
    pub(crate) slots: &'a wgpu::Buffer,
    pub(crate) occupied: &'a wgpu::Buffer,
    pub(crate) keys: Option<Range<'a>>,
    pub(crate) values: Option<Range<'a>>,
    pub(crate) out: Option<Range<'a>>,
    pub(crate) flags: Option<Range<'a>>,
    pub(crate) counters: Option<Range<'a>>,
    pub(crate) scratch: Option<Range<'a>>,
}

/// The uniform `Params` of one dispatch (`kernels/wgsl/common.wgsl`), but
/// for the grid stride, which the dispatch fills in.
#[derive(Clone, Copy, Default)]
pub(crate) struct Params {
    pub(crate) n: u32,
    pub(crate) buckets: u32,
    pub(crate) limit: u32,
    pub(crate) seed: u64,
    pub(crate) mode: u32,
    pub(crate) op: u32,
    pub(crate) kind: u32,
    pub(crate) base: u32,
    pub(crate) mask: u32,
    pub(crate) specials: u32,
    pub(crate) special_values: [u64; 2],
}

/// Dispatches recorded for one submission.
pub(crate) struct Work<'g> {
    gpu: &'g Gpu,
    variant: Variant,
    encoder: wgpu::CommandEncoder,
}

impl Gpu {
    /// The name errors give this device.
    pub(crate) fn name(&self) -> String {
        format!("wgpu ({}, {:?})", self.info.name, self.info.backend)
    }

    fn oom(&self, bytes: u64) -> Error {
        Error::OutOfMemory { bytes, device: self.name() }
    }

    /// Runs `f` inside out-of-memory and validation error scopes.
    pub(crate) async fn scoped<T>(&self, what: &str, bytes: u64, f: impl FnOnce() -> T) -> Result<T> {
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let out = f();
        let invalid = validation.pop().await;
        let out_of_memory = oom.pop().await;
        if out_of_memory.is_some() {
            return Err(self.oom(bytes));
        }
        if let Some(e) = invalid {
            return Err(Error::Device { device: self.name(), message: format!("{what}: {e}") });
        }
        Ok(out)
    }

    /// Largest storage buffer this device binds, in bytes.
    pub(crate) fn max_binding(&self) -> u64 {
        self.limits.max_storage_buffer_binding_size.min(self.limits.max_buffer_size)
    }

    /// A storage buffer of `bytes` (at least 4), uninitialised; one
    /// allocation point of [`crate::fault`].
    pub(crate) async fn storage(&self, label: &str, bytes: u64, usage: wgpu::BufferUsages) -> Result<wgpu::Buffer> {
        let size = bytes.max(4).next_multiple_of(4);
        crate::fault::alloc_point(size, Device::Wgpu)?;
        if size > self.max_binding() {
            return Err(self.oom(size));
        }
        self.scoped(label, size, || {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage: wgpu::BufferUsages::STORAGE | usage,
                mapped_at_creation: false,
            })
        })
        .await
    }

    /// A buffer for reading `bytes` back to the host; an allocation point.
    pub(crate) async fn staging(&self, bytes: u64) -> Result<wgpu::Buffer> {
        let size = bytes.max(4).next_multiple_of(4);
        crate::fault::alloc_point(size, Device::Wgpu)?;
        if size > self.limits.max_buffer_size {
            return Err(self.oom(size));
        }
        self.scoped("read-back buffer", size, || {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("gpuhash read-back"),
                size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })
        .await
    }

    /// Writes `words` at the start of `buffer` before the next submission's work.
    pub(crate) async fn write(&self, buffer: &wgpu::Buffer, words: &[u32]) -> Result<()> {
        if words.is_empty() {
            return Ok(());
        }
        self.scoped("upload", words.len() as u64 * 4, || self.queue.write_buffer(buffer, 0, bytemuck::cast_slice(words))).await
    }

    /// The pipelines of `variant`, compiled on first use.
    async fn pipelines(&self, variant: Variant) -> Result<&[wgpu::ComputePipeline]> {
        let i = variant.index();
        if let Some(compiled) = self.pipelines[i].get() {
            return compiled.as_deref().map_err(|m| Error::Device { device: self.name(), message: m.clone() });
        }
        let source = shader_source(variant);
        let built = self
            .scoped("compiling the WGSL kernels", 0, || {
                let module = self.device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some("gpuhash"),
                    source: wgpu::ShaderSource::Wgsl(Cow::Owned(source)),
                });
                Kernel::of(variant)
                    .iter()
                    .map(|k| {
                        self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                            label: Some(k.entry()),
                            layout: Some(&self.pipeline_layout),
                            module: &module,
                            entry_point: Some(k.entry()),
                            compilation_options: Default::default(),
                            cache: None,
                        })
                    })
                    .collect::<Vec<_>>()
            })
            .await
            .map_err(|e| e.to_string());
        // Two callers may compile at once; the first result stored is kept.
        let compiled = self.pipelines[i].get_or_init(|| built);
        compiled.as_deref().map_err(|m| Error::Device { device: self.name(), message: m.clone() })
    }

    /// Starts recording dispatches on tables of `variant`.
    pub(crate) async fn work(&self, variant: Variant) -> Result<Work<'_>> {
        self.pipelines(variant).await?;
        let encoder = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("gpuhash") });
        Ok(Work { gpu: self, variant, encoder })
    }
}

impl Work<'_> {
    /// Records `kernel` over `p.n` items (nothing when there are none).
    pub(crate) async fn dispatch(&mut self, kernel: Kernel, p: Params, b: &Bindings<'_>) -> Result<()> {
        self.dispatch_times(kernel, p, b, 1).await
    }

    /// Records `kernel` over `p.n` items `times` times in a row, in one
    /// pass with one binding (each dispatch sees the previous one's writes).
    pub(crate) async fn dispatch_times(&mut self, kernel: Kernel, p: Params, b: &Bindings<'_>, times: u32) -> Result<()> {
        if p.n == 0 || times == 0 {
            return Ok(());
        }
        let gpu = self.gpu;
        let at = Kernel::of(self.variant).iter().position(|k| *k == kernel).expect("the scheme's module has the entry point");
        let pipeline = &gpu.pipelines(self.variant).await?[at];
        let max_groups = gpu.limits.max_compute_workgroups_per_dimension.max(1);
        let groups = p.n.div_ceil(WORKGROUP).min(max_groups);
        let [sv0, sv1] = p.special_values;
        let words: [u32; 16] = [
            p.n,
            p.buckets,
            p.limit,
            groups * WORKGROUP,
            p.seed as u32,
            (p.seed >> 32) as u32,
            p.mode,
            p.op,
            p.kind,
            p.base,
            p.mask,
            p.specials,
            sv0 as u32,
            (sv0 >> 32) as u32,
            sv1 as u32,
            (sv1 >> 32) as u32,
        ];
        let params = gpu.scoped("params", 64, || {
            gpu.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("gpuhash params"),
                contents: bytemuck::cast_slice(&words),
                usage: wgpu::BufferUsages::UNIFORM,
            })
        })
        .await?;
        let ph = &gpu.placeholder_rw;
        let ranges: [(u32, Range<'_>); 8] = [
            (1, Range::all(b.slots)),
            (2, Range::all(b.occupied)),
            (3, b.keys.unwrap_or(Range::all(&gpu.placeholder))),
            (4, b.values.unwrap_or(Range::all(&gpu.placeholder))),
            (5, b.out.unwrap_or(Range::all(&ph[0]))),
            (6, b.flags.unwrap_or(Range::all(&ph[1]))),
            (7, b.counters.unwrap_or(Range::all(&ph[2]))),
            (8, b.scratch.unwrap_or(Range::all(&ph[3]))),
        ];
        let mut entries = vec![wgpu::BindGroupEntry { binding: 0, resource: params.as_entire_binding() }];
        entries.extend(ranges.iter().map(|(binding, r)| wgpu::BindGroupEntry {
            binding: *binding,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: r.buffer,
                offset: r.offset,
                size: std::num::NonZeroU64::new(r.bytes),
            }),
        }));
        let bind = gpu.scoped("binding buffers", 0, || {
            gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(kernel.entry()),
                layout: &gpu.layout,
                entries: &entries,
            })
        })
        .await?;
        let mut pass =
            self.encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some(kernel.entry()), timestamp_writes: None });
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &bind, &[]);
        for _ in 0..times {
            pass.dispatch_workgroups(groups, 1, 1);
        }
        Ok(())
    }

    /// Zeroes the first `bytes` of `buffer` (a multiple of 4).
    pub(crate) fn clear_range(&mut self, buffer: &wgpu::Buffer, bytes: u64) {
        self.clear_at(buffer, 0, bytes);
    }

    /// Zeroes `bytes` of `buffer` from byte `at` on (multiples of 4).
    pub(crate) fn clear_at(&mut self, buffer: &wgpu::Buffer, at: u64, bytes: u64) {
        if bytes > 0 {
            self.encoder.clear_buffer(buffer, at, Some(bytes));
        }
    }

    /// Copies the first `bytes` of `src` to the start of `dst`.
    pub(crate) fn copy(&mut self, src: &wgpu::Buffer, dst: &wgpu::Buffer, bytes: u64) {
        self.copy_at(src, dst, 0, bytes);
    }

    /// Copies the first `bytes` of `src` to `dst` from byte `at` on.
    pub(crate) fn copy_at(&mut self, src: &wgpu::Buffer, dst: &wgpu::Buffer, at: u64, bytes: u64) {
        self.copy_range(src, 0, dst, at, bytes);
    }

    /// Copies `bytes` from byte `from` of `src` to byte `at` of `dst`.
    pub(crate) fn copy_range(&mut self, src: &wgpu::Buffer, from: u64, dst: &wgpu::Buffer, at: u64, bytes: u64) {
        if bytes > 0 {
            self.encoder.copy_buffer_to_buffer(src, from, dst, at, bytes);
        }
    }

    /// Submits what is recorded so far and returns the first `words` words
    /// of `staging` (which that work copied into); recording goes on in a
    /// fresh encoder. For the host to steer the rest of a call by a count
    /// the GPU computed.
    pub(crate) async fn flush_and_read(&mut self, staging: &wgpu::Buffer, words: usize) -> Result<Vec<u32>> {
        let fresh = self.gpu.work(self.variant).await?;
        std::mem::replace(self, fresh).finish_and_read(staging, words).await
    }

    /// Submits the work. Natively it also waits for it; on the browser's
    /// WebGPU there is no waiting but for a mapping, and none is needed: later
    /// submissions run after this one, and reads go through
    /// [`Work::finish_and_read`].
    pub(crate) async fn finish(self) -> Result<()> {
        let gpu = self.gpu;
        let index = gpu.scoped("submitting work", 0, || gpu.queue.submit([self.encoder.finish()])).await?;
        #[cfg(not(target_arch = "wasm32"))]
        gpu.device
            .poll(wgpu::PollType::Wait { submission_index: Some(index), timeout: None })
            .map_err(|e| Error::Device { device: gpu.name(), message: format!("waiting for the queue: {e}") })?;
        #[cfg(target_arch = "wasm32")]
        let _ = index;
        Ok(())
    }

    /// Submits the work, then returns the first `words` words of `staging`
    /// (a `MAP_READ` buffer the work copied results into).
    pub(crate) async fn finish_and_read(self, staging: &wgpu::Buffer, words: usize) -> Result<Vec<u32>> {
        let gpu = self.gpu;
        self.finish().await?;
        if words == 0 {
            return Ok(Vec::new());
        }
        let slice = staging.slice(..(words as u64 * 4));
        let mapped = Mapping::default();
        let done = mapped.clone();
        slice.map_async(wgpu::MapMode::Read, move |r| done.complete(r));
        // Natively the mapping completes inside a poll; a browser completes it
        // from its event loop while the await below yields.
        #[cfg(not(target_arch = "wasm32"))]
        while !mapped.is_complete() {
            gpu.device
                .poll(wgpu::PollType::Wait { submission_index: None, timeout: None })
                .map_err(|e| Error::Device { device: gpu.name(), message: format!("waiting for a read-back: {e}") })?;
        }
        mapped.await.map_err(|e| Error::Device { device: gpu.name(), message: format!("reading results back: {e}") })?;
        let out = {
            let view = slice
                .get_mapped_range()
                .map_err(|e| Error::Device { device: gpu.name(), message: format!("reading results back: {e}") })?;
            bytemuck::pod_collect_to_vec::<u8, u32>(&view)
        };
        staging.unmap();
        Ok(out)
    }
}

type MapResult = std::result::Result<(), wgpu::BufferAsyncError>;

/// The outcome of one `map_async`, as a future: the callback completes it and
/// wakes whoever awaits it.
#[derive(Clone, Default)]
struct Mapping(Arc<Mutex<(Option<MapResult>, Option<Waker>)>>);

impl Mapping {
    fn lock(&self) -> std::sync::MutexGuard<'_, (Option<MapResult>, Option<Waker>)> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn complete(&self, r: MapResult) {
        let waker = {
            let mut state = self.lock();
            state.0 = Some(r);
            state.1.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn is_complete(&self) -> bool {
        self.lock().0.is_some()
    }
}

impl Future for Mapping {
    type Output = MapResult;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<MapResult> {
        let mut state = self.lock();
        match state.0.take() {
            Some(r) => Poll::Ready(r),
            None => {
                state.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pipelines are found by position: every module lists the bulk entry
    /// points first, then its own, each once.
    #[test]
    fn scheme_modules_list_the_bulk_entry_points_first() {
        for s in Variant::all() {
            let all = Kernel::of(s);
            assert_eq!(&all[..Kernel::BULK.len()], &Kernel::BULK[..], "{s:?}");
            for (i, k) in all.iter().enumerate() {
                assert!(!all[..i].contains(k), "{s:?}: {k:?} listed twice");
            }
        }
    }

    /// Runs without an adapter: every module parses and validates with no
    /// optional capability (no 64-bit integers or atomics, no f64: the
    /// browser's WebGPU), but the 64-bit and subgroup variants, which
    /// validate with the features `open` enables for them; the sources
    /// define none of the shared constants themselves.
    #[test]
    fn shaders_validate_without_optional_capabilities() {
        let schemes = SCHEMES.map(|s| (s, scheme_source(s).expect("every listed scheme has a module")));
        let own_files = [
            ("common.wgsl".to_string(), COMMON_SOURCE),
            ("bulk.wgsl".to_string(), BULK_SOURCE),
            ("fold.wgsl".to_string(), FOLD_SOURCE),
            ("lines.wgsl".to_string(), LINES_SOURCE),
            ("fold_subgroups.wgsl".to_string(), FOLD_SUBGROUPS_SOURCE),
            ("wide.wgsl".to_string(), WIDE_SOURCE),
            ("linear_wide.wgsl".to_string(), LINEAR_WIDE_SOURCE),
            ("cuckoo_wide.wgsl".to_string(), CUCKOO_WIDE_SOURCE),
        ]
            .into_iter()
            .chain(schemes.iter().map(|(s, t)| (format!("{}.wgsl", s.name()), *t)));
        for (name, text) in own_files {
            let own = text.lines().find(|l| l.trim_start().starts_with("const GH_"));
            assert!(own.is_none(), "kernels/wgsl/{name} defines {own:?}: emit it from the Rust core instead");
        }
        for v in Variant::all() {
            let source = shader_source(v);
            let module = naga::front::wgsl::parse_str(&source).unwrap_or_else(|e| panic!("{v:?}: {}", e.emit_to_string(&source)));
            // The 64-bit and subgroup variants need exactly the features `open` asks for them.
            let mut caps = naga::valid::Capabilities::empty();
            caps.set(naga::valid::Capabilities::SHADER_INT64 | naga::valid::Capabilities::SHADER_INT64_ATOMIC_ALL_OPS, v.atomics64);
            caps.set(naga::valid::Capabilities::SUBGROUP, v.subgroups);
            let mut validator = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps);
            if v.subgroups {
                use naga::valid::SubgroupOperationSet as Ops;
                validator.subgroup_stages(naga::valid::ShaderStages::COMPUTE).subgroup_operations(Ops::BASIC | Ops::ARITHMETIC | Ops::BALLOT | Ops::SHUFFLE);
            }
            validator
                .validate(&module)
                .unwrap_or_else(|e| panic!("{v:?}: {}", e.emit_to_string(&source)));
        }
    }
}
