// AVX-512 VNNI Q8_0 kernels, all in llama.cpp's order (bitwise dot_q8_0_avx2). vpdpbusd takes
// unsigned bytes, so the weights enter as q + 128 (q ^ 0x80) and each lane starts from -128 times
// the activation's four-quant sum (8 x its q8_0_neg16): the lane sums Σ q_w * q_x are the same
// exact integers as ggml's sign trick gives (no saturation either way), with one vpdpbusd and
// an xor instead of two signs, a maddubs and a madd. Prefill: 8 x 4 tiles whose rows are decoded
// (+ 128) once for all tokens, two rows per 512-bit register, each in its own eight lanes, so
// that per block one vpdpbusd, one multiply for d_w * d_x, one conversion and one fma serve two
// (row, token) pairs with the float steps of the one-row dot (dot_q4_1's avx512.rs does the same
// for Q4_1).

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

/// Decodes eight Q8_0 rows for dot8x4_q8_0_avx512. Layout: block k takes lines 4k..4k + 4, line
/// 4k + p holding rows 2p and 2p + 1's 32 quants + 128 (as u8), 32 bytes each; out.d[8k..8k + 8]
/// are the rows' f32 scales of block k. The buffers of `out` are reused. Requires AVX2, FMA and
/// F16C.
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
        for p in 0..4 {
            let line = out.b[4 * k + p].0.as_mut_ptr();
            _mm256_store_si256(line as *mut __m256i, biased(&w[2 * p][k]));
            _mm256_store_si256(line.add(32) as *mut __m256i, biased(&w[2 * p + 1][k]));
        }
        out.d.extend((0..8).map(|r| fp16_to_f32(u16::from_le_bytes(w[r][k].d))));
    }
}

/// rows[r] . xs[t] for eight rows decoded by decode8_q8_0_avx512 and four activations, bitwise
/// dot_q8_0_avx2(rows[r], xs[t]): per block, pair of rows and token, the eight lane sums of each
/// row by one 512-bit vpdpbusd (the token's quants and its -128 * Σ lanes in both halves), acc =
/// fma(d_w * d_x, f32(sums), acc) in the row's eight lanes; then hsum_f32x8 of the row's lanes.
/// Requires AVX2, FMA and AVX-512 F + VL + VNNI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(crate) unsafe fn dot8x4_q8_0_avx512(rows: &DecRows, xs: [&Act; 4]) -> [[f32; 4]; 8] {
    let n = rows.d.len() / 8;
    assert!(rows.b.len() == 4 * n && rows.d.len() == 8 * n, "decoded Q8_0 tile of {} lines and {} scales", rows.b.len(), rows.d.len());
    let ok = |x: &Act| x.q8_0.len() == n && x.q8_0_d.len() == n && x.q8_0_neg16.len() == n && x.f32.len() == 32 * n;
    assert!(xs.iter().all(|x| ok(x)), "decoded Q8_0 tile of {n} blocks for activations of {:?} values", xs.map(|x| x.f32.len()));
    // the scale of row 2p in lanes 0..8 and of row 2p + 1 in lanes 8..16
    let pair = |p: i32| _mm512_setr_epi32(2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1);
    let idx = [pair(0), pair(1), pair(2), pair(3)];
    let mut acc = [[_mm512_setzero_ps(); 4]; 4]; // [pair of rows][token]
    for k in 0..n {
        // SAFETY (indexing): k < n, so lines 4k..4k + 4, scales 8k..8k + 8 and block k of every
        // activation exist (asserted above). Aligned loads: a DecLine is 64-byte aligned.
        let dw = _mm512_castps256_ps512(_mm256_loadu_ps(rows.d.as_ptr().add(8 * k)));
        let bcast = |p: *const i32| unsafe { _mm512_broadcast_i64x4(_mm256_loadu_si256(p as *const __m256i)) };
        let y = xs.map(|x| bcast(x.q8_0.get_unchecked(k).qs.as_ptr() as *const i32));
        let n128 = xs.map(|x| _mm512_slli_epi32::<3>(bcast(x.q8_0_neg16.get_unchecked(k).as_ptr())));
        for p in 0..4 {
            let w = _mm512_load_si512(rows.b.as_ptr().add(4 * k + p) as *const __m512i);
            let dwp = _mm512_permutexvar_ps(idx[p], dw);
            for t in 0..4 {
                let s = _mm512_dpbusd_epi32(n128[t], w, y[t]);
                let dd = _mm512_mul_ps(dwp, _mm512_set1_ps(*xs[t].q8_0_d.get_unchecked(k)));
                acc[p][t] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(s), acc[p][t]);
            }
        }
    }
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
