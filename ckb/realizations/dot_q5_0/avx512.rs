// AVX-512 VNNI tiled Q5_0 prefill kernel: both rows of a pair in one 512-bit register, so one
// vpdpbusd, one conversion, one scale product and one fma serve two (row, token) pairs, and no
// lane shuffles or stores are left in the loop. The weights are decoded as q + 16 (unsigned, as
// vpdpbusd wants its first operand); the activation's q8_0_neg16 (-16 x each four-quant sum),
// used as the accumulator, makes every i32 lane exactly ggml's signed lane sum, so the scale
// products and the fma chain are those of dot_q5_0_avx2, lane by lane. The gemv's dots are
// avx2.rs's dot_rows_q5_0 with the same VNNI block sums and the high bits set by a mask register.

// q5_0_decode with the high bits from an AVX-512 mask: bit k of qh adds 0x10 to byte k (a nibble,
// so the same as or-ing it) in one masked add, instead of a broadcast, shuffle, or, compare and
// and.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
unsafe fn q5_0_decode_bw(b: &BlockQ5_0) -> __m256i {
    let qx = q5_0_nibbles(b);
    _mm256_mask_add_epi8(qx, u32::from_le_bytes(b.qh), qx, _mm256_set1_epi8(0x10))
}

/// row . x for a Q5_0 row, bitwise dot_q5_0_avx2: the block sums by one VNNI vpdpbusd started
/// from the activation's q8_0_neg16. Requires AVX2, FMA and AVX-512 F + BW + VL + VNNI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn dot_q5_0_avx512(row: &[u8], x: &Act) -> f32 {
    dot_rows_q5_0_avx512([row], x)[0]
}

/// The gemv's four-row form of dot_q5_0_avx512 (`dot_rows4` in the dispatch).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn dot_rows4_q5_0_avx512(rows: [&[u8]; 4], x: &Act) -> [f32; 4] {
    dot_rows_q5_0_avx512(rows, x)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn dot_rows_q5_0_avx512<const N: usize>(rows: [&[u8]; N], x: &Act) -> [f32; N] {
    dot_rows_q5_0(rows, x, |b, qy, n16| unsafe { _mm256_dpbusd_epi32(n16, q5_0_decode_bw(b), qy) })
}

/// Decodes a Q5_0 row pair for dot2x4_q5_0_avx512. Layout: line 2k holds block k's quants + 16
/// (0..=31) of row 0 then row 1, line 2k + 1 the two rows' f32 scales, each eight times (the
/// lanes of line 2k's sums); `d` stays empty. Requires AVX2, FMA and AVX-512 F + BW + VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
pub(crate) unsafe fn decode_q5_0_avx512(rows: [&[u8]; 2], out: &mut DecRows) {
    let (w0, w1) = (q5_0_blocks(rows[0]), q5_0_blocks(rows[1]));
    assert_eq!(w0.len(), w1.len(), "Q5_0 row pair of {} and {} blocks", w0.len(), w1.len());
    out.b.clear();
    out.d.clear();
    for (b0, b1) in w0.iter().zip(w1) {
        let (mut q, mut d) = (DecLine([0; 64]), DecLine([0; 64]));
        _mm256_store_si256(q.0.as_mut_ptr() as *mut __m256i, q5_0_decode_bw(b0));
        _mm256_store_si256(q.0.as_mut_ptr().add(32) as *mut __m256i, q5_0_decode_bw(b1));
        for (half, b) in [b0, b1].into_iter().enumerate() {
            let s = _mm256_set1_ps(fp16_to_f32(u16::from_le_bytes(b.d)));
            _mm256_store_ps(d.0.as_mut_ptr().add(32 * half) as *mut f32, s);
        }
        out.b.extend([q, d]);
    }
}

/// rows[i] . xs[t] for a row pair decoded by decode_q5_0_avx512 and four activations (prefill):
/// per block one 512-bit vpdpbusd per token (lanes 0..8 row 0, 8..16 row 1), started from the
/// token's q8_0_neg16, converted, and accumulated with one fma by d_w * d_x, so result [i][t] is
/// bitwise dot_q5_0_avx2(row i, xs[t]). Requires AVX2, FMA and AVX-512 F + VL + VNNI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl,avx512vnni")]
pub(crate) unsafe fn dot2x4_q5_0_avx512(rows: &DecRows, xs: [&Act; 4]) -> [[f32; 4]; 2] {
    let n = q5_0_tile_blocks(rows, xs, 2, 0);
    let mut acc = [_mm512_setzero_ps(); 4];
    for k in 0..n {
        // SAFETY (indexing): k < n and 2k + 1 < 2n, the lengths of the slices indexed
        // (q5_0_tile_blocks). Aligned loads: a DecLine is 64-byte aligned.
        let u = _mm512_load_si512(rows.b.get_unchecked(2 * k).0.as_ptr() as *const __m512i);
        let wd = _mm512_load_ps(rows.b.get_unchecked(2 * k + 1).0.as_ptr() as *const f32);
        for t in 0..4 {
            let x = xs[t];
            let y = _mm512_broadcast_i64x4(_mm256_loadu_si256(x.q8_0.get_unchecked(k).qs.as_ptr() as *const __m256i));
            let c = _mm512_broadcast_i64x4(_mm256_loadu_si256(x.q8_0_neg16.get_unchecked(k).as_ptr() as *const __m256i));
            let p = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(c, u, y));
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(wd, _mm512_set1_ps(*x.q8_0_d.get_unchecked(k))), p, acc[t]);
        }
    }
    hsum_halves4(acc)
}

// The block count of the 2 x 4 tile over a row pair decoded with `lines` lines and `scales`
// scales per block: asserts the decoded pair and the four activations' Q8_0 forms agree on it.
fn q5_0_tile_blocks(rows: &DecRows, xs: [&Act; 4], lines: usize, scales: usize) -> usize {
    let n = rows.b.len() / lines;
    assert!(rows.b.len() == lines * n && rows.d.len() == scales * n, "decoded Q5_0 row pair of {} lines and {} scales", rows.b.len(), rows.d.len());
    for x in xs {
        let ok = x.q8_0.len() == n && x.q8_0_d.len() == n && x.q8_0_neg16.len() == n && x.f32.len() == 32 * n;
        assert!(ok, "decoded Q5_0 row pair of {n} blocks for an activation of {} values in {} Q8_0 blocks", x.f32.len(), x.q8_0.len());
    }
    n
}
