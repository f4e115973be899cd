// AVX2 F16 dot in the order of ggml's AVX ggml_vec_dot_f16 (weights f16, activation rounded to
// f16): four 8-lane fma accumulators over steps of 32 values, ggml's reduction to f64, leftovers
// added one by one in f64. The f16 -> f32 conversion is F16C's (exact for all inputs).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_reduce4(s: [__m256; 4]) -> f64 {
    let s0 = _mm256_add_ps(s[0], s[2]);
    let s1 = _mm256_add_ps(s[1], s[3]);
    let s0 = _mm256_add_ps(s0, s1);
    let t0 = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
    let t1 = _mm_hadd_ps(t0, t0);
    _mm_cvtss_f32(_mm_hadd_ps(t1, t1)) as f64
}

// Eight f16 values at p (unaligned) to f32, exactly (F16C's vcvtph2ps: fp16_to_f32 on every lane).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_load8(p: *const u8) -> __m256 {
    _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
}

/// row . x for an F16 row (row.len() = 2 * x.len()); reads x's F16 form. Requires AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_f16_avx2(row: &[u8], x: &Act) -> f32 {
    let a = &x.f16[..];
    let n = a.len();
    assert_eq!(row.len(), n * 2, "F16 row of {} bytes for an F16 activation of {}", row.len(), n);
    assert_eq!(n, x.f32.len(), "activation lacks its F16 form");
    let w = row.as_ptr();
    let y = a.as_ptr();
    let np = n & !31;
    let mut s = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i < np {
        for (j, acc) in s.iter_mut().enumerate() {
            let ax = f16_load8(w.add(2 * (i + 8 * j)));
            let ay = _mm256_loadu_ps(y.add(i + 8 * j));
            *acc = _mm256_fmadd_ps(ax, ay, *acc);
        }
        i += 32;
    }
    let mut sum = f16_reduce4(s);
    for k in np..n {
        sum += (fp16_to_f32(u16::from_le_bytes([row[2 * k], row[2 * k + 1]])) * a[k]) as f64;
    }
    sum as f32
}
