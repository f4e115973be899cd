// AVX2 F16 dot in the order of ggml's AVX ggml_vec_dot_f16 (weights f16, activation rounded to
// f16): four 8-lane fma accumulators over steps of 32 values, ggml's reduction to f64, leftovers
// added one by one in f64. The f16 -> f32 conversion is done with AVX2 integer operations (exact
// for all inputs), so only AVX2 and FMA are required (not F16C).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn f16_reduce4(s: [__m256; 4]) -> f64 {
    let s0 = _mm256_add_ps(s[0], s[2]);
    let s1 = _mm256_add_ps(s[1], s[3]);
    let s0 = _mm256_add_ps(s0, s1);
    let t0 = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
    let t1 = _mm_hadd_ps(t0, t0);
    _mm_cvtss_f32(_mm_hadd_ps(t1, t1)) as f64
}

// Eight f16 values at p (unaligned) to f32, exactly (the same algorithm as fp16_to_f32).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn f16_load8(p: *const u8) -> __m256 {
    let h = _mm256_cvtepu16_epi32(_mm_loadu_si128(p as *const __m128i));
    let w = _mm256_slli_epi32(h, 16);
    let sign = _mm256_and_si256(w, _mm256_set1_epi32(0x8000_0000u32 as i32));
    let two_w = _mm256_add_epi32(w, w);
    let normalized = _mm256_mul_ps(
        _mm256_castsi256_ps(_mm256_add_epi32(_mm256_srli_epi32(two_w, 4), _mm256_set1_epi32(0xE0 << 23))),
        _mm256_castsi256_ps(_mm256_set1_epi32(0x0780_0000)),
    );
    let denormalized = _mm256_sub_ps(
        _mm256_castsi256_ps(_mm256_or_si256(_mm256_srli_epi32(two_w, 17), _mm256_set1_epi32(126 << 23))),
        _mm256_set1_ps(0.5),
    );
    // two_w < 2^27  <=>  (w & 0x7fffffff) < 2^26 (both sides non-negative as i32).
    let is_den = _mm256_cmpgt_epi32(_mm256_set1_epi32(1 << 26), _mm256_and_si256(w, _mm256_set1_epi32(0x7fff_ffff)));
    let r = _mm256_blendv_ps(normalized, denormalized, _mm256_castsi256_ps(is_den));
    _mm256_or_ps(r, _mm256_castsi256_ps(sign))
}

/// row . x for an F16 row (row.len() = 2 * x.len()); reads x's F16 form. Requires AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
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
