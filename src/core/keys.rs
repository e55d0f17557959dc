//! Key and value types, and the reductions applied on insert.
//!
//! Keys and values are handled as raw bits (`u64`) inside the engine, which
//! keeps the heavy code non-generic over the user's types; these traits say
//! how to convert and which packed slot word a key/value pair uses.

use super::layout::Word;

mod sealed {
    pub trait Sealed {}
}

/// Types that can be copied to a device as they are (cudarc's `DeviceRepr`
/// when the `cuda` feature is on).
#[cfg(feature = "cuda")]
pub trait DeviceScalar: cudarc::driver::DeviceRepr {}
#[cfg(feature = "cuda")]
impl<T: cudarc::driver::DeviceRepr> DeviceScalar for T {}
/// Types that can be copied to a device as they are.
#[cfg(not(feature = "cuda"))]
pub trait DeviceScalar {}
#[cfg(not(feature = "cuda"))]
impl<T> DeviceScalar for T {}

/// A key type: `u32` or `u64`.
///
/// Every value of the type is a legal key. Internally the two largest values
/// ([`Key::EMPTY`] and [`Key::TOMBSTONE`]) mark free and erased slots, so the
/// table stores keys equal to them out of band; users never see the difference.
pub trait Key:
    sealed::Sealed + DeviceScalar + bytemuck::Pod + Copy + Eq + Ord + std::hash::Hash + std::fmt::Debug + Send + Sync + 'static
{
    /// Width of the key in bits.
    const BITS: u32;
    /// The key value whose bit pattern marks an empty slot.
    const EMPTY: Self;
    /// The key value whose bit pattern marks an erased slot.
    const TOMBSTONE: Self;
    /// The packed slot word for a pair of this key and value `V`.
    type Word<V: Value>: Word;
    /// The key widened to 64 bits (zero-extended).
    fn to_u64(self) -> u64;
    /// The key from its widened bits (truncating).
    fn from_u64(bits: u64) -> Self;
}


impl Key for u32 {
    const BITS: u32 = 32;
    const EMPTY: Self = u32::MAX;
    const TOMBSTONE: Self = u32::MAX - 1;
    type Word<V: Value> = V::With32;
    #[inline(always)]
    fn to_u64(self) -> u64 {
        self as u64
    }
    #[inline(always)]
    fn from_u64(bits: u64) -> Self {
        bits as u32
    }
}

impl Key for u64 {
    const BITS: u32 = 64;
    const EMPTY: Self = u64::MAX;
    const TOMBSTONE: Self = u64::MAX - 1;
    type Word<V: Value> = V::With64;
    #[inline(always)]
    fn to_u64(self) -> u64 {
        self
    }
    #[inline(always)]
    fn from_u64(bits: u64) -> Self {
        bits
    }
}

/// What a value is, for reductions (integer wrap-around vs IEEE arithmetic).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueKind {
    /// `u32`
    U32,
    /// `i32`
    I32,
    /// `f32`
    F32,
    /// `u64`
    U64,
    /// `i64`
    I64,
    /// `f64`
    F64,
}

impl ValueKind {
    /// Width in bits.
    pub const fn bits(self) -> u32 {
        match self {
            ValueKind::U32 | ValueKind::I32 | ValueKind::F32 => 32,
            _ => 64,
        }
    }
    /// Short name as used in kernel names and benchmark output.
    pub const fn name(self) -> &'static str {
        match self {
            ValueKind::U32 => "u32",
            ValueKind::I32 => "i32",
            ValueKind::F32 => "f32",
            ValueKind::U64 => "u64",
            ValueKind::I64 => "i64",
            ValueKind::F64 => "f64",
        }
    }
    /// Code shared with the CUDA kernels (`GH_VALUE_*`).
    pub const fn code(self) -> u32 {
        match self {
            ValueKind::U32 => 0,
            ValueKind::I32 => 1,
            ValueKind::F32 => 2,
            ValueKind::U64 => 3,
            ValueKind::I64 => 4,
            ValueKind::F64 => 5,
        }
    }
}

/// A reduction applied when an inserted key is already present.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reduce {
    /// `stored + new`: wrapping for integers (exact, order-independent);
    /// IEEE addition for floats (the result depends on the order in which
    /// duplicates arrive, so it can differ in the last bits between runs).
    Sum,
    /// `min(stored, new)`; for floats a NaN operand is ignored, as in `f32::min`.
    Min,
    /// `max(stored, new)`; for floats a NaN operand is ignored, as in `f32::max`.
    Max,
}

