// Scheme::Cuckoo and Scheme::TwoLevel (src/backend/cpu/cuckoo.rs;
// src/core/cuckoo.rs for the geometry), one module switched by
// GH_TWO_LEVEL: a key lives in one of GH_CUCKOO_CHOICES candidate buckets
// or in its spill area, which a lookup reads only when something may be
// there.
//
// * Cuckoo: candidates drawn over the buckets before the stash; the stash
//   is the last buckets (GH_CUCKOO_STASH_PAIRS slots at most), read while
//   its mask is not zero.
// * Two-level: a key's region by one hash, its candidates inside that
//   region by a second hash under the region's seed (HH Hash); the
//   overflow after the regions is a linearly probed area shared by every
//   region, read only for regions whose spill count is not zero. Regions
//   are never rebuilt here (the CPU rebuilds a full region under new
//   seeds): a key without an eviction path goes to the overflow, so every
//   region keeps seed number 0.
//
// The `occupied` binding holds, after the occupancy bits (one per slot, set
// while the slot is not EMPTY), the scheme's words:
//
//   cuckoo:     [ occupancy bits | lock bits: bucket 0..B-1, stash | stash mask ]
//   two-level:  [ occupancy bits | lock bits: bucket 0..B-1, one more | spill count per region ]
//
// (src/core/cuckoo.rs FlatAux's layout, in 32-bit words; a lock bit is
// held from a parallel round's plan to its apply, below.)
//
// Phase 1 claims a key as the linear scheme does where one atomic holds a
// key field (8-byte slots: claim_direct; 16-byte slots with 64-bit atomics:
// cuckoo_wide.wgsl): the key is looked up in all its candidates and the
// stash, then its key word is claimed by compare-exchange in the first
// EMPTY slot in candidate order, so copies of one key meet at one slot.
// Keys that find every candidate slot holding another key are deferred
// (GH_DEFERRED), and after apply's fold dedupe_pending elects one
// representative per deferred key. 16-byte slots on 32-bit atomics only
// (the browser's) go through representatives for every key (bulk.wgsl's
// dedupe path):
//
//   phase 1  insert_direct or insert_wide [+ fold], dedupe_pending; or
//            locate_reps, claim_reps: a free slot of a candidate bucket,
//            taken by its occupancy bit. Nothing moves, so a lookup in the
//            same phase is exact.
//   phase 2  collect_pending lists the representatives left without a
//            slot (the host reads how many; few, or none).
//            Parallel rounds, each two dispatches:
//              plan_paths   every listed key searches an eviction path of
//                           at most GH_CUCKOO_PARALLEL_MOVES moves, reading
//                           only (nothing moves in this dispatch), then
//                           try-locks every bucket on it; a key that meets
//                           a held lock lets its own go and tries again in
//                           the next round;
//              apply_paths  the keys holding all their locks move the
//                           residents (their buckets are theirs alone) and
//                           let the locks go.
//            The host repeats rounds while keys lose locks, then once more
//            for the keys that found no path (retry_no_path: the table has
//            changed since). Keys whose walk
//            of the whole probe limit found no path take a free spill slot
//            (stash_no_path: the stash, or the overflow; the serial phase
//            would walk the same way),
//            else are refused. Keys still losing locks after the last round
//            (or with a probe limit past GH_CUCKOO_PARALLEL_MOVES and no
//            path that short) are listed again and placed one at a time by
//            evict_serial (one workgroup, its invocations in turn, one key
//            each per dispatch) as the CPU does: an EMPTY candidate slot,
//            else an eviction path applied last move first (every key is
//            in some slot at every moment), else a spill slot, else the key
//            is refused. relocate then looks the representatives' keys up
//            again if anything moved, so settle folds into the right slots
//            (phase 1's slots are folded into before anything moves).
//
// Erase frees the slot (EMPTY, occupancy bit and stash bit cleared): no
// tombstones in candidate buckets. Lookups never stop early there, so an
// EMPTY slot before a key in its candidates hides nothing. An overflow
// slot becomes a TOMBSTONE instead (its region's spill count drops): a
// lookup reads an overflow chain up to its first bucket with an EMPTY
// slot, and puts fill a chain in order, reusing TOMBSTONEs, as on the CPU.

// Scratch words of phase 2 (the dedupe table is done with by then):
// pending count, serial cursor, "a path moved keys", keys that lost a lock
// this round, keys of the window that found no path, then the list.
const PENDING_COUNT: u32 = 0u;
const PENDING_CURSOR: u32 = 1u;
const PENDING_MOVED: u32 = 2u;
const PENDING_LOST: u32 = 3u;
const PENDING_NONE: u32 = 4u;
const PENDING_LIST: u32 = 5u;

