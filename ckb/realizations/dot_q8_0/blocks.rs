// Q8_0 weights (ggml block_q8_0): blocks of 32 values, 34 bytes: d (f16) and qs[32] (i8);
// w[j] = d * qs[j]. Dotted with the Q8_0 activation: per block the exact integer sum of
// qs_w * qs_x, scaled by d_w * d_x in f32.

/// One Q8_0 weight block as stored in the file (byte fields only: align 1, any bytes valid).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockQ8_0W {
    pub(crate) d: [u8; 2],   // f16 scale, little endian
    pub(crate) qs: [u8; 32], // i8 quants
}
const _: () = assert!(std::mem::size_of::<BlockQ8_0W>() == 34);
const _: () = assert!(std::mem::align_of::<BlockQ8_0W>() == 1);

pub(crate) const Q8_0_ACT: ActKind = ActKind::Q8_0;

/// Views a Q8_0 row as its blocks. Panics when the length is not a multiple of 34.
pub(crate) fn q8_0_blocks(row: &[u8]) -> &[BlockQ8_0W] {
    assert!(row.len() % 34 == 0, "Q8_0 row of {} bytes, not a multiple of 34", row.len());
    // SAFETY: BlockQ8_0W is repr(C) of byte arrays only (size 34, align 1): every 34-byte chunk
    // of `row` is a valid value, and the slice borrows `row` for its lifetime.
    unsafe { std::slice::from_raw_parts(row.as_ptr() as *const BlockQ8_0W, row.len() / 34) }
}

/// Dequantizes a Q8_0 row (out.len() = 32 * blocks), as gguf-py and ggml do: d * q in f32.
pub(crate) fn dequant_row_q8_0(row: &[u8], out: &mut [f32]) {
    let blocks = q8_0_blocks(row);
    assert_eq!(out.len(), blocks.len() * 32, "Q8_0 row of {} blocks for {} values", blocks.len(), out.len());
    for (b, o) in blocks.iter().zip(out.chunks_exact_mut(32)) {
        let d = fp16_to_f32(u16::from_le_bytes(b.d));
        for (v, &q) in o.iter_mut().zip(&b.qs) {
            *v = d * (q as i8) as f32;
        }
    }
}
