/// row . x for an F32 row (row.len() = 4 * x.len()).
pub(crate) fn dot_f32_scalar(row: &[u8], x: &Act) -> f32 {
    let a = &x.f32;
    assert_eq!(row.len(), a.len() * 4, "F32 row of {} bytes for an activation of {}", row.len(), a.len());
    let mut sum = 0.0f64;
    for (c, &v) in row.chunks_exact(4).zip(a) {
        sum += (f32::from_le_bytes([c[0], c[1], c[2], c[3]]) * v) as f64;
    }
    sum as f32
}
