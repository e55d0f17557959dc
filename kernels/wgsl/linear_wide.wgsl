// Scheme::Linear, 16-byte slots, on adapters with 64-bit atomics (Vulkan
// and DX12 on most GPUs; never a browser): a key field is claimed whole
// with one 64-bit compare-exchange, as an 8-byte slot's key word is with a
// 32-bit one (linear.wgsl, claim_direct). Two invocations with one key
// walk one sequence and meet at one slot, so an insert is a single pass
// (plus `fold` for apply) with no representatives elected first.
//
// Appended to the linear module only where those atomics are enabled
// (src/backend/wgpu/gpu.rs); the occupancy bitmap of the 32-bit path is
// not kept, since every call on such a table takes this path.

// The slots as 64-bit fields: slot s's key is field 2s, its value 2s + 1.
@group(0) @binding(1) var<storage, read_write> slot_fields: array<atomic<u64>>;

fn field64(v: vec2<u32>) -> u64 {
    return (u64(v.y) << 32u) | u64(v.x);
}

// The slot of key field k, claimed if new (GH_NEW_BIT set), or GH_NONE
// when the probe limit passed first.
fn claim_wide(k: vec2<u32>) -> u32 {
    let key = field64(k);
    let empty = field64(vec2<u32>(GH_EMPTY_WORD_0, GH_EMPTY_WORD_1));
    var b = home_bucket(k);
    for (var step = 0u; step < params.limit; step += 1u) {
        for (var j = 0u; j < GH_SLOTS_PER_BUCKET; j += 1u) {
            let s = b * GH_SLOTS_PER_BUCKET + j;
            var cur = atomicLoad(&slot_fields[2u * s]);
            // Retried only while the field stays EMPTY (a weak exchange may fail spuriously).
            loop {
                if (cur != empty) {
                    break;
                }
                let r = atomicCompareExchangeWeak(&slot_fields[2u * s], empty, key);
                if (r.exchanged) {
                    return s | GH_NEW_BIT;
                }
                cur = r.old_value;
            }
            if (cur == key) {
                return s;
            }
        }
        b = next_bucket(b);
    }
    return GH_NONE;
}

// insert_direct over claim_wide: the claimer writes its value, assign has
// every duplicate write its own (one whole value is left: one 64-bit
// store each), if-absent writes nothing more, apply leaves out[i] = the
// slot for `fold`. counters[0] += keys placed; refused and out-of-band keys
// go to the flags list.
@compute @workgroup_size(256)
fn insert_wide(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var placed = 0u;
    let total = rounds();
    for (var r = 0u; r < total; r += 1u) {
        let i = gid.x + r * params.stride;
        if (i < params.n) {
            let k = item_key(i);
            var fold_at = GH_NONE;
            if (special_of(k) != 0u) {
                report(GH_SPECIAL_BIT | (params.base + i));
            } else {
                let v = field64(item_value(i));
                let c = claim_wide(k);
                if (c == GH_NONE) {
                    report(params.base + i);
                } else if ((c & GH_NEW_BIT) != 0u) {
                    atomicStore(&slot_fields[2u * (c & ~GH_NEW_BIT) + 1u], v);
                    placed += 1u;
                } else if (params.mode == GH_MODE_ASSIGN) {
                    atomicStore(&slot_fields[2u * c + 1u], v);
                } else if (params.mode == GH_MODE_APPLY) {
                    fold_at = c;
                }
            }
            if (params.mode == GH_MODE_APPLY) {
                out[i] = fold_at;
            }
        }
    }
    add_count(placed, lid);
}
