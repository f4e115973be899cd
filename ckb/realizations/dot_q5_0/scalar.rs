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

/// Decodes a Q5_0 row pair for dot2x4_q5_0_scalar. Layout: line 2k + i holds block k of row i,
/// its signed quants then their magnitudes (32 bytes each); d[i * blocks + k] its f32 scale.
pub(crate) fn decode_q5_0_scalar(rows: [&[u8]; 2], out: &mut DecRows) {
    let (w0, w1) = (q5_0_blocks(rows[0]), q5_0_blocks(rows[1]));
    assert_eq!(w0.len(), w1.len(), "Q5_0 row pair of {} and {} blocks", w0.len(), w1.len());
    out.b.clear();
    out.d.clear();
    for b in w0.iter().zip(w1).flat_map(|(b0, b1)| [b0, b1]) {
        let q = q5_0_unpack(b);
        out.b.push(DecLine(std::array::from_fn(|j| if j < 32 { q[j] as u8 } else { q[j - 32].unsigned_abs() })));
    }
    out.d.extend(w0.iter().chain(w1).map(|b| fp16_to_f32(u16::from_le_bytes(b.d))));
}

/// rows[i] . xs[t] for a row pair decoded by decode_q5_0_scalar and four activations: per pair
/// the operations of dot_q5_0_scalar in the same order, so result [i][t] is bitwise
/// dot_q5_0_scalar(row i, xs[t]).
pub(crate) fn dot2x4_q5_0_scalar(rows: &DecRows, xs: [&Act; 4]) -> [[f32; 4]; 2] {
    let n = rows.b.len() / 2;
    assert!(rows.b.len() == 2 * n && rows.d.len() == 2 * n, "decoded Q5_0 row pair of {} lines and {} scales", rows.b.len(), rows.d.len());
    for x in xs {
        assert_eq!(x.q8_0.len(), n, "decoded Q5_0 row pair of {} blocks for a Q8_0 activation of {} blocks", n, x.q8_0.len());
        assert_eq!(x.q8_0.len() * 32, x.f32.len(), "activation lacks its Q8_0 form");
    }
    let mut out = [[0.0f32; 4]; 2];
    for (i, o) in out.iter_mut().enumerate() {
        for (t, x) in xs.iter().enumerate() {
            let mut sum = 0.0f32;
            for (k, y) in x.q8_0.iter().enumerate() {
                let mut s = 0i32;
                for (&qw, &qx) in rows.b[2 * k + i].0[..32].iter().zip(&y.qs) {
                    s += qw as i8 as i32 * qx as i32;
                }
                sum += (rows.d[i * n + k] * fp16_to_f32(y.d)) * s as f32;
            }
            o[t] = sum;
        }
    }
    out
}
