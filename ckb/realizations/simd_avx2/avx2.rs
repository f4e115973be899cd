// AVX2 helpers the dot kernels share (one copy per engine): the horizontal sum of eight f32 lanes
// (of one accumulator, or of N at once for the multi-row gemv), the signed-byte pair products of
// ggml's mul_sum_i8_pairs_float, an exact eight-lane f16 -> f32 conversion, the scales of up to
// eight blocks gathered into eight lanes, and the 8-row tiles' interleaving of quants, broadcast of
// a token's quant group and [row][token] results.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn hsum_f32x8(x: __m256) -> f32 {
    let mut r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    _mm_cvtss_f32(r)
}

// hsum_f32x8 of each of N accumulators (the gemv's rows), four at a time: the same additions
// per row in the same order (so bitwise hsum_f32x8 of each), with the four rows' lanes
// transposed so that one vector add serves four rows.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn hsum_f32x8_rows<const N: usize>(acc: [__m256; N]) -> [f32; N] {
    let mut out = [0f32; N];
    for (o, a) in out.chunks_exact_mut(4).zip(acc.chunks_exact(4)) {
        // [l + l+4 of rows 0, 1] and [of rows 2, 3], then lane pairs (0, 2) and (1, 3) of each row
        let s01 = _mm256_add_ps(_mm256_permute2f128_ps(a[0], a[1], 0x31), _mm256_permute2f128_ps(a[0], a[1], 0x20));
        let s23 = _mm256_add_ps(_mm256_permute2f128_ps(a[2], a[3], 0x31), _mm256_permute2f128_ps(a[2], a[3], 0x20));
        let p = _mm256_add_ps(_mm256_unpacklo_ps(s01, s23), _mm256_unpackhi_ps(s01, s23));
        let mut r = [0f32; 8]; // lanes 0, 4, 1, 5: rows 0, 1, 2, 3
        _mm256_storeu_ps(r.as_mut_ptr(), _mm256_add_ps(p, _mm256_permute_ps(p, 0b01_00_11_10)));
        o.copy_from_slice(&[r[0], r[4], r[1], r[5]]);
    }
    for k in N / 4 * 4..N {
        out[k] = hsum_f32x8(acc[k]);
    }
    out
}

// An 8-row tile's four token accumulators (lane r of acc[t]: row r, token t) as [row][token].
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn rows8x4(acc: [__m256; 4]) -> [[f32; 4]; 8] {
    let mut lanes = [[0f32; 8]; 4]; // [token][row]
    for (l, a) in lanes.iter_mut().zip(acc) {
        _mm256_storeu_ps(l.as_mut_ptr(), a);
    }
    std::array::from_fn(|r| std::array::from_fn(|t| lanes[t][r]))
}

// Eight i32 lane sums of products of signed bytes, as f32 (lane k = bytes 4k..4k+4).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn mul_sum_i8_pairs_float(x: __m256i, y: __m256i) -> __m256 {
    let ax = _mm256_sign_epi8(x, x);
    let sy = _mm256_sign_epi8(y, x);
    let dot = _mm256_maddubs_epi16(ax, sy);
    _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_set1_epi16(1), dot))
}

// Eight f16 values (the u16 lanes of h) to f32, exactly for every input (F16C's vcvtph2ps:
// fp16_to_f32 on eight lanes; the AVX2 integer form it replaced cost the Q5_0 and Q8_0 gemvs
// about 10% of their block rate on Zen 3).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn f16x8_to_f32(h: __m128i) -> __m256 {
    _mm256_cvtph_ps(h)
}

// The f16 scales (bits `d(k)`, k < m) of up to eight blocks as f32 in eight lanes (lanes >= m
// are 0), converted at once.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn f16x8_scales(m: usize, d: impl Fn(usize) -> [u8; 2]) -> __m256 {
    let h = if m >= 8 {
        let d = |k: usize| i16::from_le_bytes(d(k));
        _mm_setr_epi16(d(0), d(1), d(2), d(3), d(4), d(5), d(6), d(7))
    } else {
        // A partial group: pack the scales in registers (no store-to-load forwarding stall).
        let mut h = [0u64; 2];
        for k in 0..m {
            h[k / 4] |= (u16::from_le_bytes(d(k)) as u64) << (16 * (k % 4));
        }
        _mm_set_epi64x(h[1] as i64, h[0] as i64)
    };
    f16x8_to_f32(h)
}

// The first min(8, v.len()) values of v in eight f32 lanes (lanes past them are 0).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn f32x8_head(v: &[f32]) -> __m256 {
    if v.len() >= 8 {
        _mm256_loadu_ps(v.as_ptr())
    } else {
        let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(v.len() as i32), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_maskload_ps(v.as_ptr(), mask)
    }
}

/// The four bytes at `p` broadcast to the eight i32 lanes: a token's quant group (four quants)
/// for the 8-row tiles, whose one maddubs or vpdpbusd per group serves the eight rows. Requires
/// four readable bytes at `p`.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn bcast4(p: *const i8) -> __m256i {
    _mm256_set1_epi32((p as *const i32).read_unaligned())
}

/// 32 bytes of eight rows (q[r]) interleaved four bytes at a time into four lines, as the 8-row
/// tiles' decoders lay out quants: at byte 32g of `out`, row r's bytes 4g..4g + 4 at 4r. An 8 x 8
/// transpose of i32 lanes: pairs, then quads, then halves.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn interleave8(q: [__m256i; 8], out: &mut [DecLine]) {
    let t: [__m256i; 8] = std::array::from_fn(|i| {
        let (a, b) = (q[i & !1], q[i | 1]); // rows i, i + 1 (i even): lanes (0, 1 | 4, 5), (2, 3 | 6, 7)
        if i % 2 == 0 { _mm256_unpacklo_epi32(a, b) } else { _mm256_unpackhi_epi32(a, b) }
    });
    // u[i]: rows 4(i / 4) .. + 4 of lanes g and g + 4 (g = i % 4), in the two halves
    let u: [__m256i; 8] = std::array::from_fn(|i| {
        let (a, b) = (t[4 * (i / 4) + (i % 4) / 2], t[4 * (i / 4) + (i % 4) / 2 + 2]);
        if i % 2 == 0 { _mm256_unpacklo_epi64(a, b) } else { _mm256_unpackhi_epi64(a, b) }
    });
    for g in 0..8 {
        let (a, b) = (u[g % 4], u[g % 4 + 4]);
        let v = if g < 4 { _mm256_permute2x128_si256::<0x20>(a, b) } else { _mm256_permute2x128_si256::<0x31>(a, b) };
        _mm256_store_si256(out[g / 2].0.as_mut_ptr().add(32 * (g % 2)) as *mut __m256i, v);
    }
}
