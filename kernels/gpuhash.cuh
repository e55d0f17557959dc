// gpuhash device API: find, insert and erase from your own CUDA kernels.
//
// Include this header (and gpuhash_constants.cuh next to it) in an nvcc or
// NVRTC kernel, take `table.view()` on the host and pass the view by value:
//
//     #include "gpuhash.cuh"
//     extern "C" __global__ void count(gh::TableView<unsigned, unsigned> t,
//                                      const unsigned* keys, unsigned long long n) {
//         unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
//         if (i < n) t.insert(keys[i], 1u, gh::MODE_APPLY, gh::REDUCE_SUM);
//     }
//
// The layout, hash and probe order are those of the Rust core (src/core):
// one packed key/value word per slot, 32-byte buckets, linear probing over
// buckets from the home bucket. Keys equal to the two slot markers are kept
// in the table's metadata block, so every key value is legal here too.
// 16-byte slots (any 8-byte key or value) need sm_90 (128-bit atomicCAS).
//
// What may run at once in your kernels (tests/cuda_concurrency.rs races
// them on every scheme and checks each outcome against a per-key model):
//
//   scheme             concurrent with inserts      lookups and erases
//   Linear/Hashinator  inserts, erases, lookups     any mix
//   RobinHood          inserts, erases              no lookup while any thread inserts
//   Cuckoo/TwoLevel    inserts only                 erase or look up only while no thread inserts
//
// Robin Hood, cuckoo and two-level inserts move keys they do not own, and
// lookups (and cuckoo erases) take no locks, so a key being moved may be
// missed for that instant. Split such work into separate launches.
//
// `insert` dispatches on the table's scheme at run time, so a kernel that
// calls it carries every scheme's insert: about 90 registers and a 616-byte
// stack frame (the cuckoo eviction path). Launch such kernels with at most
// 512 threads per block (90 x 1024 registers exceed an SM's 64K), or call
// `insert_as<GH_SCHEME_LINEAR>` (or the scheme the table uses) to carry one.
#pragma once
#include "gpuhash_constants.cuh"

