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
use crate::core::layout::Word;
use crate::{Device, Error, Result};

/// Invocations per workgroup of every entry point (`@workgroup_size(64)`).
pub(crate) const WORKGROUP: u32 = 64;

/// The WGSL shared by every scheme (`kernels/wgsl/common.wgsl`).
pub const COMMON_SOURCE: &str = include_str!("../../../kernels/wgsl/common.wgsl");
/// The linear scheme's entry points (`kernels/wgsl/linear.wgsl`).
pub const LINEAR_SOURCE: &str = include_str!("../../../kernels/wgsl/linear.wgsl");

/// "No slot" in the shaders' results (`GH_NONE`): the key is absent, or
/// found no free slot.
pub(crate) const NONE: u32 = u32::MAX;

/// The complete WGSL module for slots of word type `W`: the constants
/// emitted from the Rust core and this backend, then the shared code, then
/// the scheme.
pub fn shader_source<W: Word>() -> String {
    format!("{}const GH_NONE: u32 = 0x{NONE:08x}u;\n\n{COMMON_SOURCE}\n{LINEAR_SOURCE}", wgsl_header::<W>())
}

/// The entry points of a module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    FillEmpty,
    StoreValues,
    Tombstone,
    Locate,
    Claim,
}

impl Kernel {
    const ALL: [Kernel; 5] = [Kernel::FillEmpty, Kernel::StoreValues, Kernel::Tombstone, Kernel::Locate, Kernel::Claim];
    fn entry(self) -> &'static str {
        match self {
            Kernel::FillEmpty => "fill_empty",
            Kernel::StoreValues => "store_values",
            Kernel::Tombstone => "tombstone",
            Kernel::Locate => "locate",
            Kernel::Claim => "claim",
        }
    }
}

/// One opened adapter, shared by the tables on it.
pub(crate) struct Gpu {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) info: wgpu::AdapterInfo,
    pub(crate) limits: wgpu::Limits,
    layout: wgpu::BindGroupLayout,
    pipeline_layout: wgpu::PipelineLayout,
    /// Pipelines for 8-byte and 16-byte slots, compiled on first use.
    pipelines: [OnceLock<std::result::Result<Vec<wgpu::ComputePipeline>, String>>; 2],
    /// Bound where an entry point reads nothing (every binding must be bound).
    placeholder: wgpu::Buffer,
    /// Bound where an entry point writes no results.
    placeholder_rw: wgpu::Buffer,
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
    let index = match device {
        Device::Wgpu => None,
        Device::WgpuAdapter(i) => Some(i),
        other => return Err(Error::Unsupported(format!("{other} is not a wgpu device"))),
    };
    Ok(gpu(index)?.info.clone())
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
    // Everything the adapter offers: the largest tables it can hold. No
    // optional features: the shaders need only 32-bit atomics.
    let limits = adapter.limits();
    let (device, queue) = adapter
        .request_device(&wgpu::DeviceDescriptor {
            label: Some("gpuhash"),
            required_features: wgpu::Features::empty(),
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
    let (placeholder, placeholder_rw) = (placeholder("gpuhash placeholder"), placeholder("gpuhash placeholder rw"));
    Ok(Gpu {
        device,
        queue,
        info,
        limits,
        layout,
        pipeline_layout,
        pipelines: [OnceLock::new(), OnceLock::new()],
        placeholder,
        placeholder_rw,
    })
}

/// The buffers one dispatch binds (`kernels/wgsl/common.wgsl`).
pub(crate) struct Bindings<'a> {
    pub(crate) slots: &'a wgpu::Buffer,
    pub(crate) occupied: &'a wgpu::Buffer,
    pub(crate) items: Option<&'a wgpu::Buffer>,
    pub(crate) values: Option<&'a wgpu::Buffer>,
    pub(crate) results: Option<&'a wgpu::Buffer>,
}

/// The uniform `Params` of one dispatch, but for the grid stride.
#[derive(Clone, Copy)]
pub(crate) struct Params {
    pub(crate) n: u32,
    pub(crate) buckets: u32,
    pub(crate) limit: u32,
    pub(crate) seed: u64,
}

