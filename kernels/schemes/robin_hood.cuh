// Bucketed Robin Hood hashing (gpurhh). A key lives in one of the `limit`
// buckets from its multiply-shift home bucket (the cap), in any slot of its
// bucket; a resident's displacement is how many buckets past its home it
// sits. src/backend/cpu/robin_hood.rs is the reference: the same walk, the
// same decisions, the same writes.
//
// Insert: walking from the key's home, a full bucket whose richest resident
// (smallest displacement) is richer than the carried key would be there
// gives that slot to the carried key, and the resident is carried on; the
// first bucket with an EMPTY slot takes the carried key. TOMBSTONEs are never
// reused nor moved. If a carried key would pass its cap, or the cascade run
// past SPAN_PER_CAP caps from x's home, the insert fails and writes nothing.
//
// Invariant: a key stored d buckets past its home has, in each bucket j < d
// on its way, no EMPTY slot and a TOMBSTONE or a resident at least j buckets
// past its home (a swap only puts a poorer key where a richer one was). So a
// lookup stops at the key, at an EMPTY slot (EMPTY slots are a suffix of a
// bucket: inserts fill the first), at a bucket whose residents are all
// richer than the key would be there, or at the cap.
//
// Concurrency: one lock bit per bucket in the aux words. An insert locks
// every bucket it walks, in order, and keeps them. While it holds fewer than
// WAIT_HELD of them and its walk has not wrapped past the table's end, it
// waits for a busy lock: it then holds only buckets below the one it waits
// for, so waits never form a cycle. Otherwise it only tries: on a busy lock
// it releases all of them, waits (holding none) until that lock is free, and
// starts over. Long walks thus never hold a queue of waiters behind them,
// and a retry starts when its obstacle is gone rather than after a blind
// back-off (which, with every lock only tried, livelocked small tables:
// thousands of threads kept taking and dropping overlapping runs). Under the locks it plans with
// plain reads, then replays the same decisions writing (locked buckets cannot
// change, so the replay sees what the plan saw), fences and unlocks. Two
// inserts of one key meet at its home bucket's lock. Erase locks the buckets
// of its lookup the same way, so inserts and erases may run together.
// Lookups take no lock: users' kernels must not look keys up while others
// insert (a key being moved may be missed); bulk lookups never overlap bulk
// inserts.
#pragma once

