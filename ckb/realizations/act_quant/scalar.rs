// Activation forms for the dot kernels: each weight type's kernel reads x in the form ggml uses as
// that type's vec_dot_type (Q8_0 for Q4_0/Q5_0/Q8_0, Q8_0 with its block sums d*Σq for Q4_1, Q8_K
// for the k-quants, x rounded to f16/bf16 for F16/BF16, plain f32 for F32), quantized bit for bit
// like ggml's x86 CPU path:
// - q8_0 (quantize_row_q8_0, AVX2): d = amax/127 as f16 (nearest even), q = round_half_even(x*127/amax);
// - q8_K (quantize_row_q8_K_ref): max = the first x of largest |x|, iscale = -127/max,
//   q = min(127, nearest_int(iscale*x)), d = 1/iscale, bsums over 16; an all-zero block is all 0.

/// Which form of an activation a weight type's dot kernel reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ActKind {
    F32,
    F16,  // x rounded to f16 precision (ggml's vec_dot_type for F16 weights)
    BF16, // x rounded to bf16 precision (ggml's vec_dot_type for BF16 weights)
    Q8_0,
    Q8K,
}

/// 32 activations quantized to 8 bits with one f16 scale (ggml block_q8_0).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct BlockQ8_0 {
    pub(crate) d: u16,       // f16 bits of the scale
    pub(crate) qs: [i8; 32], // x[j] ~= d * qs[j]
}
const _: () = assert!(std::mem::size_of::<BlockQ8_0>() == 34);

impl BlockQ8_0 {
    pub(crate) const ZERO: BlockQ8_0 = BlockQ8_0 { d: 0, qs: [0; 32] }; // an all-zero block
}

/// 256 activations quantized to 8 bits with one f32 scale and 16-element sums (ggml block_q8_K).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct BlockQ8K {
    pub(crate) d: f32,          // scale: x[j] ~= d * qs[j]
    pub(crate) qs: [i8; 256],   // [256]
    pub(crate) bsums: [i16; 16], // [16] bsums[j] = sum of qs[16j..16j+16]
}
const _: () = assert!(std::mem::size_of::<BlockQ8K>() == 292);

impl BlockQ8K {
    pub(crate) const ZERO: BlockQ8K = BlockQ8K { d: 0.0, qs: [0; 256], bsums: [0; 16] };
}

/// IEEE half (given as its bits) to f32, exact for every input (normals, subnormals, inf, NaN).
#[inline(always)]
pub(crate) fn fp16_to_f32(h: u16) -> f32 {
    let w = (h as u32) << 16;
    let sign = w & 0x8000_0000;
    let two_w = w.wrapping_add(w);
    // Normal (and inf/NaN) numbers: shift the exponent and mantissa into place, rebias by 2^-112.
    let normalized = f32::from_bits((two_w >> 4) + (0xE0 << 23)) * f32::from_bits(0x0780_0000);
    // Subnormals: build 0.5 + m * 2^-24 and subtract the 0.5.
    let denormalized = f32::from_bits((two_w >> 17) | (126 << 23)) - 0.5;
    let bits = if two_w < (1 << 27) { denormalized.to_bits() } else { normalized.to_bits() };
    f32::from_bits(sign | bits)
}

/// f32 to IEEE half bits, round to nearest even (what F16C's vcvtps2ph with imm 0 does).
#[inline]
pub(crate) fn f32_to_fp16(x: f32) -> u16 { rt::half::f16::from_f32(x).to_bits() }

/// bf16 bits to f32 (exact).
#[inline(always)]
pub(crate) fn bf16_to_f32(h: u16) -> f32 { f32::from_bits((h as u32) << 16) }

/// f32 to bf16 bits exactly like ggml's GGML_FP32_TO_BF16: round to nearest even, NaN quieted.
#[inline]
pub(crate) fn f32_to_bf16(x: f32) -> u16 {
    let u = x.to_bits();
    if (u & 0x7fff_ffff) > 0x7f80_0000 {
        return ((u >> 16) | 64) as u16;
    }
    (u.wrapping_add(0x7fff + ((u >> 16) & 1)) >> 16) as u16
}

