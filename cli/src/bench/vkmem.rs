//! Where a Vulkan adapter's memory went during the wgpu target's timed
//! calls: per memory heap, its size, flags, and the most the driver said was
//! in use (VK_EXT_memory_budget) right after a timed call. A table or work
//! buffer placed in host memory shows up as host-heap usage of its size,
//! with kernels running at bus rather than memory speed.

use std::sync::{Mutex, OnceLock};

use ash::vk;
use gpuhash::backend::wgpu::wgpu;

/// Per heap: (size, flags, peak usage seen) of the last adapter sampled.
static PEAKS: Mutex<Vec<(u64, vk::MemoryHeapFlags, u64)>> = Mutex::new(Vec::new());

/// Whether the adapter reports heap usage (VK_EXT_memory_budget).
static HAS_BUDGET: OnceLock<bool> = OnceLock::new();

/// Samples the heaps' usage now (nothing off Vulkan or without the budget
/// extension) and keeps the peaks.
pub(crate) fn sample(device: &wgpu::Device) {
    // Safety: only reads properties of the physical device; no object of
    // wgpu's is created, used or destroyed through the raw handles.
    let Some(hal) = (unsafe { device.as_hal::<wgpu::hal::api::Vulkan>() }) else { return };
    let instance = hal.shared_instance().raw_instance();
    let physical = hal.raw_physical_device();
    // Without the extension the driver leaves the usage at zero: say
    // nothing. Asked once (the bench opens one adapter per run).
    let has_budget = *HAS_BUDGET.get_or_init(|| {
        let extensions = unsafe { instance.enumerate_device_extension_properties(physical) }.unwrap_or_default();
        extensions.iter().any(|e| e.extension_name_as_c_str() == Ok(ash::ext::memory_budget::NAME))
    });
    if !has_budget {
        return;
    }
    let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
    let mut props = vk::PhysicalDeviceMemoryProperties2::default().push_next(&mut budget);
    unsafe { instance.get_physical_device_memory_properties2(physical, &mut props) };
    let heaps = props.memory_properties.memory_heaps_as_slice().to_vec();
    let mut peaks = PEAKS.lock().unwrap_or_else(|e| e.into_inner());
    if peaks.len() != heaps.len() {
        *peaks = heaps.iter().map(|h| (h.size, h.flags, 0)).collect();
    }
    for (i, p) in peaks.iter_mut().enumerate() {
        p.2 = p.2.max(budget.heap_usage[i]);
    }
}

/// The run_info line: each heap's size, whether it is device-local, and its
/// peak usage; `None` if no sample was taken.
pub(crate) fn report() -> Option<String> {
    let peaks = PEAKS.lock().unwrap_or_else(|e| e.into_inner());
    if peaks.is_empty() {
        return None;
    }
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let heaps: Vec<String> = peaks
        .iter()
        .enumerate()
        .map(|(i, (size, flags, peak))| {
            let kind = if flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL) { "device-local" } else { "host" };
            format!("heap {i} ({kind}, {:.1} GiB): peak {:.2} GiB in use", gib(*size), gib(*peak))
        })
        .collect();
    Some(heaps.join("; "))
}
