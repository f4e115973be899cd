// AVX2 AWQ_INT4 x Q8_0 dot, in the scalar kernel's operation order per run of 32: the run's 16
// bytes of nibbles are spread to 32 bytes (low = values 0..16, high = 16..32), the block's zero
// point subtracted, multiplied with the Q8_0 quants into eight i32 lane sums, converted to f32
// and accumulated with one fma by d_w * d_x; the lanes are reduced at the end.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// row . x for an AWQ_INT4 row; reads x's Q8_0 form. Requires AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_awq_int4_avx2(row: &[u8], x: &Act) -> f32 {
    let w = awq_int4_blocks(row);
    let a = &x.q8_0[..];
    let ad = &x.q8_0_d[..];
    assert_eq!(w.len() * 4, a.len(), "AWQ_INT4 row of {} blocks for a Q8_0 activation of {} blocks", w.len(), a.len());
    assert!(a.len() * 32 == x.f32.len() && ad.len() == a.len(), "activation lacks its Q8_0 form");
    let low = _mm256_set1_epi8(0x0F);
    let mut acc = _mm256_setzero_ps();
    for ((b, ys), ds) in w.iter().zip(a.chunks_exact(4)).zip(ad.chunks_exact(4)) {
        let dw = fp16_to_f32(u16::from_le_bytes(b.d));
        let z = _mm256_set1_epi8(awq_int4_zero(b));
        for k in 0..4 {
            let tmp = _mm_loadu_si128(b.qs.as_ptr().add(16 * k) as *const __m128i);
            let nib = _mm256_and_si256(low, _mm256_set_m128i(_mm_srli_epi16(tmp, 4), tmp));
            let qw = _mm256_sub_epi8(nib, z);
            let qy = _mm256_loadu_si256(ys[k].qs.as_ptr() as *const __m256i);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(dw * ds[k]), mul_sum_i8_pairs_float(qw, qy), acc);
        }
    }
    hsum_f32x8(acc)
}
