// AVX2 Q4_K x Q8_K dot with the float operation order of llama.cpp's AVX2 path for Q4_K weights
// (the repacked ggml_gemv_q4_K_8x8_q8_K, which llama.cpp uses on AVX2 CPUs for every Q4_K matrix
// with a multiple of 8 rows): per super-block the exact integers S = sum_j sc_j * (q . x_q) and
// M = sum_j m_j * bsum32_j, then acc = fma(f32(S), d*d_x, acc), acc_m = fma(f32(M), dmin*d_x,
// acc_m), result = acc - acc_m. The integer parts are formed with ggml's vec_dot_q4_K_q8_K
// instructions (utmp scale unpacking, maddubs/madd, hadd of the bsums) and reduced per block.
// Prefill and batched steps go through the 8 x 4 tile in the gemm's order: its decoder and
// float part here, its integer sums in avx2_tile.rs (the avx2 realization's `with`) or, with
// VNNI, in avx512.rs.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

// The eight 6-bit scales then the eight 6-bit mins of a block as 16 x i16 (ggml's utmp
// unpacking of get_scale_min_k4).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_k_scales_mins(s: &[u8; 12]) -> __m256i {
    const KMASK1: u32 = 0x3f3f3f3f;
    const KMASK2: u32 = 0x0f0f0f0f;
    const KMASK3: u32 = 0x03030303;
    let mut u0 = u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
    let mut u1 = u32::from_le_bytes([s[4], s[5], s[6], s[7]]);
    let mut u2 = u32::from_le_bytes([s[8], s[9], s[10], s[11]]);
    let u3 = ((u2 >> 4) & KMASK2) | (((u1 >> 6) & KMASK3) << 4);
    let uaux = u1 & KMASK1;
    u1 = (u2 & KMASK2) | (((u0 >> 6) & KMASK3) << 4);
    u2 = uaux;
    u0 &= KMASK1;
    _mm256_cvtepu8_epi16(_mm_set_epi32(u3 as i32, u2 as i32, u1 as i32, u0 as i32))
}

// [d, dmin] of a block (adjacent f16 fields) as f32, exactly, in lanes 0 and 1.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_k_d_dmin(b: &BlockQ4K) -> __m128 {
    let dh = _mm_cvtsi32_si128(i32::from_le_bytes([b.d[0], b.d[1], b.dmin[0], b.dmin[1]]));
    _mm256_castps256_ps128(f16x8_to_f32(dh))
}

/// row . x for a Q4_K row; reads x's Q8_K form. Requires AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q4_k_avx2(row: &[u8], x: &Act) -> f32 {
    let w = q4_k_blocks(row);
    let a = &x.q8_k[..];
    assert_eq!(w.len(), a.len(), "Q4_K row of {} blocks for a Q8_K activation of {} blocks", w.len(), a.len());
    assert_eq!(a.len() * 256, x.f32.len(), "activation lacks its Q8_K form");
    let m4 = _mm256_set1_epi8(0x0F);
    // Lane 0 accumulates f32(S) * (d * d_x), lane 1 f32(M) * (dmin * d_x): two independent
    // fma chains, lane by lane the same arithmetic as two scalar fmas.
    let mut acc = _mm_setzero_ps();
    for (b, y) in w.iter().zip(a) {
        // [d, dmin] times d_x; 16 x i16: scales 0..8 then mins 0..8.
        let dd = _mm_mul_ps(q4_k_d_dmin(b), _mm_set1_ps(y.d));
        let mins_and_scales = q4_k_scales_mins(&b.scales);

        let q8sums = _mm256_loadu_si256(y.bsums.as_ptr() as *const __m256i);
        let q8s = _mm_hadd_epi16(_mm256_castsi256_si128(q8sums), _mm256_extracti128_si256(q8sums, 1));
        let prod = _mm_madd_epi16(_mm256_extracti128_si256(mins_and_scales, 1), q8s);

        let sc128 = _mm256_castsi256_si128(mins_and_scales);
        let scales = _mm256_set_m128i(sc128, sc128);
        let q4 = b.qs.as_ptr();
        let q8 = y.qs.as_ptr();
        let mut sumi = _mm256_setzero_si256();
        for j in 0..4 {
            // Broadcast the i16 scales 2j and 2j+1.
            let scale_l = _mm256_shuffle_epi8(scales, _mm256_set1_epi16(((4 * j + 1) << 8 | (4 * j)) as i16));
            let scale_h = _mm256_shuffle_epi8(scales, _mm256_set1_epi16(((4 * j + 3) << 8 | (4 * j + 2)) as i16));
            let q4bits = _mm256_loadu_si256(q4.add(32 * j) as *const __m256i);
            let q4l = _mm256_and_si256(q4bits, m4);
            let q4h = _mm256_and_si256(_mm256_srli_epi16(q4bits, 4), m4);
            let q8l = _mm256_loadu_si256(q8.add(64 * j) as *const __m256i);
            let p16l = _mm256_madd_epi16(scale_l, _mm256_maddubs_epi16(q4l, q8l));
            let q8h = _mm256_loadu_si256(q8.add(64 * j + 32) as *const __m256i);
            let p16h = _mm256_madd_epi16(scale_h, _mm256_maddubs_epi16(q4h, q8h));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p16l, p16h));
        }
        // [S, M, S, M]: exact integer reductions of the scales and mins terms.
        let s4 = _mm_add_epi32(_mm256_castsi256_si128(sumi), _mm256_extracti128_si256(sumi, 1));
        let sm = _mm_hadd_epi32(s4, prod);
        let sm = _mm_hadd_epi32(sm, sm);
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(sm), dd, acc);
    }
    _mm_cvtss_f32(_mm_sub_ss(acc, _mm_movehdup_ps(acc)))
}

