// Scheme::SlabList (src/core/slab.rs, src/backend/cpu/slab_list.rs): the
// slots are cut into slabs of one 32-byte bucket; the first quarter are
// chain heads (multiply-shift of the key's hash onto them), the rest a pool
// that chains take slabs from, one at a time, when their last slab is full.
//
// The scheme's words follow the occupancy bits in `occupied` (the binding
// every module has read-write, so the bind layout stays the same):
//
//   occupied: [ one bit per slot ][ next: one word per slab ][ handed out ][ linked ]
//
// `next[s]` is the slab after slab `s` (0 = none: pool slabs come after at
// least one head). A pool slab is handed out by one atomicAdd on the first
// counter and linked by one compare-exchange of the chain's last `next`
// word from 0. An invocation that loses that race keeps its slab, walks
// into the winner's and, before it returns, links its own further down the
// same chain (as the CPU does) or hands it back to the pool if it is still
// the last one handed out, so no slab is lost. Slabs are only appended and
// slots only leave EMPTY, so every invocation walks a key's slots in the
// same order and a lookup stops at the first EMPTY slot.
//
// No invocation waits for another. A claim that reaches the end of its
// chain with the pool used up cannot tell whether a slab handed out but
// not yet linked is on its way to this chain, so in the first pass it is
// deferred (GH_DEFERRED); the scheme's last pass over the deferred items
// runs after every earlier invocation has linked what it holds, when no
// chain can grow any more, and refuses such a key for good. So a key is
// refused exactly when the CPU refuses it: chain full, pool used up, every
// slab handed out linked.
//
// Growing a chain locks its end first (its last `next` word goes from 0
// to CHAIN_LINKING), so on a GPU, where hundreds of invocations meet at one
// full chain end at once, one slab is taken, not one per invocation (the
// spares they appended ran a pool dry at load 0.5 on an H200). Those that
// find the end locked defer and try again in the next pass: the first
// pass, then RETRY_PASSES retry passes, grow each chain end by at most one
// slab per pass; a carrying pass then lets what is left take slabs without
// the lock (a loser carries its slab further down the chain), and the last
// pass decides refusals.

// Which pass runs: PASS_LOCK (the first and the retry passes), PASS_CARRY
// or PASS_DECIDE (the last).
const PASS_LOCK: u32 = 0u;
const PASS_CARRY: u32 = 1u;
const PASS_DECIDE: u32 = 2u;
var<private> pass_kind: u32 = PASS_LOCK;

// A chain end being grown: the `next` word's value while its locker takes a slab.
const CHAIN_LINKING: u32 = 0xffffffffu;

fn slab_heads() -> u32 {
    return max(1u, params.buckets / GH_SLABS_PER_HEAD);
}

// First word of the scheme's words in `occupied`: after one bit per slot.
fn aux_base() -> u32 {
    return (params.buckets * GH_SLOTS_PER_BUCKET + 31u) / 32u;
}

fn next_word(slab: u32) -> u32 {
    return aux_base() + slab;
}

fn allocated_word() -> u32 {
    return aux_base() + params.buckets;
}

fn linked_word() -> u32 {
    return aux_base() + params.buckets + 1u;
}

// Steps a walk takes at most: a chain has at most every slab, and a weak
// compare-exchange may fail spuriously now and then.
fn walk_limit() -> u32 {
    return 2u * params.buckets + 2u;
}

fn chain_head(k: vec2<u32>) -> u32 {
    return reduce_range(mix64(k, seed()), slab_heads());
}

fn next_slab(slab: u32) -> u32 {
    return atomicLoad(&occupied[next_word(slab)]);
}

// A slab from the pool, or 0 when it is used up. The counter is read
// before it is bumped, so a used-up pool stops it: however often a full
// table is asked, it passes the pool by at most the invocations in flight.
fn take_pool_slab() -> u32 {
    let pool = params.buckets - slab_heads();
    if (atomicLoad(&occupied[allocated_word()]) >= pool) {
        return 0u;
    }
    let n = atomicAdd(&occupied[allocated_word()], 1u);
    if (n >= pool) {
        return 0u;
    }
    return slab_heads() + n;
}

