// The tile product with AVX2 and FMA; the rest of `flash` is the lane code compiled with AVX2 and
// FMA enabled (vectorized 8-wide), the f16 conversions vec_ops' F16C ones.

// A rows by 16 lanes (two registers) of the tile product: acc += b · m[k] by fma, k in order.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn mac_tile_avx2<const A: usize>(c: *mut f32, m: *const f32, rp: usize, b: *const f32, (sa, sk): (usize, usize), nk: usize) {
    use std::arch::x86_64::*;
    let mut acc: [[__m256; 2]; A] = std::array::from_fn(|a| [_mm256_loadu_ps(c.add(a * rp)), _mm256_loadu_ps(c.add(a * rp + 8))]);
    for k in 0..nk {
        let mk = [_mm256_loadu_ps(m.add(k * rp)), _mm256_loadu_ps(m.add(k * rp + 8))];
        for (a, acc) in acc.iter_mut().enumerate() {
            let bv = _mm256_broadcast_ss(&*b.add(a * sa + k * sk));
            acc.iter_mut().zip(mk).for_each(|(s, x)| *s = _mm256_fmadd_ps(bv, x, *s));
        }
    }
    for (a, acc) in acc.iter().enumerate() {
        acc.iter().enumerate().for_each(|(z, v)| _mm256_storeu_ps(c.add(a * rp + 8 * z), *v));
    }
}

/// `mac_lanes` with its bits: four rows by 16 lanes at a time, the rest one by one (mac_tiles).
fn mac_avx2(c: &mut [f32], m: &[f32], rp: usize, arows: std::ops::Range<usize>, b: &[f32], s: (usize, usize), nk: usize) {
    // SAFETY: check_cpu() verified AVX2 and FMA when the engine loaded; mac_tile_avx2 reads and
    // writes 16 lanes of its A rows of c and of m's rows k < nk, and b at a * sa + k * sk.
    unsafe { mac_tiles(16, (mac_tile_avx2::<4>, mac_tile_avx2::<1>), c, m, rp, arows, b, s, nk) }
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn attend_flash_avx2(q: &[f32], hd: usize, spans: &[std::ops::Range<usize>], kv: (&[rt::half::f16], &[rt::half::f16]), out: &mut [f32]) {
    flash(q, hd, spans, kv, (widen_f16, round_f16), (mac_avx2, 16), out)
}

/// A tile of one kv head's queries over their spans in blocks with an online softmax (`flash`):
/// `q` `[spans.len()][g][hd]`, token t's g queries over rows `spans[t]` of `kv`.
pub(crate) fn attend_flash(q: &[f32], hd: usize, spans: &[std::ops::Range<usize>], kv: (&[rt::half::f16], &[rt::half::f16]), out: &mut [f32]) {
    // SAFETY: check_cpu() verified the target's instruction sets when the engine loaded.
    unsafe { attend_flash_avx2(q, hd, spans, kv, out) }
}
