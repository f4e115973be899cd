//! Deleting a committed cache entry and generating it again (auto mode, the real chain: plan,
//! ckb implementer, review, compile + gates in a scratch crate) gives a byte-identical entry.

use metainfer_build::mode::Mode;
use metainfer_build::{ensure, Arg, ArgValue, BuildContext, Cache, Ckb, Constraints};
use std::collections::BTreeMap;
use std::path::Path;

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn regenerated_entry_is_byte_identical_to_the_committed_one() {
    let ckb = Ckb::load(Ckb::default_root()).unwrap();
    let root = ckb.workspace_root();
    let c = Constraints::from_args(
        &[
            Arg::str("model", "qwen2"),
            Arg::str("hw", "generic"),
            Arg::str("quant", "q4_k_m"),
            Arg::new("features", ArgValue::List(vec!["server".into()])),
        ],
        &ckb,
    )
    .unwrap();
    let committed = root.join("cache").join(c.key());
    assert!(
        committed.is_dir(),
        "the demo's generic engine is committed under {}",
        committed.display()
    );

    let tmp = root.join("target/regenerate-test-cache");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let mut ctx = BuildContext::for_workspace(&root)
        .unwrap()
        .with_mode(Mode::Auto, "test");
    ctx.cache = Cache::new(&tmp, &root);
    let entry = ensure(&c, &ckb, &ctx).expect("the chain regenerates the entry");

    let (want, got) = (files(&committed), files(&entry.dir));
    assert_eq!(
        want.keys().collect::<Vec<_>>(),
        got.keys().collect::<Vec<_>>(),
        "same files"
    );
    for (name, bytes) in &want {
        assert!(
            bytes == &got[name],
            "{name} differs from the committed entry"
        );
    }
}
