// The bulk operations, over the scheme's find_slot, claim_direct,
// claim_free and release_slot. One call of the Rust backend is one
// submission:
//
//   find         find                                 (any slot width)
//   insert       insert_direct [+ fold]               (8-byte slots)
//                dedupe, locate_reps, claim_reps, settle   (16-byte slots)
//                (the cuckoo scheme adds its phase 2: cuckoo.wgsl)
//   erase        erase_direct                         (8-byte slots)
//                erase_locate, erase_release          (16-byte slots, cuckoo)
//
// A scheme whose claims may have to wait for other invocations (GH_DEFERS:
// the slab list) returns GH_DEFERRED instead, and the backend runs the
// scheme's second pass over those items right after insert_direct or
// claim_reps; the others never defer.
//
// 8-byte slots hold a 32-bit key, claimed with one compare-exchange, so
// duplicates of a batch meet at one slot. A 16-byte slot's key is two
// words that no 32-bit atomic publishes together, so first one
// representative per distinct key of the batch is elected (`dedupe`, in a
// table of item indices whose keys are read from the caller's immutable
// array), and only representatives place keys (`claim_free`, which reads no
// key words); the others then fold their values into the same slot.

// ------------------------------------------------------------------ find

// flags[i] = 1 if key i is stored, else 0; with mode 1 also its value into
// out (GH_VALUE_WORDS words per item; 0 when absent). counters[0] += hits.
// The scheme's lookup(k) gives (hit, value lo, value hi): the linear and
// cuckoo schemes read whole buckets (lines.wgsl), the slab list its slots.
@compute @workgroup_size(256)
fn find(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
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
                let h = lookup(k);
                hits += found(i, h.x != 0u, h.yz);
            }
        }
    }
    add_count(hits, lid);
}

// Writes item i's lookup result: its flag, and with mode 1 its value (0
// when absent). Returns 1 for a hit.
fn found(i: u32, hit: bool, value: vec2<u32>) -> u32 {
    if (params.mode == 1u) {
        let v = select(vec2<u32>(0u, 0u), value, hit);
        if (GH_VALUE_WORDS == 2u) {
            out[2u * i] = v.x;
            out[2u * i + 1u] = v.y;
        } else {
            out[i] = v.x;
        }
    }
    flags[i] = select(0u, 1u, hit);
    return select(0u, 1u, hit);
}

// found() for an out-of-band key (special code `sp`, 1 or 2).
fn found_special(i: u32, sp: u32) -> u32 {
    let v = select(vec2<u32>(params.sv2, params.sv3), vec2<u32>(params.sv0, params.sv1), sp == 1u);
    return found(i, (params.specials & sp) != 0u, v);
}

// ------------------------------------------------------------------ 8-byte slots

// Claims or meets each key's slot and settles its value (insert_item).
// counters[0] += keys placed.
@compute @workgroup_size(256)
fn insert_direct(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var placed = 0u;
    let total = rounds();
    for (var r = 0u; r < total; r += 1u) {
        let i = gid.x + r * params.stride;
        if (i < params.n) {
            placed += insert_item(i);
        }
    }
    add_count(placed, lid);
}

// Item i of insert_direct: the claimer writes its value; assign writes
// every duplicate's (one of them is left); if-absent writes nothing more;
// apply leaves out[i] = the slot for `fold` (GH_NONE for the claimer).
// Refused keys and out-of-band keys are reported in the flags list. A
// scheme whose claim_direct may defer (GH_DEFERS) gets out[i] =
// GH_DEFERRED for its second pass, which calls this again. Returns 1 if
// it placed the key.
fn insert_item(i: u32) -> u32 {
    let k = item_key(i);
    var placed = 0u;
    var fold_at = GH_NONE;
    if (special_of(k) != 0u) {
        report(GH_SPECIAL_BIT | (params.base + i));
    } else {
        let v = item_value(i);
        let c = claim_direct(k.x);
        if (c == GH_NONE) {
            report(params.base + i);
        } else if (c == GH_DEFERRED) {
            fold_at = GH_DEFERRED;
        } else if ((c & GH_NEW_BIT) != 0u) {
            store_value(c & ~GH_NEW_BIT, v);
            placed = 1u;
        } else if (params.mode == GH_MODE_ASSIGN) {
            store_value(c, v);
        } else if (params.mode == GH_MODE_APPLY) {
            fold_at = c;
        }
    }
    if (params.mode == GH_MODE_APPLY || GH_DEFERS != 0u) {
        out[i] = fold_at;
    }
    return placed;
}

// Apply, after insert_direct: reduces item i's value into slot out[i].
// Every invocation runs every round (reduce_grouped wants uniform control
// flow).
@compute @workgroup_size(256)
fn fold(@builtin(global_invocation_id) gid: vec3<u32>) {
    let total = rounds();
    for (var r = 0u; r < total; r += 1u) {
        let i = gid.x + r * params.stride;
        var s = GH_NONE;
        var v = vec2<u32>(0u, 0u);
        if (i < params.n) {
            s = out[i];
            // A deferred claim (the cuckoo scheme's phase 2) folds later.
            if (s == GH_DEFERRED) {
                s = GH_NONE;
            }
            if (s != GH_NONE) {
                v = item_value(i);
            }
        }
        reduce_grouped(s, v);
    }
}

// Erases each key: the invocation that releases its slot (release_slot)
// counts it (counters[0]); out-of-band keys set their bit in counters[2].
@compute @workgroup_size(256)
fn erase_direct(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var erased = 0u;
    let total = rounds();
    for (var r = 0u; r < total; r += 1u) {
        let i = gid.x + r * params.stride;
        if (i < params.n) {
            let k = item_key(i);
            let sp = special_of(k);
            if (sp != 0u) {
                atomicOr(&counters[2], sp);
            } else {
                let s = find_slot(k);
                if (s != GH_NONE && release_slot(s, k)) {
                    erased += 1u;
                }
            }
        }
    }
    add_count(erased, lid);
}

