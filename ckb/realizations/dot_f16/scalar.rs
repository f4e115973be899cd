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

/// row . x for an F16 row (row.len() = 2 * x.len()); reads x's F16 form.
pub(crate) fn dot_f16_scalar(row: &[u8], x: &Act) -> f32 {
    let a = &x.f16;
    assert_eq!(row.len(), a.len() * 2, "F16 row of {} bytes for an F16 activation of {}", row.len(), a.len());
    assert_eq!(a.len(), x.f32.len(), "activation lacks its F16 form");
    let mut sum = 0.0f64;
    for (c, &v) in row.chunks_exact(2).zip(a) {
        sum += (fp16_to_f32(u16::from_le_bytes([c[0], c[1]])) * v) as f64;
    }
    sum as f32
}
