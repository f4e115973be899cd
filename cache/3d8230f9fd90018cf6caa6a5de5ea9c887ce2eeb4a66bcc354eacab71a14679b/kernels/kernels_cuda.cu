// CUDA kernels of the GPU engines (sm_80, sm_89, sm_90): dequant GEMV/GEMM for the GGUF types
// F32, F16, Q8_0, Q4_1, Q5_0, Q4_K, Q6_K, for AWQ int4 as the engines hold it (AWQ_INT4 rows) and in
// AutoAWQ's own packing, row gather (embedding), RMSNorm, NeoX rope,
// the f16 KV cache append, causal attention with online softmax, SwiGLU, residual add, and
// sampling on the device (greedy argmax; temperature + top-k). Compiled with NVRTC to PTX for
// compute_XX; no headers are included (the NVRTC wheel ships none), so f16 conversion is one
// PTX cvt instruction and the integer types are spelled out below.
//
// Conventions: activations are f32, row-major; a GGUF weight matrix [rows][cols] is stored row
// by row, each row cols / block_elems blocks of block_bytes bytes (layouts as ckb/quants/*.toml
// and ckb/realizations/dot_*/blocks.rs); y = W x means y[r] = sum_i W[r][i] * x[i]. Blocks are
// read byte by byte (GGUF rows are not aligned beyond 1 byte). Positions live on the device
// (`pos` arrays), so a decode step launches everything without a host sync until the sampled
// token is copied back.
//
// Launch shapes (the engine's contract with these kernels):
//   gemv_<t>/gemm_<t>: blockDim.x = 32 * warps (warps in 1..=32), one warp per output row;
//                      grid = (ceil(rows / warps), ceil(n_tok / GEMM_TOK)) (gemv: grid.y = 1)
//   gemv_awq/gemm_awq: blockDim = (32, AWQ_KSPLIT); grid = (ceil(out / 256), ceil(n_tok / GEMM_TOK))
//   get_rows_<t>:      blockDim.x = 32 * warps; grid = n_tok
//   rmsnorm_f32:       blockDim.x = a multiple of 32, <= 1024; grid = n_tok
//   rope_neox_f32, rope_norm_f32, kv_append_f16, swiglu_f32, add_f32: any 1-D launch covering the elements
//   attention_f16kv:   blockDim.x = 32 * ATTN_WARPS; grid = (n_head, n_tok); head_dim <= 256, % 32 == 0
//   argmax_f32, sample_topk_f32: one block of 1024 threads

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;

#define GEMM_TOK 8     // tokens per block of the prefill GEMMs
#define AWQ_GROUP 128  // AWQ group size (rows of `in` sharing a scale and zero)
#define AWQ_KSPLIT 8   // blockDim.y of the AWQ kernels: the `in` dimension split 8 ways
#define ATTN_WARPS 4   // warps per attention block
#define ATTN_MAX_HD 256
#define TOPK_MAX 256
#define F_INF __int_as_float(0x7f800000)  // no math.h, so no INFINITY

// ---- helpers ----------------------------------------------------------------------------