/// Round to nearest, ties to even, for |v| < 2^22: ggml's nearest_int (adding 1.5 * 2^23 leaves
/// the rounded integer in the low mantissa bits). Equal to `v.round_ties_even() as i32` there.
#[inline(always)]
pub(crate) fn nearest_int(v: f32) -> i32 {
    ((v + 12582912.0f32).to_bits() as i32).wrapping_sub(0x4B40_0000)
}

/// Quantizes `x` (len = 32 * out.len()) to Q8_0 blocks exactly like ggml's x86 quantize_row_q8_0.
pub(crate) fn quantize_row_q8_0(x: &[f32], out: &mut [BlockQ8_0]) {
    assert_eq!(x.len(), out.len() * 32, "quantize_row_q8_0: {} values for {} blocks", x.len(), out.len());
    for (b, xs) in out.iter_mut().zip(x.chunks_exact(32)) {
        let amax = xs.iter().fold(0.0f32, |m, &v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        b.d = f32_to_fp16(d);
        for (q, &v) in b.qs.iter_mut().zip(xs) {
            *q = nearest_int(v * id) as i8; // |v * id| <= 127
        }
    }
}

/// Quantizes `x` (len = 256 * out.len()) to Q8_K blocks exactly like ggml's quantize_row_q8_K_ref.
pub(crate) fn quantize_row_q8_k(x: &[f32], out: &mut [BlockQ8K]) {
    assert_eq!(x.len(), out.len() * 256, "quantize_row_q8_k: {} values for {} blocks", x.len(), out.len());
    for (b, xs) in out.iter_mut().zip(x.chunks_exact(256)) {
        // The first x of largest |x| (ggml's strict `>` scan), found in two vectorizable passes.
        let amax = xs.iter().fold(0.0f32, |m, &v| m.max(v.abs()));
        if amax == 0.0 || amax.is_nan() {
            *b = BlockQ8K::ZERO;
            continue;
        }
        let max = xs.iter().copied().find(|v| v.abs() == amax).unwrap_or(amax);
        let iscale = -127.0f32 / max;
        for (q, &v) in b.qs.iter_mut().zip(xs) {
            *q = nearest_int(iscale * v).min(127) as i8; // |iscale * v| <= 127
        }
        for (s, qs) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
            *s = qs.iter().map(|&q| q as i16).sum();
        }
        b.d = 1.0 / iscale;
    }
}

/// One 64-byte line of a decoded weight row pair; what its bytes hold is the decoder's layout.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug)]
pub(crate) struct DecLine(pub(crate) [u8; 64]);

/// A tile of weight rows (the type's `tile_rows`) decoded together, once, for the tiled prefill
/// kernels (`dec_rows` / `dot_dec` in the dispatch), so a row is decoded once for all tokens
/// instead of once per group of tokens. Filled by a weight type's decoder in its own layout
/// (documented beside the decoder); the buffers are reused from tile to tile.
#[derive(Clone, Debug, Default)]
pub(crate) struct DecRows {
    pub(crate) b: Vec<DecLine>, // the decoder's lines, e.g. [blocks][4 lines of 8 rows] for Q5_0 AVX2
    pub(crate) d: Vec<f32>,     // the decoder's f32 scales, e.g. [blocks][8 rows] (may be empty)
}

/// One activation vector in the forms the kernels of the engine's weight types read.
#[derive(Clone, Debug, Default)]
pub(crate) struct Act {
    pub(crate) f32: Vec<f32>,         // [n] always kept
    pub(crate) f16: Vec<f32>,         // [n] x rounded to f16 (as f32) when F16 is asked, else empty
    pub(crate) bf16: Vec<f32>,        // [n] x rounded to bf16 (as f32) when BF16 is asked, else empty
    pub(crate) q8_0: Vec<BlockQ8_0>,  // [n/32] when Q8_0 is asked, else empty
    pub(crate) q8_0_d: Vec<f32>,      // [n/32] the Q8_0 scales as f32 (fp16_to_f32(q8_0[i].d))
    pub(crate) q8_0_neg16: Vec<[i32; 8]>, // [n/32][8] lane j: -16 * (qs[4j] + .. + qs[4j + 3]) of q8_0[i]
    pub(crate) q8_0_neg16_sum: Vec<i32>,  // [n/32] -16 * (qs[0] + .. + qs[31]) of q8_0[i]: its lanes summed
    pub(crate) q8_0_s: Vec<f32>,      // [n/32] f16(amax_i / 127 * sum of q8_0[i].qs), ggml's q8_1 `s`
    pub(crate) q8_k: Vec<BlockQ8K>,   // [n/256] when Q8K is asked, else empty
}