// Lines of one decoded super-block: 64 quant groups of 32 bytes, then 8 sub-block scale vectors,
// then 4 min vectors (32 bytes each).
const Q4_K_TILE_LINES: usize = 38;

/// Decodes eight Q4_K rows for dot8x4_q4_k_avx2 (avx2_tile.rs) and dot8x4_q4_k_avx512 (avx512.rs).
/// Layout: super-block k takes lines 38k..38k + 38: at byte 32g quant group g (values 4g..4g + 4 in
/// value order) with row r's four quants (0..=15) at bytes 4r..4r + 4; at byte 2048 + 32j the i16
/// scale of sub-block j, row r's in i16 lanes 2r and 2r + 1; at byte 2304 + 32p the mins of
/// sub-blocks 2p and 2p + 1, row r's in i16 lanes 2r and 2r + 1. d[16k + r] is row r's d,
/// d[16k + 8 + r] its dmin, as f32. The buffers of `out` are reused. Requires AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn decode8_q4_k_avx2(rows: [&[u8]; 8], out: &mut DecRows) {
    let w = rows.map(q4_k_blocks);
    let n = w[0].len();
    assert!(w.iter().all(|r| r.len() == n), "Q4_K tile rows of {:?} blocks", w.map(|r| r.len()));
    // every line of a block is written below: the buffer is only sized (once per matrix shape)
    out.b.resize(Q4_K_TILE_LINES * n, DecLine([0; 64]));
    out.d.clear();
    let m4 = _mm256_set1_epi8(0x0F);
    for k in 0..n {
        let lines = &mut out.b[Q4_K_TILE_LINES * k..Q4_K_TILE_LINES * (k + 1)];
        for c in 0..8 {
            // values 32c..32c + 32: the low nibbles of qs[32(c / 2)..] for even c, the high for odd
            let q = std::array::from_fn(|r| {
                let bits = _mm256_loadu_si256(w[r][k].qs.as_ptr().add(32 * (c / 2)) as *const __m256i);
                _mm256_and_si256(if c % 2 == 0 { bits } else { _mm256_srli_epi16(bits, 4) }, m4)
            });
            interleave8(q, &mut lines[4 * c..4 * c + 4]);
        }
        // per row its scales then mins as i16 (q4_k_scales_mins), transposed so that lane r
        // holds row r's: the scales as i32 with the scale in both i16 halves, the mins pairs
        // (the high 128 bits, swapped to the front) as they are
        let sm: [__m256i; 8] = std::array::from_fn(|r| q4_k_scales_mins(&w[r][k].scales));
        let dup = |v: __m256i| unsafe { _mm256_or_si256(v, _mm256_slli_epi32::<16>(v)) };
        interleave8(sm.map(|v| unsafe { dup(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(v))) }), &mut lines[32..36]);
        let mut mins = [DecLine([0; 64]); 4];
        interleave8(sm.map(|v| unsafe { _mm256_permute2x128_si256::<0x01>(v, v) }), &mut mins);
        lines[36..38].copy_from_slice(&mins[..2]);
        out.d.extend(w.iter().map(|wr| fp16_to_f32(u16::from_le_bytes(wr[k].d))));
        out.d.extend(w.iter().map(|wr| fp16_to_f32(u16::from_le_bytes(wr[k].dmin))));
    }
}