namespace gh {

typedef unsigned long long u64;
typedef unsigned int u32;

enum InsertMode : u32 { MODE_ASSIGN = 0, MODE_IF_ABSENT = 1, MODE_APPLY = 2 };
enum ReduceOp : u32 { REDUCE_SUM = 0, REDUCE_MIN = 1, REDUCE_MAX = 2 };
// LEFT: not done by an unlocked step (gh_insert_unlocked); the locked insert decides.
enum Outcome : int { INSERTED = 0, EXISTING = 1, FAILED = 2, LEFT = 3 };

// Per-table block in device memory: counters of the last bulk call and the
// out-of-band keys (special 0 = the all-ones key, 1 = all-ones minus one).
struct Meta {
    u64 counters[4];       // inserted, existing, failed, found/erased/exported
    u64 special_value[2];  // value bits
    u32 special_state[2];  // 0 absent, 1 being written, 2 present
    u64 pad;
};

__device__ __forceinline__ u64 mix64(u64 key, u64 seed) {
    u64 h = key ^ seed;
    h ^= h >> 33;
    h *= GH_MIX_MUL_1;
    h ^= h >> 33;
    h *= GH_MIX_MUL_2;
    h ^= h >> 33;
    return h;
}

// ---- value bits -----------------------------------------------------------
template <typename V> __device__ __forceinline__ u64 to_bits(V v);
template <typename V> __device__ __forceinline__ V from_bits(u64 b);
template <> __device__ __forceinline__ u64 to_bits<u32>(u32 v) { return v; }
template <> __device__ __forceinline__ u64 to_bits<int>(int v) { return (u32)v; }
template <> __device__ __forceinline__ u64 to_bits<float>(float v) { return __float_as_uint(v); }
template <> __device__ __forceinline__ u64 to_bits<u64>(u64 v) { return v; }
template <> __device__ __forceinline__ u64 to_bits<long long>(long long v) { return (u64)v; }
template <> __device__ __forceinline__ u64 to_bits<double>(double v) { return (u64)__double_as_longlong(v); }
template <> __device__ __forceinline__ u32 from_bits<u32>(u64 b) { return (u32)b; }
template <> __device__ __forceinline__ int from_bits<int>(u64 b) { return (int)(u32)b; }
template <> __device__ __forceinline__ float from_bits<float>(u64 b) { return __uint_as_float((u32)b); }
template <> __device__ __forceinline__ u64 from_bits<u64>(u64 b) { return b; }
template <> __device__ __forceinline__ long long from_bits<long long>(u64 b) { return (long long)b; }
template <> __device__ __forceinline__ double from_bits<double>(u64 b) { return __longlong_as_double((long long)b); }

// ---- reductions applied in place -------------------------------------------
// Integers use the hardware atomics (exact, order-independent); floats add
// with atomicAdd and take min/max with a CAS loop that ignores NaN like fmin.
template <typename V> __device__ __forceinline__ void atomic_reduce(V* p, u32 op, V v);

#define GH_INT_REDUCE(T, CAST)                                                  \
    template <> __device__ __forceinline__ void atomic_reduce<T>(T* p, u32 op, T v) { \
        if (op == REDUCE_SUM) atomicAdd((CAST*)p, (CAST)v);                     \
        else if (op == REDUCE_MIN) atomicMin(p, v);                             \
        else atomicMax(p, v);                                                   \
    }
GH_INT_REDUCE(u32, u32)
GH_INT_REDUCE(int, int)
GH_INT_REDUCE(u64, u64)
GH_INT_REDUCE(long long, u64)
#undef GH_INT_REDUCE

template <> __device__ __forceinline__ void atomic_reduce<float>(float* p, u32 op, float v) {
    if (op == REDUCE_SUM) { atomicAdd(p, v); return; }
    u32* q = (u32*)p;
    u32 old = *(volatile u32*)q;
    while (true) {
        float cur = __uint_as_float(old);
        float nv = op == REDUCE_MIN ? fminf(cur, v) : fmaxf(cur, v);
        if (__float_as_uint(nv) == old) return;
        u32 prev = atomicCAS(q, old, __float_as_uint(nv));
        if (prev == old) return;
        old = prev;
    }
}

template <> __device__ __forceinline__ void atomic_reduce<double>(double* p, u32 op, double v) {
    if (op == REDUCE_SUM) { atomicAdd(p, v); return; }
    u64* q = (u64*)p;
    u64 old = *(volatile u64*)q;
    while (true) {
        double cur = __longlong_as_double((long long)old);
        double nv = op == REDUCE_MIN ? fmin(cur, v) : fmax(cur, v);
        u64 nb = (u64)__double_as_longlong(nv);
        if (nb == old) return;
        u64 prev = atomicCAS(q, old, nb);
        if (prev == old) return;
        old = prev;
    }
}

// ---- slot words -------------------------------------------------------------
// A bucket is one 32-byte sector: 4 eight-byte words or 2 sixteen-byte words.
template <int BYTES> struct Word;

template <> struct Word<8> {
    typedef u64 raw;  // bits 0-31 key, 32-63 value
    static constexpr int SLOTS = GH_BUCKET_BYTES / 8;
    static constexpr u64 EMPTY_KEY = 0xffffffffull;
    static constexpr u64 TOMB_KEY = 0xfffffffeull;
    static __device__ __forceinline__ u64 key(raw w) { return w & 0xffffffffull; }
    static __device__ __forceinline__ u64 value(raw w) { return w >> 32; }
    static __device__ __forceinline__ raw pack(u64 k, u64 v) { return (k & 0xffffffffull) | (v << 32); }
    static __device__ __forceinline__ raw empty() { return ~0ull; }
    static __device__ __forceinline__ raw tomb() { return ~0ull - 1; }
    static __device__ __forceinline__ bool eq(raw a, raw b) { return a == b; }
    static __device__ __forceinline__ raw cas(raw* p, raw cmp, raw val) { return atomicCAS(p, cmp, val); }
    static __device__ __forceinline__ raw load(const raw* p) { return __ldcg(p); }
    template <typename V> static __device__ __forceinline__ V* value_ptr(raw* p) { return (V*)((u32*)p + 1); }
};

struct __align__(16) Pair16 { u64 k, v; };

template <> struct Word<16> {
    typedef Pair16 raw;  // key word, then value word
    static constexpr int SLOTS = GH_BUCKET_BYTES / 16;
    static constexpr u64 EMPTY_KEY = ~0ull;
    static constexpr u64 TOMB_KEY = ~0ull - 1;
    static __device__ __forceinline__ u64 key(raw w) { return w.k; }
    static __device__ __forceinline__ u64 value(raw w) { return w.v; }
    static __device__ __forceinline__ raw pack(u64 k, u64 v) { raw r; r.k = k; r.v = v; return r; }
    static __device__ __forceinline__ raw empty() { return pack(~0ull, ~0ull); }
    static __device__ __forceinline__ raw tomb() { return pack(~0ull - 1, ~0ull); }
    static __device__ __forceinline__ bool eq(raw a, raw b) { return a.k == b.k && a.v == b.v; }
    static __device__ __forceinline__ raw cas(raw* p, raw cmp, raw val) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "16-byte slots need sm_90 or newer (128-bit atomicCAS)"
#endif
        return atomicCAS(p, cmp, val);
    }
    static __device__ __forceinline__ raw load(const raw* p) {
        ulonglong2 v = __ldcg((const ulonglong2*)p);
        return pack(v.x, v.y);
    }
    template <typename V> static __device__ __forceinline__ V* value_ptr(raw* p) { return (V*)&p->v; }
};