namespace gh {
namespace robin_hood {

// How far an insert's cascade may run, in probe limits (1024 buckets at the
// default limit of 32, the linear scheme's reach); as SPAN_PER_CAP in
// src/backend/cpu/robin_hood.rs.
constexpr u64 SPAN_PER_CAP = 32;

// Locks a walk may hold and still wait for the next one (see above).
constexpr u64 WAIT_HELD = 8;

// ---- per-bucket locks: bit b of the aux memory seen as 32-bit words ------
__device__ __forceinline__ bool try_lock(u64* aux, u64 b) {
    u32* word = reinterpret_cast<u32*>(aux) + (b >> 5);
    const u32 bit = 1u << (b & 31);
    u32 old;
    // Acquire: the reads of the bucket that follow see the last holder's writes.
    asm volatile("atom.acquire.gpu.or.b32 %0, [%1], %2;" : "=r"(old) : "l"(word), "r"(bit) : "memory");
    return (old & bit) == 0;
}

// Whether bucket b's lock is held, read without an atomic (a retry polls
// this first, so threads queued on a hot key read the lock word instead of
// hammering it with atomics).
__device__ __forceinline__ bool is_locked(const u64* aux, u64 b) {
    return (*(reinterpret_cast<const volatile u32*>(aux) + (b >> 5)) >> (b & 31)) & 1u;
}

// Locks bucket b; waits while it is busy if `wait`, else gives up at once.
__device__ __forceinline__ bool lock(u64* aux, u64 b, bool wait) {
    while (!try_lock(aux, b)) {
        if (!wait) return false;
        do __nanosleep(64); while (is_locked(aux, b));
    }
    return true;
}

// Releases the n buckets from `first` on (wrapping at the table's end), one
// atomic per 32-bit lock word, after a fence that publishes this thread's writes.
__device__ __forceinline__ void unlock_run(u64* aux, u64 buckets, u64 first, u64 n) {
    __threadfence();
    u32* words = reinterpret_cast<u32*>(aux);
    u64 b = first;
    while (n > 0) {
        const u32 lo = (u32)(b & 31);
        u64 run = 32 - lo;
        if (run > n) run = n;
        if (run > buckets - b) run = buckets - b;
        const u32 mask = (run == 32 ? 0xffffffffu : ((1u << (u32)run) - 1u)) << lo;
        atomicAnd(words + (b >> 5), ~mask);
        n -= run;
        b += run;
        if (b == buckets) b = 0;
    }
}

// ---- one bucket in registers ----------------------------------------------
__device__ __forceinline__ void load_bucket(const u64* p, u64 (&w)[4]) {
    const ulonglong2 a = __ldcg(reinterpret_cast<const ulonglong2*>(p));
    const ulonglong2 c = __ldcg(reinterpret_cast<const ulonglong2*>(p) + 1);
    w[0] = a.x; w[1] = a.y; w[2] = c.x; w[3] = c.y;
}
__device__ __forceinline__ void load_bucket(const Pair16* p, Pair16 (&w)[2]) {
    const ulonglong2 a = __ldcg(reinterpret_cast<const ulonglong2*>(p));
    const ulonglong2 c = __ldcg(reinterpret_cast<const ulonglong2*>(p) + 1);
    w[0].k = a.x; w[0].v = a.y; w[1].k = c.x; w[1].v = c.y;
}

// w[i] without a dynamically indexed array (which would live in local memory).
template <typename R, int S>
__device__ __forceinline__ R pick(const R (&w)[S], int i) {
    R r = w[0];
#pragma unroll
    for (int s = 1; s < S; ++s) if (s == i) r = w[s];
    return r;
}

// Buckets past its home that key k sits in bucket b.
template <typename K, typename V>
__device__ __forceinline__ u64 disp(const ViewCore<K, V>& t, u64 k, u64 b) {
    const u64 h = t.home(k);
    return b >= h ? b - h : b + t.buckets - h;
}

// What bucket b holds for an insert of x, which would sit j buckets past its
// home there: x's slot, the first EMPTY slot, and (when there is neither) the
// richest resident and whether x's lookup goes on past this bucket.
struct Look {
    int key_at, empty_at, rich_at;
    u64 rich_disp;
    bool poorer;  // a TOMBSTONE or a resident at least j buckets past its home
};

template <typename K, typename V>
__device__ __forceinline__ Look look(const ViewCore<K, V>& t, const typename ViewCore<K, V>::raw (&w)[ViewCore<K, V>::SLOTS],
                                     u64 b, u64 j, u64 x) {
    typedef typename ViewCore<K, V>::W W;
    constexpr int S = ViewCore<K, V>::SLOTS;
    Look l = {-1, -1, -1, ~0ull, j == 0};
#pragma unroll
    for (int i = S - 1; i >= 0; --i) {  // downwards: the first match wins
        const u64 k = W::key(w[i]);
        if (k == x) l.key_at = i;
        if (k == W::EMPTY_KEY) l.empty_at = i;
    }
    if (l.key_at >= 0 || l.empty_at >= 0) return l;
#pragma unroll
    for (int i = 0; i < S; ++i) {
        const u64 k = W::key(w[i]);
        if (k == W::TOMB_KEY) { l.poorer = true; continue; }
        const u64 d = disp(t, k, b);
        l.poorer |= d >= j;
        if (d < l.rich_disp) { l.rich_disp = d; l.rich_at = i; }
    }
    return l;
}

// The slot (index into t.slots) holding x and its value, by the lookup's
// stopping rules; no locks.
template <typename K, typename V>
__device__ __forceinline__ bool locate(const ViewCore<K, V>& t, u64 x, u64* at, u64* value) {
    typedef typename ViewCore<K, V>::W W;
    constexpr int S = ViewCore<K, V>::SLOTS;
    u64 b = t.home(x);
    for (u64 j = 0; j < t.limit; ++j) {
        bool poorer = j == 0;
        int r = -1;  // 1 found, 0 absent
        t.scan_bucket(t.slots + b * S, [&](int i, u64 kk, u64 vv) {
            if (kk == x) { *at = b * S + i; *value = vv; r = 1; return true; }
            if (kk == W::EMPTY_KEY) { r = 0; return true; }
            if (!poorer) poorer = kk == W::TOMB_KEY || disp(t, kk, b) >= j;
            return false;
        });
        if (r >= 0) return r == 1;
        if (!poorer) return false;  // every resident richer: x would have taken a slot here
        if (++b == t.buckets) b = 0;
    }
    return false;
}

// The unlocked step (for kernels during which no key moves): a stored x is
// updated; an absent one is LEFT to the locked insert, which may have to
// shift residents to place it.
template <typename K, typename V>
__device__ __forceinline__ int insert_unlocked(const ViewCore<K, V>& t, u64 x, V value, u32 mode, u32 op) {
    u64 at, v;
    if (!locate(t, x, &at, &v)) return LEFT;
    t.update_value(t.slots + at, value, mode, op);
    return EXISTING;
}

template <typename K, typename V>
__device__ __forceinline__ bool find(const ViewCore<K, V>& t, u64 x, V* out) {
    u64 at, v;
    if (!locate(t, x, &at, &v)) return false;
    *out = from_bits<V>(v);
    return true;
}

// Writes the cascade planned over the `held` locked buckets from `b`: the
// decisions of the plan, taken again on the same (unchanged) buckets.
template <typename K, typename V>
__device__ __forceinline__ void apply(const ViewCore<K, V>& t, u64 b, u64 held, u64 x,
                                      typename ViewCore<K, V>::raw carried) {
    typedef typename ViewCore<K, V>::W W;
    typedef typename ViewCore<K, V>::raw raw;
    constexpr int S = ViewCore<K, V>::SLOTS;
    u64 dist = 0;
    for (u64 j = 0; j < held; ++j) {
        raw* bucket = t.slots + b * S;
        raw w[S];
        load_bucket(bucket, w);
        const Look l = look(t, w, b, j, x);
        // Locked: each compare-and-swap finds the word just read (atomic, so
        // no torn 16-byte slot is ever visible).
        if (l.empty_at >= 0) { W::cas(bucket + l.empty_at, W::empty(), carried); return; }
        if (l.rich_at >= 0 && l.rich_disp < dist) {
            const raw out = pick(w, l.rich_at);
            W::cas(bucket + l.rich_at, out, carried);
            carried = out;
            dist = l.rich_disp;
        }
        ++dist;
        if (++b == t.buckets) b = 0;
    }
}

// Whether one of the n buckets from b on has an EMPTY slot (no locks: EMPTY
// slots never come back, so "none" stays true).
template <typename K, typename V>
__device__ __forceinline__ bool empty_ahead(const ViewCore<K, V>& t, u64 b, u64 n) {
    typedef typename ViewCore<K, V>::W W;
    for (u64 i = 0; i < n; ++i) {
        if (t.scan_bucket(t.slots + b * ViewCore<K, V>::SLOTS, [&](int, u64 kk, u64) { return kk == W::EMPTY_KEY; }))
            return true;
        if (++b == t.buckets) b = 0;
    }
    return false;
}

// One attempt at an insert; false when a lock was busy (then nothing was
// written and every lock taken is released). The walk locks and reads
// buckets from x's home while either question is open: is x stored (its
// lookup, at most `limit` buckets), and where does the cascade end (the first
// bucket with an EMPTY slot, or failure once a carried key would pass its
// cap or the walk its span). The span never exceeds the table, so no bucket
// is locked twice.
template <typename K, typename V>
__device__ __forceinline__ bool try_insert(const ViewCore<K, V>& t, u64 x, V value, u32 mode, u32 op, int* out,
                                           u64* busy) {
    typedef ViewCore<K, V> C;
    typedef typename C::raw raw;
    constexpr int S = C::SLOTS;
    const u64 home = t.home(x), cap = t.limit;
    const u64 span = cap * SPAN_PER_CAP < t.buckets ? cap * SPAN_PER_CAP : t.buckets;
    u64 b = home, held = 0, dist = 0;  // dist: buckets the carried key sits past its home at b
    bool looking = true;
    // -1 open, 1 ends at an EMPTY slot, 0 fails. With no EMPTY slot within
    // the span (read without locks: none comes back while inserts run) the
    // insert can only find x, so it locks just x's lookup, not the cap: on a
    // full table that is what keeps failing inserts from queueing on locks.
    int plan = empty_ahead(t, home, span) ? -1 : 0;
    int r = -1;     // EXISTING once x is found
    for (u64 j = 0; j < span && (looking || plan < 0); ++j) {
        if (!lock(t.aux, b, held < WAIT_HELD && b >= home)) {
            unlock_run(t.aux, t.buckets, home, held);
            *busy = b;
            return false;
        }
        ++held;
        raw* bucket = t.slots + b * S;
        raw w[S];
        load_bucket(bucket, w);
        const Look l = look(t, w, b, j, x);
        if (l.key_at >= 0) {
            t.update_value(bucket + l.key_at, value, mode, op);
            r = EXISTING;
            break;
        }
        if (l.empty_at >= 0) {
            looking = false;
            if (plan < 0) plan = 1;
        } else {
            looking = looking && l.poorer && j + 1 < cap;
            if (plan < 0) {
                if (l.rich_at >= 0 && l.rich_disp < dist) dist = l.rich_disp;
                // Past x's cap only a cascade goes on: with no EMPTY slot in
                // reach, fail now rather than lock the way there.
                const u64 next = b + 1 == t.buckets ? 0 : b + 1;
                if (++dist == cap || (j + 1 == cap && !empty_ahead(t, next, span - cap))) plan = 0;
            }
        }
        if (++b == t.buckets) b = 0;
    }
    if (r < 0 && plan == 1) {
        apply(t, home, held, x, C::W::pack(x, to_bits<V>(value)));
        r = INSERTED;
    }
    unlock_run(t.aux, t.buckets, home, held);
    *out = r < 0 ? FAILED : r;
    return true;
}

// Runs `attempt` (one try of a locked walk from x's home; false when the
// lock of bucket *busy was busy, with every lock released) until it
// completes, waiting before each retry until that lock is free, then a
// little more by lane (two walks that meet each other's locks around the
// wrap would otherwise retry in lockstep).
template <typename K, typename V, typename F>
__device__ __forceinline__ void with_retries(const ViewCore<K, V>& t, F&& attempt) {
    u64 busy = 0;
    while (!attempt(&busy)) {
        while (is_locked(t.aux, busy)) __nanosleep(64);
        __nanosleep(32 * (1 + (threadIdx.x & 31)));
    }
}

template <typename K, typename V>
__device__ __forceinline__ int insert(const ViewCore<K, V>& t, u64 x, V value, u32 mode, u32 op) {
    int r = FAILED;
    with_retries(t, [&](u64* busy) { return try_insert(t, x, value, mode, op, &r, busy); });
    return r;
}

// One attempt at an erase: x's lookup with every bucket on it locked, so an
// erase in a user's kernel never misses a key an insert is moving.
template <typename K, typename V>
__device__ __forceinline__ bool try_erase(const ViewCore<K, V>& t, u64 x, bool* out, u64* busy) {
    typedef typename ViewCore<K, V>::W W;
    typedef typename ViewCore<K, V>::raw raw;
    constexpr int S = ViewCore<K, V>::SLOTS;
    const u64 home = t.home(x);
    u64 b = home, held = 0;
    bool hit = false;
    for (u64 j = 0; j < t.limit; ++j) {
        if (!lock(t.aux, b, held < WAIT_HELD && b >= home)) {
            unlock_run(t.aux, t.buckets, home, held);
            *busy = b;
            return false;
        }
        ++held;
        raw* bucket = t.slots + b * S;
        raw w[S];
        load_bucket(bucket, w);
        const Look l = look(t, w, b, j, x);
        if (l.key_at >= 0) {
            W::cas(bucket + l.key_at, pick(w, l.key_at), W::tomb());  // locked: finds the word read
            hit = true;
            break;
        }
        if (l.empty_at >= 0 || !l.poorer) break;
        if (++b == t.buckets) b = 0;
    }
    unlock_run(t.aux, t.buckets, home, held);
    *out = hit;
    return true;
}

template <typename K, typename V>
__device__ __forceinline__ bool erase(const ViewCore<K, V>& t, u64 x) {
    bool hit = false;
    with_retries(t, [&](u64* busy) { return try_erase(t, x, &hit, busy); });
    return hit;
}

template <typename K, typename V>
__device__ __forceinline__ u64 displacement(const ViewCore<K, V>& t, u64 key, u64 slot) {
    return disp(t, key, slot / ViewCore<K, V>::SLOTS);
}

}  // namespace robin_hood
}  // namespace gh
