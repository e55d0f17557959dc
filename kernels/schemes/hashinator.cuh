// Hashinator's bulk operations: a team ("virtual warp") of `size` lanes of one
// warp serves one key. The team reads `size` consecutive slots of the key's
// sequence at once, one per lane, votes with __ballot_sync on its sub-mask,
// and the lowest voting lane acts; then the team moves on by `size` slots.
//
//   sequence:  h h+1 h+2 h+3 | h+4 h+5 h+6 h+7 | ...     (team of 4)
//   lane:      0  1   2   3  |  0   1   2   3  |
//
// Taking the LOWEST lane that sees the key or an EMPTY slot keeps the
// per-thread order of linear.cuh exactly: an insert claims the first EMPTY
// slot of the sequence, a lookup stops at the first EMPTY slot. The probe
// limit (slot_limit) masks lanes past it, so a full table ends the walk.
//
// Every lane of a team runs the same iterations (all loop conditions are
// ballot or shuffle results), so the sub-mask is always complete; different
// teams of a warp may diverge (independent thread scheduling, sm_70+).
// Out-of-band keys are served by the team's first lane.
#pragma once

namespace gh {
namespace hashinator {

// One key's team of lanes within a warp. Needs 1-D blocks whose size is a
// multiple of 32, and team sizes that divide 32, so a team never straddles
// two warps and threads k*size .. k*size+size-1 form team k.
struct Team {
    u32 size;   // lanes per key: 1, 2, 4, 8, 16 or 32
    u32 rank;   // this lane's place in the team
    u32 first;  // warp lane of the team's rank 0
    u32 mask;   // the team's lanes in the warp

