// AVX2 Q4_1 x Q8_0 dot: nibbles are spread to 32 bytes (low nibbles = values 0..16, high =
// 16..32) and, being unsigned, multiplied directly with the signed Q8_0 quants (maddubs, then
// madd into eight i32 lane sums; no sign trick and no offset needed, |pair| <= 2*15*127),
// converted to f32 and accumulated with one fma by d_w*d_x, even and odd blocks into two
// accumulators. The min term needs no per-block work: for eight blocks at once, their f16 mins
// times the activation's block sums (Act.q8_0_s) go into a third accumulator with one fma. A
// row's last n % 8 blocks take scalar scales instead of a partial gather. Measured (64 rows,
// best of 7, /tmp harness include!-ing this file): 576 columns 39.5-40.9 ns/row against 59-71
// for one accumulator with partial gathers; 1536 columns 90.8 against 95-100.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

// acc + d * (the eight i32 lane sums of nibbles(b) . block y, as f32).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn q4_1_step(acc: __m256, d: __m256, b: &BlockQ4_1, y: &BlockQ8_0) -> __m256 {
    let tmp = _mm_loadu_si128(b.qs.as_ptr() as *const __m128i);
    let qx = _mm256_and_si256(
        _mm256_set1_epi8(0x0F),
        _mm256_set_m128i(_mm_srli_epi16(tmp, 4), tmp),
    );
    let qy = _mm256_loadu_si256(y.qs.as_ptr() as *const __m256i);
    let p = _mm256_madd_epi16(_mm256_set1_epi16(1), _mm256_maddubs_epi16(qx, qy));
    _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc)
}

/// row . x for a Q4_1 row; reads x's Q8_0 form and its block sums (q8_0_s). Requires AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot_q4_1_avx2(row: &[u8], x: &Act) -> f32 {
    let w = q4_1_blocks(row);
    let a = &x.q8_0[..];
    let ad = &x.q8_0_d[..];
    let sx = &x.q8_0_s[..];
    let n = w.len();
    assert_eq!(
        n,
        a.len(),
        "Q4_1 row of {n} blocks for a Q8_0 activation of {} blocks",
        a.len()
    );
    assert!(
        a.len() * 32 == x.f32.len() && ad.len() == n && sx.len() == n,
        "activation lacks its Q8_0 form"
    );
    // Two accumulators (even and odd blocks) so that consecutive fmas do not wait on each other.
    let (mut acc0, mut acc1, mut acc_m) = (
        _mm256_setzero_ps(),
        _mm256_setzero_ps(),
        _mm256_setzero_ps(),
    );
    let lane = |dd: __m256, k: i32| _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(k));
    let full = n / 8 * 8;
    for g in (0..full).step_by(8) {
        // Eight blocks per step: their eight scale products are formed at once, then each
        // block's product is broadcast from its lane; the eight min terms are one fma.
        let (wb, ab) = (&w[g..g + 8], &a[g..g + 8]);
        let dd = _mm256_mul_ps(
            f16x8_scales(8, |k| wb[k].d),
            _mm256_loadu_ps(ad[g..g + 8].as_ptr()),
        );
        acc_m = _mm256_fmadd_ps(
            f16x8_scales(8, |k| wb[k].m),
            _mm256_loadu_ps(sx[g..g + 8].as_ptr()),
            acc_m,
        );
        acc0 = q4_1_step(acc0, lane(dd, 0), &wb[0], &ab[0]);
        acc1 = q4_1_step(acc1, lane(dd, 1), &wb[1], &ab[1]);
        acc0 = q4_1_step(acc0, lane(dd, 2), &wb[2], &ab[2]);
        acc1 = q4_1_step(acc1, lane(dd, 3), &wb[3], &ab[3]);
        acc0 = q4_1_step(acc0, lane(dd, 4), &wb[4], &ab[4]);
        acc1 = q4_1_step(acc1, lane(dd, 5), &wb[5], &ab[5]);
        acc0 = q4_1_step(acc0, lane(dd, 6), &wb[6], &ab[6]);
        acc1 = q4_1_step(acc1, lane(dd, 7), &wb[7], &ab[7]);
    }
    // The last n % 8 blocks (two of a 576-column row): one scalar scale each, which is cheaper
    // than gathering a partial group of eight.
    let mut summs = 0.0f32;
    for i in full..n {
        summs += fp16_to_f32(u16::from_le_bytes(w[i].m)) * sx[i];
        let d = fp16_to_f32(u16::from_le_bytes(w[i].d)) * ad[i];
        acc0 = q4_1_step(acc0, _mm256_set1_ps(d), &w[i], &a[i]);
    }
    hsum_f32x8(_mm256_add_ps(_mm256_add_ps(acc0, acc1), acc_m)) + summs
}
