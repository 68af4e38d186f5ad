// gpu_stream_kernel.cu - the training-loop pattern of docs/api.md on a real
// GPU (built by tests/gpu/run.sh with nvcc; never part of the default build):
// a kernel writes the "gradients" on a stream, gx_allreduce_stream averages
// them on that stream, a second kernel on the same stream checks the result
// on the device; the host synchronizes only at the end. Run under gx-run.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#include "gx/gx.h"

__global__ void fill(float *g, size_t n, int rank, int step)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        g[i] = (float)(rank + step + (int)(i % 13));
}

__global__ void check(const float *g, size_t n, int nranks, int step, unsigned long long *bad)
{
    float base = (float)(nranks - 1) / 2.0f + (float)step;
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float want = base + (float)(i % 13);
        if (g[i] != want)
            atomicAdd(bad, 1ull);
    }
}

#define CU(x)                                                                              \
    do {                                                                                   \
        cudaError_t e = (x);                                                               \
        if (e != cudaSuccess) {                                                            \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e));                        \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : (size_t)(4 << 20);
    int steps = argc > 2 ? atoi(argv[2]) : 20;
    struct gx_comm *comm = NULL;
    if (gx_comm_init_env(&comm) != GX_OK) {
        fprintf(stderr, "gx_comm_init_env: %s\n", gx_last_error());
        return 1;
    }
    int me = gx_comm_rank(comm), nranks = gx_comm_size(comm);
    CU(cudaSetDevice(0));
    float *g;
    unsigned long long *bad, hbad = 0;
    cudaStream_t s;
    CU(cudaMalloc(&g, n * sizeof(float)));
    CU(cudaMalloc(&bad, sizeof(*bad)));
    CU(cudaMemset(bad, 0, sizeof(*bad)));
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int step = 0; step < steps; step++) {
        fill<<<128, 256, 0, s>>>(g, n, me, step);
        int rc = gx_allreduce_stream(comm, g, g, n, GX_FLOAT32, GX_AVG, s);
        if (rc != GX_OK) {
            fprintf(stderr, "rank %d step %d: gx_allreduce_stream: %s\n", me, step,
                    gx_last_error());
            return 1;
        }
        check<<<128, 256, 0, s>>>(g, n, nranks, step, bad);
    }
    CU(cudaMemcpyAsync(&hbad, bad, sizeof(hbad), cudaMemcpyDeviceToHost, s));
    CU(cudaStreamSynchronize(s));
    printf("rank %d: %d steps of %zu floats, %llu wrong\n", me, steps, n, hbad);
    gx_comm_finalize(comm);
    gx_comm_destroy(comm);
    return hbad ? 1 : 0;
}
