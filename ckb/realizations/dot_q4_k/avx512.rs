// AVX-512 tiled Q4_K prefill kernel in the float order of llama.cpp's repacked gemm (the order of
// dot8x4_q4_k_avx2): per super-block and pair p of sub-blocks the exact integers S_p and M_p, then
// acc = fma(f32(S_p), d*d_x, acc), acc_m = fma(f32(M_p), dmin*d_x, acc_m), result acc - acc_m.
// Both rows of a pair share each 512-bit register (lanes 0..8 row 0, 8..16 row 1): per (token,
// sub-block) one maddubs and one vpdpwssd on the pair's unpacked nibbles and broadcast scales;
// the float chains of the eight (row, token) outputs run in the lanes of one 256-bit register.
// The single-row dot and the scale unpacking come from avx2.rs.

// Lines of one decoded super-block of a row pair.
const Q4_K_DEC_LINES: usize = 17;

/// Decodes a Q4_K row pair for dot2x4_q4_k_avx512. Layout: super-block b is lines 17b..17b + 17;
/// lines 0..8 hold the unsigned quants of sub-block j (values 32j..32j + 32), 8..16 its 6-bit
/// scale as 16 x i16, each [row 0 | row 1] in 32-byte halves; line 16 the eight mins of row 0
/// then of row 1 (i16), then [d, dmin] of row 0 and of row 1 (f32); `d` stays empty. Requires
/// AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn decode_q4_k_avx512(rows: [&[u8]; 2], out: &mut DecRows) {
    let (w0, w1) = (q4_k_blocks(rows[0]), q4_k_blocks(rows[1]));
    assert_eq!(w0.len(), w1.len(), "Q4_K row pair of {} and {} blocks", w0.len(), w1.len());
    out.b.resize(Q4_K_DEC_LINES * w0.len(), DecLine([0; 64]));
    out.d.clear();
    let m4 = _mm256_set1_epi8(0x0F);
    for (lines, (b0, b1)) in out.b.chunks_exact_mut(Q4_K_DEC_LINES).zip(w0.iter().zip(w1)) {
        for (half, b) in [b0, b1].into_iter().enumerate() {
            let at = |l: &mut DecLine| l.0.as_mut_ptr().add(32 * half) as *mut __m256i;
            for c in 0..4 {
                let bits = _mm256_loadu_si256(b.qs.as_ptr().add(32 * c) as *const __m256i);
                _mm256_store_si256(at(&mut lines[2 * c]), _mm256_and_si256(bits, m4));
                _mm256_store_si256(at(&mut lines[2 * c + 1]), _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4));
            }
            for j in 0..8 {
                let (sc, m) = q4_k_scale_min(j, &b.scales);
                _mm256_store_si256(at(&mut lines[8 + j]), _mm256_set1_epi16(sc as i16));
                lines[16].0[16 * half + 2 * j..][..2].copy_from_slice(&(m as i16).to_le_bytes());
            }
            _mm_storeu_ps(lines[16].0.as_mut_ptr().add(32 + 8 * half) as *mut f32, q4_k_d_dmin(b));
        }
    }
}

