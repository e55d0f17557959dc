// Scheme::Cuckoo and Scheme::TwoLevel, 16-byte slots, on adapters with
// 64-bit atomics: phase 1 claims a key field whole with one 64-bit
// compare-exchange, as 8-byte slots do with 32 bits (cuckoo.wgsl,
// claim_direct), so copies of a key meet at one slot and no
// representatives are elected but for the keys phase 2 places
// (dedupe_pending).
//
// Appended to the cuckoo module only where those atomics are enabled
// (src/backend/wgpu/gpu.rs); the occupancy bits are not read on such a
// table's candidate buckets (only claim_free reads them; the two-level
// overflow's bits are its puts' and erases').

// The slots as 64-bit fields: slot s's key is field 2s, its value 2s + 1.
@group(0) @binding(1) var<storage, read_write> slot_fields: array<atomic<u64>>;

fn field64(v: vec2<u32>) -> u64 {
    return (u64(v.y) << 32u) | u64(v.x);
}

// The slot holding key field `key` (find_slot's), its key read whole: a
// claim may be writing a candidate slot meanwhile, and two 32-bit reads
// could see half of it. (Every read goes through `slot_fields`: an entry
// point may not also use `slots`, bound to the same buffer.)
fn find_wide(k: vec2<u32>, key: u64) -> u32 {
    let c = basis(k);
    for (var j = 0u; j < GH_CUCKOO_CHOICES; j += 1u) {
        for (var t = 0u; t < GH_SLOTS_PER_BUCKET; t += 1u) {
            let s = cand(c, j) * GH_SLOTS_PER_BUCKET + t;
            if (atomicLoad(&slot_fields[2u * s]) == key) {
                return s;
            }
        }
    }
    // Spill slots change in phase 2 only: spill_find's reads, as fields.
    if (GH_TWO_LEVEL) {
        if (atomicLoad(&occupied[spill_word(region_of(k))]) == 0u) {
            return GH_NONE;
        }
        let empty = field64(vec2<u32>(GH_EMPTY_WORD_0, GH_EMPTY_WORD_1));
        let g = regions();
        var b = overflow_home(k, g);
        for (var i = 0u; i < min(g.overflow, GH_TL_OVERFLOW_PROBE); i += 1u) {
            var open = false;
            for (var t = 0u; t < GH_SLOTS_PER_BUCKET; t += 1u) {
                let f = atomicLoad(&slot_fields[2u * (b * GH_SLOTS_PER_BUCKET + t)]);
                if (f == key) {
                    return b * GH_SLOTS_PER_BUCKET + t;
                }
                open = open || f == empty;
            }
            if (open) {
                return GH_NONE;
            }
            b = overflow_next(b, g);
        }
        return GH_NONE;
    }
    let mask = atomicLoad(&occupied[mask_word()]);
    if (mask != 0u) {
        let first = stash_first();
        for (var i = 0u; i < stash_slots(); i += 1u) {
            if ((mask & (1u << i)) != 0u && atomicLoad(&slot_fields[2u * (first + i)]) == key) {
                return first + i;
            }
        }
    }
    return GH_NONE;
}

// claim_direct for a 64-bit key field: the slot of k (GH_NEW_BIT set if
// this invocation placed it), or GH_DEFERRED if every candidate slot holds
// another key.
fn claim_wide(k: vec2<u32>) -> u32 {
    let key = field64(k);
    let found = find_wide(k, key);
    if (found != GH_NONE) {
        return found;
    }
    let empty = field64(vec2<u32>(GH_EMPTY_WORD_0, GH_EMPTY_WORD_1));
    let c = basis(k);
    for (var j = 0u; j < GH_CUCKOO_CHOICES; j += 1u) {
        for (var t = 0u; t < GH_SLOTS_PER_BUCKET; t += 1u) {
            let s = cand(c, j) * GH_SLOTS_PER_BUCKET + t;
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
    }
    return GH_DEFERRED;
}

// Phase 1 over claim_wide, as insert_item over claim_direct: the claimer
// writes its value, assign has every copy write its own (one whole value
// is left: one 64-bit store each), if-absent writes nothing more. out[i] =
// the slot for apply's `fold`, GH_DEFERRED for phase 2, else GH_NONE.
// counters[0] += keys placed; out-of-band keys go to the flags list.
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
                if (c == GH_DEFERRED) {
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
            out[i] = next;
        }
    }
    add_count(placed, lid);
}