__device__ __forceinline__ float f16_to_f32(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ u16 f32_to_f16(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// Little-endian loads from byte pointers (no alignment assumed).
__device__ __forceinline__ u16 ld_u16(const u8* p) { return (u16)(p[0] | (p[1] << 8)); }
__device__ __forceinline__ u32 ld_u32(const u8* p) {
    return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// ---- block dequantization ---------------------------------------------------------------
// Each type T gives PER (values per lane per chunk), row_bytes(cols), chunks(cols) and
// deq(row, c, lane, cols, w): the values of chunk c of the row at element indices
// c*32*PER + 32*k + lane (k < PER), zero past cols. One chunk is one block for the blocked types.

struct TF32 {
    static constexpr int PER = 1;
    __device__ static size_t row_bytes(int cols) { return (size_t)cols * 4; }
    __device__ static int chunks(int cols) { return (cols + 31) / 32; }
    __device__ static void deq(const u8* row, int c, int lane, int cols, float* w) {
        int i = c * 32 + lane;
        w[0] = i < cols ? ((const float*)row)[i] : 0.0f;  // f32 rows are 4-byte aligned
    }
};

struct TF16 {
    static constexpr int PER = 1;
    __device__ static size_t row_bytes(int cols) { return (size_t)cols * 2; }
    __device__ static int chunks(int cols) { return (cols + 31) / 32; }
    __device__ static void deq(const u8* row, int c, int lane, int cols, float* w) {
        int i = c * 32 + lane;
        w[0] = i < cols ? f16_to_f32(ld_u16(row + 2 * i)) : 0.0f;
    }
};

// Q8_0: 34 bytes / 32 values: d f16 @0, qs[32] i8 @2; w = d * q.
struct TQ8_0 {
    static constexpr int PER = 1;
    __device__ static size_t row_bytes(int cols) { return (size_t)(cols / 32) * 34; }
    __device__ static int chunks(int cols) { return cols / 32; }
    __device__ static void deq(const u8* row, int c, int lane, int, float* w) {
        const u8* b = row + (size_t)c * 34;
        w[0] = f16_to_f32(ld_u16(b)) * (float)(i8)b[2 + lane];
    }
};

// Q4_1: 20 bytes / 32 values: d f16 @0, m f16 @2, qs[16] @4 (value j < 16: low nibble of qs[j];
// value j >= 16: high nibble of qs[j-16]); w = d * q + m (a multiply, then an add: --fmad=false).
struct TQ4_1 {
    static constexpr int PER = 1;
    __device__ static size_t row_bytes(int cols) { return (size_t)(cols / 32) * 20; }
    __device__ static int chunks(int cols) { return cols / 32; }
    __device__ static void deq(const u8* row, int c, int lane, int, float* w) {
        const u8* b = row + (size_t)c * 20;
        u8 qs = b[4 + (lane & 15)];
        int q = lane < 16 ? (qs & 0x0F) : (qs >> 4);
        w[0] = f16_to_f32(ld_u16(b)) * (float)q + f16_to_f32(ld_u16(b + 2));
    }
};

// Q5_0: 22 bytes / 32 values: d f16 @0, qh u32 LE @2 (bit j = 5th bit of value j), qs[16] @6
// (value j < 16: low nibble of qs[j]; value j >= 16: high nibble of qs[j-16]); w = d * (q - 16).
struct TQ5_0 {
    static constexpr int PER = 1;
    __device__ static size_t row_bytes(int cols) { return (size_t)(cols / 32) * 22; }
    __device__ static int chunks(int cols) { return cols / 32; }
    __device__ static void deq(const u8* row, int c, int lane, int, float* w) {
        const u8* b = row + (size_t)c * 22;
        u32 qh = ld_u32(b + 2);
        u8 qs = b[6 + (lane & 15)];
        int lo = lane < 16 ? (qs & 0x0F) : (qs >> 4);
        int q = lo | (int)(((qh >> lane) & 1u) << 4);
        w[0] = f16_to_f32(ld_u16(b)) * (float)(q - 16);
    }
};

// Q4_K: 144 bytes / 256 values: d f16 @0, dmin f16 @2, scales[12] @4, qs[128] @16. Sub-block j
// (32 values) = low nibbles of qs[32*(j/2) ..][..32] for even j, high nibbles for odd j;
// w = (d*sc_j)*q - (dmin*m_j), (sc_j, m_j) = get_scale_min_k4(j). Lane l, k: value 32k + l.
struct TQ4_K {
    static constexpr int PER = 8;
    __device__ static size_t row_bytes(int cols) { return (size_t)(cols / 256) * 144; }
    __device__ static int chunks(int cols) { return cols / 256; }
    __device__ static void deq(const u8* row, int c, int lane, int, float* w) {
        const u8* b = row + (size_t)c * 144;
        float d = f16_to_f32(ld_u16(b));
        float dmin = f16_to_f32(ld_u16(b + 2));
        const u8* sc = b + 4;
        const u8* qs = b + 16;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            int s, m;
            if (j < 4) {
                s = sc[j] & 63;
                m = sc[j + 4] & 63;
            } else {
                s = (sc[j + 4] & 0x0F) | ((sc[j - 4] >> 6) << 4);
                m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
            }
            u8 v = qs[32 * (j >> 1) + lane];
            int q = (j & 1) ? (v >> 4) : (v & 0x0F);
            w[j] = (d * (float)s) * (float)q - dmin * (float)m;
        }
    }
};

// Q6_K: 210 bytes / 256 values: ql[128] @0, qh[64] @128, scales[16] i8 @192, d f16 @208. Half h
// (128 values; ql += 64h, qh += 32h), l < 32: value l = ql[l] lo | qh[l] bits 0-1; 32+l =
// ql[32+l] lo | bits 2-3; 64+l = ql[l] hi | bits 4-5; 96+l = ql[32+l] hi | bits 6-7;
// w = (d * sc[v/16]) * (q6 - 32). Lane l, k: value 32k + l (h = k/4, t = k%4).
struct TQ6_K {
    static constexpr int PER = 8;
    __device__ static size_t row_bytes(int cols) { return (size_t)(cols / 256) * 210; }
    __device__ static int chunks(int cols) { return cols / 256; }
    __device__ static void deq(const u8* row, int c, int lane, int, float* w) {
        const u8* b = row + (size_t)c * 210;
        float d = f16_to_f32(ld_u16(b + 208));
        const i8* scales = (const i8*)(b + 192);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            int h = k >> 2, t = k & 3;
            const u8* ql = b + 64 * h;
            u8 qh = b[128 + 32 * h + lane];
            u8 l4 = ql[(t & 1) * 32 + lane];
            int lo = (t < 2) ? (l4 & 0x0F) : (l4 >> 4);
            int q = (lo | (((qh >> (2 * t)) & 3) << 4)) - 32;
            w[k] = (d * (float)scales[(32 * k + lane) >> 4]) * (float)q;
        }
    }
};

// AWQ_INT4 (hf_reader's repacking of AutoAWQ GEMM layers, ckb/quants/awq_int4.toml): 68 bytes /
// 128 values of one output row: d f16 @0, z u16 @2 (0..=15), qs[64] @4; in run k < 4, value
// 32k + j (j < 16) is the low nibble of qs[16k + j] and value 32k + 16 + j its high nibble;
// w = d * (q - z). Lane l, k: value 32k + l.
struct TAWQ_INT4 {
    static constexpr int PER = 4;
    __device__ static size_t row_bytes(int cols) { return (size_t)(cols / 128) * 68; }
    __device__ static int chunks(int cols) { return cols / 128; }
    __device__ static void deq(const u8* row, int c, int lane, int, float* w) {
        const u8* b = row + (size_t)c * 68;
        float d = f16_to_f32(ld_u16(b));
        int z = ld_u16(b + 2) & 0x0F;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            u8 v = b[4 + 16 * k + (lane & 15)];
            int q = lane < 16 ? (v & 0x0F) : (v >> 4);
            w[k] = d * (float)(q - z);
        }
    }
};

