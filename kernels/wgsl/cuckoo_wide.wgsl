// Scheme::Cuckoo's and Scheme::TwoLevel's claim of a 16-byte slot's key
// field on adapters with 64-bit atomics (wide.wgsl), as 8-byte slots
// claim their key word (cuckoo.wgsl claim_direct): copies of a key meet
// at one slot, and no representatives are elected but for the keys phase
// 2 places (dedupe_pending). The occupancy bits of candidate buckets are
// not read on such a table (only claim_free reads them; the two-level
// overflow's bits are its puts' and erases').

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
        if (atomicLoad(&occupied[spill_word(c.region)]) == 0u) {
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
    let c = basis(k);
    for (var j = 0u; j < GH_CUCKOO_CHOICES; j += 1u) {
        for (var t = 0u; t < GH_SLOTS_PER_BUCKET; t += 1u) {
            let claimed = claim_key_field(cand(c, j) * GH_SLOTS_PER_BUCKET + t, key);
            if (claimed != GH_NONE) {
                return claimed;
            }
        }
    }
    return GH_DEFERRED;
}
