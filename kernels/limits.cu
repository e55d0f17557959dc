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
