// AVX-512 tiled Q6_K prefill kernel: both rows of a pair in one 512-bit register (lanes 0..8 row
// 0, 8..16 row 1, each half ggml's AVX2 lane split), the pair's 6-bit quants and i16 scale
// vectors decoded once for all tokens. Per (row pair, token, super-block): eight maddubs +
// vpdpwssd (the exact i32 lane sums of dot_q6_k_avx2), the -32 offset as 32 * (bsums . scales),
// one conversion and one fma by d_x * d_w, so each (row, token) result is bitwise
// dot_q6_k_avx2. The single-row dot and the quant rebuilding come from avx2.rs.

// Lines of one decoded super-block of a row pair.
const Q6_K_DEC_LINES: usize = 18;

/// Decodes a Q6_K row pair for dot2x4_q6_k_avx512. Layout: super-block b is lines 18b..18b + 18,
/// each [row 0 | row 1] in 32-byte halves: lines 0..8 the unsigned quants of values 32k..32k + 32
/// (q6_k_quants), 8..16 their scales as 16 x i16 (q6_k_scale_pair), 16 the sixteen scales as
/// i16 (for the bsums term), 17 the f32 super-block scale eight times; `d` stays empty.
/// Requires AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn decode_q6_k_avx512(rows: [&[u8]; 2], out: &mut DecRows) {
    let (w0, w1) = (q6_k_blocks(rows[0]), q6_k_blocks(rows[1]));
    assert_eq!(w0.len(), w1.len(), "Q6_K row pair of {} and {} blocks", w0.len(), w1.len());
    out.b.resize(Q6_K_DEC_LINES * w0.len(), DecLine([0; 64]));
    out.d.clear();
    for (lines, (b0, b1)) in out.b.chunks_exact_mut(Q6_K_DEC_LINES).zip(w0.iter().zip(w1)) {
        for (half, b) in [b0, b1].into_iter().enumerate() {
            let scales = _mm_loadu_si128(b.scales.as_ptr() as *const __m128i);
            let mut v = [_mm256_setzero_si256(); Q6_K_DEC_LINES];
            for k in 0..8 {
                v[k] = q6_k_quants(b, k);
                v[8 + k] = q6_k_scale_pair(scales, k as i64);
            }
            v[16] = _mm256_cvtepi8_epi16(scales);
            v[17] = _mm256_castps_si256(_mm256_set1_ps(fp16_to_f32(u16::from_le_bytes(b.d))));
            for (line, v) in lines.iter_mut().zip(v) {
                _mm256_store_si256(line.0.as_mut_ptr().add(32 * half) as *mut __m256i, v);
            }
        }
    }
}

/// rows[i] . xs[t] for a row pair decoded by decode_q6_k_avx512 and four activations (prefill):
/// result [i][t] is bitwise dot_q6_k_avx2(row i, xs[t]). Requires AVX2, FMA and AVX-512 F + BW +
/// VL + VNNI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn dot2x4_q6_k_avx512(rows: &DecRows, xs: [&Act; 4]) -> [[f32; 4]; 2] {
    let n = rows.b.len() / Q6_K_DEC_LINES;
    assert_eq!(rows.b.len(), Q6_K_DEC_LINES * n, "decoded Q6_K row pair of {} lines", rows.b.len());
    for x in xs {
        let ok = x.q8_k.len() == n && x.f32.len() == 256 * n;
        assert!(ok, "decoded Q6_K row pair of {n} blocks for an activation of {} values in {} Q8_K blocks", x.f32.len(), x.q8_k.len());
    }
    let mut acc = [_mm512_setzero_ps(); 4];
    for (i, lines) in rows.b.chunks_exact(Q6_K_DEC_LINES).enumerate() {
        // Aligned loads: a DecLine is 64-byte aligned.
        let line = lines.as_ptr() as *const __m512i;
        for t in 0..4 {
            let y = &xs[t].q8_k[i];
            let mut sumi = _mm512_setzero_si512();
            for k in 0..8 {
                let yk = _mm512_broadcast_i64x4(_mm256_loadu_si256(y.qs.as_ptr().add(32 * k) as *const __m256i));
                // Unsigned 6-bit quants (< 64) times signed q8: pair sums fit i16 without saturation.
                let p = _mm512_maddubs_epi16(_mm512_load_si512(line.add(k)), yk);
                sumi = _mm512_dpwssd_epi32(sumi, p, _mm512_load_si512(line.add(8 + k)));
            }
            let bsums = _mm512_broadcast_i64x4(_mm256_loadu_si256(y.bsums.as_ptr() as *const __m256i));
            let offset = _mm512_slli_epi32::<5>(_mm512_madd_epi16(bsums, _mm512_load_si512(line.add(16))));
            let d = _mm512_mul_ps(_mm512_set1_ps(y.d), _mm512_castsi512_ps(_mm512_load_si512(line.add(17))));
            acc[t] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(sumi, offset)), acc[t]);
        }
    }
    hsum_halves4(acc)
}
