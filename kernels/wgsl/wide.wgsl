// 16-byte slots on adapters with 64-bit atomics (Vulkan and DX12 on most
// GPUs; never a browser), for the schemes that claim key fields directly
// (linear.wgsl, cuckoo.wgsl): a key field is claimed whole with one 64-bit
// compare-exchange, as an 8-byte slot's key word is with a 32-bit one
// (common.wgsl claim_key_word), so copies of a key meet at one slot and
// an insert is a single pass (plus `fold` for apply; plus phase 2 for the
// keys a cuckoo scheme defers) with no representatives elected first.
//
// Appended, with the scheme's own claim_wide (linear_wide.wgsl,
// cuckoo_wide.wgsl), only where those atomics are enabled
// (src/backend/wgpu/gpu.rs). Such a table never reads the occupancy bits
// of the slots these calls claim (only claim_free does).

// The slots as 64-bit fields: slot s's key is field 2s, its value 2s + 1.
@group(0) @binding(1) var<storage, read_write> slot_fields: array<atomic<u64>>;

fn field64(v: vec2<u32>) -> u64 {
    return (u64(v.y) << 32u) | u64(v.x);
}

// claim_key_word for a 64-bit key field: claims slot `s` for `key` with
// one compare-exchange while the field is EMPTY. s | GH_NEW_BIT if this
// invocation placed `key` there, `s` if the slot holds `key` already,
// else GH_NONE (another key or a TOMBSTONE).
fn claim_key_field(s: u32, key: u64) -> u32 {
    let empty = field64(vec2<u32>(GH_EMPTY_WORD_0, GH_EMPTY_WORD_1));
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
    return select(GH_NONE, s, cur == key);
}

// insert_direct over the scheme's claim_wide (bulk.wgsl insert_item's
// outcomes): the claimer writes its value, assign has every copy write its
// own (one whole value is left: one 64-bit store each), if-absent writes
// nothing more. out[i] = the slot for apply's `fold`, GH_DEFERRED for a
// cuckoo scheme's phase 2, else GH_NONE. counters[0] += keys placed;
// refused and out-of-band keys go to the flags list.
@compute @workgroup_size(256)
fn insert_wide(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var placed = 0u;
    let total = rounds();
    for (var r = 0u; r < total; r += 1u) {
        let i = gid.x + r * params.stride;
        if (i < params.n) {
            let k = item_key(i);
            var next = GH_NONE;
            if (special_of(k) != 0u) {
                report(GH_SPECIAL_BIT | (params.base + i));
            } else {
                let v = field64(item_value(i));
                let c = claim_wide(k);
                if (c == GH_NONE) {
                    report(params.base + i);
                } else if (c == GH_DEFERRED) {
                    next = GH_DEFERRED;
                } else if ((c & GH_NEW_BIT) != 0u) {
                    atomicStore(&slot_fields[2u * (c & ~GH_NEW_BIT) + 1u], v);
                    placed += 1u;
                } else if (params.mode == GH_MODE_ASSIGN) {
                    atomicStore(&slot_fields[2u * c + 1u], v);
                } else if (params.mode == GH_MODE_APPLY) {
                    next = c;
                }
            }
            if (params.mode == GH_MODE_APPLY || GH_DEFERS != 0u) {
                out[i] = next;
            }
        }
    }
    add_count(placed, lid);
}
