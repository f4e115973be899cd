// AVX-512 VNNI Q5_0 kernels. Prefill and batched steps: the AVX2 realization's 8 x 4 tiles in the
// block order (eight rows interleaved four quants at a time, weights as q + 16: decode8_q5_0 in
// avx2.rs), with one vpdpbusd per quant group and token serving the eight rows (the AVX2 tile
// needs a maddubs, an add and, per half, a madd) and the high bits set by a mask register in the
// decoder; the same bits as the AVX2 tile. This replaced a 2 x 4 tile in ggml's lane order (both
// rows of a pair in one 512-bit register), which spent four 512-bit operations per two (row,
// token) pairs and block: 512-token prefill +15% (`prefill` of a scratch crate, 3 alternating
// runs). The gemv's dots are avx2.rs's dot_rows_q5_0 with VNNI block sums started from the
// activation's q8_0_neg16 (bitwise dot_q5_0_avx2).

// q5_0_decode with the high bits from an AVX-512 mask: bit k of qh adds 0x10 to byte k (a nibble,
// so the same as or-ing it) in one masked add, instead of a broadcast, shuffle, or, compare and
// and.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
unsafe fn q5_0_decode_bw(b: &BlockQ5_0) -> __m256i {
    let qx = q5_0_nibbles(b);
    _mm256_mask_add_epi8(qx, u32::from_le_bytes(b.qh), qx, _mm256_set1_epi8(0x10))
}

/// row . x for a Q5_0 row, bitwise dot_q5_0_avx2: the block sums by one VNNI vpdpbusd started
/// from the activation's q8_0_neg16. Requires AVX2, FMA and AVX-512 F + BW + VL + VNNI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn dot_q5_0_avx512(row: &[u8], x: &Act) -> f32 {
    dot_rows_q5_0_avx512([row], x)[0]
}

/// The gemv's four-row form of dot_q5_0_avx512 (`dot_rows4` in the dispatch).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn dot_rows4_q5_0_avx512(rows: [&[u8]; 4], x: &Act) -> [f32; 4] {
    dot_rows_q5_0_avx512(rows, x)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn dot_rows_q5_0_avx512<const N: usize>(rows: [&[u8]; N], x: &Act) -> [f32; N] {
    dot_rows_q5_0(rows, x, |b, qy, n16| unsafe { _mm256_dpbusd_epi32(n16, q5_0_decode_bw(b), qy) })
}

/// decode8_q5_0_avx2 with the high bits from a mask register (the same lines and scales).
/// Requires AVX2, FMA and AVX-512 F + BW + VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
pub(crate) unsafe fn decode8_q5_0_avx512(rows: [&[u8]; 8], out: &mut DecRows) {
    decode8_q5_0(rows, out, |b| unsafe { q5_0_decode_bw(b) })
}

/// dot8x4_q5_0_avx2 with VNNI, for eight rows decoded by decode8_q5_0_avx512 and four
/// activations: dot8x4_q5_0 with, per block and token, one vpdpbusd per quant group (the token's
/// four quants broadcast) serving the eight rows, started from the token's q8_0_neg16_sum (which
/// takes back the + 16): the bits of dot8x4_q5_0_avx2. Requires AVX2, FMA and AVX-512 F + VL +
/// VNNI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(crate) unsafe fn dot8x4_q5_0_avx512(rows: &DecRows, xs: [&Act; 4]) -> [[f32; 4]; 8] {
    dot8x4_q5_0(rows, xs, |lines, k| unsafe {
        let mut s = xs.map(|x| unsafe { _mm256_set1_epi32(*x.q8_0_neg16_sum.get_unchecked(k)) });
        for j in 0..8 {
            let w = _mm256_load_si256(lines.add(32 * j) as *const __m256i);
            for t in 0..4 {
                s[t] = _mm256_dpbusd_epi32(s[t], w, bcast4(xs[t].q8_0.get_unchecked(k).qs.as_ptr().add(4 * j)));
            }
        }
        s
    })
}
