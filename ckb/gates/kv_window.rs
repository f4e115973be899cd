// Gate `kv_window`: the KV cache's size on the tiny model of the engine's family. A global layer
// holds max_seq positions; a local (sliding-window) layer only its ring of window + BATCH - 1
// positions, stored twice. Compiled inside the engine crate. (What attention reads from the
// ring is checked by e2e_tiny: the tiny gemma3 has window 8 and 16 prompt positions.)

#[test]
fn gate_kv_window() {
    let Some(engine) = gate_load_or_skip(&gate_tiny_model(), "kv_window", "tiny model loads") else { return };
    let (c, max_seq) = (engine.cfg, engine.kv.max_seq);
    let ring = c.window + BATCH - 1;
    let rows: usize = (0..c.n_layer).map(|l| if c.is_local(l) && ring < max_seq { 2 * ring } else { max_seq }).sum();
    let full = c.n_layer * max_seq * c.kv_dim * 2 * 2;
    println!("GATE kv_window bytes={} full_bytes={full} max_seq={max_seq} window={}", engine.kv.bytes(), c.window);
    assert_eq!(engine.kv.bytes(), rows * c.kv_dim * 2 * 2, "keys and values of every layer's positions, in f16");
    if SWA_PATTERN > 0 && ring < max_seq {
        assert!(engine.kv.bytes() < full, "local layers hold only their ring");
    }
}
