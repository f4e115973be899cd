// Q4_K weights (ggml block_q4_K): super-blocks of 256 values, 144 bytes: d (f16), dmin (f16),
// scales[12] (eight 6-bit scales and eight 6-bit mins, packed as in ggml's get_scale_min_k4) and
// qs[128]. Sub-block j (32 values, 0..8) reads the low nibbles of qs[32*(j/2)..][..32] for even
// j, the high nibbles for odd j; w = d*sc_j*q - dmin*m_j. Dotted with the Q8_K activation: per
// super-block the exact integer sums S = sum_j sc_j * (q . x_q) and M = sum_j m_j * bsum32_j,
// then d_x*d*S - d_x*dmin*M in f32.

/// One Q4_K weight block as stored in the file (byte fields only: align 1, any bytes valid).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockQ4K {
    pub(crate) d: [u8; 2],       // f16 super-block scale of the scales
    pub(crate) dmin: [u8; 2],    // f16 super-block scale of the mins
    pub(crate) scales: [u8; 12], // 8 x (6-bit scale, 6-bit min)
    pub(crate) qs: [u8; 128],    // 4-bit quants
}
const _: () = assert!(std::mem::size_of::<BlockQ4K>() == 144);
const _: () = assert!(std::mem::align_of::<BlockQ4K>() == 1);

pub(crate) const Q4_K_ACT: ActKind = ActKind::Q8K;

/// Views a Q4_K row as its blocks. Panics when the length is not a multiple of 144.
pub(crate) fn q4_k_blocks(row: &[u8]) -> &[BlockQ4K] {
    assert!(row.len() % 144 == 0, "Q4_K row of {} bytes, not a multiple of 144", row.len());
    // SAFETY: BlockQ4K is repr(C) of byte arrays only (size 144, align 1): every 144-byte chunk
    // of `row` is a valid value, and the slice borrows `row` for its lifetime.
    unsafe { std::slice::from_raw_parts(row.as_ptr() as *const BlockQ4K, row.len() / 144) }
}

/// Scale and min of sub-block j (0..8), as ggml's get_scale_min_k4.
#[inline]
pub(crate) fn q4_k_scale_min(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

/// The 256 unsigned 4-bit quants of a block, in value order.
#[inline]
pub(crate) fn q4_k_unpack(b: &BlockQ4K) -> [u8; 256] {
    let mut q = [0u8; 256];
    for c in 0..4 {
        for l in 0..32 {
            let v = b.qs[32 * c + l];
            q[64 * c + l] = v & 0x0F;
            q[64 * c + 32 + l] = v >> 4;
        }
    }
    q
}

/// Dequantizes a Q4_K row (out.len() = 256 * blocks) as gguf-py and ggml do:
/// (d*sc)*q - (dmin*m) in f32, two roundings.
pub(crate) fn dequant_row_q4_k(row: &[u8], out: &mut [f32]) {
    let blocks = q4_k_blocks(row);
    assert_eq!(out.len(), blocks.len() * 256, "Q4_K row of {} blocks for {} values", blocks.len(), out.len());
    for (b, o) in blocks.iter().zip(out.chunks_exact_mut(256)) {
        let d = fp16_to_f32(u16::from_le_bytes(b.d));
        let dmin = fp16_to_f32(u16::from_le_bytes(b.dmin));
        let q = q4_k_unpack(b);
        for j in 0..8 {
            let (sc, m) = q4_k_scale_min(j, &b.scales);
            let d1 = d * sc as f32;
            let m1 = dmin * m as f32;
            for l in 0..32 {
                o[32 * j + l] = d1 * q[32 * j + l] as f32 - m1;
            }
        }
    }
}
