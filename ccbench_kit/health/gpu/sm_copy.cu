// The pair matrix's SM figures (health/gpu/sm_copy.py), as nvbandwidth
// measures them: a kernel on the source GPU writing into the peer's memory
// (device_to_device_memcpy_write_sm), and one thread on the source chasing
// pointers through the peer's memory (device_to_device_latency_sm).

// every thread of the grid copies 16-byte words, a grid-stride loop; the
// destination is the peer's buffer (its writes cross the link)
extern "C" __global__ void __launch_bounds__(512)
ccb_sm_copy(const int4* __restrict__ src, int4* __restrict__ dst, unsigned long long words)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (; i < words; i += stride)
        dst[i] = src[i];
}

// run on the peer (its own memory): a ring of `n` pointers, each `step`
// slots ahead of the one before, so that consecutive loads fall in different
// cache lines and pages (nvbandwidth's ring has the same aim)
extern "C" __global__ void
ccb_chase_init(unsigned long long* ring, unsigned long long n, unsigned long long step)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n)
        ring[i] = (unsigned long long)(ring + (i + step) % n);
}

// one thread, `loads` dependent loads through the peer's ring: each load's
// address is the one before's value, so each waits a whole round trip over
// the link; volatile keeps every load a load (no L1, no reuse).  `sink`
// keeps the chain from being optimised away.
extern "C" __global__ void
ccb_chase(const unsigned long long* ring, unsigned int loads, unsigned long long* sink)
{
    const volatile unsigned long long* p = ring;
    for (unsigned int k = 0; k < loads; k++)
        p = (const volatile unsigned long long*)*p;
    *sink = (unsigned long long)p;
}