// ---- dequant GEMV / GEMM ----------------------------------------------------------------
// y[t][r] = sum_i W[r][i] * x[t][i] (+ bias[r]) for tokens t0 .. t0 + GEMM_TOK of this block.
// Each weight value is dequantized once per block and used for all of its tokens.
template <class T, int TT>
__device__ __forceinline__ void gemm_rows(const u8* __restrict__ w, const float* __restrict__ x,
                                          float* __restrict__ y, const float* __restrict__ bias,
                                          int rows, int cols, int n_tok) {
    int warps = blockDim.x >> 5, lane = threadIdx.x & 31;
    int r = blockIdx.x * warps + (threadIdx.x >> 5);
    int t0 = blockIdx.y * TT;
    if (r >= rows || t0 >= n_tok) return;  // whole warps leave together
    int nt = min(TT, n_tok - t0);
    const u8* row = w + (size_t)r * T::row_bytes(cols);
    const float* xt = x + (size_t)t0 * cols;
    float acc[TT];
#pragma unroll
    for (int t = 0; t < TT; t++) acc[t] = 0.0f;
    int nch = T::chunks(cols);
    for (int c = 0; c < nch; c++) {
        float wv[T::PER];
        T::deq(row, c, lane, cols, wv);
#pragma unroll
        for (int k = 0; k < T::PER; k++) {
            int i = c * 32 * T::PER + 32 * k + lane;
            if (i < cols) {
#pragma unroll
                for (int t = 0; t < TT; t++)
                    if (t < nt) acc[t] = fmaf(wv[k], xt[(size_t)t * cols + i], acc[t]);
            }
        }
    }
    float b = bias ? bias[r] : 0.0f;
#pragma unroll
    for (int t = 0; t < TT; t++) {
        float s = warp_sum(acc[t]);
        if (lane == 0 && t < nt) y[(size_t)(t0 + t) * rows + r] = s + b;
    }
}

