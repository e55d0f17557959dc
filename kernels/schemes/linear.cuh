// Linear probing: the default scheme (home bucket by multiply-shift, linear
// over 32-byte buckets) and Hashinator's per-thread form (Fibonacci-hashed
// home slot on a power-of-two table, linear over slots). Both claim the
// first EMPTY slot of a key's sequence, so a lookup stops at the first EMPTY
// slot it meets. Hashinator's bulk kernels probe with a team of threads per
// key (bulk.cu); the order of slots is the same.
#pragma once

namespace gh {
namespace linear {

// Read-only walk of a key's sequence, one bucket per round trip; f sees
// each slot in sequence order as f(key, value) and returns true to stop.
// (Fetching two adjacent buckets per round trip after the home bucket was
// measured on an H200: 3-5% faster for 8-byte slots at load 0.9-0.95,
// up to 40% slower for 16-byte slots, so lookups take one at a time.)
template <typename K, typename V, typename F>
__device__ __forceinline__ void walk(const ViewCore<K, V>& t, u64 k, F&& f) {
    u64 b = t.home(k);
    auto g = [&](int, u64 kk, u64 vv) { return f(kk, vv); };
    for (u64 step = 0; step < t.limit; ++step) {
        if (t.scan_bucket(t.slots + b * ViewCore<K, V>::SLOTS, g)) return;
        if (++b == t.buckets) b = 0;
    }
}

template <typename K, typename V>
__device__ __forceinline__ bool find(const ViewCore<K, V>& t, u64 key, V* out) {
    typedef typename ViewCore<K, V>::W W;
    bool hit = false;
    walk(t, key, [&](u64 kk, u64 vv) {
        if (kk == key) { *out = from_bits<V>(vv); hit = true; return true; }
        return kk == W::EMPTY_KEY;  // an EMPTY slot ends the sequence
    });
    return hit;
}

template <typename K, typename V>
__device__ __forceinline__ int insert(const ViewCore<K, V>& t, u64 k, V value, u32 mode, u32 op) {
    typedef ViewCore<K, V> C;
    typedef typename C::W W;
    typedef typename C::raw raw;
    u64 b = t.home(k);
    const raw desired = W::pack(k, to_bits<V>(value));
    for (u64 step = 0; step < t.limit; ++step) {
        raw* bucket = t.slots + b * C::SLOTS;
        int r = -1;
        t.scan_bucket_whole(bucket, [&](int i, u64 kk, u64) {
            while (true) {
                if (kk == k) {
                    t.update_value(&bucket[i], value, mode, op);
                    r = EXISTING;
                    return true;
                }
                if (kk != W::EMPTY_KEY) return false;  // another key or a tombstone
                // EMPTY slots are all ones: nothing but a claim ever changes them.
                raw prev = W::cas(&bucket[i], W::empty(), desired);
                if (W::eq(prev, W::empty())) { r = INSERTED; return true; }
                kk = W::key(prev);  // lost the race: look at what the winner wrote
            }
        });
        if (r >= 0) return r;
        if (++b == t.buckets) b = 0;
    }
    return FAILED;
}

// Turns the slot holding `k` (seen with value `vv`) into a tombstone; false
// if another thread erased it first.
template <typename W>
__device__ __forceinline__ bool tombstone(typename W::raw* slot, u64 k, u64 vv) {
    typename W::raw cur = W::pack(k, vv);
    while (true) {
        typename W::raw prev = W::cas(slot, cur, W::tomb());
        if (W::eq(prev, cur)) return true;
        if (W::key(prev) != k) return false;  // erased by someone else
        cur = prev;                           // value changed meanwhile
    }
}

template <typename K, typename V>
__device__ __forceinline__ bool erase(const ViewCore<K, V>& t, u64 k) {
    typedef ViewCore<K, V> C;
    typedef typename C::W W;
    u64 b = t.home(k);
    for (u64 step = 0; step < t.limit; ++step) {
        typename C::raw* bucket = t.slots + b * C::SLOTS;
        int r = -1;  // 1 erased, 0 absent
        t.scan_bucket_whole(bucket, [&](int i, u64 kk, u64 vv) {
            if (kk == W::EMPTY_KEY) { r = 0; return true; }
            if (kk != k) return false;
            r = tombstone<W>(&bucket[i], k, vv) ? 1 : 0;
            return true;
        });
        if (r >= 0) return r == 1;
        if (++b == t.buckets) b = 0;
    }
    return false;
}

template <typename K, typename V>
__device__ __forceinline__ u64 displacement(const ViewCore<K, V>& t, u64 key, u64 slot) {
    u64 b = slot / ViewCore<K, V>::SLOTS, h = t.home(key);
    return b >= h ? b - h : b + t.buckets - h;
}

}  // namespace linear

namespace hashinator {

__device__ __forceinline__ u32 log2_of(u64 pow2) { return 63 - __clzll(pow2); }

// Fibonacci hashing of the seeded key onto 2^p slots (src/core/hash.rs).
template <typename K, typename V>
__device__ __forceinline__ u64 home_slot(const ViewCore<K, V>& t, u64 key) {
    return ((key ^ t.seed) * GH_FIBONACCI_MUL) >> (64 - log2_of(t.slot_count()));
}

// Slots visited at most: the probe limit in buckets, in slots.
template <typename K, typename V>
__device__ __forceinline__ u64 slot_limit(const ViewCore<K, V>& t) {
    u64 n = t.slot_count(), l = t.limit * ViewCore<K, V>::SLOTS;
    return l < n ? l : n;
}

// One thread walks the slots from the home slot. (Bulk kernels use a team.)
template <typename K, typename V>
__device__ __forceinline__ bool find(const ViewCore<K, V>& t, u64 key, V* out) {
    typedef typename ViewCore<K, V>::W W;
    const u64 mask = t.slot_count() - 1, lim = slot_limit(t);
    u64 i = home_slot(t, key);
    for (u64 step = 0; step < lim; ++step, i = (i + 1) & mask) {
        typename W::raw w = W::load(&t.slots[i]);
        u64 kk = W::key(w);
        if (kk == key) { *out = from_bits<V>(W::value(w)); return true; }
        if (kk == W::EMPTY_KEY) return false;
    }
    return false;
}

template <typename K, typename V>
__device__ __forceinline__ int insert(const ViewCore<K, V>& t, u64 k, V value, u32 mode, u32 op) {
    typedef typename ViewCore<K, V>::W W;
    typedef typename W::raw raw;
    const u64 mask = t.slot_count() - 1, lim = slot_limit(t);
    const raw desired = W::pack(k, to_bits<V>(value));
    u64 i = home_slot(t, k);
    for (u64 step = 0; step < lim; ++step, i = (i + 1) & mask) {
        u64 kk = W::key(W::load(&t.slots[i]));
        while (true) {
            if (kk == k) { t.update_value(&t.slots[i], value, mode, op); return EXISTING; }
            if (kk != W::EMPTY_KEY) break;
            raw prev = W::cas(&t.slots[i], W::empty(), desired);
            if (W::eq(prev, W::empty())) return INSERTED;
            kk = W::key(prev);
        }
    }
    return FAILED;
}

template <typename K, typename V>
__device__ __forceinline__ bool erase(const ViewCore<K, V>& t, u64 k) {
    typedef typename ViewCore<K, V>::W W;
    const u64 mask = t.slot_count() - 1, lim = slot_limit(t);
    u64 i = home_slot(t, k);
    for (u64 step = 0; step < lim; ++step, i = (i + 1) & mask) {
        typename W::raw w = W::load(&t.slots[i]);
        u64 kk = W::key(w);
        if (kk == W::EMPTY_KEY) return false;
        if (kk == k) return linear::tombstone<W>(&t.slots[i], k, W::value(w));
    }
    return false;
}

template <typename K, typename V>
__device__ __forceinline__ u64 displacement(const ViewCore<K, V>& t, u64 key, u64 slot) {
    const u64 n = t.slot_count(), h = home_slot(t, key), spb = ViewCore<K, V>::SLOTS;
    u64 d = slot >= h ? slot - h : slot + n - h;
    return (d + h % spb) / spb;
}

}  // namespace hashinator
}  // namespace gh