// Slots of the stash: GH_CUCKOO_STASH_PAIRS, but at most a 32nd of the
// buckets (src/core/cuckoo.rs stash_buckets); two-level tables have none.
fn stash_buckets() -> u32 {
    if (GH_TWO_LEVEL) {
        return 0u;
    }
    return min(params.buckets / 32u, GH_CUCKOO_STASH_PAIRS / GH_SLOTS_PER_BUCKET);
}

// Two-level geometry (src/core/cuckoo.rs Regions::of): `count` regions of
// `buckets` buckets, then `overflow` buckets.
struct Regions {
    count: u32,
    buckets: u32,
    overflow: u32,
}

fn regions() -> Regions {
    let b = params.buckets;
    if (b <= GH_TL_REGION_BUCKETS) {
        return Regions(1u, b, 0u);
    }
    let span = select(GH_TL_REGION_BUCKETS, GH_TL_LARGE_REGION_BUCKETS, b >= GH_TL_LARGE_REGIONS_FROM);
    let count = b / span;
    let rb = span - span / GH_TL_OVERFLOW_SHARE;
    return Regions(count, rb, b - count * rb);
}

// Buckets candidates are drawn from: before the stash, or the regions.
fn main_buckets() -> u32 {
    if (GH_TWO_LEVEL) {
        let g = regions();
        return g.count * g.buckets;
    }
    return params.buckets - stash_buckets();
}

fn stash_first() -> u32 {
    return main_buckets() * GH_SLOTS_PER_BUCKET;
}

fn stash_slots() -> u32 {
    return stash_buckets() * GH_SLOTS_PER_BUCKET;
}

// Index in `occupied` of the stash mask (bit i: stash slot i holds a
// pair); in two-level tables, of region 0's spill count.
fn mask_word() -> u32 {
    let bits = (params.buckets * GH_SLOTS_PER_BUCKET + 31u) / 32u;
    return bits + (params.buckets + 1u + 31u) / 32u;
}

fn salt(j: u32) -> vec2<u32> {
    if (j == 0u) {
        return vec2<u32>(GH_CUCKOO_SALT_0_LO, GH_CUCKOO_SALT_0_HI);
    }
    if (j == 1u) {
        return vec2<u32>(GH_CUCKOO_SALT_1_LO, GH_CUCKOO_SALT_1_HI);
    }
    return vec2<u32>(GH_CUCKOO_SALT_2_LO, GH_CUCKOO_SALT_2_HI);
}

// The region of key `k` (src/core/cuckoo.rs Regions::region).
fn region_of(k: vec2<u32>) -> u32 {
    return reduce_range(mix64(k, seed()), regions().count);
}

// What a key's candidates are computed from, once per key: two-level, its
// region (whose spill count the overflow reads go by), the region's first
// bucket and size, and the key's hash under the region's seed (seed number
// 0: src/core/cuckoo.rs Regions::region_seed), which gives every
// candidate; cuckoo, the key itself (each candidate its own hash, computed
// only when a probe gets that far).
struct Basis {
    key: vec2<u32>,
    region: u32,
    first: u32,
    buckets: u32,
    hash: vec2<u32>,
}

fn basis(k: vec2<u32>) -> Basis {
    if (GH_TWO_LEVEL) {
        let g = regions();
        let r = reduce_range(mix64(k, seed()), g.count);
        let region_seed = mix64(vec2<u32>(r, 0u), seed() ^ vec2<u32>(GH_TL_REGION_SALT_LO, GH_TL_REGION_SALT_HI));
        return Basis(k, r, r * g.buckets, g.buckets, mix64(k, region_seed));
    }
    return Basis(k, 0u, 0u, 0u, vec2<u32>(0u, 0u));
}

// Candidate bucket `j` of the key of `b` (src/core/cuckoo.rs candidate;
// two-level: region_candidate, bits 21 j .. 21 j + 20 of the hash scaled
// to the region's buckets, at most 2^11, so the product fits 32 bits).
fn cand(b: Basis, j: u32) -> u32 {
    if (GH_TWO_LEVEL) {
        let h = b.hash;
        let fields = vec3<u32>(h.x, (h.x >> 21u) | (h.y << 11u), h.y >> 10u);
        return b.first + (((fields[j] & GH_TL_CAND_MASK) * b.buckets) >> GH_TL_CAND_BITS);
    }
    return reduce_range(mix64(b.key, seed() ^ salt(j)), main_buckets());
}

// Candidate bucket `j` of key `k`.
fn candidate(k: vec2<u32>, j: u32) -> u32 {
    return cand(basis(k), j);
}

fn is_full(k: vec2<u32>) -> bool {
    return !all(k == EMPTY_KEY) && !all(k == vec2<u32>(GH_TOMBSTONE_KEY_LO, GH_TOMBSTONE_KEY_HI));
}

// ------------------------------------------------------------- spill area

// Index in `occupied` of region r's spill count (keys it has in the overflow).
fn spill_word(r: u32) -> u32 {
    return mask_word() + r;
}