// y[r] (+)= x[i] gathered rows: out[t][i] = W[ids[t]][i] (embedding lookup).
template <class T>
__device__ __forceinline__ void get_rows(const u8* __restrict__ w, const i32* __restrict__ ids,
                                         float* __restrict__ out, int cols) {
    int warps = blockDim.x >> 5, lane = threadIdx.x & 31, wi = threadIdx.x >> 5;
    int t = blockIdx.x;
    const u8* row = w + (size_t)ids[t] * T::row_bytes(cols);
    float* o = out + (size_t)t * cols;
    for (int c = wi; c < T::chunks(cols); c += warps) {
        float wv[T::PER];
        T::deq(row, c, lane, cols, wv);
#pragma unroll
        for (int k = 0; k < T::PER; k++) {
            int i = c * 32 * T::PER + 32 * k + lane;
            if (i < cols) o[i] = wv[k];
        }
    }
}

#define GGUF_KERNELS(name, T)                                                                    \
    /* w: [rows][cols] as T's blocks; x: [cols]; y: [rows]; bias: [rows] or null */              \
    extern "C" __global__ void gemv_##name(const u8* __restrict__ w, const float* __restrict__ x, \
                                           float* __restrict__ y, const float* __restrict__ bias, \
                                           int rows, int cols) {                                 \
        gemm_rows<T, 1>(w, x, y, bias, rows, cols, 1);                                           \
    }                                                                                            \
    /* w: [rows][cols]; x: [n_tok][cols]; y: [n_tok][rows]; bias: [rows] or null */              \
    extern "C" __global__ void gemm_##name(const u8* __restrict__ w, const float* __restrict__ x, \
                                           float* __restrict__ y, const float* __restrict__ bias, \
                                           int rows, int cols, int n_tok) {                      \
        gemm_rows<T, GEMM_TOK>(w, x, y, bias, rows, cols, n_tok);                                \
    }                                                                                            \
    /* w: [n_rows][cols]; ids: [n_tok] (< n_rows); out: [n_tok][cols] */                         \
    extern "C" __global__ void get_rows_##name(const u8* __restrict__ w,                         \
                                               const i32* __restrict__ ids,                      \
                                               float* __restrict__ out, int cols) {              \
        get_rows<T>(w, ids, out, cols);                                                          \
    }

GGUF_KERNELS(f32, TF32)
GGUF_KERNELS(f16, TF16)
GGUF_KERNELS(q8_0, TQ8_0)
GGUF_KERNELS(q4_1, TQ4_1)
GGUF_KERNELS(q5_0, TQ5_0)
GGUF_KERNELS(q4_k, TQ4_K)
GGUF_KERNELS(q6_k, TQ6_K)
GGUF_KERNELS(awq_int4, TAWQ_INT4)

// ---- AWQ int4 (AutoAWQ GEMM packing) ------------------------------------------------------
// qweight i32 [in][out/8]: the 8 outputs 8p..8p+8 of row i packed in one int32 with nibble
// order [0,2,4,6,1,3,5,7], i.e. output 8p+c sits at bit shift AWQ_SHIFT(c); qzeros i32
// [in/128][out/8], same packing; scales f16 [in/128][out]; w[i][o] = (q - z) * s and
// y[t][o] = sum_i x[t][i] * w[i][o] (+ bias[o]).
// Thread (tx, ty) of block bx owns the packed column p = 32*bx + tx (8 outputs) and the rows
// i = ty, ty + AWQ_KSPLIT, ...; the AWQ_KSPLIT partial sums are added in shared memory.
// AWQ_SHIFT(c) for c = 0..8: 0, 16, 4, 20, 8, 24, 12, 28 (the inverse of the nibble order).
#define AWQ_SHIFT(c) ((((c) & 1) << 4) + (((c) >> 1) << 2))

