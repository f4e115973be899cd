// AVX2 BF16 dot in the order of ggml's AVX2 ggml_vec_dot_bf16 (weights bf16, activation rounded
// to bf16): four 8-lane accumulators over steps of 32 values (products fused into the adds, as
// GCC contracts ggml's mul+add), combined (1+2, 3+4, then both), reduced to f64, leftovers added
// one by one in f64.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

// Eight bf16 values at p (unaligned) to f32 (exact: a 16-bit shift).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bf16_load8(p: *const u8) -> __m256 {
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(p as *const __m128i)), 16))
}

#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bf16_reduce_add(x: __m256) -> f32 {
    let x128 = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
    let x64 = _mm_add_ps(x128, _mm_movehl_ps(x128, x128));
    let x32 = _mm_add_ss(x64, _mm_shuffle_ps(x64, x64, 0x55));
    _mm_cvtss_f32(x32)
}

/// row . x for a BF16 row (row.len() = 2 * x.len()); reads x's BF16 form. Requires AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_bf16_avx2(row: &[u8], x: &Act) -> f32 {
    let a = &x.bf16[..];
    let n = a.len();
    assert_eq!(row.len(), n * 2, "BF16 row of {} bytes for a BF16 activation of {}", row.len(), n);
    assert_eq!(n, x.f32.len(), "activation lacks its BF16 form");
    let w = row.as_ptr();
    let y = a.as_ptr();
    let mut c = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (j, acc) in c.iter_mut().enumerate() {
            let ax = bf16_load8(w.add(2 * (i + 8 * j)));
            let ay = _mm256_loadu_ps(y.add(i + 8 * j));
            *acc = _mm256_fmadd_ps(ax, ay, *acc);
        }
        i += 32;
    }
    let c1 = _mm256_add_ps(c[0], c[1]);
    let c3 = _mm256_add_ps(c[2], c[3]);
    let mut sum = bf16_reduce_add(_mm256_add_ps(c1, c3)) as f64;
    for k in i..n {
        sum += (bf16_to_f32(u16::from_le_bytes([row[2 * k], row[2 * k + 1]])) * a[k]) as f64;
    }
    sum as f32
}