impl Reduce {
    /// Code shared with the CUDA kernels (`GH_REDUCE_*`).
    pub const fn code(self) -> u32 {
        match self {
            Reduce::Sum => 0,
            Reduce::Min => 1,
            Reduce::Max => 2,
        }
    }
}

/// A value type: any plain 4- or 8-byte type of `u32 u64 i32 i64 f32 f64`.
pub trait Value: sealed::Sealed + DeviceScalar + bytemuck::Pod + Copy + PartialEq + std::fmt::Debug + Send + Sync + 'static {
    /// Which type this is.
    const KIND: ValueKind;
    /// Packed slot word when paired with a 32-bit key.
    type With32: Word;
    /// Packed slot word when paired with a 64-bit key.
    type With64: Word;
    /// The value's bits, zero-extended to 64.
    fn to_bits(self) -> u64;
    /// The value from its bits (the low `KIND.bits()` bits are used).
    fn from_bits(bits: u64) -> Self;
    /// Combines a stored value with a new one.
    fn reduce(op: Reduce, stored: Self, new: Self) -> Self;
}

macro_rules! int_value {
    ($t:ty, $kind:ident, $w32:ty, $bits:ty) => {
        impl Value for $t {
            const KIND: ValueKind = ValueKind::$kind;
            type With32 = $w32;
            type With64 = u128;
            #[inline(always)]
            fn to_bits(self) -> u64 {
                self as $bits as u64
            }
            #[inline(always)]
            fn from_bits(bits: u64) -> Self {
                bits as $bits as $t
            }
            #[inline(always)]
            fn reduce(op: Reduce, stored: Self, new: Self) -> Self {
                match op {
                    Reduce::Sum => stored.wrapping_add(new),
                    Reduce::Min => stored.min(new),
                    Reduce::Max => stored.max(new),
                }
            }
        }
    };
}
impl sealed::Sealed for u32 {}
impl sealed::Sealed for u64 {}
impl sealed::Sealed for i32 {}
impl sealed::Sealed for i64 {}
int_value!(u32, U32, u64, u32);
int_value!(i32, I32, u64, u32);
int_value!(u64, U64, u128, u64);
int_value!(i64, I64, u128, u64);

macro_rules! float_value {
    ($t:ty, $kind:ident, $w32:ty, $bits:ty) => {
        impl sealed::Sealed for $t {}
        impl Value for $t {
            const KIND: ValueKind = ValueKind::$kind;
            type With32 = $w32;
            type With64 = u128;
            #[inline(always)]
            fn to_bits(self) -> u64 {
                self.to_bits() as u64
            }
            #[inline(always)]
            fn from_bits(bits: u64) -> Self {
                <$t>::from_bits(bits as $bits)
            }
            #[inline(always)]
            fn reduce(op: Reduce, stored: Self, new: Self) -> Self {
                match op {
                    Reduce::Sum => stored + new,
                    Reduce::Min => stored.min(new),
                    Reduce::Max => stored.max(new),
                }
            }
        }
    };
}
float_value!(f32, F32, u64, u32);
float_value!(f64, F64, u128, u64);

/// Whether a key must be stored out of band (its bits are a slot marker).
#[inline(always)]
pub fn special_index<K: Key>(key: K) -> Option<usize> {
    if key == K::EMPTY {
        Some(0)
    } else if key == K::TOMBSTONE {
        Some(1)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_bits_round_trip() {
        assert_eq!(i32::from_bits((-5i32).to_bits()), -5);
        assert_eq!((-1i32).to_bits(), 0xffff_ffff);
        assert_eq!(f64::from_bits(Value::to_bits(1.5f64)), 1.5);
        assert_eq!(<f32 as Value>::from_bits(Value::to_bits(-2.25f32)), -2.25);
        assert_eq!(u64::from_bits(u64::MAX.to_bits()), u64::MAX);
    }

    #[test]
    fn reductions() {
        assert_eq!(u32::reduce(Reduce::Sum, u32::MAX, 2), 1);
        assert_eq!(i64::reduce(Reduce::Min, -3, 7), -3);
        assert_eq!(f32::reduce(Reduce::Max, f32::NAN, 1.0), 1.0);
    }

    #[test]
    fn specials() {
        assert_eq!(special_index(u32::MAX), Some(0));
        assert_eq!(special_index(u64::MAX - 1), Some(1));
        assert_eq!(special_index(0u32), None);
        assert_eq!(special_index(u64::MAX - 2), None);
    }
}
