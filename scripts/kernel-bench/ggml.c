// ggml's side of scripts/kernel-bench.sh: times ggml_vec_dot_<type>_<act> (llama.cpp's CPU
// kernels, from the anchor build's libggml-cpu) over the rows bench.rs wrote, the activation
// quantized with ggml's reference quantizer: best of reps passes, ns per row; then streamed over
// the rows repeated to 96 MiB, GB/s (median of 15). Prints both.
// usage: ggml <type> <cols> <rows> <dir> <reps>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef void (*vec_dot_t)(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc);
typedef void (*quant_t)(const float *x, void *y, int64_t k);
#define DOT(name) void name(int, float *, size_t, const void *, size_t, const void *, size_t, int);
DOT(ggml_vec_dot_q4_1_q8_1) DOT(ggml_vec_dot_q5_0_q8_0) DOT(ggml_vec_dot_q8_0_q8_0)
DOT(ggml_vec_dot_q4_K_q8_K) DOT(ggml_vec_dot_q6_K_q8_K)
void quantize_row_q8_0_ref(const float *, void *, int64_t);
void quantize_row_q8_1_ref(const float *, void *, int64_t);
void quantize_row_q8_K_ref(const float *, void *, int64_t);
void ggml_cpu_init(void);

static const struct { const char *ty; vec_dot_t dot; quant_t quant; size_t act_bytes, act_elems; } KERNELS[] = {
    {"q4_1", ggml_vec_dot_q4_1_q8_1, quantize_row_q8_1_ref, 36, 32},
    {"q5_0", ggml_vec_dot_q5_0_q8_0, quantize_row_q8_0_ref, 34, 32},
    {"q8_0", ggml_vec_dot_q8_0_q8_0, quantize_row_q8_0_ref, 34, 32},
    {"q4_k", ggml_vec_dot_q4_K_q8_K, quantize_row_q8_K_ref, 292, 256},
    {"q6_k", ggml_vec_dot_q6_K_q8_K, quantize_row_q8_K_ref, 292, 256},
};

#define STREAM_BYTES ((size_t)96 << 20)
#define STREAM_REPS 15

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Seconds for one pass of `dot` over `rows` rows of `rb` bytes at `w` with the activation `y`
// (its sum added to *sink, so that the pass is not dropped).
static double timed_pass(vec_dot_t dot, int cols, const uint8_t *w, size_t rows, size_t rb, const void *y, volatile float *sink) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    float acc = 0;
    for (size_t r = 0; r < rows; r++) {
        float s;
        dot(cols, &s, 0, w + r * rb, 0, y, 0, 1);
        acc += s;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    *sink += acc;
    return (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9;
}

static void *slurp(const char *dir, const char *ty, const char *ext, size_t want) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%s", dir, ty, ext);
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(1); }
    void *p = malloc(want);
    if (fread(p, 1, want, f) != want) { fprintf(stderr, "%s: shorter than %zu bytes\n", path, want); exit(1); }
    fclose(f);
    return p;
}

int main(int argc, char **argv) {
    if (argc != 6) { fprintf(stderr, "usage: %s type cols rows dir reps\n", argv[0]); return 2; }
    const char *ty = argv[1];
    int cols = atoi(argv[2]), rows = atoi(argv[3]), reps = atoi(argv[5]);
    ggml_cpu_init();
    for (size_t k = 0; k < sizeof KERNELS / sizeof KERNELS[0]; k++) {
        if (strcmp(KERNELS[k].ty, ty) != 0) continue;
        size_t wsize = 0;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.w", argv[4], ty);
        FILE *f = fopen(path, "rb");
        if (!f) { perror(path); return 1; }
        fseek(f, 0, SEEK_END);
        wsize = (size_t)ftell(f);
        fclose(f);
        size_t rb = wsize / (size_t)rows;
        uint8_t *w = slurp(argv[4], ty, "w", wsize);
        float *x = slurp(argv[4], ty, "x", (size_t)cols * 4);
        void *y = malloc((size_t)cols / KERNELS[k].act_elems * KERNELS[k].act_bytes);
        KERNELS[k].quant(x, y, cols);
        double best = 1e30;
        volatile float sink = 0;
        for (int rep = 0; rep < reps; rep++) {
            double t = timed_pass(KERNELS[k].dot, cols, w, (size_t)rows, rb, y, &sink);
            if (t < best) best = t;
        }
        // Streamed: vec_dot row after row (as ggml's mul_mat calls it for one token) over the
        // rows repeated to STREAM_BYTES, GB/s of weights, median of STREAM_REPS passes.
        size_t big_rows = STREAM_BYTES / wsize * (size_t)rows;
        uint8_t *big = malloc(big_rows * rb);
        if (!big) { fprintf(stderr, "ggml.c: no memory for %zu bytes\n", big_rows * rb); return 1; }
        for (size_t r = 0; r < big_rows; r += (size_t)rows) memcpy(big + r * rb, w, wsize);
        double gbs[STREAM_REPS];
        for (int rep = 0; rep < STREAM_REPS; rep++)
            gbs[rep] = big_rows * rb / timed_pass(KERNELS[k].dot, cols, big, big_rows, rb, y, &sink) / 1e9;
        qsort(gbs, STREAM_REPS, sizeof gbs[0], cmp_double);
        printf("%.1f %.2f\n", best * 1e9 / rows, gbs[STREAM_REPS / 2]);
        return 0;
    }
    fprintf(stderr, "ggml.c: no kernel for type %s\n", ty);
    return 1;
}
