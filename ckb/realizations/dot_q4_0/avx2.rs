// AVX2 Q4_0 x Q8_0 dot, the operation order of ggml's AVX2 ggml_vec_dot_q4_0_q8_0: nibbles are
// spread to 32 bytes (low nibbles = values 0..16, high = 16..32), 8 subtracted, multiplied with
// the Q8_0 quants into eight i32 lane sums, converted to f32 and accumulated with one fma by
// d_w*d_x; the eight lanes are reduced at the end. Eight blocks per step share one vectorized
// conversion of their f16 scales.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

// 16 bytes of nibbles -> 32 bytes: low nibbles in bytes 0..16, high nibbles in bytes 16..32.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_0_bytes_from_nibbles_32(p: *const u8) -> __m256i {
    let tmp = _mm_loadu_si128(p as *const __m128i);
    let bytes = _mm256_set_m128i(_mm_srli_epi16(tmp, 4), tmp);
    _mm256_and_si256(_mm256_set1_epi8(0x0F), bytes)
}

// acc + d * (the eight i32 lane sums of block b . block y, as f32).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_0_step(acc: __m256, d: __m256, b: &BlockQ4_0, y: &BlockQ8_0) -> __m256 {
    let qx = _mm256_sub_epi8(q4_0_bytes_from_nibbles_32(b.qs.as_ptr()), _mm256_set1_epi8(8));
    let qy = _mm256_loadu_si256(y.qs.as_ptr() as *const __m256i);
    _mm256_fmadd_ps(d, mul_sum_i8_pairs_float(qx, qy), acc)
}

/// row . x for a Q4_0 row; reads x's Q8_0 form. Requires AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q4_0_avx2(row: &[u8], x: &Act) -> f32 {
    let w = q4_0_blocks(row);
    let a = &x.q8_0[..];
    let ad = &x.q8_0_d[..];
    assert_eq!(w.len(), a.len(), "Q4_0 row of {} blocks for a Q8_0 activation of {} blocks", w.len(), a.len());
    assert!(a.len() * 32 == x.f32.len() && ad.len() == a.len(), "activation lacks its Q8_0 form");
    let mut acc = _mm256_setzero_ps();
    // Eight blocks per step: their eight scale products are formed at once, then each block's
    // product is broadcast from its lane; the fma chain is in block order.
    for ((wb, ab), adb) in w.chunks(8).zip(a.chunks(8)).zip(ad.chunks(8)) {
        let dd = _mm256_mul_ps(f16x8_scales(wb.len(), |k| wb[k].d), f32x8_head(adb));
        if let (Ok(wb), Ok(ab)) = (<&[BlockQ4_0; 8]>::try_from(wb), <&[BlockQ8_0; 8]>::try_from(ab)) {
            // Full group: written out, with constant lane indices.
            acc = q4_0_step(acc, _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(0)), &wb[0], &ab[0]);
            acc = q4_0_step(acc, _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(1)), &wb[1], &ab[1]);
            acc = q4_0_step(acc, _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(2)), &wb[2], &ab[2]);
            acc = q4_0_step(acc, _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(3)), &wb[3], &ab[3]);
            acc = q4_0_step(acc, _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(4)), &wb[4], &ab[4]);
            acc = q4_0_step(acc, _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(5)), &wb[5], &ab[5]);
            acc = q4_0_step(acc, _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(6)), &wb[6], &ab[6]);
            acc = q4_0_step(acc, _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(7)), &wb[7], &ab[7]);
        } else {
            for (k, (b, y)) in wb.iter().zip(ab).enumerate() {
                acc = q4_0_step(acc, _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(k as i32)), b, y);
            }
        }
    }
    hsum_f32x8(acc)
}
