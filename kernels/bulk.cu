// Bulk kernels behind the Rust CUDA backend. One module is compiled per
// (key type, value type) pair, chosen with -DGH_KEY_T=... -DGH_VALUE_T=...;
// every kernel is one thread per key (or per slot), with the table view
// passed by value.
#include "gpuhash.cuh"

#ifndef GH_KEY_T
#define GH_KEY_T unsigned int
#endif
#ifndef GH_VALUE_T
#define GH_VALUE_T unsigned int
#endif

typedef GH_KEY_T K;
typedef GH_VALUE_T V;
typedef gh::TableView<K, V> View;
using gh::u32;
using gh::u64;

// Adds a per-thread count into a 64-bit counter with one atomic per warp.
// Every lane of the warp must call it (threads past the end pass 0).
__device__ __forceinline__ void warp_add(u64* counter, u32 v) {
    u32 sum = __reduce_add_sync(0xffffffffu, v);
    if ((threadIdx.x & 31) == 0 && sum != 0) atomicAdd(counter, (u64)sum);
}

__device__ __forceinline__ u64 thread_index() { return blockIdx.x * (u64)blockDim.x + threadIdx.x; }

// Inserts keys[i] -> values[i]. Positions that find no slot are appended to
// `failed` (up to `failed_cap`; counters[2] holds the true count).
extern "C" __global__ void gh_insert(View t, const K* keys, const V* values, u64 n, u32 mode, u32 op,
                                     u32* failed, u64 failed_cap) {
    u64 i = thread_index();
    u32 ins = 0, ex = 0, fail = 0;
    if (i < n) {
        int r = t.insert(keys[i], values[i], mode, op);
        ins = r == gh::INSERTED;
        ex = r == gh::EXISTING;
        fail = r == gh::FAILED;
        if (fail) {
            u64 at = atomicAdd(&t.meta->counters[2], 1ull);
            if (at < failed_cap) failed[at] = (u32)i;
        }
    }
    warp_add(&t.meta->counters[0], ins);
    warp_add(&t.meta->counters[1], ex);
}

// Looks keys up: values (zero bits when absent) and a found mask (0/1 bytes).
extern "C" __global__ void gh_find(View t, const K* keys, u64 n, V* out, unsigned char* found) {
    u64 i = thread_index();
    u32 hit = 0;
    if (i < n) {
        V v = gh::from_bits<V>(0);
        hit = t.find(keys[i], &v);
        out[i] = v;
        found[i] = (unsigned char)hit;
    }
    warp_add(&t.meta->counters[3], hit);
}

extern "C" __global__ void gh_contains(View t, const K* keys, u64 n, unsigned char* found) {
    u64 i = thread_index();
    u32 hit = 0;
    if (i < n) {
        hit = t.contains(keys[i]);
        found[i] = (unsigned char)hit;
    }
    warp_add(&t.meta->counters[3], hit);
}

extern "C" __global__ void gh_erase(View t, const K* keys, u64 n) {
    u64 i = thread_index();
    u32 gone = 0;
    if (i < n) gone = t.erase(keys[i]);
    warp_add(&t.meta->counters[3], gone);
}

// Appends the positions of absent keys (used when more inserts failed than
// the failure buffer held: a failed key is exactly one left absent).
extern "C" __global__ void gh_collect_absent(View t, const K* keys, u64 n, u32* out, u64 cap) {
    u64 i = thread_index();
    if (i < n && !t.contains(keys[i])) {
        u64 at = atomicAdd(&t.meta->counters[3], 1ull);
        if (at < cap) out[at] = (u32)i;
    }
}

// Moves every key of `from` (one thread per old slot) into the empty `to`.
// Out-of-band keys stay in the metadata block, which the host carries over.
extern "C" __global__ void gh_rehash(View from, u64 from_slots, View to) {
    u64 i = thread_index();
    u32 moved = 0, fail = 0;
    if (i < from_slots) {
        View::raw w = from.slots[i];
        u64 k = View::W::key(w);
        if (k != View::W::EMPTY_KEY && k != View::W::TOMB_KEY) {
            int r = to.insert((K)k, gh::from_bits<V>(View::W::value(w)), gh::MODE_IF_ABSENT, 0);
            moved = r == gh::INSERTED;
            fail = r == gh::FAILED;
        }
    }
    warp_add(&to.meta->counters[0], moved);
    warp_add(&to.meta->counters[2], fail);
}

// Copies every pair in slots out (order unspecified); counters[3] counts them.
extern "C" __global__ void gh_export(View t, u64 slots, K* keys_out, V* values_out, u64 cap) {
    u64 i = thread_index();
    if (i >= slots) return;
    View::raw w = t.slots[i];
    u64 k = View::W::key(w);
    if (k == View::W::EMPTY_KEY || k == View::W::TOMB_KEY) return;
    u64 at = atomicAdd(&t.meta->counters[3], 1ull);
    if (at < cap) {
        keys_out[at] = (K)k;
        values_out[at] = gh::from_bits<V>(View::W::value(w));
    }
}

// Sum (counters[0]) and maximum (counters[1]) of the buckets each stored key
// sits past its home bucket, and the live (counters[2]) and erased
// (counters[3]) slots: a census after users' kernels changed the table.
extern "C" __global__ void gh_displacement(View t, u64 slots) {
    u64 i = thread_index();
    u32 d = 0, live = 0, tomb = 0;
    if (i < slots) {
        View::raw w = t.slots[i];
        u64 k = View::W::key(w);
        tomb = k == View::W::TOMB_KEY;
        if (k != View::W::EMPTY_KEY && k != View::W::TOMB_KEY) {
            live = 1;
            u64 b = i / View::SLOTS, h = t.home(k);
            u64 dist = b >= h ? b - h : b + t.buckets - h;
            d = (u32)dist;
            atomicMax(&t.meta->counters[1], dist);
        }
    }
    warp_add(&t.meta->counters[0], d);
    warp_add(&t.meta->counters[2], live);
    warp_add(&t.meta->counters[3], tomb);
}
