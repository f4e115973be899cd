/// row . x for a Q6_K row; reads x's Q8_K form.
pub(crate) fn dot_q6_k_scalar(row: &[u8], x: &Act) -> f32 {
    let w = q6_k_blocks(row);
    let a = &x.q8_k;
    assert_eq!(w.len(), a.len(), "Q6_K row of {} blocks for a Q8_K activation of {} blocks", w.len(), a.len());
    assert_eq!(a.len() * 256, x.f32.len(), "activation lacks its Q8_K form");
    let mut sum = 0.0f32;
    for (b, y) in w.iter().zip(a) {
        let q = q6_k_unpack(b);
        let mut sumi = 0i32;
        for g in 0..16 {
            let mut s = 0i32;
            for (&qw, &qx) in q[16 * g..16 * g + 16].iter().zip(&y.qs[16 * g..16 * g + 16]) {
                s += qw as i32 * qx as i32;
            }
            sumi += (b.scales[g] as i8) as i32 * s;
        }
        sum += (y.d * fp16_to_f32(u16::from_le_bytes(b.d))) * sumi as f32;
    }
    sum
}

/// row . xs[t] for four activations: dot_q6_k_scalar of each.
pub(crate) fn dot4_q6_k_scalar(row: &[u8], xs: [&Act; 4]) -> [f32; 4] {
    [dot_q6_k_scalar(row, xs[0]), dot_q6_k_scalar(row, xs[1]), dot_q6_k_scalar(row, xs[2]), dot_q6_k_scalar(row, xs[3])]
}