// ---- the table view -----------------------------------------------------------
// Table reads bypass L1 (__ldcg) so a thread never acts on a stale line.
// The fields mirror `gpuhash::backend::cuda::DeviceView` (#[repr(C)]).
// ViewCore holds what every scheme shares; each scheme's operations live in
// kernels/schemes/*.cuh as functions of a ViewCore; TableView (below them)
// dispatches to the table's scheme.
template <typename K, typename V> struct ViewCore {
    static constexpr int WORD_BYTES = (sizeof(K) == 4 && sizeof(V) == 4) ? 8 : 16;
    typedef Word<WORD_BYTES> W;
    typedef typename W::raw raw;
    static constexpr int SLOTS = W::SLOTS;

    raw* slots;
    u64 buckets;
    u64 seed;
    u64 limit;   // buckets probed at most
    Meta* meta;
    u64* aux;    // the scheme's state words (Scheme::aux_words), zeroed at creation
    u32 scheme;  // GH_SCHEME_*
    u32 param;   // the scheme's parameter (Hashinator: team size)

    static __device__ __forceinline__ int special_index(K key) {
        return key == (K)~(K)0 ? 0 : key == (K)(~(K)0 - 1) ? 1 : -1;
    }
    __device__ __forceinline__ u64 home(u64 k) const { return __umul64hi(mix64(k, seed), buckets); }
    __device__ __forceinline__ u64 slot_count() const { return buckets * SLOTS; }

    // Visits the slots held by one 16-byte load (two 8-byte slots or one
    // 16-byte slot) as f(slot, key, value); true once f returned true.
    template <typename F>
    __device__ __forceinline__ bool visit16(ulonglong2 p, int first_slot, F& f) const {
        if (WORD_BYTES == 8) {
            if (f(first_slot, p.x & 0xffffffffull, p.x >> 32)) return true;
            return f(first_slot + 1, p.y & 0xffffffffull, p.y >> 32);
        }
        return f(first_slot, p.x, p.y);
    }

    // Visits the slots of one bucket in order as f(slot, key, value) until f
    // returns true; returns whether it did. The second half of the bucket is
    // loaded only when the first does not settle the question: at moderate
    // load most lookups end in the first 16 bytes, and moving half the bytes
    // from L2 measured 26 -> 35 G/s for u32 finds on an H200. No arrays, so
    // nothing is placed in local memory.
    template <typename F>
    __device__ __forceinline__ bool scan_bucket(const raw* bucket, F&& f) const {
        constexpr int PER_LOAD = 16 / WORD_BYTES;
        if (visit16(__ldcg((const ulonglong2*)bucket), 0, f)) return true;
        return visit16(__ldcg((const ulonglong2*)bucket + 1), PER_LOAD, f);
    }

    // scan_bucket for writers (inserts, erases): the whole bucket is read by
    // two loads issued together, before any slot is looked at. Given the
    // __ldcg above, the compiler loaded each slot's key on its own, after
    // the previous slot's compare and CAS: a round trip per slot, which
    // ncu showed as most of a 2^20-key insert's time. A snapshot is enough
    // for a writer: a slot it saw EMPTY is claimed by CAS, which reports
    // what another thread wrote there first, and no key ever moves.
    template <typename F>
    __device__ __forceinline__ bool scan_bucket_whole(const raw* bucket, F&& f) const {
        constexpr int PER_LOAD = 16 / WORD_BYTES;
        const ulonglong2 lo = load16(bucket), hi = load16((const ulonglong2*)bucket + 1);
        if (visit16(lo, 0, f)) return true;
        return visit16(hi, PER_LOAD, f);
    }

    // One 16-byte load through L2 that the compiler can neither split nor
    // move below the code that uses it.
    static __device__ __forceinline__ ulonglong2 load16(const void* p) {
        ulonglong2 v;
        asm volatile("ld.global.cg.v2.u64 {%0, %1}, [%2];" : "=l"(v.x), "=l"(v.y) : "l"(p));
        return v;
    }

    // Out-of-band keys (the two slot markers) live in the metadata block.
    // State 1 means an insert claimed the key and is writing its value: the
    // key is present from the claim on, so lookups, erases and updates wait
    // for the value (only users' kernels, which may erase while others
    // insert, meet it outside inserts).
    __device__ __forceinline__ u32 settled_state(int s) const {
        u32 st;
        while ((st = *(volatile u32*)&meta->special_state[s]) == 1u) __nanosleep(32);
        return st;
    }
    __device__ __forceinline__ bool find_special(int s, V* out) const {
        if (settled_state(s) != 2u) return false;
        __threadfence();  // the value is read after the state that published it
        *out = from_bits<V>(*(volatile u64*)&meta->special_value[s]);
        return true;
    }
    __device__ __forceinline__ bool erase_special(int s) const {
        while (true) {
            const u32 was = atomicCAS(&meta->special_state[s], 2u, 0u);
            if (was != 1u) return was == 2u;
            settled_state(s);
        }
    }

    // A three-state flag (absent, being written, present) guards the value
    // so a reduction never combines into an unwritten value. A key erased
    // after the insert saw it sends the insert back to claiming it (waiting
    // for it to be present again could wait forever).
    __device__ int insert_special(int s, V value, u32 mode, u32 op) const {
        u32* state = &meta->special_state[s];
        u64* val = &meta->special_value[s];
        while (true) {
            if (atomicCAS(state, 0u, 1u) == 0u) {
                atomicExch(val, to_bits<V>(value));
                __threadfence();
                atomicExch(state, 2u);
                return INSERTED;
            }
            if (mode == MODE_IF_ABSENT) return EXISTING;
            if (settled_state(s) == 2u) break;
        }
        __threadfence();
        if (mode == MODE_ASSIGN) atomicExch(val, to_bits<V>(value));
        else atomic_reduce<V>((V*)val, op, value);
        return EXISTING;
    }

    // Updates the value of a slot that holds the key (the key never leaves
    // its slot during an insert, so the value field is updated on its own).
    __device__ __forceinline__ void update_value(raw* slot, V value, u32 mode, u32 op) const {
        if (mode == MODE_ASSIGN) {
            if (sizeof(V) == 4) atomicExch(W::template value_ptr<u32>(slot), (u32)to_bits<V>(value));
            else atomicExch(W::template value_ptr<u64>(slot), to_bits<V>(value));
        } else if (mode == MODE_APPLY) {
            atomic_reduce<V>(W::template value_ptr<V>(slot), op, value);
        }
    }
};

}  // namespace gh

