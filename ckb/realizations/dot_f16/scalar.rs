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
