//! Where a table lives.

use std::fmt;
use std::str::FromStr;

use crate::Error;

/// The device a table is created on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Device {
    /// Host memory, all CPU cores (the reference backend).
    Cpu,
    /// The NVIDIA GPU with this ordinal, through the CUDA driver.
    Cuda(usize),
    /// The default wgpu adapter (Vulkan, Metal, DX12 or browser WebGPU): a
    /// discrete or integrated GPU if there is one, else a CPU implementation
    /// such as Mesa's lavapipe. [`gpuhash::backend::wgpu::adapters`](crate::backend::wgpu)
    /// lists what wgpu finds. Implements [`Scheme::Linear`](crate::Scheme::Linear),
    /// [`Scheme::SlabList`](crate::Scheme::SlabList),
    /// [`Scheme::Cuckoo`](crate::Scheme::Cuckoo) and
    /// [`Scheme::TwoLevel`](crate::Scheme::TwoLevel) so far (needs the
    /// `wgpu` feature, on by default).
    Wgpu,
    /// The wgpu adapter with this index in
    /// [`gpuhash::backend::wgpu::adapters`](crate::backend::wgpu), to pick
    /// one adapter among several; otherwise as [`Device::Wgpu`].
    WgpuAdapter(usize),
}

impl Device {
    /// The fastest device present: the first CUDA GPU if one can be used,
    /// otherwise the CPU.
    pub fn best_available() -> Device {
        if Device::Cuda(0).check_available().is_ok() {
            Device::Cuda(0)
        } else {
            Device::Cpu
        }
    }

    /// `Ok` if tables of `scheme` can be created on this device, or why not:
    /// [`Error::Unavailable`] when the device cannot be used, and
    /// [`Error::Unsupported`] for a scheme its backend does not implement.
    /// Every scheme runs on the CPU; CUDA runs all but
    /// [`Scheme::SlabList`](crate::Scheme::SlabList); wgpu runs
    /// [`Scheme::Linear`](crate::Scheme::Linear),
    /// [`Scheme::SlabList`](crate::Scheme::SlabList),
    /// [`Scheme::Cuckoo`](crate::Scheme::Cuckoo) and
    /// [`Scheme::TwoLevel`](crate::Scheme::TwoLevel).
    pub fn check_scheme(self, scheme: crate::Scheme) -> Result<(), Error> {
        self.check_available()?;
        match self {
            Device::Wgpu | Device::WgpuAdapter(_) => crate::backend::wgpu_scheme(scheme),
            Device::Cuda(_) if scheme == crate::Scheme::SlabList => Err(Error::Unsupported(format!(
                "the CUDA backend does not implement {scheme}; slab-list tables run on the CPU and on wgpu"
            ))),
            _ => Ok(()),
        }
    }

    /// `Ok` if tables can be created on this device, or why not.
    pub fn check_available(self) -> Result<(), Error> {
        match self {
            Device::Cpu => Ok(()),
            Device::Cuda(i) => crate::backend::cuda_available(i),
            Device::Wgpu => crate::backend::wgpu_available(None),
            Device::WgpuAdapter(i) => crate::backend::wgpu_available(Some(i)),
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
            Device::Wgpu => write!(f, "wgpu"),
            Device::WgpuAdapter(i) => write!(f, "wgpu:{i}"),
        }
    }
}

impl FromStr for Device {
    type Err = String;
    /// Parses `cpu`, `cuda`, `cuda:N`, `wgpu` or `wgpu:N`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            "wgpu" => Ok(Device::Wgpu),
            _ => match (s.strip_prefix("cuda:").map(str::parse::<usize>), s.strip_prefix("wgpu:").map(str::parse::<usize>)) {
                (Some(Ok(i)), _) => Ok(Device::Cuda(i)),
                (_, Some(Ok(i))) => Ok(Device::WgpuAdapter(i)),
                _ => Err(format!("unknown device '{s}' (expected cpu, cuda, cuda:N, wgpu or wgpu:N)")),
            },
        }
    }
}
