//! [`Scheme::SlabList`] on wgpu (`kernels/wgsl/slab_list.wgsl`): the CPU's
//! slab geometry ([`crate::core::slab`]), chain heads and slot layout, so
//! the CPU backend is its oracle.
//!
//! The scheme's words (a `next` word per slab and the pool's two counters,
//! 32 bits each: slab indices fit) follow the occupancy bits in the
//! `occupied` buffer. That binding is read-write in every module already,
//! so the bind layout, shared by every scheme, stays as it is, and
//! clearing the table (which zeroes the occupancy bits) resets the chains
//! and the pool with the same clear.
//!
//! A slab taken by an invocation that lost the race to link it is linked
//! further down the same chain, as on the CPU, or handed back to the pool
//! when it is still the last one handed out (never once the pool is used
//! up): invocations that meet at one chain's end in step each take a slab,
//! and handing back spares the chain some of the empty slabs it would end
//! with.
//!
//! Claims never wait for another invocation (nothing guarantees that it
//! makes progress meanwhile, on lavapipe or in a browser). A claim that
//! finds its chain's end locked by another (which is taking one slab for
//! it), or its chain full and the pool used up, is deferred to the
//! scheme's later passes ([`later_passes`]): retries under the same lock,
//! one pass that takes slabs without it, and a last one, when every slab
//! handed out is linked; only there is a key refused, so a key is refused
//! exactly when the CPU refuses it, at every position holding it.

use super::gpu::Kernel;
use crate::core::scheme::Scheme;
use crate::core::slab::Slabs;

/// The slab list's own entry points (after the bulk ones in its module).
const OWN: [Kernel; 6] = [
    Kernel::InsertRetry,
    Kernel::InsertCarry,
    Kernel::InsertDeferred,
    Kernel::ClaimRepsRetry,
    Kernel::ClaimRepsCarry,
    Kernel::ClaimRepsDeferred,
];

/// The entry points of the slab list's module: the bulk ones, then its own.
pub(super) const KERNELS: [Kernel; Kernel::BULK.len() + OWN.len()] = Kernel::bulk_then(&OWN);

/// Retry passes after the first (`kernels/wgsl/slab_list.wgsl`): each
/// grows every chain end that claims wait at by one slab, under its lock.
const RETRY_PASSES: usize = 6;

/// The passes after a first one: `retry` RETRY_PASSES times, then `carry`,
/// then `decide`.
const fn passes(retry: Kernel, carry: Kernel, decide: Kernel) -> [Kernel; RETRY_PASSES + 2] {
    let mut all = [retry; RETRY_PASSES + 2];
    all[RETRY_PASSES] = carry;
    all[RETRY_PASSES + 1] = decide;
    all
}

/// The passes `scheme` runs right after `kernel` (same bindings and
/// parameters) over the items whose claims it deferred, in order.
pub(super) fn later_passes(scheme: Scheme, kernel: Kernel) -> &'static [Kernel] {
    const INSERT: [Kernel; RETRY_PASSES + 2] = passes(Kernel::InsertRetry, Kernel::InsertCarry, Kernel::InsertDeferred);
    const CLAIM: [Kernel; RETRY_PASSES + 2] = passes(Kernel::ClaimRepsRetry, Kernel::ClaimRepsCarry, Kernel::ClaimRepsDeferred);
    match (scheme, kernel) {
        (Scheme::SlabList, Kernel::InsertDirect) => &INSERT,
        (Scheme::SlabList, Kernel::ClaimReps) => &CLAIM,
        _ => &[],
    }
}

/// 32-bit words `scheme` keeps after the occupancy bits, for a table of
/// `buckets` buckets.
pub(super) fn aux_words(scheme: Scheme, buckets: u64) -> u64 {
    match scheme {
        Scheme::SlabList => Slabs::of(buckets).words(),
        _ => 0,
    }
}

/// The pool of a slab-list table, as the last call left it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlabPool {
    /// Pool slabs, all told.
    pub slabs: u64,
    /// Pool slabs handed out to chains.
    pub handed_out: u64,
    /// Pool slabs linked into a chain: every slab handed out once a call
    /// returns (none is lost to a lost race).
    pub linked: u64,
}

