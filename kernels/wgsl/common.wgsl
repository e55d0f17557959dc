// Shared by every WGSL scheme: bindings, the hash, slot access, reductions.
//
// The constants (GH_*) are not defined here: src/core/constants.rs
// (wgsl_header) emits the layout and hash constants from the Rust core, and
// src/backend/wgpu/gpu.rs adds the ones of the pipeline's variant (key and
// value widths of the caller's arrays, codes), so the shaders and the CPU
// backend cannot drift.
//
// Only 32-bit integers and 32-bit atomics are used, as in browser WebGPU:
// 64-bit keys, values and hash arithmetic are vec2<u32> (x = low word,
// y = high word), and a slot is GH_SLOT_WORDS atomic<u32> words in the
// memory order of the CPU's packed slot word:
//
//   8-byte slot:   [ key | value ]                     (32-bit key field)
//   16-byte slot:  [ key lo | key hi | value lo | value hi ]
//
// Within one dispatch no invocation reads a key word that another one may
// be writing, except a single-word key claimed with one compare-exchange
// (8-byte slots): a reader sees the whole key or EMPTY. Dispatches of one
// submission run in order, each seeing the writes of those before.

struct Params {
    // Items of this dispatch.
    n: u32,
    // Buckets of the table (the host checks it fits in 32 bits).
    buckets: u32,
    // Buckets visited at most (1..=buckets).
    limit: u32,
    // Invocations in the grid: each one handles items gid, gid + stride, ...
    stride: u32,
    seed_lo: u32,
    seed_hi: u32,
    // Insert: GH_MODE_*. Find: 1 writes the values found, 0 only the flags.
    mode: u32,
    // GH_REDUCE_* of an insert-or-apply.
    op: u32,
    // GH_KIND_* of the value type.
    kind: u32,
    // Batch position of this dispatch's item 0 (reported positions).
    base: u32,
    // Entries of the de-duplication table, minus one (a power of two).
    mask: u32,
    // Find: bit 1 set if the EMPTY key is stored out of band, bit 2 the TOMBSTONE key.
    specials: u32,
    // Their values (EMPTY lo, hi, TOMBSTONE lo, hi).
    sv0: u32,
    sv1: u32,
    sv2: u32,
    sv3: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// The table's slots.
@group(0) @binding(1) var<storage, read_write> slots: array<atomic<u32>>;
// One bit per slot, set once the slot is not EMPTY (16-byte slots: their
// key is two words, so a slot is claimed by this bit, then written).
@group(0) @binding(2) var<storage, read_write> occupied: array<atomic<u32>>;
// The caller's keys (GH_KEY_WORDS words each) and values (GH_VALUE_WORDS).
@group(0) @binding(3) var<storage, read> keys: array<u32>;
@group(0) @binding(4) var<storage, read> values: array<u32>;
// Per item: find's values out; an insert's or erase's state between dispatches.
@group(0) @binding(5) var<storage, read_write> out: array<u32>;
// Per item: find's found flags (0 or 1). Inserts: the list of positions to
// report (refused keys; GH_SPECIAL_BIT | position for out-of-band keys).
@group(0) @binding(6) var<storage, read_write> flags: array<u32>;
// [0] keys inserted / found / erased, [1] length of the `flags` list,
// [2] out-of-band keys met by an erase (bit 1 EMPTY, bit 2 TOMBSTONE).
@group(0) @binding(7) var<storage, read_write> counters: array<atomic<u32>>;
// The de-duplication table of a batch (item index + 1 per entry, 0 = free).
@group(0) @binding(8) var<storage, read_write> scratch: array<atomic<u32>>;

// Per workgroup, summed before one global atomic (no hot counter word).
var<workgroup> wg_count: atomic<u32>;

// ------------------------------------------------------------------ hash

// The full 64-bit product of two 32-bit words, as (low, high).
fn mul_wide(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    // At most 3 * 0xffff: no overflow.
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    let lo = (p00 & 0xffffu) | (mid << 16u);
    let hi = p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u);
    return vec2<u32>(lo, hi);
}

// a * b mod 2^64.
fn mul64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let p = mul_wide(a.x, b.x);
    return vec2<u32>(p.x, p.y + a.x * b.y + a.y * b.x);
}

// h ^ (h >> GH_MIX_SHIFT), for a shift between 32 and 64 (checked in Rust).
fn xor_shift(h: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(h.x ^ (h.y >> (GH_MIX_SHIFT - 32u)), h.y);
}

