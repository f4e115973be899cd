// AVX2 F32 dot in the order of ggml's AVX ggml_vec_dot_f32: four 8-lane fma accumulators over
// steps of 32 values, reduced (0+2, 1+3, then 0+1, then the 8 lanes by add/hadd/hadd) to an f64,
// the leftover values added one by one in f64.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

// ggml's GGML_F32x8_REDUCE of four accumulators.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f32_reduce4(s: [__m256; 4]) -> f64 {
    let s0 = _mm256_add_ps(s[0], s[2]);
    let s1 = _mm256_add_ps(s[1], s[3]);
    let s0 = _mm256_add_ps(s0, s1);
    let t0 = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
    let t1 = _mm_hadd_ps(t0, t0);
    _mm_cvtss_f32(_mm_hadd_ps(t1, t1)) as f64
}

/// row . x for an F32 row (row.len() = 4 * x.len()). Requires AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_f32_avx2(row: &[u8], x: &Act) -> f32 {
    let a = &x.f32[..];
    let n = a.len();
    assert_eq!(row.len(), n * 4, "F32 row of {} bytes for an activation of {}", row.len(), n);
    let w = row.as_ptr() as *const f32;
    let y = a.as_ptr();
    let np = n & !31;
    let mut s = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i < np {
        for (j, acc) in s.iter_mut().enumerate() {
            let ax = _mm256_loadu_ps(w.add(i + 8 * j));
            let ay = _mm256_loadu_ps(y.add(i + 8 * j));
            *acc = _mm256_fmadd_ps(ax, ay, *acc);
        }
        i += 32;
    }
    let mut sum = f32_reduce4(s);
    for (k, &v) in a.iter().enumerate().skip(np) {
        sum += (std::ptr::read_unaligned(w.add(k)) * v) as f64;
    }
    sum as f32
}
