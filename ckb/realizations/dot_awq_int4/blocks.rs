// AWQ int4 weights as the engine holds them (hf_reader repacks AutoAWQ's qweight/qzeros/scales
// into these when the checkpoint loads): blocks of 128 values of one output row, 68 bytes:
// d (f16 scale), z (zero point 0..=15) and qs[64]; in run k < 4, value 32k + j (j < 16) is the
// low nibble of qs[16k + j], value 32k + 16 + j its high nibble; w = d * (nibble - z). Dotted
// with the Q8_0 activation (four blocks of 32 per weight block): exact integer sums per run,
// scaled by d_w * d_x in f32.

/// One AWQ_INT4 weight block (byte fields only: align 1; `z` must be <= 15).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockAwqInt4 {
    pub(crate) d: [u8; 2],   // f16 scale, little endian
    pub(crate) z: [u8; 2],   // u16 zero point, little endian, 0..=15
    pub(crate) qs: [u8; 64], // four runs of 32 values: low nibbles = 0..16, high = 16..32
}
const _: () = assert!(std::mem::size_of::<BlockAwqInt4>() == 68);
const _: () = assert!(std::mem::align_of::<BlockAwqInt4>() == 1);

pub(crate) const AWQ_INT4_ACT: ActKind = ActKind::Q8_0;

/// Views an AWQ_INT4 row as its blocks. Panics when the length is not a multiple of 68.
pub(crate) fn awq_int4_blocks(row: &[u8]) -> &[BlockAwqInt4] {
    assert!(row.len() % 68 == 0, "AWQ_INT4 row of {} bytes, not a multiple of 68", row.len());
    // SAFETY: BlockAwqInt4 is repr(C) of byte arrays only (size 68, align 1): every 68-byte
    // chunk of `row` is a valid value, and the slice borrows `row` for its lifetime.
    unsafe { std::slice::from_raw_parts(row.as_ptr() as *const BlockAwqInt4, row.len() / 68) }
}

/// The zero point of a block (the loader only writes 0..=15; the mask keeps any byte pattern safe).
#[inline]
pub(crate) fn awq_int4_zero(b: &BlockAwqInt4) -> i8 {
    (u16::from_le_bytes(b.z) & 0x0F) as i8
}

/// The 128 signed values q - z of a block, in value order.
#[inline]
pub(crate) fn awq_int4_unpack(b: &BlockAwqInt4) -> [i8; 128] {
    let z = awq_int4_zero(b);
    let mut q = [0i8; 128];
    for k in 0..4 {
        for j in 0..16 {
            let byte = b.qs[16 * k + j];
            q[32 * k + j] = (byte & 0x0F) as i8 - z;
            q[32 * k + 16 + j] = (byte >> 4) as i8 - z;
        }
    }
    q
}

/// Dequantizes an AWQ_INT4 row (out.len() = 128 * blocks): d * (q - z) in f32, exact.
pub(crate) fn dequant_row_awq_int4(row: &[u8], out: &mut [f32]) {
    let blocks = awq_int4_blocks(row);
    assert_eq!(out.len(), blocks.len() * 128, "AWQ_INT4 row of {} blocks for {} values", blocks.len(), out.len());
    for (b, o) in blocks.iter().zip(out.chunks_exact_mut(128)) {
        let d = fp16_to_f32(u16::from_le_bytes(b.d));
        for (v, &q) in o.iter_mut().zip(awq_int4_unpack(b).iter()) {
            *v = d * q as f32;
        }
    }
}
