// Scheme::Linear (src/backend/cpu/linear.rs, kernels/schemes/linear.cuh):
// a key's sequence starts at the first slot of its multiply-shift home
// bucket and runs linearly over slots, wrapping around, for at most
// `limit` buckets. Inserts take the first EMPTY slot of the sequence, so a
// lookup stops at the first EMPTY slot it meets.

fn home_bucket(k: vec2<u32>) -> u32 {
    return reduce_range(mix64(k, seed()), params.buckets);
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
        b += 1u;
        if (b == params.buckets) {
            b = 0u;
        }
    }
    return GH_NONE;
}

// For each key item: results[i * (1 + GH_FIELD_WORDS)] = its slot or
// GH_NONE, followed by the value words found (left as they were when absent).
@compute @workgroup_size(64)
fn locate(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var i = gid.x; i < params.n; i += params.stride) {
        let s = find_slot(item_key(i));
        let r = i * (1u + GH_FIELD_WORDS);
        results[r] = s;
        if (s != GH_NONE) {
            let w = s * GH_SLOT_WORDS + GH_FIELD_WORDS;
            for (var j = 0u; j < GH_FIELD_WORDS; j += 1u) {
                results[r + 1u + j] = atomicLoad(&slots[w + j]);
            }
        }
    }
}

// Places key items that are absent from the table (and distinct): each
// takes the first slot of its sequence that no one has taken, and writes
// its key and value there. results[i] = the slot, or GH_NONE when the
// probe limit passed first (the key is refused). Reads no key words (see
// common.wgsl), so it cannot see a pair half-written by another invocation.
@compute @workgroup_size(64)
fn claim(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var i = gid.x; i < params.n; i += params.stride) {
        let k = item_key(i);
        var b = home_bucket(k);
        var placed = GH_NONE;
        for (var step = 0u; step < params.limit && placed == GH_NONE; step += 1u) {
            for (var j = 0u; j < GH_SLOTS_PER_BUCKET; j += 1u) {
                let s = b * GH_SLOTS_PER_BUCKET + j;
                if (take_slot(s)) {
                    write_pair(s, k, i);
                    placed = s;
                    break;
                }
            }
            b += 1u;
            if (b == params.buckets) {
                b = 0u;
            }
        }
        results[i] = placed;
    }
}
