// Q4_1 weights (ggml block_q4_1): blocks of 32 values, 20 bytes: d (f16), m (f16) and qs[16];
// value j < 16 is the low nibble of qs[j], value j + 16 its high nibble; w = d * nibble + m.
// Dotted with the Q8_0 activation: exact integer sum of nibble * q_x per block, scaled by d_w * d_x,
// plus m_w times the activation block's d_x * Σ q_x (Act.q8_0_s, exact in f32).

/// One Q4_1 weight block as stored in the file (byte fields only: align 1, any bytes valid).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockQ4_1 {
    pub(crate) d: [u8; 2],   // f16 scale, little endian
    pub(crate) m: [u8; 2],   // f16 min (added to every value), little endian
    pub(crate) qs: [u8; 16], // nibbles: low = values 0..16, high = values 16..32
}
const _: () = assert!(std::mem::size_of::<BlockQ4_1>() == 20);
const _: () = assert!(std::mem::align_of::<BlockQ4_1>() == 1);

pub(crate) const Q4_1_ACT: ActKind = ActKind::Q8_0;

/// Views a Q4_1 row as its blocks. Panics when the length is not a multiple of 20.
pub(crate) fn q4_1_blocks(row: &[u8]) -> &[BlockQ4_1] {
    assert!(
        row.len() % 20 == 0,
        "Q4_1 row of {} bytes, not a multiple of 20",
        row.len()
    );
    // SAFETY: BlockQ4_1 is repr(C) of byte arrays only (size 20, align 1): every 20-byte chunk
    // of `row` is a valid value, and the slice borrows `row` for its lifetime.
    unsafe { std::slice::from_raw_parts(row.as_ptr() as *const BlockQ4_1, row.len() / 20) }
}

/// The 32 unsigned quants (nibbles, 0..=15) of a block, in value order.
#[inline]
pub(crate) fn q4_1_unpack(b: &BlockQ4_1) -> [u8; 32] {
    let mut q = [0u8; 32];
    for j in 0..16 {
        q[j] = b.qs[j] & 0x0F;
        q[j + 16] = b.qs[j] >> 4;
    }
    q
}

/// Dequantizes a Q4_1 row (out.len() = 32 * blocks), as gguf-py and ggml do: d * q + m in f32
/// (a multiply, then an add: not fused).
pub(crate) fn dequant_row_q4_1(row: &[u8], out: &mut [f32]) {
    let blocks = q4_1_blocks(row);
    assert_eq!(
        out.len(),
        blocks.len() * 32,
        "Q4_1 row of {} blocks for {} values",
        blocks.len(),
        out.len()
    );
    for (b, o) in blocks.iter().zip(out.chunks_exact_mut(32)) {
        let d = fp16_to_f32(u16::from_le_bytes(b.d));
        let m = fp16_to_f32(u16::from_le_bytes(b.m));
        for (v, &q) in o.iter_mut().zip(q4_1_unpack(b).iter()) {
            *v = d * q as f32 + m;
        }
    }
}