// Key k's home bucket in the overflow (src/core/cuckoo.rs Regions::overflow_home).
fn overflow_home(k: vec2<u32>, g: Regions) -> u32 {
    let salt = vec2<u32>(GH_TL_OVERFLOW_SALT_LO, GH_TL_OVERFLOW_SALT_HI);
    return g.count * g.buckets + reduce_range(mix64(k, seed() ^ salt), g.overflow);
}

// The bucket after `b` in an overflow chain (wrapping within the overflow).
fn overflow_next(b: u32, g: Regions) -> u32 {
    let first = g.count * g.buckets;
    return select(b + 1u, first, b + 1u == first + g.overflow);
}

// The slot of key c.key in its spill area (the stash, or its overflow chain
// up to the first bucket with an EMPTY slot), or GH_NONE. Spill slots
// change in phase 2 and erase only, so plain word reads see whole keys.
fn spill_find(c: Basis) -> u32 {
    let k = c.key;
    if (GH_TWO_LEVEL) {
        if (atomicLoad(&occupied[spill_word(c.region)]) == 0u) {
            return GH_NONE;
        }
        let g = regions();
        var b = overflow_home(k, g);
        for (var i = 0u; i < min(g.overflow, GH_TL_OVERFLOW_PROBE); i += 1u) {
            var open = false;
            for (var t = 0u; t < GH_SLOTS_PER_BUCKET; t += 1u) {
                let z = slot_key(b * GH_SLOTS_PER_BUCKET + t);
                if (all(z == k)) {
                    return b * GH_SLOTS_PER_BUCKET + t;
                }
                open = open || all(z == EMPTY_KEY);
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
            if ((mask & (1u << i)) != 0u && all(slot_key(first + i) == k)) {
                return first + i;
            }
        }
    }
    return GH_NONE;
}

// spill_find's answer as lookup gives it (hit, value lo, value hi), read
// through the lines.
fn spill_lookup(c: Basis) -> vec3<u32> {
    let k = c.key;
    if (GH_TWO_LEVEL) {
        if (atomicLoad(&occupied[spill_word(c.region)]) == 0u) {
            return vec3<u32>(0u, 0u, 0u);
        }
        let g = regions();
        var b = overflow_home(k, g);
        for (var i = 0u; i < min(g.overflow, GH_TL_OVERFLOW_PROBE); i += 1u) {
            // Slots fill in chain order, so the first EMPTY one ends the chain.
            let d = bucket_lookup(b, k, true);
            if (d.x != 0u) {
                return d.yzw;
            }
            b = overflow_next(b, g);
        }
        return vec3<u32>(0u, 0u, 0u);
    }
    let mask = atomicLoad(&occupied[mask_word()]);
    if (mask != 0u) {
        let first = stash_first();
        for (var i = 0u; i < stash_slots(); i += 1u) {
            let slot = line_slot(first + i);
            if ((mask & (1u << i)) != 0u && all(slot.xy == k)) {
                return vec3<u32>(1u, slot.zw);
            }
        }
    }
    return vec3<u32>(0u, 0u, 0u);
}

// Stores key `k` (absent, held by no other invocation) with value `v` in a
// free slot of its spill area: a stash slot claimed by its mask bit, or
// the first EMPTY or TOMBSTONE slot of its overflow chain claimed by its
// occupancy bit (which only puts set and erases clear there), counted in
// its region's spill count. The slot, or GH_NONE if there is none.
fn spill_put(k: vec2<u32>, v: vec2<u32>) -> u32 {
    if (GH_TWO_LEVEL) {
        let g = regions();
        var b = overflow_home(k, g);
        for (var i = 0u; i < min(g.overflow, GH_TL_OVERFLOW_PROBE); i += 1u) {
            for (var t = 0u; t < GH_SLOTS_PER_BUCKET; t += 1u) {
                let s = b * GH_SLOTS_PER_BUCKET + t;
                if (!is_full(slot_key(s)) && take_slot(s)) {
                    store_pair(s, k, v);
                    atomicAdd(&occupied[spill_word(region_of(k))], 1u);
                    return s;
                }
            }
            b = overflow_next(b, g);
        }
        return GH_NONE;
    }
    let first = stash_first();
    let every = select((1u << stash_slots()) - 1u, 0xffffffffu, stash_slots() >= 32u);
    var mask = atomicLoad(&occupied[mask_word()]);
    var at = GH_NONE;
    // Each try that fails sees one more bit set: at most stash_slots() tries.
    loop {
        let free = ~mask & every;
        if (free == 0u) {
            break;
        }
        let bit = 1u << firstTrailingBit(free);
        mask = atomicOr(&occupied[mask_word()], bit);
        if ((mask & bit) == 0u) {
            at = first + firstTrailingBit(bit);
            fill(at, k, v);
            break;
        }
    }
    return at;
}

// ------------------------------------------------------------------ lookups

// The slot holding key `k`, or GH_NONE.
fn find_slot(k: vec2<u32>) -> u32 {
    let c = basis(k);
    for (var j = 0u; j < GH_CUCKOO_CHOICES; j += 1u) {
        for (var t = 0u; t < GH_SLOTS_PER_BUCKET; t += 1u) {
            let s = cand(c, j) * GH_SLOTS_PER_BUCKET + t;
            if (all(slot_key(s) == k)) {
                return s;
            }
        }
    }
    return spill_find(c);
}

// Key k's value as (hit, value lo, value hi), as find_slot finds it, its
// candidate buckets read a bucket at a time and the spill area through
// the lines (lines.wgsl; an EMPTY candidate slot ends nothing here).
fn lookup(k: vec2<u32>) -> vec3<u32> {
    let c = basis(k);
    for (var j = 0u; j < GH_CUCKOO_CHOICES; j += 1u) {
        let d = bucket_lookup(cand(c, j), k, false);
        if (d.y != 0u) {
            return d.yzw;
        }
    }
    return spill_lookup(c);
}

// 8-byte slots, phase 1: the key is looked up first (it may sit behind an
// EMPTY slot freed by an erase, or in the spill area), then claimed in
// candidate order with one compare-exchange on its key word, where two
// invocations with one key meet: slots only fill while it runs, so a copy
// that passes a slot saw it hold another key or its own. GH_DEFERRED if
// every candidate slot holds another key: every copy of the key then sees
// the same, and phase 2 places one of them. No occupancy bit is set: only
// claim_free reads them in candidate buckets, and these tables never run it.
fn claim_direct(k: u32) -> u32 {
    let found = find_slot(vec2<u32>(k, 0u));
    if (found != GH_NONE) {
        return found;
    }
    let c = basis(vec2<u32>(k, 0u));
    for (var j = 0u; j < GH_CUCKOO_CHOICES; j += 1u) {
        for (var t = 0u; t < GH_SLOTS_PER_BUCKET; t += 1u) {
            let claimed = claim_key_word(cand(c, j) * GH_SLOTS_PER_BUCKET + t, k);
            if (claimed != GH_NONE) {
                return claimed;
            }
        }
    }
    return GH_DEFERRED;
}

// Places key `k`, absent and held by no other invocation, in the first
// free slot of its candidate buckets (taken by its occupancy bit), with
// value `v`. GH_NONE if every candidate slot is taken: phase 2 follows.
fn claim_free(k: vec2<u32>, v: vec2<u32>) -> u32 {
    let c = basis(k);
    for (var j = 0u; j < GH_CUCKOO_CHOICES; j += 1u) {
        for (var t = 0u; t < GH_SLOTS_PER_BUCKET; t += 1u) {
            let s = cand(c, j) * GH_SLOTS_PER_BUCKET + t;
            if (take_slot(s)) {
                store_pair(s, k, v);
                return s;
            }
        }
    }
    return GH_NONE;
}

// ------------------------------------------------------------------ erase

// Empties slot `s`, found holding key `k`; true for the one invocation
// that did. The compare-exchange is on a key word where `k` differs from
// the EMPTY key (there is one: that key is never stored in a slot). An
// overflow slot becomes a TOMBSTONE instead, which keeps the chains
// through it readable, and its region's spill count drops.
fn release_slot(s: u32, k: vec2<u32>) -> bool {
    let first = stash_first();
    if (GH_TWO_LEVEL && s >= first) {
        if (!bury(s, k)) {
            return false;
        }
        atomicAnd(&occupied[s >> 5u], ~(1u << (s & 31u)));
        atomicSub(&occupied[spill_word(region_of(k))], 1u);
        return true;
    }
    let w = s * GH_SLOT_WORDS;
    let empty = vec4<u32>(GH_EMPTY_WORD_0, GH_EMPTY_WORD_1, GH_EMPTY_WORD_2, GH_EMPTY_WORD_3);
    let j = select(0u, 1u, GH_FIELD_WORDS == 2u && k.x == GH_EMPTY_WORD_0);
    var old = k[j];
    loop {
        if (old != k[j]) {
            return false;
        }
        let r = atomicCompareExchangeWeak(&slots[w + j], k[j], empty[j]);
        if (r.exchanged) {
            break;
        }
        old = r.old_value;
    }
    for (var i = 0u; i < GH_SLOT_WORDS; i += 1u) {
        if (i != j) {
            atomicStore(&slots[w + i], empty[i]);
        }
    }
    atomicAnd(&occupied[s >> 5u], ~(1u << (s & 31u)));
    if (s >= first) {
        atomicAnd(&occupied[mask_word()], ~(1u << (s - first)));
    }
    return true;
}

// ------------------------------------------------------------------ phase 2

// Tables that claim keys whole (insert_direct, insert_wide), after phase
// 1 and its fold: the items it deferred elect one representative per key
// (out[i] = GH_REP_REFUSED, for collect_pending; a copy: its
// representative's index); every other item is done (GH_SPECIAL_ITEM, which
// relocate and settle pass over).
@compute @workgroup_size(256)
fn dedupe_pending(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var i = gid.x; i < params.n; i += params.stride) {
        if (out[i] != GH_DEFERRED) {
            out[i] = GH_SPECIAL_ITEM;
            continue;
        }
        let rep = representative(i, item_key(i));
        out[i] = select(rep, GH_REP_REFUSED, rep == i);
    }
}