/// Dispatches recorded for one submission.
pub(crate) struct Work<'g> {
    gpu: &'g Gpu,
    slot_bytes: usize,
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

    /// The pipelines for `slot_bytes`-byte slots, compiled on first use.
    async fn pipelines(&self, slot_bytes: usize) -> Result<&[wgpu::ComputePipeline]> {
        let i = if slot_bytes == 8 { 0 } else { 1 };
        if let Some(compiled) = self.pipelines[i].get() {
            return compiled.as_deref().map_err(|m| Error::Device { device: self.name(), message: m.clone() });
        }
        let source = if i == 0 { shader_source::<u64>() } else { shader_source::<u128>() };
        let built = self
            .scoped("compiling the WGSL kernels", 0, || {
                let module = self.device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some("gpuhash"),
                    source: wgpu::ShaderSource::Wgsl(Cow::Owned(source)),
                });
                Kernel::ALL
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

    /// Starts recording dispatches on tables of `slot_bytes`-byte slots.
    pub(crate) async fn work(&self, slot_bytes: usize) -> Result<Work<'_>> {
        self.pipelines(slot_bytes).await?;
        let encoder = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("gpuhash") });
        Ok(Work { gpu: self, slot_bytes, encoder })
    }
}

impl Work<'_> {
    /// Records `kernel` over `p.n` items (nothing when there are none).
    pub(crate) async fn dispatch(&mut self, kernel: Kernel, p: Params, b: &Bindings<'_>) -> Result<()> {
        if p.n == 0 {
            return Ok(());
        }
        let gpu = self.gpu;
        let pipeline = &gpu.pipelines(self.slot_bytes).await?[kernel as usize];
        let max_groups = gpu.limits.max_compute_workgroups_per_dimension.max(1);
        let groups = p.n.div_ceil(WORKGROUP).min(max_groups);
        let words = [p.n, p.buckets, p.limit, groups * WORKGROUP, p.seed as u32, (p.seed >> 32) as u32, 0, 0];
        let params = gpu.scoped("params", 32, || {
            gpu.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("gpuhash params"),
                contents: bytemuck::cast_slice(&words),
                usage: wgpu::BufferUsages::UNIFORM,
            })
        })
        .await?;
        fn entry(binding: u32, buf: &wgpu::Buffer) -> wgpu::BindGroupEntry<'_> {
            wgpu::BindGroupEntry { binding, resource: buf.as_entire_binding() }
        }
        let bind = gpu.scoped("binding buffers", 0, || {
            gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(kernel.entry()),
                layout: &gpu.layout,
                entries: &[
                    entry(0, &params),
                    entry(1, b.slots),
                    entry(2, b.occupied),
                    entry(3, b.items.unwrap_or(&gpu.placeholder)),
                    entry(4, b.values.unwrap_or(&gpu.placeholder)),
                    entry(5, b.results.unwrap_or(&gpu.placeholder_rw)),
                ],
            })
        })
        .await?;
        let mut pass =
            self.encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some(kernel.entry()), timestamp_writes: None });
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(groups, 1, 1);
        Ok(())
    }

    /// Zeroes `buffer`.
    pub(crate) fn clear(&mut self, buffer: &wgpu::Buffer) {
        self.encoder.clear_buffer(buffer, 0, None);
    }

    /// Copies the first `bytes` of `src` to the start of `dst`.
    pub(crate) fn copy(&mut self, src: &wgpu::Buffer, dst: &wgpu::Buffer, bytes: u64) {
        if bytes > 0 {
            self.encoder.copy_buffer_to_buffer(src, 0, dst, 0, bytes);
        }
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

    /// Runs without an adapter: both modules parse and validate with no
    /// optional capability (no 64-bit integers or atomics, no f64: the
    /// browser's WebGPU), and the sources define none of the shared
    /// constants themselves.
    #[test]
    fn shaders_validate_without_optional_capabilities() {
        for (name, text) in [("common.wgsl", COMMON_SOURCE), ("linear.wgsl", LINEAR_SOURCE)] {
            let own = text.lines().find(|l| l.trim_start().starts_with("const GH_"));
            assert!(own.is_none(), "kernels/wgsl/{name} defines {own:?}: emit it from the Rust core instead");
        }
        for source in [shader_source::<u64>(), shader_source::<u128>()] {
            let module = naga::front::wgsl::parse_str(&source).unwrap_or_else(|e| panic!("{}", e.emit_to_string(&source)));
            naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::empty())
                .validate(&module)
                .unwrap_or_else(|e| panic!("{}", e.emit_to_string(&source)));
        }
    }
}
