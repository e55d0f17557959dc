//! [`Scheme::Cuckoo`](crate::Scheme::Cuckoo) on wgpu (`kernels/wgsl/cuckoo.wgsl`):
//! the constants its module takes from the core, the size of its words
//! beside the occupancy bits, the dispatches that place the keys a batch's
//! first phase left without a slot, and where a key sits among its
//! candidates. Candidates and stash are the CPU's ([`crate::core::cuckoo`]),
//! so lookups agree with it; which slot a key takes may differ.

use super::gpu::{Bindings, Kernel, Params, Range, Work};
use crate::core::cuckoo::{candidate, choices, stash_buckets, MAX_EVICTIONS, SALTS, STASH_PAIRS, WALK_SALT, WALK_STEP_MUL};
use crate::Result;

/// Keys one dispatch of the serial phase places at most: one per
/// invocation of its single workgroup, in turn (an invocation that placed
/// several keys in one dispatch lost moves on lavapipe). Dispatches stay
/// short whatever the batch; a chunk of `n` items records `n / SERIAL_KEYS`
/// of them, indirect, and those past the keys left run no workgroup.
const SERIAL_KEYS: u32 = super::gpu::WORKGROUP;

/// Scratch words the placement phase uses before its list of keys (count,
/// cursor, moved flag, padding): `kernels/wgsl/cuckoo.wgsl` PENDING_LIST.
pub(super) const SCRATCH_HEADER: usize = 4;

// One mask word holds the stash.
const _: () = assert!(STASH_PAIRS <= 32);

/// The module's constants for slots of `slot_bytes`.
pub(super) fn wgsl_constants(slot_bytes: usize) -> String {
    let mut s = String::new();
    let mut def = |name: &str, x: u64| s += &format!("const {name}: u32 = 0x{:08x}u;\n", x as u32);
    def("GH_CUCKOO_CHOICES", choices(slot_bytes) as u64);
    def("GH_CUCKOO_STASH_PAIRS", STASH_PAIRS);
    def("GH_CUCKOO_MAX_EVICTIONS", MAX_EVICTIONS);
    def("GH_CUCKOO_SERIAL_KEYS", SERIAL_KEYS as u64);
    let mut split = |name: &str, x: u64| {
        def(&format!("{name}_LO"), x);
        def(&format!("{name}_HI"), x >> 32);
    };
    for (j, &salt) in SALTS.iter().enumerate() {
        split(&format!("GH_CUCKOO_SALT_{j}"), salt);
    }
    split("GH_CUCKOO_WALK_SALT", WALK_SALT);
    split("GH_CUCKOO_WALK_STEP_MUL", WALK_STEP_MUL);
    s
}

/// 32-bit words of the `occupied` buffer: a bit per slot, then a lock bit
/// per bucket and one for the stash, then the stash mask.
pub(super) fn occupied_words(slots: u64, buckets: u64) -> u64 {
    slots.div_ceil(32) + (buckets + 1).div_ceil(32) + 1
}

/// Records the second phase of an insert chunk, after `claim_reps`: the
/// representatives left without a slot are listed in `scratch` (the
/// de-duplication table, done with by then), placed one at a time
/// ([`SERIAL_KEYS`] per dispatch; enough dispatches for every item of the
/// chunk), and every representative's slot is looked up again if a path
/// moved keys.
pub(super) async fn record_placement(
    w: &mut Work<'_>,
    scratch: &wgpu::Buffer,
    args: &wgpu::Buffer,
    p: Params,
    b: &Bindings<'_>,
) -> Result<()> {
    let serial = p.n.div_ceil(SERIAL_KEYS);
    w.clear_range(scratch, SCRATCH_HEADER as u64 * 4);
    w.dispatch(Kernel::CollectPending, p, b).await?;
    let to_args = Bindings { out: Some(Range::items(args, 0, serial as usize * 3, 1)), ..*b };
    w.dispatch(Kernel::SerialArgs, Params { n: serial, ..p }, &to_args).await?;
    w.dispatch_times(Kernel::EvictSerial, Params { n: 1, ..p }, b, serial, Some(args)).await?;
    w.dispatch(Kernel::Relocate, p, b).await
}

/// Bytes of the indirect arguments of a chunk of `n` items' serial dispatches.
pub(super) fn args_bytes(n: usize) -> u64 {
    n.div_ceil(SERIAL_KEYS as usize) as u64 * 12
}

/// Where `key` in `slot` sits: the index of its candidate bucket, or the
/// number of candidates for a stash slot (as the CPU reports it).
pub(super) fn displacement(key: u64, slot: u64, buckets: u64, seed: u64, slot_bytes: usize) -> u64 {
    let spb = (crate::core::layout::BUCKET_BYTES / slot_bytes) as u64;
    let main = buckets - stash_buckets(buckets, spb);
    let d = choices(slot_bytes);
    (0..d).position(|j| candidate(key, seed, j, main) == slot / spb).unwrap_or(d) as u64
}