// Representatives left without a slot (GH_REP_REFUSED), listed in scratch.
@compute @workgroup_size(256)
fn collect_pending(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var i = gid.x; i < params.n; i += params.stride) {
        if (out[i] == GH_REP_REFUSED) {
            let at = atomicAdd(&scratch[PENDING_COUNT], 1u);
            atomicStore(&scratch[PENDING_LIST + at], i);
        }
    }
}

// 64-bit x + a (a small), wrapping.
fn add_small(x: vec2<u32>, a: u32) -> vec2<u32> {
    let lo = x.x + a;
    return vec2<u32>(lo, x.y + select(0u, 1u, lo < x.x));
}

// 64-bit x mod m, for m <= 4 (2^32 mod m < 4: no overflow).
fn mod_small(x: vec2<u32>, m: u32) -> u32 {
    let wrap = (0xffffffffu % m + 1u) % m;
    return ((x.y % m) * wrap + x.x % m) % m;
}

// src/core/cuckoo.rs walk_word: the word steering step `step` of a walk.
fn walk_word(k: vec2<u32>, step: u32) -> vec2<u32> {
    let spread = mul64(vec2<u32>(step, 0u), vec2<u32>(GH_CUCKOO_WALK_STEP_MUL_LO, GH_CUCKOO_WALK_STEP_MUL_HI));
    return mix64(k ^ spread, seed() ^ vec2<u32>(GH_CUCKOO_WALK_SALT_LO, GH_CUCKOO_WALK_SALT_HI));
}

