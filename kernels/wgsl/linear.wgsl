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

// The slots again, as 16-byte lines: a bucket is two lines (one 32-byte
// sector), read with two plain vector loads. Atomic loads fetch each word
// on its own, which made lookups read the table several times over. Only
// `find_lines` uses this view, and lookups run while nothing writes.
@group(0) @binding(1) var<storage, read_write> slot_lines: array<vec4<u32>>;

// One slot's verdict on key k, as (decided, hit, value lo, value hi):
// decided when the slot holds k or is EMPTY (k is absent: the probe ends).
fn verdict(slot_key: vec2<u32>, value: vec2<u32>, k: vec2<u32>) -> vec4<u32> {
    if (all(slot_key == k)) {
        return vec4<u32>(1u, 1u, value);
    }
    return vec4<u32>(select(0u, 1u, all(slot_key == EMPTY_KEY)), 0u, 0u, 0u);
}

// Key k's value as (hit, value lo, value hi): find_slot's sequence, a
// bucket at a time.
// (No local array of a bucket's slots: a dynamically indexed array lands
// in local memory, three times slower on an NVIDIA GPU.)
fn lookup_lines(k: vec2<u32>) -> vec3<u32> {
    var b = home_bucket(k);
    for (var step = 0u; step < params.limit; step += 1u) {
        let a = slot_lines[2u * b];
        let c = slot_lines[2u * b + 1u];
        var d: vec4<u32>;
        if (GH_FIELD_WORDS == 1u) {
            // Four 8-byte slots, [key | value] twice per line.
            d = verdict(vec2<u32>(a.x, 0u), vec2<u32>(a.y, 0u), k);
            if (d.x == 0u) {
                d = verdict(vec2<u32>(a.z, 0u), vec2<u32>(a.w, 0u), k);
            }
            if (d.x == 0u) {
                d = verdict(vec2<u32>(c.x, 0u), vec2<u32>(c.y, 0u), k);
            }
            if (d.x == 0u) {
                d = verdict(vec2<u32>(c.z, 0u), vec2<u32>(c.w, 0u), k);
            }
        } else {
            // Two 16-byte slots, a line each: [key lo | key hi | value lo | value hi].
            d = verdict(a.xy, a.zw, k);
            if (d.x == 0u) {
                d = verdict(c.xy, c.zw, k);
            }
        }
        if (d.x != 0u) {
            return d.yzw;
        }
        b = next_bucket(b);
    }
    return vec3<u32>(0u, 0u, 0u);
}

// `find` with lookup_lines: the same results.
@compute @workgroup_size(256)
fn find_lines(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var hits = 0u;
    let total = rounds();
    for (var r = 0u; r < total; r += 1u) {
        let i = gid.x + r * params.stride;
        if (i < params.n) {
            let k = item_key(i);
            let sp = special_of(k);
            if (sp != 0u) {
                hits += found_special(i, sp);
            } else {
                let h = lookup_lines(k);
                hits += found(i, h.x != 0u, h.yz);
            }
        }
    }
    add_count(hits, lid);
}
