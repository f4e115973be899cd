// Gate `geglu`: the FFN's GELU gate against the float32 reference (ckb/gates/reference/geglu_ref.py,
// vectors/geglu.txt): within one f16 ulp of the table value (times up), the clamps exact.
// Compiled inside the engine crate.

#[test]
fn gate_geglu() {
    if !gate_cpu_runs("geglu") {
        return;
    }
    let data = std::path::PathBuf::from(std::env::var("METAINFER_GATE_DATA").expect("METAINFER_GATE_DATA names ckb/gates"));
    let path = data.join("vectors/geglu.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let rows: Vec<[f32; 3]> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let v: Vec<f32> = l.split_whitespace().map(|s| s.parse().unwrap_or_else(|e| panic!("bad number {s:?}: {e}"))).collect();
            [v[0], v[1], v[2]]
        })
        .collect();
    assert!(rows.len() > 3000, "{} rows", rows.len());
    let mut gate: Vec<f32> = rows.iter().map(|r| r[0]).collect();
    let up: Vec<f32> = rows.iter().map(|r| r[1]).collect();
    geglu(&mut gate, &up);
    let mut failures = 0;
    for (r, &got) in rows.iter().zip(&gate) {
        let [x, u, want] = *r;
        let ok = if x <= -10.0 || x >= 10.0 {
            got.to_bits() == want.to_bits() || got == want
        } else {
            // one f16 ulp of the gelu value (2^-10 relative), and one f32 ulp of tanh near -1
            // (0.5 |x| 2^-24: where 1 + tanh cancels), times |up|
            (got - want).abs() <= want.abs() * 2f32.powi(-10) * 1.0001 + 2f32.powi(-24) * (1.0 + x.abs()) * u.abs()
        };
        if !ok {
            failures += 1;
            if failures < 10 {
                println!("geglu({x}, {u}) = {got}, reference {want}");
            }
        }
    }
    assert_eq!(failures, 0, "{failures} of {} values off by more than one f16 ulp", rows.len());
    // in place, any length, no allocation visible: an empty slice is fine
    geglu(&mut [], &[]);
}
