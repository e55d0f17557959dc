// Cuckoo placement: the flat scheme (gh::cuckoo: 2 or 3 candidate buckets
// over the table, a stash in its last buckets, a lock bit per bucket) and
// the two-level scheme (gh::two_level: a region per key, cuckoo inside it
// with the region's own seed, one lock per region, an overflow for what a
// region cannot place, region rebuilds). The
// algorithm is src/backend/cpu/cuckoo.rs step for step (src/core/cuckoo.rs
// for the geometry), so a serial run places keys as the CPU does.
//
// Inserts change a bucket only while holding its lock (flat) or its
// region's (two-level). Waiting follows one order, so waits never form a
// cycle: a flat insert waits for its candidate buckets in ascending order,
// then only tries the buckets of an eviction path (a busy one: release all,
// sleep, start over), and waits for the stash lock last (whose holder waits
// for nothing); a two-level insert holds one lock. (Trying every lock and
// releasing on any busy one, as an earlier version did, livelocked small
// tables.) Lookups and erases take no locks: they must not run while
// inserts run (a key being moved may be missed).
#pragma once

namespace gh {
namespace cuckoo {

// Lock attempts before an insert reports its key as not stored: a guard
// against livelock, never reached in practice.
constexpr u32 MAX_ATTEMPTS = 1u << 20;
constexpr int MAX_CHOICES = 3;
constexpr int MAX_PATH = (int)GH_CUCKOO_MAX_EVICTIONS;

// Candidate buckets per key: 2 for 8-byte slots, 3 for 16-byte slots.
template <typename K, typename V> struct Choices {
    static constexpr int D = ViewCore<K, V>::WORD_BYTES == 8 ? 2 : 3;
};

__device__ __forceinline__ u64 salt(int j) {
    return j == 0 ? GH_CUCKOO_SALT_0 : j == 1 ? GH_CUCKOO_SALT_1 : GH_CUCKOO_SALT_2;
}

// The word steering step `step` of a key's eviction walk.
__device__ __forceinline__ u64 walk_word(u64 key, u64 seed, u64 step) {
    return mix64(key ^ (step * 0x9e3779b97f4a7c15ull), seed ^ GH_CUCKOO_WALK_SALT);
}

// Where candidates are drawn: buckets first .. first + n - 1 under one seed
// (the flat table's candidate buckets, or one region).
struct Space {
    u64 first, n, seed;
    __device__ __forceinline__ u64 cand(u64 key, int j) const { return first + __umul64hi(mix64(key, seed ^ salt(j)), n); }
};

// A two-level region's candidates (src/core/cuckoo.rs region_candidate):
// one hash of the key gives them all, candidate j from its bits 21j ..
// 21j + 20 scaled to the region's n buckets (at most 2^11, so the product
// fits 32 bits). A hash per candidate made the region build's step 1 and
// walks 8-14% slower (u32 inserts on an H200, 2^27 slots, load 0.5-0.95).
__device__ __forceinline__ u32 region_cand(u64 h, int j, u32 n) {
    constexpr u32 BITS = (u32)GH_CUCKOO_REGION_CAND_BITS;
    return ((u32)(h >> (BITS * j)) & ((1u << BITS) - 1)) * n >> BITS;
}
struct RegionSpace {
    u64 first, n, seed;
    __device__ __forceinline__ u64 cand(u64 key, int j) const { return first + region_cand(mix64(key, seed), j, (u32)n); }
};

// Slot stores go to L2 like the loads (__ldcg), so a thread that takes the
// lock next sees them after the releasing thread's fence.
__device__ __forceinline__ void store_raw(u64* p, u64 w) { __stcg(p, w); }
__device__ __forceinline__ void store_raw(Pair16* p, Pair16 w) { __stcg((ulonglong2*)p, make_ulonglong2(w.k, w.v)); }

template <typename W> __device__ __forceinline__ bool full(typename W::raw w) {
    u64 k = W::key(w);
    return k != W::EMPTY_KEY && k != W::TOMB_KEY;
}

// An eviction path: the resident in slot `slot[i]` of `bucket[i]` moves to
// `bucket[i + 1]`; the last moves into its EMPTY slot `empty`.
struct Path {
    u64 bucket[MAX_PATH + 1];
    unsigned char slot[MAX_PATH];
    int n;
    int empty;
};

template <typename K, typename V> struct Engine {
    typedef ViewCore<K, V> C;
    typedef typename C::W W;
    typedef typename C::raw raw;
    static constexpr int D = Choices<K, V>::D;
    static constexpr int S = C::SLOTS;

    const C& t;
    __device__ Engine(const C& t_) : t(t_) {}

    __device__ __forceinline__ raw* cell(u64 b, int i) const { return t.slots + b * S + i; }

    __device__ __forceinline__ int first_empty(u64 b) const {
        for (int i = 0; i < S; ++i)
            if (W::key(W::load(cell(b, i))) == W::EMPTY_KEY) return i;
        return -1;
    }

    // The candidate index and slot holding `key` (false if none).
    __device__ __forceinline__ bool locate(const u64* xc, u64 key, int* j_out, int* i_out) const {
        for (int j = 0; j < D; ++j)
            for (int i = 0; i < S; ++i)
                if (W::key(W::load(cell(xc[j], i))) == key) { *j_out = j; *i_out = i; return true; }
        return false;
    }

    // Stores `word` in the first EMPTY candidate slot, in candidate order.
    __device__ __forceinline__ bool place_free(const u64* xc, raw word) const {
        for (int j = 0; j < D; ++j) {
            int i = first_empty(xc[j]);
            if (i >= 0) { store_raw(cell(xc[j], i), word); return true; }
        }
        return false;
    }

    // Claims the first EMPTY candidate slot, in candidate order, by CAS; a
    // copy of the key met on the way is updated instead. No locks: only for
    // kernels during which no key moves (gh_insert_unlocked). Claims of one
    // key meet at one slot: slots only fill meanwhile and each claim walks
    // the same order, so a claim passes a slot only once it is full with
    // another key. LEFT when every candidate is full.
    __device__ int claim(const u64* xc, u64 k, V value, u32 mode, u32 op) const {
        const raw word = W::pack(k, to_bits<V>(value));
        for (int j = 0; j < D; ++j)
            for (int i = 0; i < S; ++i) {
                raw* c = cell(xc[j], i);
                raw cur = W::load(c);
                while (W::key(cur) == W::EMPTY_KEY) {
                    const raw prev = W::cas(c, cur, word);
                    if (W::eq(prev, cur)) return INSERTED;
                    cur = prev;
                }
                if (W::key(cur) == k) {
                    t.update_value(c, value, mode, op);
                    return EXISTING;
                }
            }
        return LEFT;
    }

    // The unlocked step's read of a key's candidates: every bucket loaded by
    // loads issued together (as scan_bucket_whole), then looked at. Returns
    // the slot holding `key` (null if none) and sets `empty` to the first
    // EMPTY slot in candidate order (null if none). locate and then claim
    // had taken a round trip per slot, reading the first bucket twice.
    __device__ __forceinline__ raw* snapshot(const u64* xc, u64 key, raw** empty) const {
        constexpr int PER_LOAD = 16 / C::WORD_BYTES;
        ulonglong2 lo[D], hi[D];
#pragma unroll
        for (int j = 0; j < D; ++j) {
            lo[j] = C::load16(cell(xc[j], 0));
            hi[j] = C::load16((const ulonglong2*)cell(xc[j], 0) + 1);
        }
        raw *at = nullptr, *e = nullptr;
#pragma unroll
        for (int j = 0; j < D; ++j) {
            auto f = [&](int i, u64 kk, u64) {
                if (kk == key) {
                    at = cell(xc[j], i);
                    return true;
                }
                if (kk == W::EMPTY_KEY && !e) e = cell(xc[j], i);
                return false;
            };
            if (t.visit16(lo[j], 0, f) || t.visit16(hi[j], PER_LOAD, f)) break;
        }
        *empty = e;
        return at;
    }

    // claim, starting with a CAS on `empty`, the first EMPTY candidate slot
    // a snapshot saw of a key it did not hold. A slot seen full stays full
    // (nothing moves during the step), so a copy of the key claimed since
    // sits at or after `empty`: a lost CAS goes on as claim, which meets it.
    __device__ __forceinline__ int claim_seen(raw* empty, const u64* xc, u64 k, V value, u32 mode, u32 op) const {
        if (!empty) return LEFT;
        const raw prev = W::cas(empty, W::empty(), W::pack(k, to_bits<V>(value)));
        if (W::eq(prev, W::empty())) return INSERTED;
        return claim(xc, k, value, mode, op);
    }

    // Searches an eviction path of at most `steps` moves from the key's full
    // candidates `xc`, reading only; `lock(b)` is asked for each bucket the
    // walk steps into. 1: found, 0: none, -1: a lock was busy (p.bucket[1..n]
    // are held). Each step moves the first resident (in an order drawn from
    // walk_word) whose other candidate has an EMPTY slot, else the first that
    // may move at all; a move never enters the path or a candidate of the key.
    template <typename SP, typename L>
    __device__ int walk(const SP& sp, u64 key, const u64* xc, u64 steps, Path& p, L&& lock) const {
        p.n = 0;
        if (steps > GH_CUCKOO_MAX_EVICTIONS) steps = GH_CUCKOO_MAX_EVICTIONS;
        for (u64 step = 0; step < steps; ++step) {
            const u64 r = walk_word(key, sp.seed, step);
            const int froms = step == 0 ? D : 1;
            bool have = false;
            u64 pcur = 0, pc = 0;
            int ps = 0;
            for (int f = 0; f < froms; ++f) {
                const u64 cur = step == 0 ? xc[(r + (u64)f) % D] : p.bucket[p.n];
                for (int t2 = 0; t2 < S; ++t2) {
                    const int s = (int)((r + (u64)t2) % S);
                    raw w = W::load(cell(cur, s));
                    if (!full<W>(w)) continue;
                    const u64 z = W::key(w);
                    for (int u = 0; u < D; ++u) {
                        const u64 c = sp.cand(z, (int)(((r >> 32) + (u64)u) % D));
                        bool excluded = false;
                        for (int j = 0; j < D; ++j) excluded |= xc[j] == c;
                        if (step > 0)
                            for (int j = 0; j <= p.n; ++j) excluded |= p.bucket[j] == c;
                        if (excluded) continue;
                        const bool free = first_empty(c) >= 0;
                        if (!have || free) { have = true; pcur = cur; pc = c; ps = s; }
                        if (free) goto picked;
                    }
                }
            }
        picked:
            if (!have) return 0;
            if (!lock(pc)) return -1;
            p.bucket[p.n] = pcur;
            p.slot[p.n] = (unsigned char)ps;
            p.n += 1;
            p.bucket[p.n] = pc;
            const int e = first_empty(pc);
            if (e >= 0) { p.empty = e; return 1; }
        }
        return 0;
    }

    // Applies a path, last move first (every key stays in some slot), and
    // stores `word` where the first resident was.
    __device__ void apply(const Path& p, raw word) const {
        int dst = p.empty;
        for (int i = p.n - 1; i >= 0; --i) {
            const int src = p.slot[i];
            store_raw(cell(p.bucket[i + 1], dst), W::load(cell(p.bucket[i], src)));
            dst = src;
        }
        store_raw(cell(p.bucket[0], dst), word);
    }

    // Empties a slot holding `k` (or makes it a tombstone); false if
    // another erase took it first.
    __device__ __forceinline__ bool free_slot(raw* slot, u64 k, bool tomb = false) const {
        raw cur = W::load(slot);
        while (W::key(cur) == k) {
            raw prev = W::cas(slot, cur, tomb ? W::tomb() : W::empty());
            if (W::eq(prev, cur)) return true;
            cur = prev;
        }
        return false;
    }

    // Lookup in the candidates: reads them all unless found.
    __device__ __forceinline__ bool find_in(const u64* xc, u64 key, V* out) const {
        bool hit = false;
        for (int j = 0; j < D && !hit; ++j) {
            t.scan_bucket(cell(xc[j], 0), [&](int, u64 kk, u64 vv) {
                if (kk != key) return false;
                *out = from_bits<V>(vv);
                hit = true;
                return true;
            });
        }
        return hit;
    }
};

// Sleeps before attempt `attempt` again, longer each time (at most ~16 us),
// by a per-thread, per-attempt factor of 1 to 4: threads of one warp that
// fail on each other's locks would otherwise retry in lockstep.
__device__ __forceinline__ void back_off(u32 attempt) {
    u32 h = (blockIdx.x * blockDim.x + threadIdx.x + 1) * 0x9e3779b9u ^ attempt * 0x85ebca6bu;
    h ^= h >> 15;
    __nanosleep((32u << (attempt < 7 ? attempt : 7)) * (1u + (h & 3u)));
}

// ---- flat ---------------------------------------------------------------------

// Stash slots (in the last buckets) for a table: src/core/cuckoo.rs stash_buckets.
__device__ __forceinline__ u64 stash_buckets(u64 buckets, u64 spb) {
    u64 want = GH_CUCKOO_STASH_PAIRS / spb;
    return buckets / 32 < want ? buckets / 32 : want;
}

template <typename K, typename V> struct Flat {
    typedef Engine<K, V> E;
    typedef typename E::raw raw;
    typedef typename E::W W;
    static constexpr int D = E::D;
    static constexpr int S = E::S;

    E e;
    u64 main;     // candidate buckets; the stash follows
    int stash;    // stash slots
    u32* locks;   // bit b locks bucket b; bit `buckets` the stash
    u64* mask;    // bit i: stash slot i holds a pair

    __device__ Flat(const ViewCore<K, V>& t) : e(t) {
        u64 sb = stash_buckets(t.buckets, S);
        main = t.buckets - sb;
        stash = (int)(sb * S);
        locks = (u32*)t.aux;
        mask = t.aux + (t.buckets + 1 + 63) / 64;
    }
    __device__ __forceinline__ Space space() const { return Space{0, main, e.t.seed}; }
    __device__ __forceinline__ raw* stash_cell(int i) const { return e.t.slots + main * S + i; }
    __device__ __forceinline__ u64 stash_mask() const { return __ldcg(mask); }

    __device__ __forceinline__ bool try_lock(u64 b) const {
        u32 bit = 1u << (b & 31);
        return !(atomicOr(&locks[b >> 5], bit) & bit);
    }
    // Waits for bucket b's lock (polling the word, not hammering it with atomics).
    __device__ __forceinline__ void lock(u64 b) const {
        const u32 bit = 1u << (b & 31);
        while (!try_lock(b))
            do __nanosleep(64); while (*(const volatile u32*)&locks[b >> 5] & bit);
    }
    __device__ __forceinline__ void unlock(u64 b) const { atomicAnd(&locks[b >> 5], ~(1u << (b & 31))); }

    // Releases the candidates (each once) and the path's buckets.
    __device__ __forceinline__ void release(const u64* xc, int locked_cands, const Path& p) const {
        __threadfence();
        for (int j = 0; j < locked_cands; ++j) {
            bool dup = false;
            for (int i = 0; i < j; ++i) dup |= xc[i] == xc[j];
            if (!dup) unlock(xc[j]);
        }
        for (int i = 1; i <= p.n; ++i) unlock(p.bucket[i]);
    }

    // The stash slot holding `key`, or -1.
    __device__ __forceinline__ int stash_find(u64 key) const {
        if (stash_mask() == 0) return -1;
        for (int i = 0; i < stash; ++i)
            if (W::key(W::load(stash_cell(i))) == key) return i;
        return -1;
    }

    // Lookup in the stash for a bulk find, during which nothing writes the
    // table: whole buckets (and the mask) through the read-only cache. Every
    // lookup that misses its candidates reads these same few sectors; read a
    // word at a time from L2 (stash_find) they queue on one L2 slice, which
    // held half-miss finds at load 0.9 to a ninth of the hits' rate.
    __device__ __forceinline__ bool stash_lookup(u64 key, V* out) const {
        if (__ldg(mask) == 0) return false;
        bool hit = false;
        auto f = [&](int, u64 kk, u64 vv) {
            if (kk != key) return false;
            *out = from_bits<V>(vv);
            hit = true;
            return true;
        };
        const ulonglong2* p = (const ulonglong2*)stash_cell(0);
        for (int h = 0; h < stash * (int)sizeof(raw) / 16 && !hit; ++h) e.t.visit16(__ldg(p + h), 0, f);
        return hit;
    }

    // One attempt; -1 if an eviction path's lock was busy (everything
    // released; *busy names the bucket).
    __device__ int try_insert(const u64* xc, u64 k, V value, u32 mode, u32 op, Path& p, u64* busy) const {
        p.n = 0;
        // The candidates, waited for in ascending order (each once).
        u64 lo = ~0ull;
        for (int n = 0; n < D; ++n) {
            u64 next = ~0ull;
            for (int j = 0; j < D; ++j)
                if ((lo == ~0ull || xc[j] > lo) && xc[j] < next) next = xc[j];
            if (next == ~0ull) break;
            lock(next);
            lo = next;
        }
        __threadfence();
        const raw word = W::pack(k, to_bits<V>(value));
        int r;
        int j, i;
        if (e.locate(xc, k, &j, &i)) {
            e.t.update_value(e.cell(xc[j], i), value, mode, op);
            r = EXISTING;
        } else if ((i = stash_find(k)) >= 0) {
            // Only inserts of this key (which hold its candidates) stash it.
            e.t.update_value(stash_cell(i), value, mode, op);
            r = EXISTING;
        } else if (e.place_free(xc, word)) {
            r = INSERTED;
        } else {
            // A walk without locks first: when it finds no path (as on a full
            // table) the locked one is skipped, so refused keys lock nothing
            // past their candidates.
            int w = e.walk(space(), k, xc, e.t.limit, p, [](u64) { return true; });
            p.n = 0;
            if (w > 0) w = e.walk(space(), k, xc, e.t.limit, p, [&](u64 b) { *busy = b; return try_lock(b); });
            if (w < 0) { release(xc, D, p); return -1; }
            if (w > 0) {
                e.apply(p, word);
                r = INSERTED;
            } else if (stash == 0 || __popcll(stash_mask()) >= stash) {
                // Stash slots are freed only by erases, which never run with
                // inserts: a full mask stays full.
                r = FAILED;
            } else {
                const u64 sl = e.t.buckets;
                lock(sl);
                __threadfence();
                r = FAILED;
                for (int s = 0; s < stash; ++s) {
                    if (W::key(W::load(stash_cell(s))) != W::EMPTY_KEY) continue;
                    store_raw(stash_cell(s), word);
                    __threadfence();
                    atomicOr(mask, 1ull << s);
                    r = INSERTED;
                    break;
                }
                __threadfence();
                unlock(sl);
            }
        }
        release(xc, D, p);
        return r;
    }
};

template <typename K, typename V>
__device__ __forceinline__ void candidates(const Flat<K, V>& f, u64 k, u64* xc) {
    const Space sp = f.space();
    for (int j = 0; j < Flat<K, V>::D; ++j) xc[j] = sp.cand(k, j);
}

// The unlocked step (gh_insert_unlocked): a key stored in its candidates
// or the stash is updated, else it claims a candidate slot (Engine::claim).
template <typename K, typename V>
__device__ int insert_unlocked(const ViewCore<K, V>& t, u64 k, V value, u32 mode, u32 op) {
    Flat<K, V> f(t);
    u64 xc[MAX_CHOICES];
    candidates(f, k, xc);
    typename Flat<K, V>::raw* empty;
    typename Flat<K, V>::raw* at = f.e.snapshot(xc, k, &empty);
    int i;
    if (!at && (i = f.stash_find(k)) >= 0) at = f.stash_cell(i);
    if (!at) return f.e.claim_seen(empty, xc, k, value, mode, op);
    t.update_value(at, value, mode, op);
    return EXISTING;
}

// `bulk`: a bulk lookup kernel, during which nothing writes the table.
template <typename K, typename V>
__device__ __forceinline__ bool find(const ViewCore<K, V>& t, u64 key, V* out, bool bulk) {
    Flat<K, V> f(t);
    u64 xc[MAX_CHOICES];
    candidates(f, key, xc);
    if (f.e.find_in(xc, key, out)) return true;
    if (bulk) return f.stash_lookup(key, out);
    int i = f.stash_find(key);
    if (i < 0) return false;
    *out = from_bits<V>(Flat<K, V>::W::value(Flat<K, V>::W::load(f.stash_cell(i))));
    return true;
}

template <typename K, typename V>
__device__ int insert(const ViewCore<K, V>& t, u64 k, V value, u32 mode, u32 op) {
    Flat<K, V> f(t);
    u64 xc[MAX_CHOICES];
    candidates(f, k, xc);
    Path p;
    for (u32 attempt = 0; attempt < MAX_ATTEMPTS; ++attempt) {
        u64 busy = 0;
        int r = f.try_insert(xc, k, value, mode, op, p, &busy);
        if (r >= 0) return r;
        // Holding nothing, wait until the path's busy bucket is free, then a
        // little more by lane and attempt (threads of a warp that met on
        // each other's paths would otherwise retry in lockstep).
        while (*(const volatile u32*)&f.locks[busy >> 5] & (1u << (busy & 31))) __nanosleep(64);
        back_off(attempt < 3 ? attempt : 3);
    }
    return FAILED;
}

template <typename K, typename V>
__device__ __forceinline__ bool erase(const ViewCore<K, V>& t, u64 k) {
    Flat<K, V> f(t);
    u64 xc[MAX_CHOICES];
    candidates(f, k, xc);
    int j, i;
    if (f.e.locate(xc, k, &j, &i)) return f.e.free_slot(f.e.cell(xc[j], i), k);
    i = f.stash_find(k);
    if (i < 0) return false;
    // Of two erases of one key, only the one that empties the slot clears its bit.
    if (!f.e.free_slot(f.stash_cell(i), k)) return false;
    atomicAnd(f.mask, ~(1ull << i));
    return true;
}

// Index of the candidate holding the key at `slot`; D for the stash.
template <typename K, typename V>
__device__ __forceinline__ u64 displacement(const ViewCore<K, V>& t, u64 key, u64 slot) {
    Flat<K, V> f(t);
    u64 xc[MAX_CHOICES];
    candidates(f, key, xc);
    const u64 b = slot / ViewCore<K, V>::SLOTS;
    for (int j = 0; j < Flat<K, V>::D; ++j)
        if (xc[j] == b) return (u64)j;
    return (u64)Flat<K, V>::D;
}

}  // namespace cuckoo

// ---- two-level ---------------------------------------------------------------------

namespace two_level {

using cuckoo::Engine;
using cuckoo::Path;
using cuckoo::RegionSpace;
using cuckoo::store_raw;

template <typename K, typename V> struct Regions {
    typedef Engine<K, V> E;
    typedef typename E::raw raw;
    typedef typename E::W W;
    static constexpr int D = E::D;
    static constexpr int S = E::S;

    E e;
    u64 count;    // regions
    u64 rb;       // buckets per region
    u64 over;     // overflow buckets, from count * rb
    __device__ Regions(const ViewCore<K, V>& t) : e(t) {
        // src/core/cuckoo.rs Regions::of: a region per span (large spans in
        // large tables), each but a 128th of it, the rest the overflow; or
        // one region.
        count = 1; rb = t.buckets; over = 0;
        if (t.buckets > GH_CUCKOO_REGION_BUCKETS) {
            const u64 span = t.buckets >= GH_CUCKOO_LARGE_REGIONS_FROM ? GH_CUCKOO_LARGE_REGION_BUCKETS : GH_CUCKOO_REGION_BUCKETS;
            count = t.buckets / span;
            rb = span - span / GH_CUCKOO_OVERFLOW_SHARE;
            over = t.buckets - count * rb;
        }
    }
    __device__ __forceinline__ u64 region(u64 key) const { return __umul64hi(mix64(key, e.t.seed), count); }
    __device__ __forceinline__ RegionSpace space(u64 r, u64 n) const {
        return RegionSpace{r * rb, rb, mix64(r ^ (n << 40), e.t.seed ^ GH_CUCKOO_REGION_SALT)};
    }
    // Keys of a region (word w) in the overflow.
    static __device__ __forceinline__ u64 spilled(u64 w) { return (w & GH_CUCKOO_REGION_SPILLED) >> GH_CUCKOO_SPILL_SHIFT; }

    // The overflow (src/core/cuckoo.rs overflow_home and overflow_next): a
    // chain of buckets from a key's home, read up to its first bucket with
    // an EMPTY slot (inserts fill a chain in order; erases leave tombstones).
    __device__ __forceinline__ u64 over_home(u64 k) const {
        return count * rb + __umul64hi(mix64(k, e.t.seed ^ GH_CUCKOO_OVERFLOW_SALT), over);
    }
    __device__ __forceinline__ u64 over_next(u64 b) const { return b + 1 == count * rb + over ? count * rb : b + 1; }
    __device__ __forceinline__ u64 over_reach() const { return over < GH_CUCKOO_OVERFLOW_PROBE ? over : GH_CUCKOO_OVERFLOW_PROBE; }
    // The overflow slot holding k, or null.
    __device__ raw* over_find(u64 k) const {
        u64 b = over_home(k);
        for (u64 n = over_reach(); n > 0; --n, b = over_next(b)) {
            bool open = false;
            for (int i = 0; i < S; ++i) {
                const u64 kk = W::key(W::load(e.cell(b, i)));
                if (kk == k) return e.cell(b, i);
                open |= kk == W::EMPTY_KEY;
            }
            if (open) return nullptr;
        }
        return nullptr;
    }
    // Stores a pair absent from the overflow in the first EMPTY or tombstone
    // slot of its chain (other regions' inserts may race for it: the CAS
    // decides); false if the chain is full.
    __device__ bool over_put(raw word) const {
        u64 b = over_home(W::key(word));
        for (u64 n = over_reach(); n > 0; --n, b = over_next(b))
            for (int i = 0; i < S; ++i) {
                raw* c = e.cell(b, i);
                raw cur = W::load(c);
                while (!cuckoo::full<W>(cur)) {
                    const raw prev = W::cas(c, cur, word);
                    if (W::eq(prev, cur)) return true;
                    cur = prev;
                }
            }
        return false;
    }
    // Region r's space as lookups see it (seed number from its region word).
    __device__ __forceinline__ RegionSpace current(u64 r) const { return space(r, __ldcg(&e.t.aux[r]) & GH_CUCKOO_REGION_SEED); }

    __device__ __forceinline__ void cands(const RegionSpace& sp, u64 k, u64* xc) const {
        const u64 h = mix64(k, sp.seed);
        for (int j = 0; j < D; ++j) xc[j] = sp.first + cuckoo::region_cand(h, j, (u32)sp.n);
    }

    // Places a pair in a locked region: an EMPTY candidate, else a path.
    __device__ bool place(const RegionSpace& sp, raw word, u64 steps, Path& p) const {
        u64 xc[cuckoo::MAX_CHOICES];
        cands(sp, W::key(word), xc);
        if (e.place_free(xc, word)) return true;
        if (e.walk(sp, W::key(word), xc, steps, p, [](u64) { return true; }) <= 0) return false;
        e.apply(p, word);
        return true;
    }

    // Rebuilds locked region r (seed number n) with the next seeds so that it
    // also holds `word`, in a rebuild area claimed from the pool; returns the
    // new seed number, or n with the region restored exactly.
    __device__ u64 rebuild(u64 r, u64 n, raw word, Path& p, bool* ok) const {
        const u64 m = rb * S;
        raw* reg = e.t.slots + r * rb * S;
        u64 live = 0;
        for (u64 i = 0; i < m; ++i) live += cuckoo::full<W>(W::load(reg + i));
        *ok = false;
        // src/core/cuckoo.rs rebuild_may_fit: 24/25 full in large regions, else 31/32.
        if (rb > GH_CUCKOO_REGION_BUCKETS ? (live + 1) * 25 > m * 24 : (live + 1) * 32 > m * 31) return n;
        // Claim an area (holders hold one region lock and wait on nothing).
        u64* pool = e.t.aux + count;
        const u64 areas = count < GH_CUCKOO_REBUILD_AREAS ? count : GH_CUCKOO_REBUILD_AREAS;
        u64 a = 0;
        for (u32 attempt = 0;; ++attempt) {
            bool got = false;
            for (a = 0; a < areas; ++a)
                if (!(atomicOr(pool, 1ull << a) & (1ull << a))) { got = true; break; }
            if (got) break;
            cuckoo::back_off(attempt);
        }
        __threadfence();
        raw* area = (raw*)(e.t.aux + (count + 2) / 2 * 2 + a * rb * 4);
        for (u64 i = 0; i < m; ++i) store_raw(area + i, W::load(reg + i));
        u64 result = n;
        for (u64 tries = 1; tries <= GH_CUCKOO_REBUILD_SEEDS && !*ok; ++tries) {
            const RegionSpace sp = space(r, n + tries);
            for (u64 i = 0; i < m; ++i) store_raw(reg + i, W::empty());
            bool all = true;
            for (u64 i = 0; i < m && all; ++i) {
                raw w = W::load(area + i);
                if (cuckoo::full<W>(w)) all = place(sp, w, GH_CUCKOO_MAX_EVICTIONS, p);
            }
            if (all && place(sp, word, GH_CUCKOO_MAX_EVICTIONS, p)) { *ok = true; result = n + tries; }
        }
        if (!*ok)
            for (u64 i = 0; i < m; ++i) store_raw(reg + i, W::load(area + i));
        __threadfence();
        atomicAnd(pool, ~(1ull << a));
        return result;
    }
};

// The unlocked step (gh_insert_unlocked): in the region's current
// candidates, a stored key is updated, else it claims a slot (Engine::claim).
// Keys of regions with keys in the overflow take the locked insert, which
// reads the overflow first.
template <typename K, typename V>
__device__ int insert_unlocked(const ViewCore<K, V>& t, u64 k, V value, u32 mode, u32 op) {
    Regions<K, V> g(t);
    u64 xc[cuckoo::MAX_CHOICES];
    const u64 r = g.region(k);
    const u64 w = __ldcg(&t.aux[r]);
    if (Regions<K, V>::spilled(w)) return LEFT;
    g.cands(g.space(r, w & GH_CUCKOO_REGION_SEED), k, xc);
    typename Regions<K, V>::raw* empty;
    typename Regions<K, V>::raw* at = g.e.snapshot(xc, k, &empty);
    if (!at) return g.e.claim_seen(empty, xc, k, value, mode, op);
    t.update_value(at, value, mode, op);
    return EXISTING;
}

template <typename K, typename V>
__device__ __forceinline__ bool find(const ViewCore<K, V>& t, u64 key, V* out) {
    Regions<K, V> g(t);
    u64 xc[cuckoo::MAX_CHOICES];
    const u64 r = g.region(key);
    const u64 w = __ldcg(&t.aux[r]);
    g.cands(g.space(r, w & GH_CUCKOO_REGION_SEED), key, xc);
    if (g.e.find_in(xc, key, out)) return true;
    if (!Regions<K, V>::spilled(w)) return false;
    const typename Regions<K, V>::raw* o = g.over_find(key);
    if (!o) return false;
    *out = from_bits<V>(Regions<K, V>::W::value(Regions<K, V>::W::load(o)));
    return true;
}

template <typename K, typename V>
__device__ int insert(const ViewCore<K, V>& t, u64 k, V value, u32 mode, u32 op) {
    typedef typename Regions<K, V>::W W;
    Regions<K, V> g(t);
    const u64 r = g.region(k);
    u64* rw = &t.aux[r];
    // One lock per region and no other held, so waiting is safe; poll the
    // word rather than hammer it with atomics.
    u64 old;
    while ((old = atomicOr(rw, GH_CUCKOO_REGION_LOCK)) & GH_CUCKOO_REGION_LOCK)
        do __nanosleep(64); while (*(volatile u64*)rw & GH_CUCKOO_REGION_LOCK);
    __threadfence();
    const u64 n = old & GH_CUCKOO_REGION_SEED;
    u64 out = old & ~GH_CUCKOO_REGION_LOCK;  // the region word to unlock with
    const RegionSpace sp = g.space(r, n);
    u64 xc[cuckoo::MAX_CHOICES];
    g.cands(sp, k, xc);
    const typename W::raw word = W::pack(k, to_bits<V>(value));
    Path p;
    int res, j, i;
    typename W::raw* o = nullptr;
    // A probe limit of 0 marks the region build's leftovers, keys its
    // searches (paths of up to six moves, random walks) found no place for:
    // walks here would mostly fail too, each thousands of bucket reads
    // under the region's lock (at load 0.95 they took an insert from 79 to
    // 245 ms on an H200), so they take a free candidate slot, then the
    // overflow while it has room, and walk only then.
    // Other keys walk up to 64 moves before the overflow: walks of 16 fill
    // regions to about 0.95, those of 64 to past 0.97 (the CPU at 2^22
    // slots).
    const u64 steps = t.limit == 0 ? 0 : GH_CUCKOO_MAX_EVICTIONS;
    const bool room = g.over && (out & GH_CUCKOO_REGION_SPILLED) != GH_CUCKOO_REGION_SPILLED;
    if (g.e.locate(xc, k, &j, &i)) {
        t.update_value(g.e.cell(xc[j], i), value, mode, op);
        res = EXISTING;
    } else if (Regions<K, V>::spilled(old) && (o = g.over_find(k))) {
        t.update_value(o, value, mode, op);
        res = EXISTING;
    } else if (g.place(sp, word, steps, p)) {
        res = INSERTED;
    } else if (room && g.over_put(word)) {
        // No place in the region: the overflow, counted in the region word.
        res = INSERTED;
        out += 1ull << GH_CUCKOO_SPILL_SHIFT;
    } else if (steps == 0 && g.place(sp, word, GH_CUCKOO_MAX_EVICTIONS, p)) {
        res = INSERTED;  // a leftover, the overflow full: the walk after all
    } else if (old & GH_CUCKOO_REGION_FULL) {
        res = FAILED;  // a rebuild failed and no key left since: do not redo it
    } else {
        bool ok;
        const u64 n2 = g.rebuild(r, n, word, p, &ok);
        res = ok ? INSERTED : FAILED;
        out = (ok ? n2 : n | GH_CUCKOO_REGION_FULL) | (out & GH_CUCKOO_REGION_SPILLED);
    }
    // Publishes the region's writes, then unlocks with its seed number and flag.
    __threadfence();
    atomicExch(rw, out);
    return res;
}

template <typename K, typename V>
__device__ __forceinline__ bool erase(const ViewCore<K, V>& t, u64 k) {
    Regions<K, V> g(t);
    u64 xc[cuckoo::MAX_CHOICES];
    const u64 r = g.region(k);
    const u64 w = __ldcg(&t.aux[r]);
    g.cands(g.space(r, w & GH_CUCKOO_REGION_SEED), k, xc);
    int j, i;
    if (g.e.locate(xc, k, &j, &i)) {
        if (!g.e.free_slot(g.e.cell(xc[j], i), k)) return false;
    } else {
        // A tombstone in the overflow: lookups read a chain up to its first EMPTY slot.
        typename Regions<K, V>::raw* o = Regions<K, V>::spilled(w) ? g.over_find(k) : nullptr;
        if (!o || !g.e.free_slot(o, k, true)) return false;
        atomicAdd((unsigned long long*)&t.aux[r], (unsigned long long)(0ull - (1ull << GH_CUCKOO_SPILL_SHIFT)));
    }
    // A slot came free: a later rebuild of the region may succeed again.
    if (__ldcg(&t.aux[r]) & GH_CUCKOO_REGION_FULL) atomicAnd(&t.aux[r], ~GH_CUCKOO_REGION_FULL);
    return true;
}

template <typename K, typename V>
__device__ __forceinline__ u64 displacement(const ViewCore<K, V>& t, u64 key, u64 slot) {
    Regions<K, V> g(t);
    u64 xc[cuckoo::MAX_CHOICES];
    g.cands(g.current(g.region(key)), key, xc);
    const u64 b = slot / ViewCore<K, V>::SLOTS;
    for (int j = 0; j < Regions<K, V>::D; ++j)
        if (xc[j] == b) return (u64)j;
    return (u64)Regions<K, V>::D;
}

}  // namespace two_level
}  // namespace gh
