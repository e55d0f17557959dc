// Scheme::Linear (src/backend/cpu/linear.rs, kernels/schemes/linear.cuh):
// a key's sequence starts at the first slot of its multiply-shift home
// bucket and runs linearly over slots, wrapping around, for at most
// `limit` buckets. Inserts take the first EMPTY slot of the sequence, so a
// lookup stops at the first EMPTY slot it meets (a slot never becomes EMPTY
// again but by a clear or a rebuild, so a key lies before any EMPTY slot of
// its sequence).

fn home_bucket(k: vec2<u32>) -> u32 {
    return reduce_range(mix64(k, seed()), params.buckets);
}

fn next_bucket(b: u32) -> u32 {
    return select(b + 1u, 0u, b + 1u == params.buckets);
}

// Releases slot `s`, found holding key `k`, for bulk.wgsl's erases: a
// TOMBSTONE (common.wgsl bury), so the sequences through it stay whole.
fn release_slot(s: u32, k: vec2<u32>) -> bool {
    return bury(s, k);
}

// The slot holding key `k`, or GH_NONE.
fn find_slot(k: vec2<u32>) -> u32 {
    var b = home_bucket(k);
    for (var step = 0u; step < params.limit; step += 1u) {
        for (var j = 0u; j < GH_SLOTS_PER_BUCKET; j += 1u) {
            let s = b * GH_SLOTS_PER_BUCKET + j;
            let sk = slot_key(s);
            if (all(sk == k)) {
                return s;
            }
            if (all(sk == EMPTY_KEY)) {
                return GH_NONE;
            }
        }
        b = next_bucket(b);
    }
    return GH_NONE;
}

// 8-byte slots: the slot of key `k` (32-bit key field), claimed with one
// compare-exchange on its key word if the key is new. Returns the slot
// with GH_NEW_BIT set if this invocation placed the key, or GH_NONE when
// the probe limit passed first. Two invocations with one key walk one
// sequence: the first to claim an EMPTY slot of it wins, and the other
// meets the key there, so a key is never placed twice.
fn claim_direct(k: u32) -> u32 {
    var b = home_bucket(vec2<u32>(k, 0u));
    for (var step = 0u; step < params.limit; step += 1u) {
        for (var j = 0u; j < GH_SLOTS_PER_BUCKET; j += 1u) {
            let c = claim_key_word(b * GH_SLOTS_PER_BUCKET + j, k);
            if (c != GH_NONE) {
                return c;
            }
        }
        b = next_bucket(b);
    }
    return GH_NONE;
}

// Any slot width: places key `k`, absent from the table and held by no
// other invocation of the dispatch, in the first slot of its sequence no
// one has taken, with value `v`. Returns the slot, or GH_NONE when the
// probe limit passed first. Reads no key words, so it cannot see a pair
// half-written by another invocation.
fn claim_free(k: vec2<u32>, v: vec2<u32>) -> u32 {
    var b = home_bucket(k);
    for (var step = 0u; step < params.limit; step += 1u) {
        for (var j = 0u; j < GH_SLOTS_PER_BUCKET; j += 1u) {
            let s = b * GH_SLOTS_PER_BUCKET + j;
            if (take_slot(s)) {
                store_pair(s, k, v);
                return s;
            }
        }
        b = next_bucket(b);
    }
    return GH_NONE;
}

// ------------------------------------------------------------------ lookups

// Key k's value as (hit, value lo, value hi): find_slot's sequence, a
// bucket at a time (lines.wgsl), ending at the first EMPTY slot.
fn lookup(k: vec2<u32>) -> vec3<u32> {
    var b = home_bucket(k);
    for (var step = 0u; step < params.limit; step += 1u) {
        let d = bucket_lookup(b, k, true);
        if (d.x != 0u) {
            return d.yzw;
        }
        b = next_bucket(b);
    }
    return vec3<u32>(0u, 0u, 0u);
}