template <int TT>
__device__ __forceinline__ void awq_rows(const i32* __restrict__ qweight,
                                         const i32* __restrict__ qzeros,
                                         const u16* __restrict__ scales,
                                         const float* __restrict__ x, float* __restrict__ y,
                                         const float* __restrict__ bias, int in, int out,
                                         int n_tok) {
    __shared__ float part[AWQ_KSPLIT][32][8];
    int tx = threadIdx.x, ty = threadIdx.y;
    int np = out / 8;
    int p = blockIdx.x * 32 + tx;
    int t0 = blockIdx.y * TT;
    int nt = min(TT, n_tok - t0);
    bool live = p < np;
    float acc[TT][8];
#pragma unroll
    for (int t = 0; t < TT; t++)
#pragma unroll
        for (int c = 0; c < 8; c++) acc[t][c] = 0.0f;
    if (live) {
        for (int g = 0; g < in / AWQ_GROUP; g++) {
            u32 z = (u32)qzeros[(size_t)g * np + p];
            float s[8], zf[8];
#pragma unroll
            for (int c = 0; c < 8; c++) {
                s[c] = f16_to_f32(scales[(size_t)g * out + 8 * p + c]);
                zf[c] = (float)((z >> AWQ_SHIFT(c)) & 15u);
            }
            for (int i = g * AWQ_GROUP + ty; i < (g + 1) * AWQ_GROUP; i += AWQ_KSPLIT) {
                u32 q = (u32)qweight[(size_t)i * np + p];
                float wv[8];
#pragma unroll
                for (int c = 0; c < 8; c++) wv[c] = ((float)((q >> AWQ_SHIFT(c)) & 15u) - zf[c]) * s[c];
#pragma unroll
                for (int t = 0; t < TT; t++) {
                    if (t < nt) {
                        float xv = x[(size_t)(t0 + t) * in + i];
#pragma unroll
                        for (int c = 0; c < 8; c++) acc[t][c] = fmaf(wv[c], xv, acc[t][c]);
                    }
                }
            }
        }
    }
#pragma unroll
    for (int t = 0; t < TT; t++) {
        if (t >= nt) break;  // nt is uniform over the block
#pragma unroll
        for (int c = 0; c < 8; c++) part[ty][tx][c] = acc[t][c];
        __syncthreads();
        if (ty == 0 && live) {
#pragma unroll
            for (int c = 0; c < 8; c++) {
                float v = 0.0f;
                for (int k = 0; k < AWQ_KSPLIT; k++) v += part[k][tx][c];
                int o = 8 * p + c;
                y[(size_t)(t0 + t) * out + o] = v + (bias ? bias[o] : 0.0f);
            }
        }
        __syncthreads();
    }
}

// qweight: i32 [in][out/8]; qzeros: i32 [in/128][out/8]; scales: f16 bits [in/128][out];
// x: [in]; y: [out]; bias: [out] or null. in % 128 == 0, out % 8 == 0.
extern "C" __global__ void gemv_awq(const i32* __restrict__ qweight, const i32* __restrict__ qzeros,
                                    const u16* __restrict__ scales, const float* __restrict__ x,
                                    float* __restrict__ y, const float* __restrict__ bias, int in,
                                    int out) {
    awq_rows<1>(qweight, qzeros, scales, x, y, bias, in, out, 1);
}

// As gemv_awq with x: [n_tok][in], y: [n_tok][out].
extern "C" __global__ void gemm_awq(const i32* __restrict__ qweight, const i32* __restrict__ qzeros,
                                    const u16* __restrict__ scales, const float* __restrict__ x,
                                    float* __restrict__ y, const float* __restrict__ bias, int in,
                                    int out, int n_tok) {
    awq_rows<GEMM_TOK>(qweight, qzeros, scales, x, y, bias, in, out, n_tok);
}

