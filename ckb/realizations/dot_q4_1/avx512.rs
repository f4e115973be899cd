// AVX-512 VNNI Q4_1 kernels, all in llama.cpp's order (bitwise dot_q4_1_avx2, so prefill logits
// stay llama.cpp's, whose prefill of Q4_1 runs its gemv). A block's eight i32 lane sums (lane i:
// the products of values 4i..4i + 4) are one vpdpbusd of the unsigned nibbles by the signed
// quants instead of a maddubs and a madd: the same integers (maddubs cannot saturate here,
// 2 * 15 * 128 < 2^15). Prefill: 8 x 4 tiles whose rows are decoded once for all tokens, two
// rows per 512-bit register, so that per block one vpdpbusd, one multiply for d_w * d_x, one
// conversion and one fma serve two (row, token) pairs in each row's own eight lanes; the min
// term is a lane per row (its fma chain the scalar one of dot, lane for lane). A block order
// instead (exact block sums, one fma per block: dot_q5_0's tiles) moved a SmolLM2 greedy pick
// whose llama.cpp margin is 0.23, above the gate's near tie.

/// row . x for a Q4_1 row, bitwise dot_q4_1_avx2. Requires AVX2, FMA and AVX-512 F + VL + VNNI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(crate) unsafe fn dot_q4_1_avx512(row: &[u8], x: &Act) -> f32 {
    dot_rows_q4_1([row], x, |qx, qy| unsafe { _mm256_dpbusd_epi32(_mm256_setzero_si256(), qx, qy) })[0]
}

/// The gemv's four-row form of dot_q4_1_avx512 (`dot_rows4` in the dispatch).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(crate) unsafe fn dot_rows4_q4_1_avx512(rows: [&[u8]; 4], x: &Act) -> [f32; 4] {
    dot_rows_q4_1(rows, x, |qx, qy| unsafe { _mm256_dpbusd_epi32(_mm256_setzero_si256(), qx, qy) })
}

/// Decodes eight Q4_1 rows for dot8x4_q4_1_avx512: block k's nibbles (0..=15, as bytes in value
/// order) in lines 4k..4k + 4 as pair_lines8 lays them out; out.d[16k..16k + 8] are the rows' f32
/// scales of block k, out.d[16k + 8..16k + 16] their mins. The buffers of `out` are reused.
/// Requires AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn decode8_q4_1_avx512(rows: [&[u8]; 8], out: &mut DecRows) {
    let w = rows.map(q4_1_blocks);
    let n = w[0].len();
    assert!(w.iter().all(|r| r.len() == n), "Q4_1 tile rows of {:?} blocks", w.map(|r| r.len()));
    // every line of a block is written below: the buffer is only sized (once per matrix shape)
    out.b.resize(4 * n, DecLine([0; 64]));
    out.d.clear();
    let f = |h: [u8; 2]| fp16_to_f32(u16::from_le_bytes(h));
    for k in 0..n {
        pair_lines8(w.map(|r| unsafe { q4_1_nibbles(&r[k]) }), &mut out.b[4 * k..]);
        out.d.extend((0..8).map(|r| f(w[r][k].d)));
        out.d.extend((0..8).map(|r| f(w[r][k].m)));
    }
}

/// rows[r] . xs[t] for eight rows decoded by decode8_q4_1_avx512 and four activations, bitwise
/// dot_q4_1_avx2(rows[r], xs[t]): dot8x4_pairs_avx512 with lanes from zero, plus per block
/// summs = fma(m_w, s_x, summs) in the row's lane, added to the row's hsum. Requires AVX2, FMA and
/// AVX-512 F + VL + VNNI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(crate) unsafe fn dot8x4_q4_1_avx512(rows: &DecRows, xs: [&Act; 4]) -> [[f32; 4]; 8] {
    let n = rows.b.len() / 4;
    assert!(xs.iter().all(|x| x.q8_0_s.len() == n), "decoded Q4_1 tile of {n} blocks for activations of {:?} values", xs.map(|x| x.f32.len()));
    let mut summs = [_mm256_setzero_ps(); 4]; // [token], lane r: row r
    let min_term = |k: usize| {
        // SAFETY (indexing): dot8x4_pairs_avx512 asserts n blocks of scales and mins (16 per
        // block), k < n, and q8_0_s has n sums (asserted above).
        let mw = unsafe { _mm256_loadu_ps(rows.d.as_ptr().add(16 * k + 8)) };
        for t in 0..4 {
            summs[t] = unsafe { _mm256_fmadd_ps(mw, _mm256_set1_ps(*xs[t].q8_0_s.get_unchecked(k)), summs[t]) };
        }
    };
    let dots = dot8x4_pairs_avx512(&rows.b, &rows.d, 16, xs, |_, _| _mm512_setzero_si512(), min_term);
    let mut m = [[0f32; 8]; 4]; // [token][row]
    for t in 0..4 {
        _mm256_storeu_ps(m[t].as_mut_ptr(), summs[t]);
    }
    std::array::from_fn(|r| std::array::from_fn(|t| dots[r][t] + m[t][r]))
}
