// AVX2 Q6_K x Q8_K dot, the operation order of ggml's current AVX2 ggml_vec_dot_q6_K_q8_K: per
// half (128 values) the unsigned 6-bit quants are rebuilt from ql/qh, multiplied with the Q8_K
// quants by maddubs and pairwise with the per-16 scales by madd into eight i32 lanes; the -32
// offset is taken off per lane as 32 * (bsums . scales) (madd of bsums with the scales); per
// super-block one fma by d_x*d into eight f32 lanes, reduced at the end. Integer parts are exact;
// the lane split is ggml's, so the result is bitwise that of llama.cpp's AVX2 path. Prefill goes
// through the 8 x 4 tile in the block order: its decoder and float part here, its block sums in
// avx2_tile.rs (the avx2 realization's `with`) or, with VNNI, in avx512.rs.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

// Values 32k..32k + 32 (k < 8) of a block as unsigned 6-bit quants, rebuilt from ql and qh as
// ggml's AVX2 kernel does (for k in a loop that unrolls, the shifts are constants).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6_k_quants(b: &BlockQ6K, k: usize) -> __m256i {
    let (h, j) = (k / 4, k % 4);
    let lo = _mm256_loadu_si256(b.ql.as_ptr().add(64 * h + 32 * (j % 2)) as *const __m256i);
    let hi = _mm256_loadu_si256(b.qh.as_ptr().add(32 * h) as *const __m256i);
    let lo = _mm256_and_si256(_mm256_srl_epi16(lo, _mm_cvtsi32_si128(4 * (j / 2) as i32)), _mm256_set1_epi8(0x0F));
    let hi = _mm256_and_si256(_mm256_srl_epi16(hi, _mm_cvtsi32_si128(2 * j as i32)), _mm256_set1_epi8(3));
    _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4))
}

/// row . x for a Q6_K row; reads x's Q8_K form. Requires AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q6_k_avx2(row: &[u8], x: &Act) -> f32 {
    let w = q6_k_blocks(row);
    let a = &x.q8_k[..];
    assert_eq!(w.len(), a.len(), "Q6_K row of {} blocks for a Q8_K activation of {} blocks", w.len(), a.len());
    assert_eq!(a.len() * 256, x.f32.len(), "activation lacks its Q8_K form");
    let mut acc = _mm256_setzero_ps();
    // pair[i]: the vpshufb mask spreading scales 2i and 2i + 1 to eight bytes each. From memory
    // (black_box), so that each is one vpshufb with a memory operand, which the compiler would
    // otherwise turn into two or three shuffles (vpshufd, vpshuflw/vpshufhw).
    let pair: [__m128i; 8] = std::hint::black_box(std::array::from_fn(|i| _mm_set_epi64x(0x0101010101010101 * (2 * i as i64 + 1), 0x0101010101010101 * (2 * i as i64))));
    for (b, y) in w.iter().zip(a) {
        let d = y.d * fp16_to_f32(u16::from_le_bytes(b.d));
        let scales = _mm_loadu_si128(b.scales.as_ptr() as *const __m128i);
        let q8sums = _mm256_loadu_si256(y.bsums.as_ptr() as *const __m256i);
        let q8sclsub = _mm256_slli_epi32(_mm256_madd_epi16(q8sums, _mm256_cvtepi8_epi16(scales)), 5);
        let mut sumi = _mm256_setzero_si256();
        for k in 0..8 {
            // Unsigned 6-bit quants (< 64) times signed q8: pair sums fit i16 without saturation.
            let q = q6_k_quants(b, k);
            let q8 = _mm256_loadu_si256(y.qs.as_ptr().add(32 * k) as *const __m256i);
            // i16 x 16 of scales[2k] (x8) and scales[2k + 1] (x8)
            let sc = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, pair[k]));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(sc, _mm256_maddubs_epi16(q, q8)));
        }
        sumi = _mm256_sub_epi32(sumi, q8sclsub);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_f32x8(acc)
}

// Lines of one decoded super-block: 64 quant groups of 32 bytes, then 16 sub-block scale
// vectors, then 8 scale-pair vectors (32 bytes each).
const Q6_K_TILE_LINES: usize = 44;

