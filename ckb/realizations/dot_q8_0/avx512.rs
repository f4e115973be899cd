// AVX-512 VNNI Q8_0 kernels, all in llama.cpp's order (bitwise dot_q8_0_avx2). vpdpbusd takes
// unsigned bytes, so the weights enter as q + 128 (q ^ 0x80) and each lane starts from -128 times
// the activation's four-quant sum (8 x its q8_0_neg16): the lane sums Σ q_w * q_x are the same
// exact integers as ggml's sign trick gives (no saturation either way), with one vpdpbusd and
// an xor instead of two signs, a maddubs and a madd. Prefill: 8 x 4 tiles whose rows are decoded
// (+ 128) once for all tokens, two rows per 512-bit register, each in its own eight lanes, so
// that per block one vpdpbusd, one multiply for d_w * d_x, one conversion and one fma serve two
// (row, token) pairs with the float steps of the one-row dot: the loop is simd_avx2's
// dot8x4_pairs_avx512 (avx512.rs), which dot_q4_1's tile shares.

/// row . x for a Q8_0 row, bitwise dot_q8_0_avx2. Requires AVX2, FMA and AVX-512 F + VL + VNNI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(crate) unsafe fn dot_q8_0_avx512(row: &[u8], x: &Act) -> f32 {
    // SAFETY (indexing): dot_rows_q8_0 asserts q8_0_neg16 has a lane set per block
    dot_rows_q8_0([row], x, |qx, qy, i| unsafe { q8_0_sums_vnni(qx, qy, x.q8_0_neg16.get_unchecked(i)) })[0]
}

/// The gemv's four-row form of dot_q8_0_avx512 (`dot_rows4` in the dispatch).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(crate) unsafe fn dot_rows4_q8_0_avx512(rows: [&[u8]; 4], x: &Act) -> [f32; 4] {
    // SAFETY (indexing): dot_rows_q8_0 asserts q8_0_neg16 has a lane set per block
    dot_rows_q8_0(rows, x, |qx, qy, i| unsafe { q8_0_sums_vnni(qx, qy, x.q8_0_neg16.get_unchecked(i)) })
}

// The eight lane sums Σ qx * qy of a block (lane i: values 4i..4i + 4) as f32: (qx + 128) . qy
// by vpdpbusd started from -128 * Σ qy (8 x the activation's q8_0_neg16 lanes).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
unsafe fn q8_0_sums_vnni(qx: __m256i, qy: __m256i, n16: &[i32; 8]) -> __m256 {
    let n128 = _mm256_slli_epi32::<3>(_mm256_loadu_si256(n16.as_ptr() as *const __m256i));
    _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(n128, _mm256_xor_si256(qx, _mm256_set1_epi8(-128)), qy))
}

/// Decodes eight Q8_0 rows for dot8x4_q8_0_avx512: block k's quants + 128 (as u8) in lines
/// 4k..4k + 4 as pair_lines8 lays them out; out.d[8k..8k + 8] are the rows' f32 scales of block
/// k. The buffers of `out` are reused. Requires AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn decode8_q8_0_avx512(rows: [&[u8]; 8], out: &mut DecRows) {
    let w = rows.map(q8_0_blocks);
    let n = w[0].len();
    assert!(w.iter().all(|r| r.len() == n), "Q8_0 tile rows of {:?} blocks", w.map(|r| r.len()));
    // every line of a block is written below: the buffer is only sized (once per matrix shape)
    out.b.resize(4 * n, DecLine([0; 64]));
    out.d.clear();
    let biased = |b: &BlockQ8_0W| unsafe { _mm256_xor_si256(_mm256_loadu_si256(b.qs.as_ptr() as *const __m256i), _mm256_set1_epi8(-128)) };
    for k in 0..n {
        pair_lines8(w.map(|r| biased(&r[k])), &mut out.b[4 * k..]);
        out.d.extend((0..8).map(|r| fp16_to_f32(u16::from_le_bytes(w[r][k].d))));
    }
}

/// rows[r] . xs[t] for eight rows decoded by decode8_q8_0_avx512 and four activations, bitwise
/// dot_q8_0_avx2(rows[r], xs[t]): dot8x4_pairs_avx512 with each token's lanes started from -128 *
/// its four-quant sums (8 x q8_0_neg16, in both halves). Requires AVX2, FMA and AVX-512 F + VL +
/// VNNI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(crate) unsafe fn dot8x4_q8_0_avx512(rows: &DecRows, xs: [&Act; 4]) -> [[f32; 4]; 8] {
    let n = rows.b.len() / 4;
    assert!(xs.iter().all(|x| x.q8_0_neg16.len() == n), "decoded Q8_0 tile of {n} blocks for activations of {:?} values", xs.map(|x| x.f32.len()));
    // SAFETY (indexing): k < n blocks (dot8x4_pairs_avx512 calls it so), q8_0_neg16 has n (above)
    let start = |t: usize, k: usize| unsafe {
        let n16 = xs[t].q8_0_neg16.get_unchecked(k).as_ptr() as *const __m256i;
        _mm512_slli_epi32::<3>(_mm512_broadcast_i64x4(_mm256_loadu_si256(n16)))
    };
    dot8x4_pairs_avx512(&rows.b, &rows.d, 8, xs, start, |_| {})
}
