// AVX2 Q5_0 x Q8_0 dot, the operation order of ggml's AVX2 ggml_vec_dot_q5_0_q8_0: nibbles are
// spread to 32 bytes, the 32 high bits of qh expanded to bytes, and each byte made q5 + 16 as
// `nibble | (bit ? 0x10 : 0)`; then ggml's eight i32 lane sums of products with the Q8_0 quants,
// exactly (maddubs of the unsigned bytes, one op fewer than ggml's sign trick, plus the
// activation's q8_0_neg16, -16 x each four-quant sum), converted to f32 and accumulated with one
// fma by d_w*d_x. The scales of eight blocks are converted and multiplied at once (F16C, the
// activation's scales precomputed as f32); the fma chain keeps ggml's block order (bitwise that
// of llama.cpp's AVX2 path). Prefill goes through a tiled form instead of a four-token kernel,
// each row decoded once for all tokens: 8 rows x 4 tokens per call in block order
// (dot8x4_q5_0_avx2 in avx2_tile.rs, and its VNNI form in avx512.rs).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

// The 32 nibbles of a block as bytes, in value order (low nibbles, then high ones): the 16 bytes
// loaded into both halves (a load, no shuffle), the upper half's shifted by 4, masked.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_0_nibbles(b: &BlockQ5_0) -> __m256i {
    let both = _mm256_broadcastsi128_si256(_mm_loadu_si128(b.qs.as_ptr() as *const __m128i));
    _mm256_and_si256(_mm256_set1_epi8(0x0F), _mm256_srlv_epi64(both, _mm256_set_epi64x(4, 4, 0, 0)))
}

// The 32 quants of a block + 16 (0..=31, unsigned, as maddubs wants its first operand) as bytes,
// in value order: nibble | 0x10 where the value's bit of qh is set.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_0_decode(b: &BlockQ5_0) -> __m256i {
    let qx = q5_0_nibbles(b);
    // Byte k = 0xFF where bit k of qh is set: broadcast qh, pick byte k/8 into byte k, then test
    // bit k%8 with one mask (and, compare with the mask: a constant register fewer than ggml's or
    // with the other bits and compare with all ones).
    let qh = i32::from_le_bytes(b.qh);
    let shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(qh), shuf);
    let bit = _mm256_set1_epi64x(0x8040201008040201u64 as i64);
    let hbits = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
    _mm256_or_si256(qx, _mm256_and_si256(hbits, _mm256_set1_epi8(0x10)))
}

/// row . x for a Q5_0 row; reads x's Q8_0 form. Requires AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q5_0_avx2(row: &[u8], x: &Act) -> f32 {
    dot_rows_q5_0_avx2([row], x)[0]
}

/// The gemv's four-row form (`dot_rows4` in the dispatch): dot_rows_q5_0_avx2 of four rows.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_rows4_q5_0_avx2(rows: [&[u8]; 4], x: &Act) -> [f32; 4] {
    dot_rows_q5_0_avx2(rows, x)
}

/// dot_rows_q5_0 with AVX2's block sums: (q + 16) . y by maddubs (no saturation: 2 * 31 * 127 <
/// 2^15) and madd, plus the activation's -16 * Σ y. Requires AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_rows_q5_0_avx2<const N: usize>(rows: [&[u8]; N], x: &Act) -> [f32; N] {
    dot_rows_q5_0(rows, x, |b, qy, n16| unsafe { _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(q5_0_decode(b), qy), _mm256_set1_epi16(1)), n16) })
}

