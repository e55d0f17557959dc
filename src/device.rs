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
    /// A GPU through wgpu (Vulkan, Metal, DX12, WebGPU). Not available yet.
    Wgpu,
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

    /// `Ok` if tables of `scheme` can be created on this device, or why not.
    /// Every scheme runs on every device that is available.
    pub fn check_scheme(self, scheme: crate::Scheme) -> Result<(), Error> {
        let _ = scheme;
        self.check_available()
    }

    /// `Ok` if tables can be created on this device, or why not.
    pub fn check_available(self) -> Result<(), Error> {
        match self {
            Device::Cpu => Ok(()),
            Device::Cuda(i) => crate::backend::cuda_available(i),
            Device::Wgpu => Err(Error::Unavailable {
                device: self.to_string(),
                reason: "the wgpu backend is not implemented yet".into(),
            }),
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
            Device::Wgpu => write!(f, "wgpu"),
        }
    }
}

impl FromStr for Device {
    type Err = String;
    /// Parses `cpu`, `cuda`, `cuda:N` or `wgpu`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            "wgpu" => Ok(Device::Wgpu),
            _ => match s.strip_prefix("cuda:").map(str::parse::<usize>) {
                Some(Ok(i)) => Ok(Device::Cuda(i)),
                _ => Err(format!("unknown device '{s}' (expected cpu, cuda, cuda:N or wgpu)")),
            },
        }
    }
}