// Each scheme's operations: find(v, key, out), insert(v, key, value, mode, op),
// erase(v, key) and displacement(v, key, slot) on a ViewCore, in-slot keys only.
#include "schemes/linear.cuh"
#include "schemes/robin_hood.cuh"
#include "schemes/cuckoo.cuh"
#include "schemes/hashinator.cuh"

namespace gh {

// The table as users' kernels see it: copy it freely, pass it by value.
template <typename K, typename V> struct TableView : ViewCore<K, V> {
    typedef ViewCore<K, V> Core;

    // Looks a key up; writes its value to *out when found. `bulk`: called
    // by a bulk lookup kernel, during which nothing writes the table.
    template <u32 S> __device__ __forceinline__ bool find_as(K key, V* out, bool bulk = false) const {
        int s = Core::special_index(key);
        if (s >= 0) return this->find_special(s, out);
        if (S == GH_SCHEME_LINEAR) return linear::find(*this, (u64)key, out);
        if (S == GH_SCHEME_HASHINATOR) return hashinator::find(*this, (u64)key, out);
        if (S == GH_SCHEME_ROBIN_HOOD) return robin_hood::find(*this, (u64)key, out);
        if (S == GH_SCHEME_CUCKOO) return cuckoo::find(*this, (u64)key, out, bulk);
        if (S == GH_SCHEME_TWO_LEVEL) return two_level::find(*this, (u64)key, out);
        return false;
    }

    // An insert of an in-slot key without locks, for kernels during which no
    // key moves (gh_insert_unlocked): a stored key is updated as insert_as
    // would; on the cuckoo schemes an absent key claims its first EMPTY
    // candidate slot. LEFT when the key needs the locked insert.
    template <u32 S> __device__ __forceinline__ int insert_unlocked_as(u64 key, V value, u32 mode, u32 op) const {
        if (S == GH_SCHEME_ROBIN_HOOD) return robin_hood::insert_unlocked(*this, key, value, mode, op);
        if (S == GH_SCHEME_CUCKOO) return cuckoo::insert_unlocked(*this, key, value, mode, op);
        if (S == GH_SCHEME_TWO_LEVEL) return two_level::insert_unlocked(*this, key, value, mode, op);
        return LEFT;
    }

    // Inserts a pair. A present key is overwritten (MODE_ASSIGN), kept
    // (MODE_IF_ABSENT) or combined with `op` (MODE_APPLY). Returns INSERTED,
    // EXISTING, or FAILED when the scheme found no place within its limits.
    template <u32 S> __device__ __forceinline__ int insert_as(K key, V value, u32 mode, u32 op) const {
        int s = Core::special_index(key);
        if (s >= 0) return this->insert_special(s, value, mode, op);
        if (S == GH_SCHEME_LINEAR) return linear::insert(*this, (u64)key, value, mode, op);
        if (S == GH_SCHEME_HASHINATOR) return hashinator::insert(*this, (u64)key, value, mode, op);
        if (S == GH_SCHEME_ROBIN_HOOD) return robin_hood::insert(*this, (u64)key, value, mode, op);
        if (S == GH_SCHEME_CUCKOO) return cuckoo::insert(*this, (u64)key, value, mode, op);
        if (S == GH_SCHEME_TWO_LEVEL) return two_level::insert(*this, (u64)key, value, mode, op);
        return FAILED;
    }

    // Erases a key; true if this call removed it.
    template <u32 S> __device__ __forceinline__ bool erase_as(K key) const {
        int s = Core::special_index(key);
        if (s >= 0) return this->erase_special(s);
        if (S == GH_SCHEME_LINEAR) return linear::erase(*this, (u64)key);
        if (S == GH_SCHEME_HASHINATOR) return hashinator::erase(*this, (u64)key);
        if (S == GH_SCHEME_ROBIN_HOOD) return robin_hood::erase(*this, (u64)key);
        if (S == GH_SCHEME_CUCKOO) return cuckoo::erase(*this, (u64)key);
        if (S == GH_SCHEME_TWO_LEVEL) return two_level::erase(*this, (u64)key);
        return false;
    }

    // Buckets past its first candidate that a key stored at `slot` sits.
    template <u32 S> __device__ __forceinline__ u64 displacement_as(u64 key, u64 slot) const {
        if (S == GH_SCHEME_HASHINATOR) return hashinator::displacement(*this, key, slot);
        if (S == GH_SCHEME_ROBIN_HOOD) return robin_hood::displacement(*this, key, slot);
        if (S == GH_SCHEME_CUCKOO) return cuckoo::displacement(*this, key, slot);
        if (S == GH_SCHEME_TWO_LEVEL) return two_level::displacement(*this, key, slot);
        return linear::displacement(*this, key, slot);
    }

    // The same, dispatched on the table's scheme at run time (for users' kernels).
#define GH_DISPATCH(FN, ARGS)                                                         \
    switch (this->scheme) {                                                           \
        case GH_SCHEME_HASHINATOR: return this->template FN<GH_SCHEME_HASHINATOR> ARGS; \
        case GH_SCHEME_ROBIN_HOOD: return this->template FN<GH_SCHEME_ROBIN_HOOD> ARGS; \
        case GH_SCHEME_CUCKOO: return this->template FN<GH_SCHEME_CUCKOO> ARGS;         \
        case GH_SCHEME_TWO_LEVEL: return this->template FN<GH_SCHEME_TWO_LEVEL> ARGS;   \
        default: return this->template FN<GH_SCHEME_LINEAR> ARGS;                      \
    }
    __device__ bool find(K key, V* out) const { GH_DISPATCH(find_as, (key, out)) }
    __device__ __forceinline__ bool contains(K key) const { V v; return find(key, &v); }
    __device__ int insert(K key, V value, u32 mode, u32 op) const { GH_DISPATCH(insert_as, (key, value, mode, op)) }
    __device__ bool erase(K key) const { GH_DISPATCH(erase_as, (key)) }
#undef GH_DISPATCH
};

}  // namespace gh
