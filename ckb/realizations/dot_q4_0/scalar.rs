/// row . x for a Q4_0 row; reads x's Q8_0 form.
pub(crate) fn dot_q4_0_scalar(row: &[u8], x: &Act) -> f32 {
    let w = q4_0_blocks(row);
    let a = &x.q8_0;
    assert_eq!(w.len(), a.len(), "Q4_0 row of {} blocks for a Q8_0 activation of {} blocks", w.len(), a.len());
    assert_eq!(a.len() * 32, x.f32.len(), "activation lacks its Q8_0 form");
    let mut sum = 0.0f32;
    for (b, y) in w.iter().zip(a) {
        let q = q4_0_unpack(b);
        let mut s = 0i32;
        for (&qw, &qx) in q.iter().zip(&y.qs) {
            s += qw as i32 * qx as i32;
        }
        sum += (fp16_to_f32(u16::from_le_bytes(b.d)) * fp16_to_f32(y.d)) * s as f32;
    }
    sum
}