// The first EMPTY slot of bucket `b` (0..GH_SLOTS_PER_BUCKET), or GH_NONE.
fn first_empty(b: u32) -> u32 {
    var found: u32;
    found = GH_NONE;
    for (var t = 0u; t < GH_SLOTS_PER_BUCKET; t += 1u) {
        if (found == GH_NONE && all(slot_key(b * GH_SLOTS_PER_BUCKET + t) == EMPTY_KEY)) {
            found = t;
        }
    }
    return found;
}

// Writes pair (k, v) into the EMPTY slot `s` and marks it occupied.
fn fill(s: u32, k: vec2<u32>, v: vec2<u32>) {
    store_pair(s, k, v);
    atomicOr(&occupied[s >> 5u], 1u << (s & 31u));
}

// An eviction path (src/backend/cpu/cuckoo.rs Engine::walk): the resident
// in slot ps[i] of bucket pb[i] moves to bucket pb[i + 1], the last one
// into its EMPTY slot `empty`; `n` moves.
struct Path {
    pb: array<u32, 65>,
    ps: array<u32, 64>,
    n: u32,
    empty: u32,
}

// Searches an eviction path of at most `limit` moves for key `k`, whose
// candidates `xc` are full, reading only. Each step looks at the residents
// of the current bucket (the first step: of every candidate) in an order
// drawn from walk_word, and moves the first whose other candidate has an
// EMPTY slot, else the first that may move at all; a move never enters a
// bucket already on the path or a candidate of `k`. p.empty is GH_NONE
// when there is no path.
fn walk(k: vec2<u32>, xc: array<u32, 3>, limit: u32) -> Path {
    var p: Path;
    p.n = 0u;
    p.empty = GH_NONE;
    var dead: bool;
    dead = false;
    let steps = min(limit, GH_CUCKOO_MAX_EVICTIONS);
    for (var step = 0u; step < steps && p.empty == GH_NONE && !dead; step += 1u) {
        let r = walk_word(k, step);
        let high = vec2<u32>(r.y, 0u);
        // The buckets a resident may leave: every candidate first, then the path's end.
        let froms = select(1u, GH_CUCKOO_CHOICES, step == 0u);
        var have: bool;
        var free: bool;
        var pick_b: u32;
        var pick_s: u32;
        var pick_c: u32;
        have = false;
        free = false;
        pick_b = 0u;
        pick_s = 0u;
        pick_c = 0u;
        for (var f = 0u; f < froms && !free; f += 1u) {
            var cur = p.pb[p.n];
            if (step == 0u) {
                cur = xc[mod_small(add_small(r, f), GH_CUCKOO_CHOICES)];
            }
            for (var t = 0u; t < GH_SLOTS_PER_BUCKET && !free; t += 1u) {
                let s = mod_small(add_small(r, t), GH_SLOTS_PER_BUCKET);
                let z = slot_key(cur * GH_SLOTS_PER_BUCKET + s);
                for (var u = 0u; u < GH_CUCKOO_CHOICES && !free && is_full(z); u += 1u) {
                    let c = candidate(z, mod_small(add_small(high, u), GH_CUCKOO_CHOICES));
                    var excluded: bool;
                    excluded = false;
                    for (var j = 0u; j < GH_CUCKOO_CHOICES; j += 1u) {
                        excluded = excluded || xc[j] == c;
                    }
                    for (var j = 0u; step > 0u && j <= p.n; j += 1u) {
                        excluded = excluded || p.pb[j] == c;
                    }
                    if (!excluded) {
                        free = first_empty(c) != GH_NONE;
                        if (!have || free) {
                            have = true;
                            pick_b = cur;
                            pick_s = s;
                            pick_c = c;
                        }
                    }
                }
            }
        }
        if (have) {
            p.pb[p.n] = pick_b;
            p.ps[p.n] = pick_s;
            p.n += 1u;
            p.pb[p.n] = pick_c;
            p.empty = first_empty(pick_c);
        } else {
            dead = true;
        }
    }
    return p;
}