/// rows[i] . xs[t] for a row pair decoded by decode_q4_k_avx512 and four activations (prefill):
/// result [i][t] is bitwise the gemm order (gate_q4_k_gemm). Requires AVX2, FMA and AVX-512 F + BW +
/// VL + VNNI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn dot2x4_q4_k_avx512(rows: &DecRows, xs: [&Act; 4]) -> [[f32; 4]; 2] {
    let n = rows.b.len() / Q4_K_DEC_LINES;
    assert_eq!(rows.b.len(), Q4_K_DEC_LINES * n, "decoded Q4_K row pair of {} lines", rows.b.len());
    for x in xs {
        let ok = x.q8_k.len() == n && x.f32.len() == 256 * n;
        assert!(ok, "decoded Q4_K row pair of {n} blocks for an activation of {} values in {} Q8_K blocks", x.f32.len(), x.q8_k.len());
    }
    // Lane 4r + t: row r, token t.
    let (mut acc, mut acc_m) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    for (i, lines) in rows.b.chunks_exact(Q4_K_DEC_LINES).enumerate() {
        // Aligned loads: a DecLine is 64-byte aligned.
        let line = lines.as_ptr() as *const __m512i;
        let ys = [&xs[0].q8_k[i], &xs[1].q8_k[i], &xs[2].q8_k[i], &xs[3].q8_k[i]];
        let mins = _mm256_load_si256(line.add(16) as *const __m256i);
        // z[p][t]: the 16 lane sums (8 per row) of S_p for token t; m[t]: [M_0..4 of row 0 | of row 1].
        let mut z = [[_mm512_setzero_si512(); 4]; 4];
        let mut m = [_mm256_setzero_si256(); 4];
        for t in 0..4 {
            for j in 0..8 {
                let y = _mm512_broadcast_i64x4(_mm256_loadu_si256(ys[t].qs.as_ptr().add(32 * j) as *const __m256i));
                let p = _mm512_maddubs_epi16(_mm512_load_si512(line.add(j)), y);
                z[j / 2][t] = _mm512_dpwssd_epi32(z[j / 2][t], p, _mm512_load_si512(line.add(8 + j)));
            }
            let bs = _mm256_loadu_si256(ys[t].bsums.as_ptr() as *const __m256i);
            let q8s = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256::<1>(bs));
            m[t] = _mm256_madd_epi16(mins, _mm256_broadcastsi128_si256(q8s));
        }
        // [d0, dmin0, d1, dmin1] spread to lanes 4r + t, times the four tokens' d_x.
        let dw = _mm256_castps128_ps256(_mm_load_ps((line.add(16) as *const f32).add(8)));
        let dx = _mm_set_ps(ys[3].d, ys[2].d, ys[1].d, ys[0].d);
        let dx = _mm256_set_m128(dx, dx);
        let dd = _mm256_mul_ps(_mm256_permutevar8x32_ps(dw, _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2)), dx);
        let dm = _mm256_mul_ps(_mm256_permutevar8x32_ps(dw, _mm256_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3)), dx);
        let mt = q4_k_transpose4x2(m);
        for p in 0..4 {
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q4_k_pair_sums(z[p])), dd, acc);
            acc_m = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mt[p]), dm, acc_m);
        }
    }
    let mut out = [[0f32; 4]; 2];
    let r = _mm256_sub_ps(acc, acc_m);
    _mm_storeu_ps(out[0].as_mut_ptr(), _mm256_castps256_ps128(r));
    _mm_storeu_ps(out[1].as_mut_ptr(), _mm256_extractf128_ps::<1>(r));
    out
}

// Lane 4r + t = the sum of lanes 8r..8r + 8 of z[t] (r: row, t: token), exactly.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,avx512f")]
unsafe fn q4_k_pair_sums(z: [__m512i; 4]) -> __m256i {
    let a01 = _mm512_add_epi32(_mm512_unpacklo_epi32(z[0], z[1]), _mm512_unpackhi_epi32(z[0], z[1]));
    let a23 = _mm512_add_epi32(_mm512_unpacklo_epi32(z[2], z[3]), _mm512_unpackhi_epi32(z[2], z[3]));
    // per 128-bit chunk c: the sums of its four lanes of z[0], z[1], z[2], z[3]
    let b = _mm512_add_epi32(_mm512_unpacklo_epi64(a01, a23), _mm512_unpackhi_epi64(a01, a23));
    let c = _mm512_add_epi32(b, _mm512_shuffle_i32x4::<0b10_11_00_01>(b, b));
    _mm512_castsi512_si256(_mm512_shuffle_i32x4::<0b00_00_10_00>(c, c))
}

// 4 x 4 transposes of i32 lanes in both 128-bit halves: out[p] lane 4h + t = r[t] lane 4h + p.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn q4_k_transpose4x2(r: [__m256i; 4]) -> [__m256i; 4] {
    let t0 = _mm256_unpacklo_epi32(r[0], r[1]);
    let t1 = _mm256_unpacklo_epi32(r[2], r[3]);
    let t2 = _mm256_unpackhi_epi32(r[0], r[1]);
    let t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    [_mm256_unpacklo_epi64(t0, t1), _mm256_unpackhi_epi64(t0, t1), _mm256_unpacklo_epi64(t2, t3), _mm256_unpackhi_epi64(t2, t3)]
}