// src/core/hash.rs mix64: MurmurHash3's fmix64 of the seeded key.
fn mix64(key: vec2<u32>, seed: vec2<u32>) -> vec2<u32> {
    var h = key ^ seed;
    h = xor_shift(h);
    h = mul64(h, vec2<u32>(GH_MIX_MUL_1_LO, GH_MIX_MUL_1_HI));
    h = xor_shift(h);
    h = mul64(h, vec2<u32>(GH_MIX_MUL_2_LO, GH_MIX_MUL_2_HI));
    return xor_shift(h);
}

// src/core/hash.rs reduce_range: (h * n) >> 64, for n < 2^32.
fn reduce_range(h: vec2<u32>, n: u32) -> u32 {
    let lo = mul_wide(h.x, n);
    let hi = mul_wide(h.y, n);
    let mid = hi.x + lo.y;
    let carry = select(0u, 1u, mid < hi.x);
    return hi.y + carry;
}

fn seed() -> vec2<u32> {
    return vec2<u32>(params.seed_lo, params.seed_hi);
}

// ------------------------------------------------------------------ items

const EMPTY_KEY: vec2<u32> = vec2<u32>(GH_EMPTY_KEY_LO, GH_EMPTY_KEY_HI);

// Rounds of the grid-stride loop: the same for every invocation, so the
// barrier after it is in uniform control flow.
fn rounds() -> u32 {
    return (params.n + params.stride - 1u) / params.stride;
}

// The caller's key `i`, widened to a key field (high word 0 for 32 bits).
fn item_key(i: u32) -> vec2<u32> {
    if (GH_KEY_WORDS == 2u) {
        return vec2<u32>(keys[2u * i], keys[2u * i + 1u]);
    }
    return vec2<u32>(keys[i], 0u);
}

// The caller's value `i`, zero-extended to a value field (as Value::to_bits).
fn item_value(i: u32) -> vec2<u32> {
    if (GH_VALUE_WORDS == 2u) {
        return vec2<u32>(values[2u * i], values[2u * i + 1u]);
    }
    return vec2<u32>(values[i], 0u);
}

// 1 for the key type's EMPTY marker, 2 for its TOMBSTONE, else 0: those
// two keys live out of band (their bits mark slots).
fn special_of(k: vec2<u32>) -> u32 {
    if (all(k == vec2<u32>(GH_KEY_EMPTY_LO, GH_KEY_EMPTY_HI))) {
        return 1u;
    }
    if (all(k == vec2<u32>(GH_KEY_TOMBSTONE_LO, GH_KEY_TOMBSTONE_HI))) {
        return 2u;
    }
    return 0u;
}

// Appends `entry` to the `flags` list.
fn report(entry: u32) {
    let at = atomicAdd(&counters[1], 1u);
    flags[at] = entry;
}

// Adds this workgroup's `count` to counters[0]: one global atomic per group.
fn add_count(count: u32, lid: u32) {
    atomicAdd(&wg_count, count);
    workgroupBarrier();
    if (lid == 0u) {
        let c = atomicLoad(&wg_count);
        if (c != 0u) {
            atomicAdd(&counters[0], c);
        }
    }
}

// ------------------------------------------------------------------ slots

// The key field of slot `s`.
fn slot_key(s: u32) -> vec2<u32> {
    let w = s * GH_SLOT_WORDS;
    if (GH_FIELD_WORDS == 2u) {
        return vec2<u32>(atomicLoad(&slots[w]), atomicLoad(&slots[w + 1u]));
    }
    return vec2<u32>(atomicLoad(&slots[w]), 0u);
}

// The value field of slot `s`.
fn slot_value(s: u32) -> vec2<u32> {
    let w = s * GH_SLOT_WORDS + GH_FIELD_WORDS;
    if (GH_FIELD_WORDS == 2u) {
        return vec2<u32>(atomicLoad(&slots[w]), atomicLoad(&slots[w + 1u]));
    }
    return vec2<u32>(atomicLoad(&slots[w]), 0u);
}

fn store_value(s: u32, v: vec2<u32>) {
    let w = s * GH_SLOT_WORDS + GH_FIELD_WORDS;
    atomicStore(&slots[w], v.x);
    if (GH_FIELD_WORDS == 2u) {
        atomicStore(&slots[w + 1u], v.y);
    }
}

// Writes key field `k` and value field `v` into slot `s`.
fn store_pair(s: u32, k: vec2<u32>, v: vec2<u32>) {
    let w = s * GH_SLOT_WORDS;
    atomicStore(&slots[w], k.x);
    if (GH_FIELD_WORDS == 2u) {
        atomicStore(&slots[w + 1u], k.y);
    }
    store_value(s, v);
}

