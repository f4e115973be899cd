/// row . x for a Q5_0 row; reads x's Q8_0 form.
pub(crate) fn dot_q5_0_scalar(row: &[u8], x: &Act) -> f32 {
    let w = q5_0_blocks(row);
    let a = &x.q8_0;
    assert_eq!(w.len(), a.len(), "Q5_0 row of {} blocks for a Q8_0 activation of {} blocks", w.len(), a.len());
    assert_eq!(a.len() * 32, x.f32.len(), "activation lacks its Q8_0 form");
    let mut sum = 0.0f32;
    for (b, y) in w.iter().zip(a) {
        let q = q5_0_unpack(b);
        let mut s = 0i32;
        for (&qw, &qx) in q.iter().zip(&y.qs) {
            s += qw as i32 * qx as i32;
        }
        sum += (fp16_to_f32(u16::from_le_bytes(b.d)) * fp16_to_f32(y.d)) * s as f32;
    }
    sum
}

/// row . xs[t] for four activations: dot_q5_0_scalar of each.
pub(crate) fn dot4_q5_0_scalar(row: &[u8], xs: [&Act; 4]) -> [f32; 4] {
    [dot_q5_0_scalar(row, xs[0]), dot_q5_0_scalar(row, xs[1]), dot_q5_0_scalar(row, xs[2]), dot_q5_0_scalar(row, xs[3])]
}

/// Decodes a Q5_0 row for dot2x4_q5_0_scalar: per block the signed quants, their magnitudes and
/// the f32 scale (the buffers of `out` are reused).
pub(crate) fn decode_q5_0_scalar(row: &[u8], out: &mut DecRow) {
    let w = q5_0_blocks(row);
    out.b.clear();
    out.d.clear();
    for b in w {
        let q = q5_0_unpack(b);
        out.b.push(DecBlock { q, a: q.map(|v| v.unsigned_abs()) });
        out.d.push(fp16_to_f32(u16::from_le_bytes(b.d)));
    }
}

/// rows[i] . xs[t] for two rows decoded by decode_q5_0_scalar and four activations: per pair
/// the operations of dot_q5_0_scalar in the same order, so result [i][t] is bitwise
/// dot_q5_0_scalar(row i, xs[t]).
pub(crate) fn dot2x4_q5_0_scalar(rows: [&DecRow; 2], xs: [&Act; 4]) -> [[f32; 4]; 2] {
    let n = rows[0].b.len();
    for r in rows {
        assert!(r.b.len() == n && r.d.len() == n, "decoded Q5_0 rows of {} and {} blocks", n, r.b.len());
    }
    for x in xs {
        assert_eq!(x.q8_0.len(), n, "decoded Q5_0 row of {} blocks for a Q8_0 activation of {} blocks", n, x.q8_0.len());
        assert_eq!(x.q8_0.len() * 32, x.f32.len(), "activation lacks its Q8_0 form");
    }
    let mut out = [[0.0f32; 4]; 2];
    for (i, r) in rows.iter().enumerate() {
        for (t, x) in xs.iter().enumerate() {
            let mut sum = 0.0f32;
            for ((b, &d), y) in r.b.iter().zip(&r.d).zip(&x.q8_0) {
                let mut s = 0i32;
                for (&qw, &qx) in b.q.iter().zip(&y.qs) {
                    s += qw as i32 * qx as i32;
                }
                sum += (d * fp16_to_f32(y.d)) * s as f32;
            }
            out[i][t] = sum;
        }
    }
    out
}