// Places key `k` (absent, with no free candidate slot when phase 1 ran)
// as the CPU's insert does, run by one invocation alone (no other one
// reads or writes slots meanwhile; its reads see every earlier key's
// moves): an EMPTY
// candidate slot, else an eviction path of at most `limit` moves, else a
// spill slot. Returns the slot, or GH_NONE (the table is unchanged).
fn place(k: vec2<u32>, v: vec2<u32>) -> u32 {
    var xc: array<u32, 3>;
    var at: u32;
    at = GH_NONE;
    let c = basis(k);
    for (var j = 0u; j < GH_CUCKOO_CHOICES; j += 1u) {
        xc[j] = cand(c, j);
    }
    for (var j = 0u; j < GH_CUCKOO_CHOICES && at == GH_NONE; j += 1u) {
        let e = first_empty(xc[j]);
        if (e != GH_NONE) {
            at = xc[j] * GH_SLOTS_PER_BUCKET + e;
            fill(at, k, v);
        }
    }
    if (at == GH_NONE) {
        let p = walk(k, xc, params.limit);
        if (p.empty != GH_NONE) {
            // Last move first: the EMPTY slot is filled before its source is
            // overwritten, so every key is in some slot at every moment.
            var dst = p.empty;
            let last = p.pb[p.n] * GH_SLOTS_PER_BUCKET + p.empty;
            for (var i = p.n; i > 0u; i -= 1u) {
                let src = p.pb[i - 1u] * GH_SLOTS_PER_BUCKET + p.ps[i - 1u];
                store_pair(p.pb[i] * GH_SLOTS_PER_BUCKET + dst, slot_key(src), slot_value(src));
                dst = p.ps[i - 1u];
            }
            atomicOr(&occupied[last >> 5u], 1u << (last & 31u));
            atomicStore(&scratch[PENDING_MOVED], 1u);
            at = p.pb[0] * GH_SLOTS_PER_BUCKET + dst;
            store_pair(at, k, v);
        }
    }
    if (at == GH_NONE) {
        at = spill_put(k, v);
    }
    return at;
}

// ------------------------------------------------------- parallel rounds

// A planned path, in the `flags` binding (GH_CUCKOO_PATH_WORDS words per
// listed key of the window the host dispatches, entry e from word
// GH_CUCKOO_PATH_WORDS * e): bits 0-4 the moves L (1 to
// GH_CUCKOO_PARALLEL_MOVES), 5-6 the candidate of the key the path starts
// from, 7-8 the EMPTY slot at its end; then four bits per move, five from
// bit 9 of the first word on, eight in each later word: the slot whose
// resident moves (two bits) and which of its candidates it moves to (two
// bits). Buckets follow from the keys, so a path fits three words
// (src/backend/wgpu/cuckoo.rs checks that slots and candidates fit two
// bits). Other states of the first word, which no path has (its bits 5-6
// would name a fourth candidate):
const PATH_TODO: u32 = 0u;           // not planned yet (L is never 0)
const PATH_LOST: u32 = 0xfffffffeu;  // met a held lock: the next round plans again
const PATH_NONE: u32 = 0xffffffffu;  // no short path
const PATH_DONE: u32 = 0xfffffffdu;  // placed

// Index in `occupied` of the word holding bucket 0's lock bit.
fn lock_base() -> u32 {
    return (params.buckets * GH_SLOTS_PER_BUCKET + 31u) / 32u;
}

// Takes bucket `b`'s lock bit; false if another invocation holds it.
fn try_lock(b: u32) -> bool {
    let bit = 1u << (b & 31u);
    return (atomicOr(&occupied[lock_base() + (b >> 5u)], bit) & bit) == 0u;
}

fn unlock(b: u32) {
    atomicAnd(&occupied[lock_base() + (b >> 5u)], ~(1u << (b & 31u)));
}

