// Included by scripts/kernel-bench.sh into a crate around a cache entry's engine.rs, in the
// module of the kernels gate (ckb/gates/kernels.rs: its random rows and activations). Times the
// engine's gemv kernels (dot_row one row at a time, and dot_rows4 where the type has a four-row
// form) over a matrix of about 256 KiB (the L2 of the 2-core EPYC these figures came from: the
// compute side of a decode matvec), best of KB_REPS passes; then the memory side: the engine's
// matvec on one thread over those rows repeated to 96 MiB. Writes the rows and the activation to
// KB_DIR so that ggml.c can time ggml's vec_dot on the same bytes, both ways.

// The streamed measurement's matrix (well past the last-level cache) and passes.
const STREAM_BYTES: usize = 96 << 20;
const STREAM_REPS: usize = 15;

// The compiled types ggml.c knows.
fn kb_types() -> impl Iterator<Item = GgmlType> {
    COMPILED_TYPES.iter().copied().filter(|ty| ["Q4_1", "Q5_0", "Q8_0", "Q4_K", "Q6_K"].contains(&ty.name()))
}

// (ty, cols, rows, the rows' bytes, the activation) of a type: about 256 KiB of random rows.
fn kb_rows(ty: GgmlType) -> (GgmlType, usize, usize, Vec<u8>, Vec<f32>) {
    let cols = if 896 % ty.block_elems() == 0 { 896 } else { 4864 };
    let rows = (256 * 1024 / ty.row_bytes(cols).expect("a whole number of blocks")).max(4) / 4 * 4;
    let mut rng = GateRng::new(0x4B42);
    let w: Vec<u8> = (0..rows).flat_map(|_| gate_random_row(ty, cols, &mut rng)).collect();
    (ty, cols, rows, w, gate_random_x(cols, 0, &mut rng))
}

#[test]
fn kernel_bench() {
    let dir = std::path::PathBuf::from(std::env::var("KB_DIR").expect("KB_DIR: where the rows go"));
    let reps: usize = std::env::var("KB_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
    if let Err(e) = check_cpu() {
        panic!("this cpu cannot run the entry's kernels: {e}");
    }
    for (ty, cols, rows, w, xf) in kb_types().map(kb_rows) {
        let (rb, x) = (w.len() / rows, Act::new(&xf, &[act_kind(ty)]));
        let row = |r: usize| &w[r * rb..(r + 1) * rb];
        let time = |pass: &dyn Fn() -> f32| {
            let mut best = f64::MAX;
            for _ in 0..reps {
                let t = std::time::Instant::now();
                std::hint::black_box(pass());
                best = best.min(t.elapsed().as_secs_f64());
            }
            best * 1e9 / rows as f64
        };
        let one = time(&|| (0..rows).map(|r| dot_row(ty, row(r), &x)).sum());
        let four = dot_rows4(ty, [row(0), row(1), row(2), row(3)], &x).map(|_| {
            time(&|| (0..rows).step_by(4).map(|r| dot_rows4(ty, [row(r), row(r + 1), row(r + 2), row(r + 3)], &x).unwrap().iter().sum::<f32>()).sum())
        });
        std::fs::write(dir.join(format!("{}.w", gate_tag(ty))), &w).unwrap();
        std::fs::write(dir.join(format!("{}.x", gate_tag(ty))), xf.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
        let four = four.map_or("-".to_string(), |ns| format!("{ns:.1}"));
        println!("KB {} cols={cols} rows={rows} one_row_ns={one:.1} four_row_ns={four}", gate_tag(ty));
    }
}

// A test of its own (kernel-bench.sh runs it after kernel_bench): in the same function, the code
// around the timed loops moved the L2 figures (Q5_0's four-row form 62 -> 70 ns per row).
#[test]
fn kernel_stream() {
    if let Err(e) = check_cpu() {
        panic!("this cpu cannot run the entry's kernels: {e}");
    }
    for (ty, cols, rows, w, xf) in kb_types().map(kb_rows) {
        let (rb, x) = (w.len() / rows, Act::new(&xf, &[act_kind(ty)]));
        // Streamed: the decode matvec itself (its row split and weight prefetch, dot_rows4 where
        // the type has it) on one thread over the rows repeated to STREAM_BYTES, GB/s of weights,
        // median of STREAM_REPS passes: what decode sees, where the weights come from memory.
        let big: Vec<u8> = w.iter().copied().cycle().take(STREAM_BYTES / w.len() * w.len()).collect();
        let (pool, big_rows) = (Pool::new(1), big.len() / rb);
        let m = QMatrix { ty, rows: big_rows, cols, row_bytes: rb, data: &big };
        let mut out = vec![0f32; big_rows];
        let mut passes: Vec<f64> = (0..STREAM_REPS)
            .map(|_| {
                let t = std::time::Instant::now();
                matvec(&pool, &m, &x, &mut out);
                big.len() as f64 / t.elapsed().as_secs_f64() / 1e9
            })
            .collect();
        passes.sort_by(|a, b| a.total_cmp(b));
        println!("KS {} stream_gb_s={:.2}", gate_tag(ty), passes[STREAM_REPS / 2]);
    }
}
