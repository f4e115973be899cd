// AVX2 tiled Q5_0 prefill kernel, the scheme of llama.cpp's repacked gemms (which it has for
// Q4_0 and Q4_K, not Q5_0): eight rows decoded together with their quants interleaved four at a
// time, so one maddubs serves the eight rows of a token (a row per i32 lane); each block's sum is
// exact in integers before its one fma. Per (row, token) pair and block that is about 2.6 vector
// operations where the single-row order needs 5 (sign, maddubs, madd, conversion, fma).

/// Decodes eight Q5_0 rows for dot8x4_q5_0_avx2. Layout: block k takes lines 4k..4k + 4, where
/// quant group j (values 4j..4j + 4) is the 32 bytes at byte 32j: row r's four quants + 16
/// (0..=31, unsigned, as maddubs wants its first operand) at bytes 4r..4r + 4; d[8k + r] is row
/// r's f32 scale of block k. The buffers of `out` are reused. Requires AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn decode8_q5_0_avx2(rows: [&[u8]; 8], out: &mut DecRows) {
    decode8_q5_0(rows, out, |b| unsafe { q5_0_decode(b) })
}

/// rows[r] . xs[t] for eight rows decoded by decode8_q5_0_avx2 and four activations (prefill):
/// dot8x4_q5_0 with, per block and token, one maddubs per quant group (the token's four quants
/// broadcast) serving the eight rows; four groups are summed in i16 (|sum| <= 4 * 2 * 31 * 128 <
/// 2^15) and widened with madd onto the token's q8_0_neg16_sum, which takes back the + 16. That
/// is the contract's block order, not dot_q5_0_avx2's eight lane sums. Requires AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot8x4_q5_0_avx2(rows: &DecRows, xs: [&Act; 4]) -> [[f32; 4]; 8] {
    let ones = _mm256_set1_epi16(1);
    dot8x4_q5_0(rows, xs, |lines, k| unsafe {
        let mut s = xs.map(|x| unsafe { _mm256_set1_epi32(*x.q8_0_neg16_sum.get_unchecked(k)) });
        for half in 0..2 {
            let mut p = [_mm256_setzero_si256(); 4];
            for j in 4 * half..4 * half + 4 {
                let w = _mm256_load_si256(lines.add(32 * j) as *const __m256i);
                for t in 0..4 {
                    p[t] = _mm256_add_epi16(p[t], _mm256_maddubs_epi16(w, bcast4(xs[t].q8_0.get_unchecked(k).qs.as_ptr().add(4 * j))));
                }
            }
            for t in 0..4 {
                s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(p[t], ones));
            }
        }
        s
    })
}