// Which candidate of key `z` bucket `c` is.
fn choice_of(z: vec2<u32>, c: u32) -> u32 {
    let zc = basis(z);
    for (var j = 0u; j < GH_CUCKOO_CHOICES; j += 1u) {
        if (cand(zc, j) == c) {
            return j;
        }
    }
    return 0u;
}

// Four bits of move `m` of the path of window entry `e`.
fn path_move(e: u32, m: u32) -> u32 {
    let at = GH_CUCKOO_PATH_WORDS * e;
    if (m < 5u) {
        return (flags[at] >> (9u + 4u * m)) & 15u;
    }
    let q = m - 5u;
    return (flags[at + 1u + q / 8u] >> (4u * (q % 8u))) & 15u;
}

// The buckets of the path of window entry `e`, for key `k` (the L + 1
// buckets), and the slots whose residents move, read from the residents in
// place: call before any move of the path.
fn path_buckets(k: vec2<u32>, e: u32) -> Path {
    let w = flags[GH_CUCKOO_PATH_WORDS * e];
    var p: Path;
    p.n = w & 31u;
    p.empty = (w >> 7u) & 3u;
    p.pb[0] = candidate(k, (w >> 5u) & 3u);
    for (var m = 0u; m < p.n; m += 1u) {
        let f = path_move(e, m);
        p.ps[m] = f & 3u;
        p.pb[m + 1u] = candidate(slot_key(p.pb[m] * GH_SLOTS_PER_BUCKET + p.ps[m]), f >> 2u);
    }
    return p;
}

// Plans every listed key of the window (entries params.base + e, e <
// params.n) still to be placed: a path of at most GH_CUCKOO_PARALLEL_MOVES
// moves, all its buckets locked, written to flags; PATH_LOST (counted in
// scratch[PENDING_LOST]) if a lock was held, PATH_NONE if there is no path.
// A key that walked the whole probe limit without a path is marked
// GH_REP_NO_PATH: the serial phase would only walk the same way again, so
// it is left a stash slot (stash_no_path). Reads slots only.
@compute @workgroup_size(256)
fn plan_paths(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var e = gid.x; e < params.n; e += params.stride) {
        let at = GH_CUCKOO_PATH_WORDS * e;
        let state = flags[at];
        if (state != PATH_TODO && state != PATH_LOST) {
            continue;
        }
        let i = atomicLoad(&scratch[PENDING_LIST + params.base + e]);
        let k = item_key(i);
        var xc: array<u32, 3>;
        let c = basis(k);
        for (var j = 0u; j < GH_CUCKOO_CHOICES; j += 1u) {
            xc[j] = cand(c, j);
        }
        let p = walk(k, xc, min(params.limit, GH_CUCKOO_PARALLEL_MOVES));
        if (p.empty == GH_NONE) {
            flags[at] = PATH_NONE;
            atomicAdd(&scratch[PENDING_NONE], 1u);
            if (params.limit <= GH_CUCKOO_PARALLEL_MOVES) {
                out[i] = GH_REP_NO_PATH;
            }
            continue;
        }
        var held = 0u;
        while (held <= p.n && try_lock(p.pb[held])) {
            held += 1u;
        }
        if (held <= p.n) {
            for (var j = 0u; j < held; j += 1u) {
                unlock(p.pb[j]);
            }
            flags[at] = PATH_LOST;
            atomicAdd(&scratch[PENDING_LOST], 1u);
            continue;
        }
        var w = vec3<u32>(p.n | (choice_of(k, p.pb[0]) << 5u) | (p.empty << 7u), 0u, 0u);
        for (var m = 0u; m < p.n; m += 1u) {
            let z = slot_key(p.pb[m] * GH_SLOTS_PER_BUCKET + p.ps[m]);
            let f = p.ps[m] | (choice_of(z, p.pb[m + 1u]) << 2u);
            if (m < 5u) {
                w.x |= f << (9u + 4u * m);
            } else if (m < 13u) {
                w.y |= f << (4u * (m - 5u));
            } else {
                w.z |= f << (4u * (m - 13u));
            }
        }
        flags[at] = w.x;
        flags[at + 1u] = w.y;
        flags[at + 2u] = w.z;
    }
}