impl Act {
    /// `x` in the forms `kinds` (the f32 form is always kept).
    pub(crate) fn new(x: &[f32], kinds: &[ActKind]) -> Act {
        let mut a = Act::default();
        a.set(x, kinds);
        a
    }

    /// Replaces the contents with `x` in the forms `kinds`, reusing the allocations. Forms not
    /// asked for are emptied so a kernel can never read a stale one. Panics when `x.len()` is not
    /// a multiple of 32 (Q8_0) or 256 (Q8K) for a quantized form asked for.
    pub(crate) fn set(&mut self, x: &[f32], kinds: &[ActKind]) {
        let n = x.len();
        [&mut self.f32, &mut self.f16, &mut self.bf16, &mut self.q8_0_d, &mut self.q8_0_s].into_iter().for_each(Vec::clear);
        (self.q8_0.clear(), self.q8_0_neg16.clear(), self.q8_0_neg16_sum.clear(), self.q8_k.clear());
        self.f32.extend_from_slice(x);
        if kinds.contains(&ActKind::F16) {
            self.f16.extend(x.iter().map(|&v| fp16_to_f32(f32_to_fp16(v))));
        }
        if kinds.contains(&ActKind::BF16) {
            self.bf16.extend(x.iter().map(|&v| bf16_to_f32(f32_to_bf16(v))));
        }
        if kinds.contains(&ActKind::Q8_0) {
            assert!(n % 32 == 0, "Q8_0 activation of length {n}, not a multiple of 32");
            self.q8_0.resize(n / 32, BlockQ8_0::ZERO);
            quantize_row_q8_0(x, &mut self.q8_0);
            self.q8_0_d.extend(self.q8_0.iter().map(|b| fp16_to_f32(b.d)));
            // what a u8 x s8 dot of weights stored as q + 16 (Q5_0 on VNNI) adds to become the signed dot
            let neg16 = |b: &BlockQ8_0| std::array::from_fn(|j| -16 * b.qs[4 * j..4 * j + 4].iter().map(|&q| q as i32).sum::<i32>());
            self.q8_0_neg16.extend(self.q8_0.iter().map(neg16));
            self.q8_0_neg16_sum.extend(self.q8_0_neg16.iter().map(|l| l.iter().sum::<i32>()));
            // d_x * sum q_x per block, the min term of a weight type with an offset (Q4_1: w = d q + m),
            // as ggml's quantize_row_q8_1 stores it: the unrounded d = amax / 127 times the sum, rounded
            // to f16 (the exact f32 product drifts from llama.cpp's logits by ~0.1 on SmolLM2; this
            // halves that). |sum| <= 32 * 127 fits i16, which vectorizes.
            let s = |(b, xs): (&BlockQ8_0, &[f32])| {
                let amax = xs.iter().fold(0.0f32, |m, &v| m.max(v.abs()));
                fp16_to_f32(f32_to_fp16(amax / 127.0 * b.qs.iter().map(|&q| q as i16).sum::<i16>() as f32))
            };
            self.q8_0_s.extend(self.q8_0.iter().zip(x.chunks_exact(32)).map(s));
        }
        if kinds.contains(&ActKind::Q8K) {
            assert!(n % 256 == 0, "Q8_K activation of length {n}, not a multiple of 256");
            self.q8_k.resize(n / 256, BlockQ8K::ZERO);
            quantize_row_q8_k(x, &mut self.q8_k);
        }
    }

    /// Number of activations.
    pub(crate) fn len(&self) -> usize { self.f32.len() }
    /// Whether there are no activations.
    pub(crate) fn is_empty(&self) -> bool { self.f32.is_empty() }
}
