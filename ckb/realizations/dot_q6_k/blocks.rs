// Q6_K weights (ggml block_q6_K): super-blocks of 256 values, 210 bytes: ql[128] (low 4 bits),
// qh[64] (high 2 bits), scales[16] (i8, one per 16 values), d (f16). Within each half h (128
// values; ql += 64h, qh += 32h) and l < 32: value l = ql[l] low | qh[l] bits 0-1, value 32+l =
// ql[32+l] low | qh[l] bits 2-3, value 64+l = ql[l] high | qh[l] bits 4-5, value 96+l = ql[32+l]
// high | qh[l] bits 6-7; w = (d*sc[v/16]) * (q6 - 32). Dotted with the Q8_K activation: per
// super-block the exact integer sum S = sum_g sc_g * (q . x_q over the 16 values of g), then
// (d_x*d)*S in f32.

/// One Q6_K weight block as stored in the file (byte fields only: align 1, any bytes valid).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockQ6K {
    pub(crate) ql: [u8; 128],    // low 4 bits of the quants
    pub(crate) qh: [u8; 64],     // high 2 bits of the quants
    pub(crate) scales: [u8; 16], // i8 scales, one per 16 values
    pub(crate) d: [u8; 2],       // f16 super-block scale
}
const _: () = assert!(std::mem::size_of::<BlockQ6K>() == 210);
const _: () = assert!(std::mem::align_of::<BlockQ6K>() == 1);

pub(crate) const Q6_K_ACT: ActKind = ActKind::Q8K;

/// Views a Q6_K row as its blocks. Panics when the length is not a multiple of 210.
pub(crate) fn q6_k_blocks(row: &[u8]) -> &[BlockQ6K] {
    assert!(row.len() % 210 == 0, "Q6_K row of {} bytes, not a multiple of 210", row.len());
    // SAFETY: BlockQ6K is repr(C) of byte arrays only (size 210, align 1): every 210-byte chunk
    // of `row` is a valid value, and the slice borrows `row` for its lifetime.
    unsafe { std::slice::from_raw_parts(row.as_ptr() as *const BlockQ6K, row.len() / 210) }
}

/// The 256 signed quants (q6 - 32) of a block, in value order.
#[inline]
pub(crate) fn q6_k_unpack(b: &BlockQ6K) -> [i8; 256] {
    let mut q = [0i8; 256];
    for h in 0..2 {
        let (ql, qh) = (&b.ql[64 * h..64 * h + 64], &b.qh[32 * h..32 * h + 32]);
        let o = &mut q[128 * h..128 * h + 128];
        for l in 0..32 {
            o[l] = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) as i8 - 32;
            o[l + 32] = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
            o[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
            o[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
        }
    }
    q
}

/// Dequantizes a Q6_K row (out.len() = 256 * blocks) as gguf-py and ggml do: (d*sc)*q in f32.
pub(crate) fn dequant_row_q6_k(row: &[u8], out: &mut [f32]) {
    let blocks = q6_k_blocks(row);
    assert_eq!(out.len(), blocks.len() * 256, "Q6_K row of {} blocks for {} values", blocks.len(), out.len());
    for (b, o) in blocks.iter().zip(out.chunks_exact_mut(256)) {
        let d = fp16_to_f32(u16::from_le_bytes(b.d));
        let q = q6_k_unpack(b);
        for g in 0..16 {
            let ds = d * (b.scales[g] as i8) as f32;
            for l in 16 * g..16 * g + 16 {
                o[l] = ds * q[l] as f32;
            }
        }
    }
}
