// The tile product with AVX-512; the rest of `flash` is the lane code compiled with AVX-512
// enabled (vectorized 16-wide), the f16 conversions vec_ops' F16C ones.

// A rows by 32 lanes (two registers) of the tile product: acc += b · m[k] by fma, k in order.
#[target_feature(enable = "avx512f")]
unsafe fn mac_tile_avx512<const A: usize>(c: *mut f32, m: *const f32, rp: usize, b: *const f32, (sa, sk): (usize, usize), nk: usize) {
    use std::arch::x86_64::*;
    let mut acc: [[__m512; 2]; A] = std::array::from_fn(|a| [_mm512_loadu_ps(c.add(a * rp)), _mm512_loadu_ps(c.add(a * rp + 16))]);
    for k in 0..nk {
        let mk = [_mm512_loadu_ps(m.add(k * rp)), _mm512_loadu_ps(m.add(k * rp + 16))];
        for (a, acc) in acc.iter_mut().enumerate() {
            let bv = _mm512_set1_ps(*b.add(a * sa + k * sk));
            acc.iter_mut().zip(mk).for_each(|(s, x)| *s = _mm512_fmadd_ps(bv, x, *s));
        }
    }
    for (a, acc) in acc.iter().enumerate() {
        acc.iter().enumerate().for_each(|(z, v)| _mm512_storeu_ps(c.add(a * rp + 16 * z), *v));
    }
}

/// `mac_lanes` with its bits: four rows by 32 lanes at a time (mac_tile_avx512), the rows past the
/// last group of four one by one.
fn mac_avx512(c: &mut [f32], m: &[f32], rp: usize, arows: std::ops::Range<usize>, b: &[f32], (sa, sk): (usize, usize), nk: usize) {
    assert!(rp % 32 == 0 && c.len() >= arows.end * rp && m.len() >= nk * rp && (arows.is_empty() || nk == 0 || (arows.end - 1) * sa + (nk - 1) * sk < b.len()), "a tile product of rows {arows:?} x {rp} lanes x {nk} out of its slices");
    let a1 = arows.start + arows.len() / 4 * 4;
    for (a0, na) in (arows.start..a1).step_by(4).map(|a| (a, 4)).chain((a1..arows.end).map(|a| (a, 1))) {
        for r0 in (0..rp).step_by(32) {
            let (c, m, b) = (c[a0 * rp + r0..].as_mut_ptr(), m[r0..].as_ptr(), b[a0 * sa..].as_ptr());
            // SAFETY: check_cpu() verified the target's instruction sets when the engine loaded;
            // the loads and stores are of 16 lanes at r0 + 16z < rp in rows a0.. < arows.end of `c`
            // and rows k < nk of `m`, the broadcasts at (a0 + a) * sa + k * sk < b.len() (all
            // checked above).
            unsafe { if na == 4 { mac_tile_avx512::<4>(c, m, rp, b, (sa, sk), nk) } else { mac_tile_avx512::<1>(c, m, rp, b, (sa, sk), nk) } }
        }
    }
}

#[target_feature(enable = "avx512f,avx2,fma,f16c")]
unsafe fn attend_flash_avx512(q: &[f32], hd: usize, spans: &[std::ops::Range<usize>], kv: (&[rt::half::f16], &[rt::half::f16]), out: &mut [f32]) {
    flash(q, hd, spans, kv, (widen_f16, round_f16), (mac_avx512, 32), out)
}

/// A tile of one kv head's queries over their spans in blocks with an online softmax (`flash`):
/// `q` `[spans.len()][g][hd]`, token t's g queries over rows `spans[t]` of `kv`.
pub(crate) fn attend_flash(q: &[f32], hd: usize, spans: &[std::ops::Range<usize>], kv: (&[rt::half::f16], &[rt::half::f16]), out: &mut [f32]) {
    // SAFETY: check_cpu() verified the target's instruction sets when the engine loaded.
    unsafe { attend_flash_avx512(q, hd, spans, kv, out) }
}
