/// row . x for a Q4_K row; reads x's Q8_K form.
pub(crate) fn dot_q4_k_scalar(row: &[u8], x: &Act) -> f32 {
    let w = q4_k_blocks(row);
    let a = &x.q8_k;
    assert_eq!(w.len(), a.len(), "Q4_K row of {} blocks for a Q8_K activation of {} blocks", w.len(), a.len());
    assert_eq!(a.len() * 256, x.f32.len(), "activation lacks its Q8_K form");
    let mut sum = 0.0f32;
    for (b, y) in w.iter().zip(a) {
        let q = q4_k_unpack(b);
        let mut sumi = 0i32;
        let mut summ = 0i32;
        for j in 0..8 {
            let (sc, m) = q4_k_scale_min(j, &b.scales);
            let mut s = 0i32;
            for (&qw, &qx) in q[32 * j..32 * j + 32].iter().zip(&y.qs[32 * j..32 * j + 32]) {
                s += qw as i32 * qx as i32;
            }
            sumi += sc as i32 * s;
            summ += m as i32 * (y.bsums[2 * j] as i32 + y.bsums[2 * j + 1] as i32);
        }
        let d = y.d * fp16_to_f32(u16::from_le_bytes(b.d));
        let dmin = y.d * fp16_to_f32(u16::from_le_bytes(b.dmin));
        sum += d * sumi as f32 - dmin * summ as f32;
    }
    sum
}

/// row . xs[t] for four activations (the portable form of the four-token kernel; the same
/// values as four calls of dot_q4_k_scalar).
pub(crate) fn dot4_q4_k_scalar(row: &[u8], xs: [&Act; 4]) -> [f32; 4] {
    [dot_q4_k_scalar(row, xs[0]), dot_q4_k_scalar(row, xs[1]), dot_q4_k_scalar(row, xs[2]), dot_q4_k_scalar(row, xs[3])]
}