// ---- RMSNorm ------------------------------------------------------------------------------
// x: [n_tok][n]; weight: [n]; y: [n_tok][n] (may alias x). One block per token:
// y = x / sqrt(mean(x^2) + eps) * weight.
extern "C" __global__ void rmsnorm_f32(const float* x, const float* __restrict__ weight, float* y,
                                       int n, float eps) {
    __shared__ float red[32];
    const float* xr = x + (size_t)blockIdx.x * n;
    float* yr = y + (size_t)blockIdx.x * n;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss = fmaf(xr[i], xr[i], ss);
    ss = warp_sum(ss);
    int lane = threadIdx.x & 31, wi = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0) red[wi] = ss;
    __syncthreads();
    if (wi == 0) {
        ss = lane < nw ? red[lane] : 0.0f;
        ss = warp_sum(ss);
        if (lane == 0) red[0] = ss;
    }
    __syncthreads();
    float scale = 1.0f / sqrtf(red[0] / (float)n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] * scale * weight[i];
}

// ---- NeoX rope ----------------------------------------------------------------------------
// q: [n_tok][n_head][head_dim]; k: [n_tok][n_head_kv][head_dim]; pos: [n_tok] (on the device).
// Pair i (< head_dim/2) of every head rotates by pos * theta^(-2i/head_dim); the pair is
// (i, i + head_dim/2) for NeoX rope, (2i, 2i + 1) for normal rope. One thread per (token, head
// of q or k, i); n_tok * (n_head + n_head_kv) * head_dim/2 threads.
__device__ __forceinline__ void rope_f32(float* __restrict__ q, float* __restrict__ k,
                                         const i32* __restrict__ pos, int n_tok, int n_head,
                                         int n_head_kv, int head_dim, float theta, bool neox) {
    int half = head_dim / 2;
    int heads = n_head + n_head_kv;
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)n_tok * heads * half) return;
    int i = (int)(idx % half);
    int h = (int)((idx / half) % heads);
    int t = (int)(idx / ((long long)half * heads));
    float* v = h < n_head ? q + ((size_t)t * n_head + h) * head_dim
                          : k + ((size_t)t * n_head_kv + (h - n_head)) * head_dim;
    float freq = powf(theta, -2.0f * (float)i / (float)head_dim);
    float s, c;
    sincosf((float)pos[t] * freq, &s, &c);
    int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
    float x0 = v[a], x1 = v[b];
    v[a] = x0 * c - x1 * s;
    v[b] = x0 * s + x1 * c;
}

extern "C" __global__ void rope_neox_f32(float* __restrict__ q, float* __restrict__ k,
                                         const i32* __restrict__ pos, int n_tok, int n_head,
                                         int n_head_kv, int head_dim, float theta) {
    rope_f32(q, k, pos, n_tok, n_head, n_head_kv, head_dim, theta, true);
}

extern "C" __global__ void rope_norm_f32(float* __restrict__ q, float* __restrict__ k,
                                         const i32* __restrict__ pos, int n_tok, int n_head,
                                         int n_head_kv, int head_dim, float theta) {
    rope_f32(q, k, pos, n_tok, n_head, n_head_kv, head_dim, theta, false);
}

// ---- KV cache -----------------------------------------------------------------------------
// k, v: [n_tok][kv_dim] f32; k_cache, v_cache: one layer's [max_seq][kv_dim] as f16 bits;
// pos: [n_tok] (< max_seq). cache[pos[t]][j] = f16(k[t][j]) (round to nearest even).
extern "C" __global__ void kv_append_f16(const float* __restrict__ k, const float* __restrict__ v,
                                         u16* __restrict__ k_cache, u16* __restrict__ v_cache,
                                         const i32* __restrict__ pos, int n_tok, int kv_dim) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)n_tok * kv_dim) return;
    int t = (int)(idx / kv_dim), j = (int)(idx % kv_dim);
    size_t dst = (size_t)pos[t] * kv_dim + j;
    k_cache[dst] = f32_to_f16(k[idx]);
    v_cache[dst] = f32_to_f16(v[idx]);
}