// Keys whose plan holds its locks move along their paths (last move first)
// and take the first slot; the locks go. No two paths share a bucket, and
// nothing else writes slots in this dispatch. counters[0] += keys placed.
@compute @workgroup_size(256)
fn apply_paths(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var placed = 0u;
    let total = rounds();
    for (var r = 0u; r < total; r += 1u) {
        let e = gid.x + r * params.stride;
        if (e >= params.n) {
            continue;
        }
        let state = flags[GH_CUCKOO_PATH_WORDS * e];
        if (state == PATH_TODO || state >= PATH_DONE) {
            continue;
        }
        let i = atomicLoad(&scratch[PENDING_LIST + params.base + e]);
        let k = item_key(i);
        let p = path_buckets(k, e);
        var dst = p.empty;
        for (var m = p.n; m > 0u; m -= 1u) {
            let src = p.pb[m - 1u] * GH_SLOTS_PER_BUCKET + p.ps[m - 1u];
            store_pair(p.pb[m] * GH_SLOTS_PER_BUCKET + dst, slot_key(src), slot_value(src));
            dst = p.ps[m - 1u];
        }
        let last = p.pb[p.n] * GH_SLOTS_PER_BUCKET + p.empty;
        atomicOr(&occupied[last >> 5u], 1u << (last & 31u));
        let at = p.pb[0] * GH_SLOTS_PER_BUCKET + dst;
        store_pair(at, k, item_value(i));
        out[i] = GH_REP_BIT | GH_REP_NEW | at;
        placed += 1u;
        for (var m = 0u; m <= p.n; m += 1u) {
            unlock(p.pb[m]);
        }
        flags[GH_CUCKOO_PATH_WORDS * e] = PATH_DONE;
        atomicStore(&scratch[PENDING_MOVED], 1u);
    }
    add_count(placed, lid);
}

// Once a window's rounds are done, its keys that found no path walk again
// in further rounds (the table changed since, as the serial phase would
// find it): PATH_NONE back to PATH_TODO, GH_REP_NO_PATH back to
// GH_REP_REFUSED.
@compute @workgroup_size(256)
fn retry_no_path(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var e = gid.x; e < params.n; e += params.stride) {
        let at = GH_CUCKOO_PATH_WORDS * e;
        if (flags[at] == PATH_NONE) {
            flags[at] = PATH_TODO;
            let i = atomicLoad(&scratch[PENDING_LIST + params.base + e]);
            if (out[i] == GH_REP_NO_PATH) {
                out[i] = GH_REP_REFUSED;
            }
        }
    }
}

// After every window's rounds: each representative marked GH_REP_NO_PATH
// takes a free spill slot (spill_put: the stash, or its overflow chain),
// as the serial phase would after the same walk; the rest stay refused.
// counters[0] += keys placed.
@compute @workgroup_size(256)
fn stash_no_path(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var placed = 0u;
    let total = rounds();
    for (var r = 0u; r < total; r += 1u) {
        let i = gid.x + r * params.stride;
        if (i >= params.n || out[i] != GH_REP_NO_PATH) {
            continue;
        }
        let s = spill_put(item_key(i), item_value(i));
        if (s != GH_NONE) {
            out[i] = GH_REP_BIT | GH_REP_NEW | s;
            placed += 1u;
        }
    }
    add_count(placed, lid);
}

// ------------------------------------------------------------ serial phase

// Where this dispatch's share of the list starts and ends.
var<workgroup> wg_start: u32;
var<workgroup> wg_end: u32;

// One workgroup places up to GH_CUCKOO_SERIAL_KEYS (its size) listed keys
// from where the previous dispatch stopped, one at a time: key `at` by
// invocation `at - start`, a barrier after each, so a key's moves are done
// before the next key reads the slots, and no invocation places two keys
// (one that did lost moves on lavapipe). out[i] = GH_REP_BIT | GH_REP_NEW
// | the slot, or stays GH_REP_REFUSED. counters[0] += keys placed.
@compute @workgroup_size(256)
fn evict_serial(@builtin(local_invocation_index) lid: u32) {
    if (lid == 0u) {
        let count = atomicLoad(&scratch[PENDING_COUNT]);
        let start = atomicLoad(&scratch[PENDING_CURSOR]);
        wg_start = start;
        wg_end = max(start, min(count, start + GH_CUCKOO_SERIAL_KEYS));
    }
    let start = workgroupUniformLoad(&wg_start);
    let end = workgroupUniformLoad(&wg_end);
    var placed = 0u;
    for (var at = start; at < end; at += 1u) {
        if (lid == at - start) {
            let i = atomicLoad(&scratch[PENDING_LIST + at]);
            let s = place(item_key(i), item_value(i));
            if (s != GH_NONE) {
                out[i] = GH_REP_BIT | GH_REP_NEW | s;
                placed = 1u;
            }
        }
        storageBarrier();
    }
    if (lid == 0u) {
        atomicStore(&scratch[PENDING_CURSOR], end);
    }
    add_count(placed, lid);
}

// If a path moved keys, every representative that holds a slot looks its
// key up again (nothing moves during this dispatch), so settle folds
// values into the slots the keys are in now.
@compute @workgroup_size(256)
fn relocate(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (atomicLoad(&scratch[PENDING_MOVED]) == 0u) {
        return;
    }
    for (var i = gid.x; i < params.n; i += params.stride) {
        let o = out[i];
        if ((o & GH_REP_BIT) == 0u || o == GH_REP_REFUSED || o == GH_REP_NO_PATH || o == GH_SPECIAL_ITEM) {
            continue;
        }
        let s = find_slot(item_key(i));
        if (s != GH_NONE) {
            out[i] = (o & ~GH_REP_SLOT) | s;
        }
    }
}