// At slab `slab`, whose slots are all taken: the slab to walk next, or 0
// when the chain ends there and the pool is used up. Links `*spare` (a slab
// this invocation holds) or a fresh pool slab after `slab`; when another
// invocation linked one first, walks into theirs and keeps its own in
// `*spare`.
//
// In the locking passes returns CHAIN_LINKING when another invocation holds
// the chain end: the claim defers to the next pass.
fn grow_chain(slab: u32, spare: ptr<function, u32>) -> u32 {
    let seen = next_slab(slab);
    if (seen != 0u) {
        return seen;
    }
    if (pass_kind == PASS_LOCK) {
        let r = atomicCompareExchangeWeak(&occupied[next_word(slab)], 0u, CHAIN_LINKING);
        if (!r.exchanged) {
            // Linked or locked by another (CHAIN_LINKING), or a spurious failure: look again.
            return select(r.old_value, slab, r.old_value == 0u);
        }
        // Zero (the pool used up) unlocks the end as it was.
        let fresh = take_pool_slab();
        atomicStore(&occupied[next_word(slab)], fresh);
        if (fresh != 0u) {
            atomicAdd(&occupied[linked_word()], 1u);
        }
        return fresh;
    }
    var fresh = *spare;
    *spare = 0u;
    if (fresh == 0u) {
        fresh = take_pool_slab();
    }
    if (fresh == 0u) {
        return 0u;
    }
    let r = atomicCompareExchangeWeak(&occupied[next_word(slab)], 0u, fresh);
    if (r.exchanged) {
        atomicAdd(&occupied[linked_word()], 1u);
        return fresh;
    }
    *spare = fresh;
    // A spurious failure: look at the same slab again.
    if (r.old_value == 0u) {
        return slab;
    }
    return r.old_value;
}

// Disposes of `spare`, a slab this invocation took and no longer needs:
// handed back if it is the last one handed out (so no chain ends with it
// empty), else linked at the end of the chain through slab `last`. Never
// handed back once the pool is used up, so that after a claim found it
// used up no chain grows again in the same submission.
fn link_at_end(last: u32, spare: u32) {
    let n = spare - slab_heads();
    if (n + 1u < params.buckets - slab_heads()) {
        let back = atomicCompareExchangeWeak(&occupied[allocated_word()], n + 1u, n);
        if (back.exchanged) {
            return;
        }
    }
    var at = last;
    for (var step = 0u; step < walk_limit(); step += 1u) {
        let r = atomicCompareExchangeWeak(&occupied[next_word(at)], 0u, spare);
        if (r.exchanged) {
            atomicAdd(&occupied[linked_word()], 1u);
            return;
        }
        if (r.old_value != 0u) {
            at = r.old_value;
        }
    }
}

// What a claim returns when the chain ends and the pool is used up, or
// (the locking passes) its end is locked by another invocation.
fn chain_exhausted() -> u32 {
    return select(GH_DEFERRED, GH_NONE, pass_kind == PASS_DECIDE);
}

// Releases slot `s`, found holding key `k`, for bulk.wgsl's erases: a
// TOMBSTONE (common.wgsl bury), as the CPU's erase leaves.
fn release_slot(s: u32, k: vec2<u32>) -> bool {
    return bury(s, k);
}

// The slot holding key `k`, or GH_NONE.
fn find_slot(k: vec2<u32>) -> u32 {
    var slab = chain_head(k);
    for (var step = 0u; step < params.buckets; step += 1u) {
        for (var j = 0u; j < GH_SLOTS_PER_BUCKET; j += 1u) {
            let s = slab * GH_SLOTS_PER_BUCKET + j;
            let sk = slot_key(s);
            if (all(sk == k)) {
                return s;
            }
            if (all(sk == EMPTY_KEY)) {
                return GH_NONE;
            }
        }
        slab = next_slab(slab);
        if (slab == 0u) {
            return GH_NONE;
        }
    }
    return GH_NONE;
}

// Key k's value as (hit, value lo, value hi), for bulk.wgsl's `find`.
fn lookup(k: vec2<u32>) -> vec3<u32> {
    let s = find_slot(k);
    if (s == GH_NONE) {
        return vec3<u32>(0u, 0u, 0u);
    }
    return vec3<u32>(1u, slot_value(s));
}

