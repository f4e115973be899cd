// AVX2 tiled Q4_K prefill kernel in the float order of llama.cpp's repacked gemm
// (ggml_gemm_q4_K_8x8_q8_K), laid out as that gemm lays out its weights: eight rows decoded
// together, their 4-bit quants interleaved four at a time, so one maddubs serves the eight rows
// of a token (a row per i32 lane) and the per-pair sums come out per row without horizontal adds.

// Lines of one decoded super-block: 64 quant groups of 32 bytes, then 8 sub-block scale vectors,
// then 4 min vectors (32 bytes each).
const Q4_K_TILE_LINES: usize = 38;

/// Decodes eight Q4_K rows for dot8x4_q4_k_avx2. Layout: super-block k takes lines 38k..38k + 38:
/// at byte 32g quant group g (values 4g..4g + 4 in value order) with row r's four quants
/// (0..=15) at bytes 4r..4r + 4; at byte 2048 + 32j the i16 scale of sub-block j, row r's in
/// i16 lanes 2r and 2r + 1; at byte 2304 + 32p the mins of sub-blocks 2p and 2p + 1, row r's in
/// i16 lanes 2r and 2r + 1. d[16k + r] is row r's d, d[16k + 8 + r] its dmin, as f32. The
/// buffers of `out` are reused. Requires AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
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
        let mut sc = [[0i16; 16]; 8]; // [sub-block][i16 lane]
        let mut mins = [[0i16; 16]; 4]; // [pair][i16 lane]
        for (r, wr) in w.iter().enumerate() {
            for j in 0..8 {
                let (s, m) = q4_k_scale_min(j, &wr[k].scales);
                sc[j][2 * r..2 * r + 2].fill(s as i16);
                mins[j / 2][2 * r + j % 2] = m as i16;
            }
            out.d.push(fp16_to_f32(u16::from_le_bytes(wr[k].d)));
        }
        out.d.extend(w.iter().map(|wr| fp16_to_f32(u16::from_le_bytes(wr[k].dmin))));
        for (i, v) in sc.iter().chain(&mins).enumerate() {
            _mm256_store_si256(lines[32 + i / 2].0.as_mut_ptr().add(32 * (i % 2)) as *mut __m256i, _mm256_loadu_si256(v.as_ptr() as *const __m256i));
        }
    }
}

/// rows[r] . xs[t] for eight rows decoded by decode8_q4_k_avx2 and four activations (prefill), in
/// the gemm order (gate_q4_k_gemm in the kernels gate): per super-block and pair p of sub-blocks
/// the exact S_p = sc_2p * (q . x_q)_2p + sc_2p+1 * (q . x_q)_2p+1 and M_p = m_2p * bsum32_2p +
/// m_2p+1 * bsum32_2p+1, then acc = fma(f32(S_p), d * d_x, acc), acc_m = fma(f32(M_p), dmin *
/// d_x, acc_m); result acc - acc_m. The eight groups of a sub-block are summed in i16 (|sum| <=
/// 8 * 2 * 15 * 127 < 2^15) before madd with the scales. Requires AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot8x4_q4_k_avx2(rows: &DecRows, xs: [&Act; 4]) -> [[f32; 4]; 8] {
    let n = rows.d.len() / 16;
    assert!(rows.b.len() == Q4_K_TILE_LINES * n && rows.d.len() == 16 * n, "decoded Q4_K tile of {} lines and {} scales", rows.b.len(), rows.d.len());
    for x in xs {
        assert!(x.q8_k.len() == n && x.f32.len() == 256 * n, "decoded Q4_K tile of {n} super-blocks for an activation of {} values in {} Q8_K blocks", x.f32.len(), x.q8_k.len());
    }
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
            let mut s = [_mm256_setzero_si256(); 4];
            for j in [2 * p, 2 * p + 1] {
                let mut sum = [_mm256_setzero_si256(); 4];
                for g in 8 * j..8 * j + 8 {
                    let wq = _mm256_load_si256(base.add(32 * g) as *const __m256i);
                    for t in 0..4 {
                        let y4 = (y[t].qs.as_ptr().add(4 * g) as *const i32).read_unaligned();
                        sum[t] = _mm256_add_epi16(sum[t], _mm256_maddubs_epi16(wq, _mm256_set1_epi32(y4)));
                    }
                }
                let scv = _mm256_load_si256(base.add(2048 + 32 * j) as *const __m256i);
                for t in 0..4 {
                    s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(sum[t], scv));
                }
            }
            let mv = _mm256_load_si256(base.add(2304 + 32 * p) as *const __m256i);
            for t in 0..4 {
                let dx = _mm256_set1_ps(y[t].d);
                let m = _mm256_madd_epi16(mv, _mm256_set1_epi32(bs[t][p]));
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), _mm256_mul_ps(d, dx), acc[t]);
                acc_m[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, dx), acc_m[t]);
            }
        }
    }
    rows8x4(std::array::from_fn(|t| _mm256_sub_ps(acc[t], acc_m[t])))
}