// 8-byte slots: claims slot `s` for the 32-bit key `k` with one
// compare-exchange on its key word while that is EMPTY. Returns
// s | GH_NEW_BIT if this invocation placed `k` there, `s` if the slot holds
// `k` already, else GH_NONE (another key or a TOMBSTONE). Every scheme's
// claim_direct walks its sequence with this, so copies of one key meet.
fn claim_key_word(s: u32, k: u32) -> u32 {
    let w = s * GH_SLOT_WORDS;
    var cur = atomicLoad(&slots[w]);
    // Retried only while the word stays EMPTY (a weak exchange may fail spuriously).
    loop {
        if (cur != GH_EMPTY_WORD_0) {
            break;
        }
        let r = atomicCompareExchangeWeak(&slots[w], GH_EMPTY_WORD_0, k);
        if (r.exchanged) {
            return s | GH_NEW_BIT;
        }
        cur = r.old_value;
    }
    return select(GH_NONE, s, cur == k);
}

// Sets slot `s`'s bit in `occupied`; true if this invocation set it (it
// owns the slot), false if it was set already.
fn take_slot(s: u32) -> bool {
    let bit = 1u << (s & 31u);
    if ((atomicLoad(&occupied[s >> 5u]) & bit) != 0u) {
        return false;
    }
    return (atomicOr(&occupied[s >> 5u], bit) & bit) == 0u;
}

// Turns slot `s`, found holding key `k`, into a TOMBSTONE; true for the
// one invocation that did (several may erase the same key at once). The
// compare-exchange is on a word where `k` differs from the TOMBSTONE key
// (there is one: that key is never stored in a slot).
fn bury(s: u32, k: vec2<u32>) -> bool {
    let w = s * GH_SLOT_WORDS;
    let tomb = vec4<u32>(GH_TOMBSTONE_WORD_0, GH_TOMBSTONE_WORD_1, GH_TOMBSTONE_WORD_2, GH_TOMBSTONE_WORD_3);
    var j = 0u;
    if (GH_FIELD_WORDS == 2u && k.x == GH_TOMBSTONE_WORD_0) {
        j = 1u;
    }
    let r = atomicCompareExchangeWeak(&slots[w + j], k[j], tomb[j]);
    if (!r.exchanged) {
        // Another invocation buried it, or a spurious failure: retry once
        // per spurious failure, never past a changed word.
        var old = r.old_value;
        loop {
            if (old != k[j]) {
                return false;
            }
            let again = atomicCompareExchangeWeak(&slots[w + j], k[j], tomb[j]);
            if (again.exchanged) {
                break;
            }
            old = again.old_value;
        }
    }
    for (var i = 0u; i < GH_SLOT_WORDS; i += 1u) {
        if (i != j) {
            atomicStore(&slots[w + i], tomb[i]);
        }
    }
    return true;
}

// ------------------------------------------------------------------ reductions

// Reduces `v` into word `w` of the slots with one hardware atomic: the
// reductions the GPU folds are exactly those (u32 sum, min and max; i32
// sum); the host folds the others, as a compare-exchange loop would make
// a key repeated n times in a batch cost n^2 attempts.
fn reduce_word(w: u32, v: u32) {
    if (params.op == GH_REDUCE_MIN) {
        atomicMin(&slots[w], v);
    } else if (params.op == GH_REDUCE_MAX) {
        atomicMax(&slots[w], v);
    } else {
        atomicAdd(&slots[w], v);
    }
}

// Reduces value field `v` into slot `s`. 64-bit values: wrapping sums only
// (a carry from the low word); the host folds the other 64-bit reductions.
fn reduce_into(s: u32, v: vec2<u32>) {
    let w = s * GH_SLOT_WORDS + GH_FIELD_WORDS;
    if (params.kind == GH_KIND_U64 || params.kind == GH_KIND_I64) {
        let old = atomicAdd(&slots[w], v.x);
        let carry = select(0u, 1u, old + v.x < old);
        let high = v.y + carry;
        if (high != 0u) {
            atomicAdd(&slots[w + 1u], high);
        }
        return;
    }
    reduce_word(w, v.x);
}

// ------------------------------------------------------------------ maintenance

// Every slot word to all ones: every slot EMPTY (n = words).
@compute @workgroup_size(256)
fn fill_empty(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var i = gid.x; i < params.n; i += params.stride) {
        atomicStore(&slots[i], 0xffffffffu);
    }
}
