// Shared by every WGSL scheme: bindings, the hash, and slot access.
//
// The constants (GH_*) are not defined here: src/core/constants.rs
// (wgsl_header) emits them from the Rust core and prepends them when the
// pipelines are created, so the shaders and the CPU backend cannot drift.
// GH_NONE ("no slot": absent, or no free slot found) comes from
// src/backend/wgpu/gpu.rs the same way.
//
// Only 32-bit integers and 32-bit atomics are used, as in browser WebGPU:
// 64-bit keys, values and hash arithmetic are vec2<u32> (x = low word,
// y = high word), and a slot is GH_SLOT_WORDS atomic<u32> words in the
// memory order of the CPU's packed slot word:
//
//   8-byte slot:   [ key | value ]                     (32-bit key field)
//   16-byte slot:  [ key lo | key hi | value lo | value hi ]
//
// A slot spans several atomics, so no single atomic publishes a pair. Each
// bulk call is therefore split into dispatches in which no invocation reads
// words another one may be writing (dispatches of one pass are ordered, and
// each sees the writes of the ones before):
//   * lookups (`locate`) only read;
//   * new keys are placed by `claim`, whose invocations never read key
//     words: a slot is taken by setting its bit in `occupied` (one
//     atomicOr decides the owner), and only the owner writes the slot;
//   * updates of present keys (`store_values`) and erasures (`tombstone`)
//     write slots found by an earlier `locate` and read nothing.
// The host removes duplicate keys from a batch before it places or erases
// them, so two invocations of one dispatch never hold the same key.

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
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// The table's slots.
@group(0) @binding(1) var<storage, read_write> slots: array<atomic<u32>>;
// One bit per slot, set once the slot is not EMPTY (claimed, then full or a
// tombstone); cleared only by a clear or a rebuild, like EMPTY itself.
@group(0) @binding(2) var<storage, read_write> occupied: array<atomic<u32>>;
// Per item: its key (GH_FIELD_WORDS words) or, for `store_values`, a slot.
@group(0) @binding(3) var<storage, read> items: array<u32>;
// Per item: its value (GH_FIELD_WORDS words).
@group(0) @binding(4) var<storage, read> values: array<u32>;
// Per item: what the entry point reports (see each one).
@group(0) @binding(5) var<storage, read_write> results: array<u32>;

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

// ------------------------------------------------------------------ slots

const EMPTY_KEY: vec2<u32> = vec2<u32>(GH_EMPTY_KEY_LO, GH_EMPTY_KEY_HI);

// Key item `i` (the high word is 0 for a 32-bit key field).
fn item_key(i: u32) -> vec2<u32> {
    if (GH_FIELD_WORDS == 2u) {
        return vec2<u32>(items[2u * i], items[2u * i + 1u]);
    }
    return vec2<u32>(items[i], 0u);
}

// The key field of slot `s`.
fn slot_key(s: u32) -> vec2<u32> {
    let w = s * GH_SLOT_WORDS;
    if (GH_FIELD_WORDS == 2u) {
        return vec2<u32>(atomicLoad(&slots[w]), atomicLoad(&slots[w + 1u]));
    }
    return vec2<u32>(atomicLoad(&slots[w]), 0u);
}

// Writes key field `k` and value item `i` into slot `s`.
fn write_pair(s: u32, k: vec2<u32>, i: u32) {
    let w = s * GH_SLOT_WORDS;
    atomicStore(&slots[w], k.x);
    if (GH_FIELD_WORDS == 2u) {
        atomicStore(&slots[w + 1u], k.y);
    }
    write_value(s, i);
}

// Writes value item `i` into slot `s`.
fn write_value(s: u32, i: u32) {
    let w = s * GH_SLOT_WORDS + GH_FIELD_WORDS;
    for (var j = 0u; j < GH_FIELD_WORDS; j += 1u) {
        atomicStore(&slots[w + j], values[i * GH_FIELD_WORDS + j]);
    }
}

// Writes the TOMBSTONE marker over slot `s` (every word, as the CPU does).
fn write_tombstone(s: u32) {
    let w = s * GH_SLOT_WORDS;
    atomicStore(&slots[w], GH_TOMBSTONE_WORD_0);
    atomicStore(&slots[w + 1u], GH_TOMBSTONE_WORD_1);
    if (GH_SLOT_WORDS == 4u) {
        atomicStore(&slots[w + 2u], GH_TOMBSTONE_WORD_2);
        atomicStore(&slots[w + 3u], GH_TOMBSTONE_WORD_3);
    }
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

// ------------------------------------------------------------------ maintenance

// Every slot word to all ones: every slot EMPTY (n = words).
@compute @workgroup_size(64)
fn fill_empty(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var i = gid.x; i < params.n; i += params.stride) {
        atomicStore(&slots[i], 0xffffffffu);
    }
}

// Writes the value of item i into the slot held in items[i] (a slot that
// `locate` found holding the key).
@compute @workgroup_size(64)
fn store_values(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var i = gid.x; i < params.n; i += params.stride) {
        write_value(items[i], i);
    }
}

// Turns the slots that `locate` wrote to results (stride 1 + GH_FIELD_WORDS)
// into tombstones, and leaves 1 in results[i * stride] for a key erased, 0
// for a key absent.
@compute @workgroup_size(64)
fn tombstone(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var i = gid.x; i < params.n; i += params.stride) {
        let r = i * (1u + GH_FIELD_WORDS);
        let s = results[r];
        if (s != GH_NONE) {
            write_tombstone(s);
        }
        results[r] = select(0u, 1u, s != GH_NONE);
    }
}
