/// row . x for an AWQ_INT4 row; reads x's Q8_0 form (four activation blocks per weight block).
pub(crate) fn dot_awq_int4_scalar(row: &[u8], x: &Act) -> f32 {
    let w = awq_int4_blocks(row);
    let a = &x.q8_0;
    assert_eq!(w.len() * 4, a.len(), "AWQ_INT4 row of {} blocks for a Q8_0 activation of {} blocks", w.len(), a.len());
    assert_eq!(a.len() * 32, x.f32.len(), "activation lacks its Q8_0 form");
    let mut sum = 0.0f32;
    for (b, ys) in w.iter().zip(a.chunks_exact(4)) {
        let q = awq_int4_unpack(b);
        let d = fp16_to_f32(u16::from_le_bytes(b.d));
        for (k, y) in ys.iter().enumerate() {
            let mut s = 0i32;
            for (&qw, &qx) in q[32 * k..32 * k + 32].iter().zip(&y.qs) {
                s += qw as i32 * qx as i32;
            }
            sum += (d * fp16_to_f32(y.d)) * s as f32;
        }
    }
    sum
}