// ------------------------------------------------------------------ 16-byte slots

// out[i] = the index of the item that represents key i's batch duplicates
// (i itself for one of them), or GH_SPECIAL_ITEM for an out-of-band key
// (reported in the flags list).
@compute @workgroup_size(256)
fn dedupe(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var i = gid.x; i < params.n; i += params.stride) {
        let k = item_key(i);
        if (special_of(k) != 0u) {
            report(GH_SPECIAL_BIT | (params.base + i));
            out[i] = GH_SPECIAL_ITEM;
            continue;
        }
        out[i] = representative(i, k);
    }
}

// The index of the item that represents key `k` (item i's): the first of
// its copies to enter the de-duplication table. The table has at least
// twice as many entries as items, so a free entry is always found.
fn representative(i: u32, k: vec2<u32>) -> u32 {
    var h = mix64(k, seed() ^ vec2<u32>(0x9e3779b9u, 0x7f4a7c15u)).y & params.mask;
    var rep = i;
    loop {
        var cur = atomicLoad(&scratch[h]);
        if (cur == 0u) {
            let x = atomicCompareExchangeWeak(&scratch[h], 0u, i + 1u);
            if (x.exchanged) {
                break;
            }
            cur = x.old_value;
            if (cur == 0u) {
                continue;
            }
        }
        if (all(item_key(cur - 1u) == k)) {
            rep = cur - 1u;
            break;
        }
        h = (h + 1u) & params.mask;
    }
    return rep;
}

// Representatives look their key up: out[i] = GH_REP_BIT | the slot, or
// GH_REP_PENDING if absent. Assign writes the value of a key found.
@compute @workgroup_size(256)
fn locate_reps(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var i = gid.x; i < params.n; i += params.stride) {
        if (out[i] != i) {
            continue;
        }
        let s = find_slot(item_key(i));
        if (s == GH_NONE) {
            out[i] = GH_REP_PENDING;
        } else {
            out[i] = GH_REP_BIT | s;
            if (params.mode == GH_MODE_ASSIGN) {
                store_value(s, item_value(i));
            }
        }
    }
}

// Representatives of absent keys place them (claim_rep). counters[0] +=
// keys placed.
@compute @workgroup_size(256)
fn claim_reps(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var placed = 0u;
    let total = rounds();
    for (var r = 0u; r < total; r += 1u) {
        let i = gid.x + r * params.stride;
        if (i < params.n && out[i] == GH_REP_PENDING) {
            placed += claim_rep(i);
        }
    }
    add_count(placed, lid);
}

// Representative i of an absent key places it: out[i] = GH_REP_BIT |
// GH_REP_NEW | the slot, or GH_REP_REFUSED; a claim the scheme defers
// (GH_DEFERRED) leaves it GH_REP_PENDING for the scheme's second pass.
// Returns 1 if it placed the key.
fn claim_rep(i: u32) -> u32 {
    let s = claim_free(item_key(i), item_value(i));
    if (s == GH_NONE) {
        out[i] = GH_REP_REFUSED;
    } else if (s != GH_DEFERRED) {
        out[i] = GH_REP_BIT | GH_REP_NEW | s;
        return 1u;
    }
    return 0u;
}

// Every item learns its representative's outcome: a refused key is
// reported at each position holding it; apply reduces every value into
// the slot but the one its representative placed with. Every invocation
// runs every round (reduce_grouped wants uniform control flow).
@compute @workgroup_size(256)
fn settle(@builtin(global_invocation_id) gid: vec3<u32>) {
    let total = rounds();
    for (var r = 0u; r < total; r += 1u) {
        let i = gid.x + r * params.stride;
        var s = GH_NONE;
        var v = vec2<u32>(0u, 0u);
        if (i < params.n && out[i] != GH_SPECIAL_ITEM) {
            let o = out[i];
            let own = (o & GH_REP_BIT) != 0u;
            var state = o;
            if (!own) {
                state = out[o];
            }
            if (state == GH_REP_REFUSED || state == GH_REP_NO_PATH) {
                report(params.base + i);
            } else if (params.mode == GH_MODE_APPLY && !(own && (state & GH_REP_NEW) != 0u)) {
                s = state & GH_REP_SLOT;
                v = item_value(i);
            }
        }
        if (params.mode == GH_MODE_APPLY) {
            reduce_grouped(s, v);
        }
    }
}

// out[i] = the slot holding key i, or GH_NONE; out-of-band keys set their
// bit in counters[2]. Reads only: erase_release writes in a later dispatch.
@compute @workgroup_size(256)
fn erase_locate(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var i = gid.x; i < params.n; i += params.stride) {
        let k = item_key(i);
        let sp = special_of(k);
        if (sp != 0u) {
            atomicOr(&counters[2], sp);
            out[i] = GH_NONE;
        } else {
            out[i] = find_slot(k);
        }
    }
}

// Releases the slots erase_locate found (the scheme's release_slot: a
// TOMBSTONE, or a cuckoo slot made EMPTY); counters[0] += keys erased
// (duplicates of one key count once).
@compute @workgroup_size(256)
fn erase_release(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var erased = 0u;
    let total = rounds();
    for (var r = 0u; r < total; r += 1u) {
        let i = gid.x + r * params.stride;
        if (i < params.n) {
            let s = out[i];
            if (s != GH_NONE && release_slot(s, item_key(i))) {
                erased += 1u;
            }
        }
    }
    add_count(erased, lid);
}
