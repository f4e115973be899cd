// AVX-512 VNNI helpers of the 8 x 4 tiles in llama.cpp's order (Q4_1 and Q8_0): a tile's eight
// rows laid out two per 64-byte line, and the loop that dots them with four tokens, two (row,
// token) pairs per 512-bit register, each row in its own eight lanes.

/// A block's 32 bytes of eight rows (q[r]) as four lines: line p holds rows 2p and 2p + 1, 32
/// bytes each. Requires four lines in `out`.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn pair_lines8(q: [__m256i; 8], out: &mut [DecLine]) {
    for (p, line) in out[..4].iter_mut().enumerate() {
        let line = line.0.as_mut_ptr();
        _mm256_store_si256(line as *mut __m256i, q[2 * p]);
        _mm256_store_si256(line.add(32) as *mut __m256i, q[2 * p + 1]);
    }
}

/// out[r][t] = hsum_f32x8 of Σ_k d_w[r] * d_x[t] * f32(lanes) for the eight rows of a tile laid
/// out by pair_lines8 (block k: lines[4k..4k + 4]; the rows' f32 scales at d[stride * k..+ 8])
/// and four activations, where a block's lanes are vpdpbusd(start(t, k), row's bytes, token's
/// quants): per block, pair of rows and token, one vpdpbusd, one multiply, one conversion and
/// one fma in llama.cpp's order (acc = fma(d_w * d_x, f32(sums), acc)), the float steps of its
/// one-row dot. `each_block(k)` runs once per block (a kernel's own lanes, Q4_1's min term).
/// Requires AVX2, FMA and AVX-512 F + VL + VNNI; panics unless the lines, scales and
/// activations have the same number of blocks.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(crate) unsafe fn dot8x4_pairs_avx512(lines: &[DecLine], d: &[f32], stride: usize, xs: [&Act; 4], start: impl Fn(usize, usize) -> __m512i, mut each_block: impl FnMut(usize)) -> [[f32; 4]; 8] {
    let n = lines.len() / 4;
    assert!(lines.len() == 4 * n && d.len() == stride * n && stride >= 8, "8-row tile of {} lines and {} scales", lines.len(), d.len());
    let ok = |x: &Act| x.q8_0.len() == n && x.q8_0_d.len() == n && x.f32.len() == 32 * n;
    assert!(xs.iter().all(|x| ok(x)), "8-row tile of {n} blocks for activations of {:?} values", xs.map(|x| x.f32.len()));
    // the scale of row 2p in lanes 0..8 and of row 2p + 1 in lanes 8..16
    let idx = [0, 2, 4, 6].map(|a: i32| unsafe { _mm512_setr_epi32(a, a, a, a, a, a, a, a, a + 1, a + 1, a + 1, a + 1, a + 1, a + 1, a + 1, a + 1) });
    let mut acc = [[_mm512_setzero_ps(); 4]; 4]; // [pair of rows][token]
    for k in 0..n {
        // SAFETY (indexing): k < n, so lines 4k..4k + 4, scales stride * k..+ 8 and block k of
        // every activation exist (asserted above). Aligned loads: a DecLine is 64-byte aligned.
        let dw = _mm512_castps256_ps512(_mm256_loadu_ps(d.as_ptr().add(stride * k)));
        let y = xs.map(|x| unsafe { _mm512_broadcast_i64x4(_mm256_loadu_si256(x.q8_0.get_unchecked(k).qs.as_ptr() as *const __m256i)) });
        let s0 = [start(0, k), start(1, k), start(2, k), start(3, k)];
        each_block(k);
        for p in 0..4 {
            let w = _mm512_load_si512(lines.as_ptr().add(4 * k + p) as *const __m512i);
            let dwp = _mm512_permutexvar_ps(idx[p], dw);
            for t in 0..4 {
                let s = _mm512_dpbusd_epi32(s0[t], w, y[t]);
                let dd = _mm512_mul_ps(dwp, _mm512_set1_ps(*xs[t].q8_0_d.get_unchecked(k)));
                acc[p][t] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(s), acc[p][t]);
            }
        }
    }
    // row 2p in the low half of acc[p][t], row 2p + 1 in the high half (plain loops: a closure
    // here, compiled without the target features, kept acc in memory through the loop above)
    let mut out = [[0f32; 4]; 8];
    for p in 0..4 {
        for t in 0..4 {
            let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(acc[p][t])));
            out[2 * p][t] = hsum_f32x8(_mm512_castps512_ps256(acc[p][t]));
            out[2 * p + 1][t] = hsum_f32x8(hi);
        }
    }
    out
}
