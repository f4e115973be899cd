// Q5_0 weights (ggml block_q5_0): blocks of 32 values, 22 bytes: d (f16), qh[4] (bit j of the
// little-endian u32 = 5th bit of value j) and qs[16] (value j < 16 = low nibble of qs[j], value
// j + 16 = its high nibble); w = d * ((nibble | hbit << 4) - 16). Dotted with the Q8_0
// activation: exact integer sum per block, scaled by d_w * d_x in f32.

/// One Q5_0 weight block as stored in the file (byte fields only: align 1, any bytes valid).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockQ5_0 {
    pub(crate) d: [u8; 2],   // f16 scale, little endian
    pub(crate) qh: [u8; 4],  // u32 LE: bit j = high bit of value j
    pub(crate) qs: [u8; 16], // nibbles: low = values 0..16, high = values 16..32
}
const _: () = assert!(std::mem::size_of::<BlockQ5_0>() == 22);
const _: () = assert!(std::mem::align_of::<BlockQ5_0>() == 1);

pub(crate) const Q5_0_ACT: ActKind = ActKind::Q8_0;

/// Views a Q5_0 row as its blocks. Panics when the length is not a multiple of 22.
pub(crate) fn q5_0_blocks(row: &[u8]) -> &[BlockQ5_0] {
    assert!(row.len() % 22 == 0, "Q5_0 row of {} bytes, not a multiple of 22", row.len());
    // SAFETY: BlockQ5_0 is repr(C) of byte arrays only (size 22, align 1): every 22-byte chunk
    // of `row` is a valid value, and the slice borrows `row` for its lifetime.
    unsafe { std::slice::from_raw_parts(row.as_ptr() as *const BlockQ5_0, row.len() / 22) }
}

/// The 32 signed quants (5-bit value - 16) of a block, in value order.
#[inline]
pub(crate) fn q5_0_unpack(b: &BlockQ5_0) -> [i8; 32] {
    let qh = u32::from_le_bytes(b.qh);
    let mut q = [0i8; 32];
    for j in 0..16 {
        let h0 = ((qh >> j) & 1) as u8;
        let h1 = ((qh >> (j + 16)) & 1) as u8;
        q[j] = ((b.qs[j] & 0x0F) | (h0 << 4)) as i8 - 16;
        q[j + 16] = ((b.qs[j] >> 4) | (h1 << 4)) as i8 - 16;
    }
    q
}

/// Dequantizes a Q5_0 row (out.len() = 32 * blocks), as gguf-py and ggml do: d * q in f32.
pub(crate) fn dequant_row_q5_0(row: &[u8], out: &mut [f32]) {
    let blocks = q5_0_blocks(row);
    assert_eq!(out.len(), blocks.len() * 32, "Q5_0 row of {} blocks for {} values", blocks.len(), out.len());
    for (b, o) in blocks.iter().zip(out.chunks_exact_mut(32)) {
        let d = fp16_to_f32(u16::from_le_bytes(b.d));
        for (v, &q) in o.iter_mut().zip(q5_0_unpack(b).iter()) {
            *v = d * q as f32;
        }
    }
}
