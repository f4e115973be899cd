//! The real `ckb/` loads (every file matches the schema, unknown fields rejected) and is
//! referentially intact: the same check as `cargo metainfer ckb check`.

use metainfer_build::{Arg, Ckb, Constraints};
use std::path::Path;

fn real_ckb() -> Ckb {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ckb");
    Ckb::load(&root).unwrap_or_else(|e| panic!("the ckb does not load: {e}"))
}

#[test]
fn ckb_check_passes() {
    let ckb = real_ckb();
    let problems = ckb.check();
    assert!(
        problems.is_empty(),
        "`cargo metainfer ckb check` problems:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_tiled_form_needs_both_entries_and_a_tile_of_2_4_or_8_rows() {
    let mut ckb = real_ckb();
    fn avx2(ckb: &mut Ckb) -> &mut metainfer_build::ckb::schema::RealizationRef {
        let c = ckb.contracts.get_mut("dot_q5_0").expect("dot_q5_0");
        let r = c.realizations.iter_mut().find(|r| r.variant == "avx2");
        r.expect("dot_q5_0 has an avx2 realization")
    }
    avx2(&mut ckb).tile_rows = Some(3);
    let problems = ckb.check();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("dot_q5_0")
                && p.contains("tile_rows = 3; a tile has 2, 4 or 8 rows")),
        "{problems:?}"
    );
    avx2(&mut ckb).tile_rows = Some(8);
    avx2(&mut ckb).entry_tiled = None;
    let problems = ckb.check();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("names only some of entry_dec, entry_tiled and tile_rows")),
        "{problems:?}"
    );
}

#[test]
fn tokenizer_flags_name_a_pre_tokenizer_of_the_family() {
    let mut ckb = real_ckb();
    let llama = ckb.models.get_mut("llama").expect("the llama family");
    llama.tokenizer.ignore_merges.push("llama3".into());
    llama.tokenizer.add_bos_for.push("gpt-4o".into());
    let problems = ckb.check();
    for (key, name) in [("ignore_merges", "llama3"), ("add_bos_for", "gpt-4o")] {
        let want = format!("tokenizer.{key} names `{name}`, which is not a pre-tokenizer");
        assert!(
            problems.iter().any(|p| p.contains(&want)),
            "{want}: {problems:?}"
        );
    }
}

#[test]
fn every_model_and_file_quant_forms_constraints() {
    let ckb = real_ckb();
    let models: Vec<String> = ckb
        .models
        .values()
        .flat_map(|f| {
            std::iter::once(f.family.clone()).chain(f.presets.iter().map(|p| p.name.clone()))
        })
        .collect();
    for model in &models {
        for q in ckb.quants.values().filter(|q| Ckb::is_file_quant(q)) {
            for t in ckb.targets.values() {
                let args = [
                    Arg::str("model", model.as_str()),
                    Arg::str("hw", t.id.as_str()),
                    Arg::str("quant", q.id.as_str()),
                    Arg::str("generator", "auto"),
                ];
                if let Err(e) = Constraints::from_args(&args, &ckb) {
                    panic!("model={model} hw={} quant={}: {e}", t.id, q.id);
                }
            }
        }
    }
}