    // An invalid parameter (the host validates it) degrades to one lane,
    // which is still correct: the walk then is the per-thread one.
    __device__ __forceinline__ explicit Team(u32 param) {
        size = (param >= 1 && param <= 32 && (param & (param - 1)) == 0) ? param : 1;
        const u32 lane = threadIdx.x & 31;
        rank = lane & (size - 1);
        first = lane - rank;
        mask = (size == 32 ? 0xffffffffu : ((1u << size) - 1)) << first;
    }
    __device__ __forceinline__ bool leader() const { return rank == 0; }
    // Lowest team lane whose bit is set in a ballot (ballot != 0).
    __device__ __forceinline__ u32 lowest(u32 ballot) const { return __ffs(ballot) - 1; }
};

// Looks `key` (in slots, not a marker) up with the team. All lanes get the answer.
template <typename K, typename V>
__device__ __forceinline__ bool team_find_slot(const ViewCore<K, V>& t, const Team& team, u64 key, u64* value_bits) {
    typedef typename ViewCore<K, V>::W W;
    const u64 mask = t.slot_count() - 1, lim = slot_limit(t);
    const u64 h = home_slot(t, key);
    for (u64 base = 0; base < lim; base += team.size) {
        const u64 p = base + team.rank;
        const bool live = p < lim;
        u64 kk = W::EMPTY_KEY, vv = 0;
        if (live) {
            typename W::raw w = W::load(&t.slots[(h + p) & mask]);
            kk = W::key(w);
            vv = W::value(w);
        }
        const u32 stop = __ballot_sync(team.mask, live && (kk == key || kk == W::EMPTY_KEY));
        if (stop) {
            const u32 src = team.lowest(stop);
            const bool hit = __shfl_sync(team.mask, (int)(kk == key), src) != 0;
            *value_bits = __shfl_sync(team.mask, vv, src);
            return hit;
        }
    }
    return false;
}

// Inserts `k` (in slots, not a marker) with the team; all lanes get the
// outcome (INSERTED, EXISTING or FAILED).
template <typename K, typename V>
__device__ __forceinline__ int team_insert_slot(const ViewCore<K, V>& t, const Team& team, u64 k, V value, u32 mode,
                                                u32 op) {
    typedef typename ViewCore<K, V>::W W;
    typedef typename W::raw raw;
    constexpr int AGAIN = -1;
    const u64 mask = t.slot_count() - 1, lim = slot_limit(t);
    const u64 h = home_slot(t, k);
    const raw desired = W::pack(k, to_bits<V>(value));
    for (u64 base = 0; base < lim; base += team.size) {
        const u64 p = base + team.rank;
        const bool live = p < lim;
        raw* slot = &t.slots[(h + p) & mask];
        // EMPTY_KEY for lanes past the limit, but `live` keeps them out of every vote.
        u64 kk = live ? W::key(W::load(slot)) : W::EMPTY_KEY;
        while (true) {
            const u32 vote = __ballot_sync(team.mask, live && (kk == k || kk == W::EMPTY_KEY));
            if (!vote) break;  // nothing here: the next `size` slots
            const u32 src = team.lowest(vote);
            int r = AGAIN;
            if ((threadIdx.x & 31) == src) {
                if (kk == k) {
                    t.update_value(slot, value, mode, op);
                    r = EXISTING;
                } else {
                    // EMPTY slots are all ones: nothing but a claim ever changes them.
                    raw prev = W::cas(slot, W::empty(), desired);
                    if (W::eq(prev, W::empty())) {
                        r = INSERTED;
                    } else if (W::key(prev) == k) {
                        // A copy of the key from the same batch won the slot.
                        t.update_value(slot, value, mode, op);
                        r = EXISTING;
                    } else {
                        // Another key took it: vote again without this slot. (A
                        // marker key with other value bits cannot occur; were it
                        // seen, treating it as taken still ends the loop.)
                        kk = W::key(prev) == W::EMPTY_KEY ? W::TOMB_KEY : W::key(prev);
                    }
                }
            }
            r = __shfl_sync(team.mask, r, src);
            if (r != AGAIN) return r;
        }
    }
    return FAILED;
}

// Erases `k` (in slots, not a marker) with the team; true on every lane if
// this call turned it into a tombstone.
template <typename K, typename V>
__device__ __forceinline__ bool team_erase_slot(const ViewCore<K, V>& t, const Team& team, u64 k) {
    typedef typename ViewCore<K, V>::W W;
    const u64 mask = t.slot_count() - 1, lim = slot_limit(t);
    const u64 h = home_slot(t, k);
    for (u64 base = 0; base < lim; base += team.size) {
        const u64 p = base + team.rank;
        const bool live = p < lim;
        typename W::raw* slot = &t.slots[(h + p) & mask];
        u64 kk = W::EMPTY_KEY, vv = 0;
        if (live) {
            typename W::raw w = W::load(slot);
            kk = W::key(w);
            vv = W::value(w);
        }
        const u32 stop = __ballot_sync(team.mask, live && (kk == k || kk == W::EMPTY_KEY));
        if (stop) {
            const u32 src = team.lowest(stop);
            int gone = 0;
            if ((threadIdx.x & 31) == src && kk == k) gone = linear::tombstone<W>(slot, k, vv);
            return __shfl_sync(team.mask, gone, src) != 0;
        }
    }
    return false;
}

// ---- whole-key entry points (out-of-band keys included) --------------------

template <typename K, typename V>
__device__ __forceinline__ int team_insert(const ViewCore<K, V>& t, const Team& team, K key, V value, u32 mode, u32 op) {
    const int s = ViewCore<K, V>::special_index(key);
    if (s < 0) return team_insert_slot(t, team, (u64)key, value, mode, op);
    int r = FAILED;
    if (team.leader()) r = t.insert_special(s, value, mode, op);
    return __shfl_sync(team.mask, r, team.first);
}

template <typename K, typename V>
__device__ __forceinline__ bool team_find(const ViewCore<K, V>& t, const Team& team, K key, V* out) {
    const int s = ViewCore<K, V>::special_index(key);
    if (s < 0) {
        u64 bits = 0;
        const bool hit = team_find_slot(t, team, (u64)key, &bits);
        if (hit) *out = from_bits<V>(bits);
        return hit;
    }
    V v = from_bits<V>(0);
    int hit = 0;
    if (team.leader()) hit = t.find_special(s, &v);
    hit = __shfl_sync(team.mask, hit, team.first);
    const u64 bits = __shfl_sync(team.mask, to_bits<V>(v), team.first);
    if (hit) *out = from_bits<V>(bits);
    return hit != 0;
}

template <typename K, typename V>
__device__ __forceinline__ bool team_erase(const ViewCore<K, V>& t, const Team& team, K key) {
    const int s = ViewCore<K, V>::special_index(key);
    if (s < 0) return team_erase_slot(t, team, (u64)key);
    int gone = 0;
    if (team.leader()) gone = t.erase_special(s);
    return __shfl_sync(team.mask, gone, team.first) != 0;
}

}  // namespace hashinator

// ---- tombstone cleaning (Linear and Hashinator) ------------------------------
// The compaction (gh_clean_extract) leaves a key in place only where lookups
// still reach it once lifted keys and tombstones are EMPTY (lookups stop at
// the first EMPTY slot); the rest are lifted out and inserted again. One
// thread sees one bucket, its slots j = 0, 1, ... in order.
// Linear: a key stays iff its home bucket is this one; lookups scan the
// bucket from its start, so the kernel packs the keys that stay to its front.
// Hashinator: a key at slot j stays iff its home slot lies in this bucket at
// or before j and no slot from there to j turns EMPTY (`gap` is the last one
// before j that does, -1 if none); such keys do not move.
template <u32 S, typename K, typename V>
__device__ __forceinline__ bool clean_stays(const ViewCore<K, V>& t, u64 key, u64 bucket, int j, int gap) {
    if (S == GH_SCHEME_HASHINATOR) {
        const u64 h = hashinator::home_slot(t, key), first = bucket * ViewCore<K, V>::SLOTS;
        return h >= first && h <= first + j && (long long)(h - first) > gap;
    }
    return t.home(key) == bucket;
}

}  // namespace gh
