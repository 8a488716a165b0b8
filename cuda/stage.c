/* stage.c -- host staging of device buffers through one pinned buffer
 * (cudaMallocHost: the copies run at full PCIe/NVLink-C2C speed and need no
 * bounce through pageable memory). */
#include "check.h"
#include "cuda_device.h"

void *cuda_stage_reserve(struct cuda_stage *s, size_t bytes)
{
    if (bytes <= s->bytes) return s->host;
    if (s->host) CUDA_CHECK(cudaFreeHost(s->host));
    s->host = NULL;
    CUDA_CHECK(cudaMallocHost(&s->host, bytes));
    s->bytes = bytes;
    return s->host;
}

void *cuda_stage_to_host(struct cuda_stage *s, const void *dev, size_t bytes)
{
    void *h = cuda_stage_reserve(s, bytes);
    CUDA_CHECK(cudaMemcpy(h, dev, bytes, cudaMemcpyDeviceToHost));
    return h;
}

void cuda_stage_from_host(const struct cuda_stage *s, void *dev, size_t bytes)
{
    if (bytes > s->bytes)
        cuda_fail_at(__FILE__, __LINE__, "cuda_stage_from_host", "bad size",
                     "more bytes asked for than the staging buffer holds");
    CUDA_CHECK(cudaMemcpy(dev, s->host, bytes, cudaMemcpyHostToDevice));
}

void cuda_stage_free(struct cuda_stage *s)
{
    if (s->host) CUDA_CHECK(cudaFreeHost(s->host));
    s->host = NULL;
    s->bytes = 0;
}
