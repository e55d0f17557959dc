// Zero-copy random reads of host memory: how allocation and size change the rate.
// Build and run on a CUDA machine: nvcc -O3 -arch=sm_90 -o zero-copy-reach zero-copy-reach.cu -lcuda && ./zero-copy-reach
#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <vector>
#include <algorithm>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("ERR %s: %s\n", #x, cudaGetErrorString(e_)); return -1; } } while (0)
#define DK(x) do { CUresult e_ = (x); if (e_ != CUDA_SUCCESS) { const char* s; cuGetErrorString(e_, &s); printf("DERR %s: %s\n", #x, s); return -1; } } while (0)

__device__ __forceinline__ uint64_t mixh(uint64_t x) { x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33; return x; }
// One random 32-byte sector per key (4 words of one sector), like one bucket probe.
__global__ void rd(const uint64_t* __restrict__ p, uint64_t words, uint64_t n, uint64_t seed, uint64_t* out) {
  uint64_t acc = 0;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    uint64_t s = (mixh(i ^ seed) % (words / 4)) * 4;
    const ulonglong2* q = (const ulonglong2*)(p + s);
    ulonglong2 a = __ldcv(q), b = __ldcv(q + 1);
    acc += a.x ^ a.y ^ b.x ^ b.y;
  }
  if (acc == 0x1234567) out[0] = acc;
}
// The same per key but 8 threads cooperating on one 128-byte line (a wide bucket).
__global__ void rd128(const uint64_t* __restrict__ p, uint64_t words, uint64_t n, uint64_t seed, uint64_t* out) {
  uint64_t acc = 0;
  uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  for (uint64_t i = t / 8; i < n; i += (uint64_t)gridDim.x * blockDim.x / 8) {
    uint64_t s = (mixh(i ^ seed) % (words / 16)) * 16 + (t % 8) * 2;
    ulonglong2 a = __ldcv((const ulonglong2*)(p + s));
    acc += a.x ^ a.y;
  }
  if (acc == 0x1234567) out[0] = acc;
}

static float timeit(void (*k)(const uint64_t*, uint64_t, uint64_t, uint64_t, uint64_t*), const uint64_t* p, uint64_t words, uint64_t n, uint64_t* out) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> ms;
  for (int r = 0; r < 4; r++) {
    cudaEventRecord(a);
    k<<<132 * 16, 256>>>(p, words, n, 77 + r, out);
    cudaEventRecord(b); cudaEventSynchronize(b);
    float m; cudaEventElapsedTime(&m, a, b); ms.push_back(m);
  }
  cudaError_t e = cudaGetLastError(); if (e) printf("kernel err %s\n", cudaGetErrorString(e));
  std::sort(ms.begin(), ms.end()); return ms[1];
}

static void report(const char* how, size_t bytes, const uint64_t* dp, uint64_t* out) {
  uint64_t words = bytes / 8, n = 1 << 22;
  float m = timeit(rd, dp, words, n, out);
  float m2 = timeit(rd128, dp, words, n, out);
  printf("%-22s %7zu MiB  32B: %7.2f ms %6.3f Gkeys/s %5.1f GB/s | 128B: %7.2f ms %6.3f Gkeys/s %5.1f GB/s\n", how, bytes >> 20,
         m, n / m / 1e6, n * 32.0 / m / 1e6, m2, n / m2 / 1e6, n * 128.0 / m2 / 1e6);
  fflush(stdout);
}

int main(int argc, char** argv) {
  CK(cudaSetDevice(0)); CK(cudaFree(0));
  uint64_t* out; CK(cudaMalloc(&out, 64));
  size_t sizes[] = {64ull << 20, 256ull << 20, 683ull << 20, 2048ull << 20, 8192ull << 20};
  for (size_t bytes : sizes) {
    { // device memory baseline
      void* d; CK(cudaMalloc(&d, bytes)); CK(cudaMemset(d, 1, bytes));
      report("device", bytes, (uint64_t*)d, out); cudaFree(d);
    }
    { // malloc + register (what pages do now)
      void* h = aligned_alloc(4096, bytes); memset(h, 1, bytes);
      CK(cudaHostRegister(h, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped));
      void* dp; CK(cudaHostGetDevicePointer(&dp, h, 0));
      report("malloc+register", bytes, (uint64_t*)dp, out);
      cudaHostUnregister(h); free(h);
    }
    { // mmap, THP advised, register
      size_t al = 2ull << 20; size_t len = bytes + al;
      char* raw = (char*)mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      char* h = (char*)(((uintptr_t)raw + al - 1) & ~(al - 1));
      int r = madvise(h, bytes, MADV_HUGEPAGE); memset(h, 1, bytes);
      CK(cudaHostRegister(h, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped));
      void* dp; CK(cudaHostGetDevicePointer(&dp, h, 0));
      report(r ? "thp(madvise failed)" : "thp+register", bytes, (uint64_t*)dp, out);
      cudaHostUnregister(h); munmap(raw, len);
    }
    { // driver-allocated pinned memory
      void* h; CK(cudaHostAlloc(&h, bytes, cudaHostAllocPortable | cudaHostAllocMapped)); memset(h, 1, bytes);
      void* dp; CK(cudaHostGetDevicePointer(&dp, h, 0));
      report("cudaHostAlloc", bytes, (uint64_t*)dp, out);
      cudaFreeHost(h);
    }
    { // VMM host allocation mapped with the allocation granularity
      CUmemAllocationProp prop = {};
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA; prop.location.id = 0;
      size_t gran = 0;
      if (cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS) { printf("vmm host: no granularity\n"); continue; }
      size_t sz = (bytes + gran - 1) / gran * gran;
      CUmemGenericAllocationHandle hd; CUresult cr = cuMemCreate(&hd, sz, &prop, 0);
      if (cr != CUDA_SUCCESS) { const char* s; cuGetErrorString(cr, &s); printf("vmm host create: %s\n", s); continue; }
      CUdeviceptr va; DK(cuMemAddressReserve(&va, sz, gran, 0, 0)); DK(cuMemMap(va, sz, 0, hd, 0));
      CUmemAccessDesc acc[2] = {};
      acc[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE; acc[0].location.id = 0; acc[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      acc[1].location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA; acc[1].location.id = 0; acc[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      CUresult ar = cuMemSetAccess(va, sz, acc, 2);
      if (ar != CUDA_SUCCESS) { const char* s; cuGetErrorString(ar, &s); printf("vmm host access (dev+host): %s; device only\n", s); DK(cuMemSetAccess(va, sz, acc, 1)); }
      else { memset((void*)va, 1, sz); }
      CK(cudaMemset((void*)va, 1, sz)); CK(cudaDeviceSynchronize());
      char name[64]; snprintf(name, 64, "vmm-host gran %zuK", gran >> 10);
      report(name, bytes, (uint64_t*)va, out);
      // copy rate from it, as a page upload would be
      void* d; CK(cudaMalloc(&d, sz)); cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
      cudaEventRecord(a); cudaMemcpyAsync(d, (void*)va, sz, cudaMemcpyDefault); cudaEventRecord(b); cudaEventSynchronize(b);
      float m; cudaEventElapsedTime(&m, a, b); printf("   vmm-host h2d copy %.1f GB/s\n", sz / m / 1e6); cudaFree(d);
      cuMemUnmap(va, sz); cuMemAddressFree(va, sz); cuMemRelease(hd);
    }
  }
  return 0;
}