/// rows[r] . x for N Q5_0 rows (the gemv takes four at a time: each activation block and its
/// q8_0_neg16 are loaded once for the four, one call and one reduction serve them), `sums(block,
/// y's quants, y's q8_0_neg16)` giving ggml's eight i32 lane sums Σ q * y over four quants,
/// exactly; per row the operations and their order are those of one row, so rows[r]'s result is
/// bitwise dot_q5_0_avx2(rows[r], x). Inlined into its callers, whose instruction sets it uses.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn dot_rows_q5_0<const N: usize>(rows: [&[u8]; N], x: &Act, sums: impl Fn(&BlockQ5_0, __m256i, __m256i) -> __m256i) -> [f32; N] {
    let w = rows.map(q5_0_blocks);
    let (a, ad) = (&x.q8_0[..], &x.q8_0_d[..]);
    for w in &w {
        assert_eq!(w.len(), a.len(), "Q5_0 row of {} blocks for a Q8_0 activation of {} blocks", w.len(), a.len());
    }
    assert!(a.len() * 32 == x.f32.len() && ad.len() == a.len() && x.q8_0_neg16.len() == a.len(), "activation lacks its Q8_0 form");
    let mut acc = [_mm256_setzero_ps(); N];
    // Eight blocks per step: their eight scale products are formed at once and parked on the
    // stack, then broadcast from there block by block (a load rather than a lane permute on the
    // vector ports: black_box keeps the compiler from forwarding the stored lanes through two
    // shuffles per block, and the registers it held them in go to the constants); each row's fma
    // chain is in block order.
    let mut dd = [[0f32; 8]; N];
    let groups = a.chunks(8).zip(ad.chunks(8)).zip(x.q8_0_neg16.chunks(8));
    for (g, ((ab, adb), ng)) in groups.enumerate() {
        let (xd, n) = (f32x8_head(adb), ab.len());
        for r in 0..N {
            let wb = &w[r][8 * g..8 * g + n];
            _mm256_storeu_ps(dd[r].as_mut_ptr(), _mm256_mul_ps(f16x8_scales(n, |k| wb[k].d), xd));
        }
        std::hint::black_box(&mut dd);
        for (k, (y, neg16)) in ab.iter().zip(ng).enumerate() {
            let qy = _mm256_loadu_si256(y.qs.as_ptr() as *const __m256i);
            let n16 = _mm256_loadu_si256(neg16.as_ptr() as *const __m256i);
            for r in 0..N {
                let s = _mm256_cvtepi32_ps(sums(&w[r][8 * g + k], qy, n16));
                acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&dd[r][k]), s, acc[r]);
            }
        }
    }
    hsum_f32x8_rows(acc)
}

/// decode8_q5_0_avx2 (avx2_tile.rs) and decode8_q5_0_avx512 (avx512.rs): the 8-row tile's
/// layout, `decode` giving a block's quants + 16 as bytes in value order. Inlined into its
/// callers, whose instruction sets it uses.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn decode8_q5_0(rows: [&[u8]; 8], out: &mut DecRows, decode: impl Fn(&BlockQ5_0) -> __m256i) {
    let w = rows.map(q5_0_blocks);
    let n = w[0].len();
    assert!(w.iter().all(|r| r.len() == n), "Q5_0 tile rows of {:?} blocks", w.map(|r| r.len()));
    // every line of a block is written below: the buffer is only sized (once per matrix shape)
    out.b.resize(4 * n, DecLine([0; 64]));
    out.d.clear();
    for k in 0..n {
        let lines = &mut out.b[4 * k..4 * (k + 1)];
        interleave8(std::array::from_fn(|r| decode(&w[r][k])), lines);
        let mut d = [0f32; 8];
        _mm256_storeu_ps(d.as_mut_ptr(), f16x8_scales(8, |r| w[r][k].d));
        out.d.extend_from_slice(&d);
    }
}

/// dot8x4_q5_0_avx2 (avx2_tile.rs) and dot8x4_q5_0_avx512 (avx512.rs): rows[r] . xs[t] for an
/// 8-row tile decoded by decode8_q5_0 and four activations in the block order (gate_q5_0_block
/// in the kernels gate), `sums(lines, k)` giving each token's exact integer sums of block k (lane
/// r: row r, the + 16 taken back) from the block's four lines; then acc = fma(f32(s), d_w * d_x,
/// acc), blocks in order. Inlined into its callers, whose instruction sets it uses.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn dot8x4_q5_0(rows: &DecRows, xs: [&Act; 4], sums: impl Fn(*const u8, usize) -> [__m256i; 4]) -> [[f32; 4]; 8] {
    let n = rows.d.len() / 8;
    assert!(rows.b.len() == 4 * n && rows.d.len() == 8 * n, "decoded Q5_0 tile of {} lines and {} scales", rows.b.len(), rows.d.len());
    let ok = |x: &Act| x.q8_0.len() == n && x.q8_0_d.len() == n && x.q8_0_neg16_sum.len() == n && x.f32.len() == 32 * n;
    assert!(xs.iter().all(|x| ok(x)), "decoded Q5_0 tile of {n} blocks for activations of {:?} values", xs.map(|x| x.f32.len()));
    let mut acc = [_mm256_setzero_ps(); 4];
    for k in 0..n {
        // SAFETY (indexing): k < n, so lines 4k..4k + 4, scales 8k..8k + 8 and block k of every
        // activation exist (asserted above). Aligned loads: a DecLine is 64-byte aligned.
        let s = sums(rows.b.as_ptr().add(4 * k) as *const u8, k);
        let dw = _mm256_loadu_ps(rows.d.as_ptr().add(8 * k));
        for t in 0..4 {
            let dd = _mm256_mul_ps(dw, _mm256_set1_ps(*xs[t].q8_0_d.get_unchecked(k)));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), dd, acc[t]);
        }
    }
    rows8x4(acc)
}
