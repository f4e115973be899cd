// Q4_0 weights (ggml block_q4_0): blocks of 32 values, 18 bytes: d (f16) and qs[16]; value j < 16
// is the low nibble of qs[j], value j + 16 its high nibble; w = d * (nibble - 8). Dotted with the
// Q8_0 activation: exact integer sum per block, scaled by d_w * d_x in f32.

/// One Q4_0 weight block as stored in the file (byte fields only: align 1, any bytes valid).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockQ4_0 {
    pub(crate) d: [u8; 2],   // f16 scale, little endian
    pub(crate) qs: [u8; 16], // nibbles: low = values 0..16, high = values 16..32
}
const _: () = assert!(std::mem::size_of::<BlockQ4_0>() == 18);
const _: () = assert!(std::mem::align_of::<BlockQ4_0>() == 1);

pub(crate) const Q4_0_ACT: ActKind = ActKind::Q8_0;

/// Views a Q4_0 row as its blocks. Panics when the length is not a multiple of 18.
pub(crate) fn q4_0_blocks(row: &[u8]) -> &[BlockQ4_0] {
    assert!(row.len() % 18 == 0, "Q4_0 row of {} bytes, not a multiple of 18", row.len());
    // SAFETY: BlockQ4_0 is repr(C) of byte arrays only (size 18, align 1): every 18-byte chunk
    // of `row` is a valid value, and the slice borrows `row` for its lifetime.
    unsafe { std::slice::from_raw_parts(row.as_ptr() as *const BlockQ4_0, row.len() / 18) }
}

/// The 32 signed quants (nibble - 8) of a block, in value order.
#[inline]
pub(crate) fn q4_0_unpack(b: &BlockQ4_0) -> [i8; 32] {
    let mut q = [0i8; 32];
    for j in 0..16 {
        q[j] = (b.qs[j] & 0x0F) as i8 - 8;
        q[j + 16] = (b.qs[j] >> 4) as i8 - 8;
    }
    q
}

/// Dequantizes a Q4_0 row (out.len() = 32 * blocks), as gguf-py and ggml do: d * q in f32.
pub(crate) fn dequant_row_q4_0(row: &[u8], out: &mut [f32]) {
    let blocks = q4_0_blocks(row);
    assert_eq!(out.len(), blocks.len() * 32, "Q4_0 row of {} blocks for {} values", blocks.len(), out.len());
    for (b, o) in blocks.iter().zip(out.chunks_exact_mut(32)) {
        let d = fp16_to_f32(u16::from_le_bytes(b.d));
        for (v, &q) in o.iter_mut().zip(q4_0_unpack(b).iter()) {
            *v = d * q as f32;
        }
    }
}
