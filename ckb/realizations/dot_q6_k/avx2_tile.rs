// AVX2 tiled Q6_K prefill kernel in the block order: eight rows decoded together, their quants
// (as q + 32, unsigned) interleaved four at a time, so one maddubs serves the eight rows of a
// token (a row per i32 lane); a super-block's sum is exact in integers before its one fma.

// Lines of one decoded super-block: 64 quant groups of 32 bytes, then 16 sub-block scale
// vectors, then 8 scale-pair vectors (32 bytes each).
const Q6_K_TILE_LINES: usize = 44;

/// Decodes eight Q6_K rows for dot8x4_q6_k_avx2. Layout: super-block k takes lines 44k..44k + 44:
/// at byte 32g quant group g (values 4g..4g + 4 in value order) with row r's four quants + 32
/// (0..=63) at bytes 4r..4r + 4; at byte 2048 + 32s the i16 scale of sub-block s (values
/// 16s..16s + 16), row r's in i16 lanes 2r and 2r + 1; at byte 2560 + 32i the scales of sub-blocks
/// 2i and 2i + 1, row r's in i16 lanes 2r and 2r + 1. d[8k + r] is row r's d as f32. The buffers
/// of `out` are reused. Requires AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
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
        let mut sc = [[0i16; 16]; 24]; // [sub-block, then pair][i16 lane]
        for (r, wr) in w.iter().enumerate() {
            for s in 0..16 {
                let v = wr[k].scales[s] as i8 as i16;
                sc[s][2 * r..2 * r + 2].fill(v);
                sc[16 + s / 2][2 * r + s % 2] = v;
            }
            out.d.push(fp16_to_f32(u16::from_le_bytes(wr[k].d)));
        }
        for (i, v) in sc.iter().enumerate() {
            _mm256_store_si256(lines[32 + i / 2].0.as_mut_ptr().add(32 * (i % 2)) as *mut __m256i, _mm256_loadu_si256(v.as_ptr() as *const __m256i));
        }
    }
}

/// rows[r] . xs[t] for eight rows decoded by decode8_q6_k_avx2 and four activations (prefill), in
/// the block order (gate_q6_k_block in the kernels gate): per super-block the exact integer
/// s = Σ_sub sc * Σ (q - 32) * x_q, then acc = fma(f32(s), d * d_x, acc). Two quant groups are
/// summed in i16 (|sum| <= 2 * 2 * 63 * 127 < 2^15) before madd with the scales; the + 32 comes
/// back as 32 * Σ_sub sc * bsum16 (madd of the scale pairs with the token's bsums). Requires AVX2
/// and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot8x4_q6_k_avx2(rows: &DecRows, xs: [&Act; 4]) -> [[f32; 4]; 8] {
    let n = rows.d.len() / 8;
    assert!(rows.b.len() == Q6_K_TILE_LINES * n && rows.d.len() == 8 * n, "decoded Q6_K tile of {} lines and {} scales", rows.b.len(), rows.d.len());
    for x in xs {
        assert!(x.q8_k.len() == n && x.f32.len() == 256 * n, "decoded Q6_K tile of {n} super-blocks for an activation of {} values in {} Q8_K blocks", x.f32.len(), x.q8_k.len());
    }
    let mut acc = [_mm256_setzero_ps(); 4];
    for k in 0..n {
        // SAFETY (indexing): k < n, so lines 44k..44k + 44, scales 8k..8k + 8 and super-block k
        // of every activation exist (asserted above). Aligned loads: a DecLine is 64-byte aligned.
        let base = rows.b.as_ptr().add(Q6_K_TILE_LINES * k) as *const u8;
        let y = xs.map(|x| x.q8_k.get_unchecked(k));
        let mut s = [_mm256_setzero_si256(); 4];
        for sb in 0..16 {
            let scv = _mm256_load_si256(base.add(2048 + 32 * sb) as *const __m256i);
            for half in 0..2 {
                let g = 4 * sb + 2 * half;
                let (w0, w1) = (_mm256_load_si256(base.add(32 * g) as *const __m256i), _mm256_load_si256(base.add(32 * g + 32) as *const __m256i));
                for t in 0..4 {
                    let yq = y[t].qs.as_ptr().add(4 * g) as *const i32;
                    let (y0, y1) = (_mm256_set1_epi32(yq.read_unaligned()), _mm256_set1_epi32(yq.add(1).read_unaligned()));
                    let sum = _mm256_add_epi16(_mm256_maddubs_epi16(w0, y0), _mm256_maddubs_epi16(w1, y1));
                    s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(sum, scv));
                }
            }
        }
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