/// Decodes eight Q6_K rows for dot8x4_q6_k_avx2 (avx2_tile.rs) and dot8x4_q6_k_avx512 (avx512.rs).
/// Layout: super-block k takes lines 44k..44k + 44: at byte 32g quant group g (values 4g..4g + 4 in
/// value order) with row r's four quants + 32 (0..=63) at bytes 4r..4r + 4; at byte 2048 + 32s the
/// i16 scale of sub-block s (values 16s..16s + 16), row r's in i16 lanes 2r and 2r + 1; at byte
/// 2560 + 32i the scales of sub-blocks 2i and 2i + 1, row r's in i16 lanes 2r and 2r + 1. d[8k + r]
/// is row r's d as f32. The buffers of `out` are reused. Requires AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn decode8_q6_k_avx2(rows: [&[u8]; 8], out: &mut DecRows) {
    let w = rows.map(q6_k_blocks);
    let n = w[0].len();
    assert!(w.iter().all(|r| r.len() == n), "Q6_K tile rows of {:?} blocks", w.map(|r| r.len()));
    // every line of a block is written below: the buffer is only sized (once per matrix shape)
    out.b.resize(Q6_K_TILE_LINES * n, DecLine([0; 64]));
    out.d.clear();
    for k in 0..n {
        let lines = &mut out.b[Q6_K_TILE_LINES * k..Q6_K_TILE_LINES * (k + 1)];
        for c in 0..8 {
            interleave8(std::array::from_fn(|r| q6_k_quants(&w[r][k], c)), &mut lines[4 * c..4 * c + 4]);
        }
        // per row its sixteen scales as i16, transposed so that lane r holds row r's: as i32 with
        // the scale in both i16 halves (sub-blocks 0..8, then 8..16), and as pairs
        let sc: [__m256i; 8] = std::array::from_fn(|r| _mm256_cvtepi8_epi16(_mm_loadu_si128(w[r][k].scales.as_ptr() as *const __m128i)));
        let dup = |v: __m256i| unsafe { _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32::<16>(v)) };
        interleave8(sc.map(|v| unsafe { dup(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(v))) }), &mut lines[32..36]);
        interleave8(sc.map(|v| unsafe { dup(_mm256_cvtepi16_epi32(_mm256_extracti128_si256::<1>(v))) }), &mut lines[36..40]);
        interleave8(sc, &mut lines[40..44]);
        out.d.extend(w.iter().map(|wr| fp16_to_f32(u16::from_le_bytes(wr[k].d))));
    }
}

/// dot8x4_q6_k_avx2 (avx2_tile.rs) and dot8x4_q6_k_avx512 (avx512.rs): rows[r] . xs[t] for eight
/// rows decoded by decode8_q6_k_avx2 and four activations in the block order (gate_q6_k_block in
/// the kernels gate), `sums(base, ys)` giving each token's exact Σ_sub sc * Σ (q + 32) * x_q of
/// the super-block at `base` (lane r: row r); the + 32 comes back as 32 * Σ_sub sc * bsum16 (madd
/// of the scale pairs with the token's bsums), then acc = fma(f32(s), d * d_x, acc). Inlined into
/// its callers, whose instruction sets it uses.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn dot8x4_q6_k(rows: &DecRows, xs: [&Act; 4], sums: impl Fn(*const u8, [&BlockQ8K; 4]) -> [__m256i; 4]) -> [[f32; 4]; 8] {
    let n = rows.d.len() / 8;
    assert!(rows.b.len() == Q6_K_TILE_LINES * n && rows.d.len() == 8 * n, "decoded Q6_K tile of {} lines and {} scales", rows.b.len(), rows.d.len());
    let ok = xs.iter().all(|x| x.q8_k.len() == n && x.f32.len() == 256 * n);
    assert!(ok, "decoded Q6_K tile of {n} super-blocks for activations of {:?} values", xs.map(|x| x.f32.len()));
    let mut acc = [_mm256_setzero_ps(); 4];
    for k in 0..n {
        // SAFETY (indexing): k < n, so lines 44k..44k + 44, scales 8k..8k + 8 and super-block k
        // of every activation exist (asserted above). Aligned loads: a DecLine is 64-byte aligned.
        let base = rows.b.as_ptr().add(Q6_K_TILE_LINES * k) as *const u8;
        let y = xs.map(|x| x.q8_k.get_unchecked(k));
        let s = sums(base, y);
        let dw = _mm256_loadu_ps(rows.d.as_ptr().add(8 * k));
        for t in 0..4 {
            let mut c = _mm256_setzero_si256();
            for i in 0..8 {
                let pair = _mm256_load_si256(base.add(2560 + 32 * i) as *const __m256i);
                let bs = (y[t].bsums.as_ptr().add(2 * i) as *const i32).read_unaligned();
                c = _mm256_add_epi32(c, _mm256_madd_epi16(pair, _mm256_set1_epi32(bs)));
            }
            let st = _mm256_sub_epi32(s[t], _mm256_slli_epi32::<5>(c));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(st), _mm256_mul_ps(dw, _mm256_set1_ps(y[t].d)), acc[t]);
        }
    }
    rows8x4(acc)
}
