/// row . x for a Q4_1 row; reads x's Q8_0 form and its block sums (q8_0_s).
pub(crate) fn dot_q4_1_scalar(row: &[u8], x: &Act) -> f32 {
    let w = q4_1_blocks(row);
    let a = &x.q8_0;
    let sx = &x.q8_0_s;
    assert_eq!(
        w.len(),
        a.len(),
        "Q4_1 row of {} blocks for a Q8_0 activation of {} blocks",
        w.len(),
        a.len()
    );
    assert!(
        a.len() * 32 == x.f32.len() && sx.len() == a.len(),
        "activation lacks its Q8_0 form"
    );
    let mut sum = 0.0f32;
    for ((b, y), &s_x) in w.iter().zip(a).zip(sx) {
        let q = q4_1_unpack(b);
        let mut s = 0i32;
        for (&qw, &qx) in q.iter().zip(&y.qs) {
            s += qw as i32 * qx as i32;
        }
        sum += (fp16_to_f32(u16::from_le_bytes(b.d)) * fp16_to_f32(y.d)) * s as f32;
        sum += fp16_to_f32(u16::from_le_bytes(b.m)) * s_x;
    }
    sum
}
