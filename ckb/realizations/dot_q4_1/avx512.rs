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

/// Decodes eight Q4_1 rows for dot8x4_q4_1_avx512. Layout: block k takes lines 4k..4k + 4, line
/// 4k + p holding rows 2p and 2p + 1's 32 nibbles (0..=15) as bytes in value order, 32 bytes
/// each; out.d[16k..16k + 8] are the rows' f32 scales of block k, out.d[16k + 8..16k + 16] their
/// mins. The buffers of `out` are reused. Requires AVX2, FMA and F16C.
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
        for p in 0..4 {
            let line = out.b[4 * k + p].0.as_mut_ptr();
            _mm256_store_si256(line as *mut __m256i, q4_1_nibbles(&w[2 * p][k]));
            _mm256_store_si256(line.add(32) as *mut __m256i, q4_1_nibbles(&w[2 * p + 1][k]));
        }
        out.d.extend((0..8).map(|r| f(w[r][k].d)));
        out.d.extend((0..8).map(|r| f(w[r][k].m)));
    }
}

/// rows[r] . xs[t] for eight rows decoded by decode8_q4_1_avx512 and four activations, bitwise
/// dot_q4_1_avx2(rows[r], xs[t]): per block, pair of rows and token, the eight lane sums of each
/// row by one 512-bit vpdpbusd (the token's quants in both halves), acc = fma(d_w * d_x, f32(sums),
/// acc) in the row's eight lanes, summs = fma(m_w, s_x, summs) in its lane; then hsum_f32x8 of the
/// row's lanes + summs. Requires AVX2, FMA and AVX-512 F + VL + VNNI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(crate) unsafe fn dot8x4_q4_1_avx512(rows: &DecRows, xs: [&Act; 4]) -> [[f32; 4]; 8] {
    let n = rows.d.len() / 16;
    assert!(rows.b.len() == 4 * n && rows.d.len() == 16 * n, "decoded Q4_1 tile of {} lines and {} scales", rows.b.len(), rows.d.len());
    let ok = |x: &Act| x.q8_0.len() == n && x.q8_0_d.len() == n && x.q8_0_s.len() == n && x.f32.len() == 32 * n;
    assert!(xs.iter().all(|x| ok(x)), "decoded Q4_1 tile of {n} blocks for activations of {:?} values", xs.map(|x| x.f32.len()));
    // the scale of row 2p in lanes 0..8 and of row 2p + 1 in lanes 8..16
    let pair = |p: i32| _mm512_setr_epi32(2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1);
    let idx = [pair(0), pair(1), pair(2), pair(3)];
    let mut acc = [[_mm512_setzero_ps(); 4]; 4]; // [pair of rows][token]
    let mut summs = [_mm256_setzero_ps(); 4]; // [token], lane r: row r
    for k in 0..n {
        // SAFETY (indexing): k < n, so lines 4k..4k + 4, scales and mins 16k..16k + 16 and block
        // k of every activation exist (asserted above). Aligned loads: a DecLine is 64-byte aligned.
        let dw = _mm512_castps256_ps512(_mm256_loadu_ps(rows.d.as_ptr().add(16 * k)));
        let mw = _mm256_loadu_ps(rows.d.as_ptr().add(16 * k + 8));
        let y = xs.map(|x| unsafe { _mm512_broadcast_i64x4(_mm256_loadu_si256(x.q8_0.get_unchecked(k).qs.as_ptr() as *const __m256i)) });
        for t in 0..4 {
            summs[t] = _mm256_fmadd_ps(mw, _mm256_set1_ps(*xs[t].q8_0_s.get_unchecked(k)), summs[t]);
        }
        for p in 0..4 {
            let w = _mm512_load_si512(rows.b.as_ptr().add(4 * k + p) as *const __m512i);
            let dwp = _mm512_permutexvar_ps(idx[p], dw);
            for t in 0..4 {
                let s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, y[t]);
                let dd = _mm512_mul_ps(dwp, _mm512_set1_ps(*xs[t].q8_0_d.get_unchecked(k)));
                acc[p][t] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(s), acc[p][t]);
            }
        }
    }
    let mut m = [[0f32; 8]; 4]; // [token][row]
    for t in 0..4 {
        _mm256_storeu_ps(m[t].as_mut_ptr(), summs[t]);
    }
    let mut out = [[0f32; 4]; 8];
    for p in 0..4 {
        for t in 0..4 {
            let (lo, hi) = (_mm512_castps512_ps256(acc[p][t]), _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(acc[p][t]))));
            out[2 * p][t] = hsum_f32x8(lo) + m[t][2 * p];
            out[2 * p + 1][t] = hsum_f32x8(hi) + m[t][2 * p + 1];
        }
    }
    out
}