// 8-byte slots: in slab `slab`, the slot of key `k` (a 32-bit key field)
// or the first EMPTY one, claimed with one compare-exchange on its key
// word: the slot, with GH_NEW_BIT if this invocation placed the key, or
// GH_NONE if every slot holds another key (or a TOMBSTONE).
fn claim_in_slab(slab: u32, k: u32) -> u32 {
    for (var j = 0u; j < GH_SLOTS_PER_BUCKET; j += 1u) {
        let c = claim_key_word(slab * GH_SLOTS_PER_BUCKET + j, k);
        if (c != GH_NONE) {
            return c;
        }
    }
    return GH_NONE;
}

// 8-byte slots: the slot of key `k`, claimed in chain order if the key is
// new (with GH_NEW_BIT), as linear.wgsl's claim_direct along its sequence:
// copies of a key walk the same slots, so they meet at one. GH_DEFERRED or
// GH_NONE when the chain is full and the pool used up (see the top).
fn claim_direct(k: u32) -> u32 {
    var slab = chain_head(vec2<u32>(k, 0u));
    var spare = 0u;
    var claimed = GH_NONE;
    for (var step = 0u; step < walk_limit(); step += 1u) {
        claimed = claim_in_slab(slab, k);
        if (claimed != GH_NONE) {
            break;
        }
        let next = grow_chain(slab, &spare);
        if (next == 0u || next == CHAIN_LINKING) {
            claimed = chain_exhausted();
            break;
        }
        slab = next;
    }
    if (spare != 0u) {
        link_at_end(slab, spare);
    }
    return claimed;
}

// Any slot width: places key `k`, absent from the table and held by no
// other invocation of the dispatch, in the first slot of its chain no one
// has taken (the occupancy bit), with value `v`. Returns the slot, or
// GH_DEFERRED or GH_NONE when the chain is full and the pool used up. Reads
// no key words, so it cannot see a pair half-written by another invocation.
fn claim_free(k: vec2<u32>, v: vec2<u32>) -> u32 {
    var slab = chain_head(k);
    var spare = 0u;
    var placed = GH_NONE;
    for (var step = 0u; step < walk_limit(); step += 1u) {
        for (var j = 0u; j < GH_SLOTS_PER_BUCKET; j += 1u) {
            let s = slab * GH_SLOTS_PER_BUCKET + j;
            if (take_slot(s)) {
                store_pair(s, k, v);
                placed = s;
                break;
            }
        }
        if (placed != GH_NONE) {
            break;
        }
        let next = grow_chain(slab, &spare);
        if (next == 0u || next == CHAIN_LINKING) {
            placed = chain_exhausted();
            break;
        }
        slab = next;
    }
    if (spare != 0u) {
        link_at_end(slab, spare);
    }
    return placed;
}

// A later pass of kind `kind`: the items insert_direct deferred (8-byte
// slots, out[i] = GH_DEFERRED) claim again, or, with `reps`, the
// representatives claim_reps left pending (16-byte slots) place their key
// again.
fn later_pass(gid: vec3<u32>, lid: u32, kind: u32, reps: bool) {
    pass_kind = kind;
    let waiting = select(GH_DEFERRED, GH_REP_PENDING, reps);
    var placed = 0u;
    let total = rounds();
    for (var r = 0u; r < total; r += 1u) {
        let i = gid.x + r * params.stride;
        if (i < params.n && out[i] == waiting) {
            if (reps) {
                placed += claim_rep(i);
            } else {
                placed += insert_item(i);
            }
        }
    }
    add_count(placed, lid);
}

@compute @workgroup_size(256)
fn insert_retry(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    later_pass(gid, lid, PASS_LOCK, false);
}

@compute @workgroup_size(256)
fn insert_carry(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    later_pass(gid, lid, PASS_CARRY, false);
}

@compute @workgroup_size(256)
fn insert_deferred(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    later_pass(gid, lid, PASS_DECIDE, false);
}

@compute @workgroup_size(256)
fn claim_reps_retry(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    later_pass(gid, lid, PASS_LOCK, true);
}

@compute @workgroup_size(256)
fn claim_reps_carry(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    later_pass(gid, lid, PASS_CARRY, true);
}

@compute @workgroup_size(256)
fn claim_reps_deferred(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    later_pass(gid, lid, PASS_DECIDE, true);
}