impl SlabPool {
    /// From the two counter words (`[handed out, linked]`) of a table of
    /// `buckets` buckets. The handed-out counter may pass the pool by the
    /// invocations that asked for a slab as it ran out.
    pub(super) fn from_words(buckets: u64, words: [u32; 2]) -> SlabPool {
        let slabs = Slabs::of(buckets).pool();
        SlabPool { slabs, handed_out: (words[0] as u64).min(slabs), linked: words[1] as u64 }
    }
}

/// A rebuild's pairs, read back in slot order, reordered so that
/// neighbouring invocations insert into different chains. In slot order a
/// chain's keys sit side by side (a slab is one chain's), so invocations
/// running in step would all reach the same chain's end at once: each takes
/// a slab, one links it and the others link theirs further down, and the
/// chain ends with several empty slabs, which can use the pool up before
/// the load the table held. A stride near `n / phi`, coprime to `n`, visits
/// every pair once and puts a slab's keys far apart.
pub(super) fn spread<T: Copy>(items: &[T]) -> Vec<T> {
    let n = items.len() as u64;
    if n < 3 {
        return items.to_vec();
    }
    let mut stride = (n as f64 * 0.618_033_988_75) as u64 | 1;
    while gcd(stride, n) != 1 {
        stride = (stride + 2) % n;
    }
    (0..n).map(|i| items[(i * stride % n) as usize]).collect()
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The chain position (0 = head) of every slab, from the `next` words of a
/// table of `next.len()` slabs; slabs in no chain get 0.
fn depths(next: &[u32]) -> Vec<u64> {
    let geo = Slabs::of(next.len() as u64);
    let mut depth = vec![0u64; next.len()];
    for head in 0..geo.heads() as usize {
        let (mut slab, mut d) = (head, 0);
        // A chain has at most every slab: bounded even if the words were wrong.
        for _ in 0..next.len() {
            match next[slab] as usize {
                0 => break,
                n if n < next.len() => {
                    d += 1;
                    depth[n] = d;
                    slab = n;
                }
                _ => break,
            }
        }
    }
    depth
}

/// (sum, max) of the chain positions of the slabs holding `pairs` ((slot,
/// key, value) of every full slot), as the CPU's displacement counts them.
pub(super) fn displacement(next: &[u32], slots_per_bucket: u64, pairs: &[(u64, u64, u64)]) -> (u64, u64) {
    let depth = depths(next);
    pairs.iter().fold((0, 0), |(sum, max), &(s, _, _)| {
        let d = depth.get((s / slots_per_bucket) as usize).copied().unwrap_or(0);
        (sum + d, max.max(d))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_points_are_the_bulk_ones_then_the_second_passes() {
        assert_eq!(KERNELS[..Kernel::BULK.len()], Kernel::BULK);
        assert_eq!(KERNELS[Kernel::BULK.len()..], OWN);
        assert!(later_passes(Scheme::Linear, Kernel::InsertDirect).is_empty());
        assert_eq!(later_passes(Scheme::SlabList, Kernel::InsertDirect).last(), Some(&Kernel::InsertDeferred));
    }

    #[test]
    fn spread_visits_every_item_once() {
        for n in [0usize, 1, 2, 3, 10, 64, 1000, 4096, 12345] {
            let items: Vec<usize> = (0..n).collect();
            let mut out = spread(&items);
            if n >= 64 {
                assert!(out.windows(2).all(|w| w[0].abs_diff(w[1]) > 4), "{n}: neighbours stay close");
            }
            out.sort_unstable();
            assert_eq!(out, items, "{n}");
        }
    }

    #[test]
    fn depths_follow_the_chains() {
        // 8 slabs, 2 heads: 0 -> 2 -> 5, 1 -> 3; slabs 4, 6, 7 unused.
        let next = [2, 3, 5, 0, 0, 0, 0, 0];
        assert_eq!(depths(&next), vec![0, 0, 1, 1, 0, 2, 0, 0]);
        assert_eq!(displacement(&next, 4, &[(20, 1, 0), (9, 2, 0), (0, 3, 0)]), (3, 2));
    }
}
