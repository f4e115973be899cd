// F32 weights: a row is cols little-endian f32 values; the dot reads the plain f32 activation
// (ggml's vec_dot_type for F32 is F32). The scalar kernel accumulates in f64 like ggml's
// generic ggml_vec_dot_f32.

pub(crate) const F32_ACT: ActKind = ActKind::F32;

/// The row's values (exactly).
pub(crate) fn dequant_row_f32(row: &[u8], out: &mut [f32]) {
    assert_eq!(row.len(), out.len() * 4, "F32 row of {} bytes for {} values", row.len(), out.len());
    for (o, c) in out.iter_mut().zip(row.chunks_exact(4)) {
        *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
}
