// Hardware-limit kernels for the benchmark: what one random 32-byte sector
// read and one random 8-byte atomicCAS per key cost on this GPU, measured
// with the same access shape as a table probe (one thread per key, hashed
// addresses, two 16-byte loads per sector).
typedef unsigned long long u64;
typedef unsigned int u32;

__device__ __forceinline__ u64 scramble(u64 x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
    return x;
}

// One random sector per key; `out` keeps the loads from being optimised away.
extern "C" __global__ void gh_limit_read(const ulonglong2* table, u64 sectors, u64 n, u64 seed, u32* out) {
    u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (i >= n) return;
    u64 s = __umul64hi(scramble(i ^ seed), sectors);
    ulonglong2 a = __ldcg(table + 2 * s), b = __ldcg(table + 2 * s + 1);
    out[i] = (u32)(a.x ^ a.y ^ b.x ^ b.y);
}

// One random CAS per key on 8-byte words (half succeed, as in an insert).
extern "C" __global__ void gh_limit_cas(u64* table, u64 words, u64 n, u64 seed) {
    u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (i >= n) return;
    u64 w = __umul64hi(scramble(i ^ seed), words);
    atomicCAS(table + w, (i & 1) ? ~0ull : i, i);
}

// One radix partition pass over n 4-byte hashes with a 4-byte payload, by
// their top 8 bits (256 buckets), unstable: the cost of reordering a batch
// by table region before building it. Three kernels: a histogram, bucket
// offsets, and a scatter in which each block reserves its share of every
// bucket with one atomic and places its elements through shared memory.
#define GH_RADIX_BUCKETS 256

extern "C" __global__ void gh_limit_radix_hist(const u32* hashes, u64 n, u64 per_block, u32* hist) {
    __shared__ u32 h[GH_RADIX_BUCKETS];
    h[threadIdx.x] = 0;
    __syncthreads();
    u64 lo = blockIdx.x * per_block, hi = min(lo + per_block, n);
    for (u64 i = lo + threadIdx.x; i < hi; i += blockDim.x) atomicAdd(&h[hashes[i] >> 24], 1u);
    __syncthreads();
    if (h[threadIdx.x]) atomicAdd(&hist[threadIdx.x], h[threadIdx.x]);
}

// Exclusive scan of the 256 bucket counts into the scatter cursors (one block).
extern "C" __global__ void gh_limit_radix_offsets(const u32* hist, u32* cursor) {
    __shared__ u32 s[GH_RADIX_BUCKETS];
    u32 t = threadIdx.x;
    s[t] = hist[t];
    __syncthreads();
    for (u32 d = 1; d < GH_RADIX_BUCKETS; d <<= 1) {
        u32 v = t >= d ? s[t - d] : 0;
        __syncthreads();
        s[t] += v;
        __syncthreads();
    }
    cursor[t] = s[t] - hist[t];
}

extern "C" __global__ void gh_limit_radix_scatter(const u32* hashes, const u32* payload, u64 n, u64 per_block,
                                                  u32* cursor, u32* out_hashes, u32* out_payload) {
    __shared__ u32 count[GH_RADIX_BUCKETS], base[GH_RADIX_BUCKETS];
    count[threadIdx.x] = 0;
    __syncthreads();
    u64 lo = blockIdx.x * per_block, hi = min(lo + per_block, n);
    for (u64 i = lo + threadIdx.x; i < hi; i += blockDim.x) atomicAdd(&count[hashes[i] >> 24], 1u);
    __syncthreads();
    u32 c = count[threadIdx.x];
    base[threadIdx.x] = c ? atomicAdd(&cursor[threadIdx.x], c) : 0;
    count[threadIdx.x] = 0;
    __syncthreads();
    for (u64 i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        u32 h = hashes[i], b = h >> 24;
        u32 at = base[b] + atomicAdd(&count[b], 1u);
        out_hashes[at] = h;
        out_payload[at] = payload[i];
    }
}