/// dot8x4_q4_k_avx2 (avx2_tile.rs) and dot8x4_q4_k_avx512 (avx512.rs): rows[r] . xs[t] for eight
/// rows decoded by decode8_q4_k_avx2 and four activations in the gemm order (gate_q4_k_gemm in
/// the kernels gate), `s_p(base, ys, p)` giving each token's exact S_p = sc_2p * (q . x_q)_2p +
/// sc_2p+1 * (q . x_q)_2p+1 as f32 (lane r: row r) from the super-block's lines at `base`; then
/// M_p = m_2p * bsum32_2p + m_2p+1 * bsum32_2p+1 (one madd), acc = fma(f32(S_p), d * d_x, acc),
/// acc_m = fma(f32(M_p), dmin * d_x, acc_m); result acc - acc_m. Inlined into its callers, whose
/// instruction sets it uses.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn dot8x4_q4_k(rows: &DecRows, xs: [&Act; 4], s_p: impl Fn(*const u8, [&BlockQ8K; 4], usize) -> [__m256; 4]) -> [[f32; 4]; 8] {
    let n = rows.d.len() / 16;
    assert!(rows.b.len() == Q4_K_TILE_LINES * n && rows.d.len() == 16 * n, "decoded Q4_K tile of {} lines and {} scales", rows.b.len(), rows.d.len());
    let ok = xs.iter().all(|x| x.q8_k.len() == n && x.f32.len() == 256 * n);
    assert!(ok, "decoded Q4_K tile of {n} super-blocks for activations of {:?} values", xs.map(|x| x.f32.len()));
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut acc_m = [_mm256_setzero_ps(); 4];
    for k in 0..n {
        // SAFETY (indexing): k < n, so lines 38k..38k + 38, scales 16k..16k + 16 and super-block
        // k of every activation exist (asserted above). Aligned loads: a DecLine is 64-byte aligned.
        let base = rows.b.as_ptr().add(Q4_K_TILE_LINES * k) as *const u8;
        let d = _mm256_loadu_ps(rows.d.as_ptr().add(16 * k));
        let dmin = _mm256_loadu_ps(rows.d.as_ptr().add(16 * k + 8));
        let y = xs.map(|x| x.q8_k.get_unchecked(k));
        // per token, the eight bsum32 as i16: pair p's two are i32 lane p (broadcast below)
        let mut bs = [[0i32; 4]; 4];
        for t in 0..4 {
            let b16 = _mm256_loadu_si256(y[t].bsums.as_ptr() as *const __m256i);
            let b32 = _mm_hadd_epi16(_mm256_castsi256_si128(b16), _mm256_extracti128_si256(b16, 1));
            _mm_storeu_si128(bs[t].as_mut_ptr() as *mut __m128i, b32);
        }
        for p in 0..4 {
            let s = s_p(base, y, p);
            let mv = _mm256_load_si256(base.add(2304 + 32 * p) as *const __m256i);
            for t in 0..4 {
                let dx = _mm256_set1_ps(y[t].d);
                let m = _mm256_madd_epi16(mv, _mm256_set1_epi32(bs[t][p]));
                acc[t] = _mm256_fmadd_ps(s[t], _mm256_mul_ps(d, dx), acc[t]);
                acc_m[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, dx), acc_m[t]);
            }
        }
    }
    rows8x4(std::array::from_fn(|t| _mm256_sub_ps(acc[t], acc_m[t])))
}
