// F16 weights: a row is cols little-endian IEEE half values. Like ggml (vec_dot_type F16), the
// activation is rounded to f16 first (Act's F16 form), products are taken in f32 and summed in
// f64 by the scalar kernel.

pub(crate) const F16_ACT: ActKind = ActKind::F16;

/// The row's values (exactly).
pub(crate) fn dequant_row_f16(row: &[u8], out: &mut [f32]) {
    assert_eq!(row.len(), out.len() * 2, "F16 row of {} bytes for {} values", row.len(), out.len());
    for (o, c) in out.iter_mut().zip(row.chunks_exact(2)) {
        *o = fp16_to_f32(u16::from_le_bytes([c[0], c[1]]));
    }
}