// ---- attention ----------------------------------------------------------------------------
// q: [n_tok][n_head][head_dim]; k_cache, v_cache: one layer's [max_seq][n_head_kv][head_dim]
// f16 bits, holding positions 0 ..= pos[t]; out: [n_tok][n_head][head_dim]; pos: [n_tok].
// Query t of head h attends causally to positions 0 ..= pos[t] of kv head h / (n_head /
// n_head_kv): softmax(scale * q.k) . v, with an online softmax. Block (h, t); warp w takes the
// positions w, w + ATTN_WARPS, ...; lane l holds dims l + 32j; the warps merge in shared memory.
// Decode is n_tok = 1; prefill passes all new tokens (their K/V appended first).
extern "C" __global__ void attention_f16kv(const float* __restrict__ q,
                                           const u16* __restrict__ k_cache,
                                           const u16* __restrict__ v_cache, float* __restrict__ out,
                                           const i32* __restrict__ pos, int n_tok, int n_head,
                                           int n_head_kv, int head_dim, float scale) {
    __shared__ float sm_m[ATTN_WARPS], sm_l[ATTN_WARPS];
    __shared__ float sm_acc[ATTN_WARPS][ATTN_MAX_HD];
    int h = blockIdx.x, t = blockIdx.y;
    int lane = threadIdx.x & 31, wi = threadIdx.x >> 5;
    int per = head_dim >> 5;  // dims per lane, <= 8
    int kvh = h / (n_head / n_head_kv);
    int kv_dim = n_head_kv * head_dim;
    const float* qh = q + ((size_t)t * n_head + h) * head_dim;
    float qv[ATTN_MAX_HD / 32], acc[ATTN_MAX_HD / 32];
#pragma unroll
    for (int j = 0; j < ATTN_MAX_HD / 32; j++) {
        qv[j] = j < per ? qh[lane + 32 * j] * scale : 0.0f;
        acc[j] = 0.0f;
    }
    float m = -F_INF, l = 0.0f;
    int last = pos[t];
    for (int p = wi; p <= last; p += ATTN_WARPS) {
        const u16* kp = k_cache + (size_t)p * kv_dim + (size_t)kvh * head_dim;
        const u16* vp = v_cache + (size_t)p * kv_dim + (size_t)kvh * head_dim;
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < ATTN_MAX_HD / 32; j++)
            if (j < per) s = fmaf(qv[j], f16_to_f32(kp[lane + 32 * j]), s);
        s = warp_sum(s);
        float mn = fmaxf(m, s);
        float corr = expf(m - mn);  // 0 on the first position (m = -inf)
        float e = expf(s - mn);
        l = l * corr + e;
#pragma unroll
        for (int j = 0; j < ATTN_MAX_HD / 32; j++)
            if (j < per) acc[j] = fmaf(e, f16_to_f32(vp[lane + 32 * j]), acc[j] * corr);
        m = mn;
    }
    if (lane == 0) {
        sm_m[wi] = m;
        sm_l[wi] = l;
    }
#pragma unroll
    for (int j = 0; j < ATTN_MAX_HD / 32; j++)
        if (j < per) sm_acc[wi][lane + 32 * j] = acc[j];
    __syncthreads();
    if (wi == 0) {
        float mg = -F_INF;
        for (int w = 0; w < ATTN_WARPS; w++) mg = fmaxf(mg, sm_m[w]);
        float lg = 0.0f, f[ATTN_WARPS];
        for (int w = 0; w < ATTN_WARPS; w++) {
            f[w] = sm_l[w] > 0.0f ? expf(sm_m[w] - mg) : 0.0f;  // warps with no position
            lg += sm_l[w] * f[w];
        }
        float* o = out + ((size_t)t * n_head + h) * head_dim;
        for (int d = lane; d < head_dim; d += 32) {
            float v = 0.0f;
            for (int w = 0; w < ATTN_WARPS; w++) v = fmaf(sm_acc[w][d], f[w], v);
            o[d] = v / lg;
        }
    }
}

// ---- SwiGLU and residual ------------------------------------------------------------------
// gate, up, out: [n] (n = n_tok * n_ff; out may alias gate). out = silu(gate) * up.
extern "C" __global__ void swiglu_f32(const float* gate, const float* __restrict__ up, float* out,
                                      int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

// y, x: [n]. y += x (the residual stream).
extern "C" __global__ void add_f32(float* __restrict__ y, const float* __restrict__ x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += x[i];
}

// ---- sampling on the device ---------------------------------------------------------------
// The order of candidates: larger logit first, then lower id. NaN and -inf are never chosen.
__device__ __forceinline__ bool better(float a, int ia, float b, int ib) {
    return a > b || (a == b && ia < ib);
}

// Block-wide best (value, id) under `better`, over ids i with pred(v, i); id -1 when none.
// blockDim.x a multiple of 32 (1024 for speed); every thread gets the result.
template <class Pred>
__device__ __forceinline__ void block_best(const float* __restrict__ logits, int n, Pred pred,
                                           float* out_v, int* out_i) {
    __shared__ float rv[32];
    __shared__ int ri[32];
    float bv = -F_INF;
    int bi = -1;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float v = logits[i];
        if (v == v && v != -F_INF && pred(v, i) && (bi < 0 || better(v, i, bv, bi))) {
            bv = v;
            bi = i;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (oi >= 0 && (bi < 0 || better(ov, oi, bv, bi))) {
            bv = ov;
            bi = oi;
        }
    }
    int lane = threadIdx.x & 31, wi = threadIdx.x >> 5;
    __syncthreads();  // rv/ri may still be read by a previous call
    if (lane == 0) {
        rv[wi] = bv;
        ri[wi] = bi;
    }
    __syncthreads();
    int nw = blockDim.x >> 5;
    bv = lane < nw ? rv[lane] : -F_INF;
    bi = lane < nw ? ri[lane] : -1;
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (oi >= 0 && (bi < 0 || better(ov, oi, bv, bi))) {
            bv = ov;
            bi = oi;
        }
    }
    *out_v = bv;
    *out_i = bi;
}

// logits: [n]; out: [1]. Greedy: the lowest id among the largest non-NaN logits (+inf wins);
// 0 when every logit is NaN or -inf. One block of 1024 threads.
extern "C" __global__ void argmax_f32(const float* __restrict__ logits, int n, i32* __restrict__ out) {
    float v;
    int i;
    block_best(logits, n, [](float, int) { return true; }, &v, &i);
    if (threadIdx.x == 0) out[0] = i < 0 ? 0 : i;
}

// logits: [n]; out: [1]. Keeps the top_k (1 ..= TOPK_MAX) candidates in the order above, then
// draws from softmax(logit / temperature) over them with u in [0, 1) (drawn on the host from
// the seeded RNG and passed by value, so no sync). temperature <= 0 or top_k == 1: greedy.
// One block of 1024 threads.
extern "C" __global__ void sample_topk_f32(const float* __restrict__ logits, int n, int top_k,
                                           float temperature, float u, i32* __restrict__ out) {
    __shared__ float cv[TOPK_MAX];
    __shared__ int ci[TOPK_MAX];
    int k = min(max(top_k, 1), TOPK_MAX);
    if (temperature <= 0.0f) k = 1;
    int kept = 0;
    float pv = F_INF;
    int pi = -1;
    for (int r = 0; r < k; r++) {
        float v;
        int i;
        // the best candidate strictly after (pv, pi) in the order
        block_best(logits, n, [=](float a, int ia) { return pi < 0 || better(pv, pi, a, ia); },
                   &v, &i);
        if (i < 0) break;
        if (threadIdx.x == 0) {
            cv[r] = v;
            ci[r] = i;
        }
        pv = v;
        pi = i;
        kept = r + 1;
        if (v == F_INF) break;  // a +inf logit is chosen outright
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        if (kept == 0) {
            out[0] = 0;
        } else if (kept == 1 || cv[0] == F_INF) {
            out[0] = ci[0];
        } else {
            float sum = 0.0f;
            for (int r = 0; r < kept; r++) {
                cv[r] = expf((cv[r] - cv[0]) / temperature);
                sum += cv[r];
            }
            float target = u * sum, run = 0.0f;
            int pick = ci[kept - 1];
            for (int r = 0; r < kept; r++) {
                run += cv[r];
                if (run > target) {
                    pick = ci[r];
                    break;
                }
            }
            out[0] = pick;
        }
    }
}
