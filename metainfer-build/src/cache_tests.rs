use super::*;
use crate::ckb::Ckb;
use crate::constraints::Arg;
use crate::manifest::SlotRecord;
use std::sync::{Arc, Barrier};

fn ckb() -> Ckb {
    Ckb::load(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ckb")).unwrap()
}

fn constraints(hw: &str) -> Constraints {
    let args = [
        Arg::str("model", "qwen2"),
        Arg::str("hw", hw),
        Arg::str("quant", "q4_k_m"),
    ];
    Constraints::from_args(&args, &ckb()).unwrap()
}

fn candidate(tag: &str, passed: bool) -> Candidate {
    let mut files = BTreeMap::new();
    files.insert(
        "engine.rs".to_string(),
        format!("pub struct Engine; // {tag}\n").into_bytes(),
    );
    files.insert(
        "gates.toml".to_string(),
        b"[gate.dot_f32]\nstatus = \"pass\"\n".to_vec(),
    );
    files.insert(
        "transcript.jsonl".to_string(),
        format!("{{\"tag\":\"{tag}\"}}\n").into_bytes(),
    );
    files.insert("kernels/dot.cu".to_string(), b"// kernel\n".to_vec());
    Candidate {
        files,
        slots: vec![SlotRecord {
            slot: "dot_f32".into(),
            contract: "dot_f32".into(),
            version: 1,
            implementer: "ckb".into(),
            realization: "dot_f32/scalar".into(),
        }],
        gates_passed: passed,
        ..Default::default()
    }
}

fn cache() -> (tempfile::TempDir, Cache) {
    let ws = tempfile::tempdir().unwrap();
    let cache = Cache::new("cache", ws.path());
    (ws, cache)
}

fn leftovers(cache: &Cache) -> Vec<String> {
    let Ok(rd) = fs::read_dir(&cache.dir) else {
        return Vec::new();
    };
    rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}

#[test]
fn write_then_lookup() {
    let (_ws, cache) = cache();
    let c = constraints("generic");
    assert!(cache.lookup(&c).unwrap().is_none());
    let written = cache.write(&c, "digest", &candidate("a", true)).unwrap();
    assert_eq!(written.dir, cache.dir.join(c.key()));
    let hit = cache.lookup(&c).unwrap().unwrap();
    assert_eq!(hit, written);
    let m = &hit.manifest;
    assert_eq!(m.key, c.key());
    assert_eq!(m.generator_version, crate::GENERATOR_VERSION);
    assert_eq!(m.ckb_digest, "digest");
    assert!(m.gates_passed);
    assert_eq!(m.constraints, c);
    assert_eq!(m.slots.len(), 1);
    assert_eq!(
        m.files.keys().collect::<Vec<_>>(),
        [
            "engine.rs",
            "gates.toml",
            "kernels/dot.cu",
            "transcript.jsonl"
        ]
    );
    assert_eq!(m.files["engine.rs"], hash(b"pub struct Engine; // a\n"));
    assert_eq!(hit.files().len(), 5);
    assert!(hit.staleness("digest").is_empty());
    assert_eq!(
        hit.staleness("other"),
        ["the ckb changed since it was generated"]
    );
    assert!(leftovers(&cache).is_empty());
    // The manifest is plain TOML with the constraints as a table.
    let text = fs::read_to_string(hit.manifest_path()).unwrap();
    assert!(
        text.contains("[constraints]\nbatch = 1\nfamily = \"qwen2\""),
        "{text}"
    );
}

#[test]
fn tampered_files_are_refused() {
    let (_ws, cache) = cache();
    let c = constraints("generic");
    let e = cache.write(&c, "d", &candidate("a", true)).unwrap();
    let key = c.key();

    fs::write(e.engine_path(), "pub struct Engine; // edited\n").unwrap();
    let err = cache.lookup(&c).unwrap_err().to_string();
    assert_eq!(
        err,
        format!("cache entry cache/{key} was modified after it was generated: engine.rs does not match its blake3 in manifest.toml; run `cargo metainfer prepare --refresh` to regenerate it, or restore it from git")
    );
    fs::write(e.engine_path(), "pub struct Engine; // a\n").unwrap();
    assert!(cache.lookup(&c).is_ok());

    fs::remove_file(e.path("kernels/dot.cu")).unwrap();
    let err = cache.lookup(&c).unwrap_err().to_string();
    assert!(err.contains(": kernels/dot.cu is missing;"), "{err}");
    fs::write(e.path("kernels/dot.cu"), "// kernel\n").unwrap();

    fs::write(e.path("kernels/extra.cu"), "x").unwrap();
    let err = cache.lookup(&c).unwrap_err().to_string();
    assert!(
        err.contains(": kernels/extra.cu is not listed in manifest.toml;"),
        "{err}"
    );
    fs::remove_file(e.path("kernels/extra.cu")).unwrap();

    fs::write(e.manifest_path(), "key = 3").unwrap();
    let err = cache.lookup(&c).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "cache entry cache/{key} is malformed: manifest.toml: "
        )),
        "{err}"
    );
}

#[test]
fn colliding_manifests_are_refused() {
    let (_ws, cache) = cache();
    let c = constraints("generic");
    let e = cache.write(&c, "d", &candidate("a", true)).unwrap();
    let key = c.key();
    // The stored constraints were edited: they no longer hash to the key.
    let text = fs::read_to_string(e.manifest_path()).unwrap();
    fs::write(
        e.manifest_path(),
        text.replace("hw = \"generic\"", "hw = \"x86_64-avx2\""),
    )
    .unwrap();
    let err = cache.lookup(&c).unwrap_err();
    assert!(matches!(err, CacheError::Collision { .. }), "{err}");
    assert!(err.to_string().starts_with(&format!(
        "cache entry cache/{key} holds other constraints than were asked for (stored: model=qwen2 hw=x86_64-avx2 quant=q4_k_m (key "
    )), "{err}");
    fs::write(e.manifest_path(), &text).unwrap();
    // A genuine collision: same key, other constraints asked for.
    let other = constraints("x86_64-avx2");
    let err = cache.open(&key, Some(&other)).unwrap_err().to_string();
    assert_eq!(
        err,
        format!("cache entry cache/{key} holds other constraints than were asked for (stored: model=qwen2 hw=generic quant=q4_k_m; asked: model=qwen2 hw=x86_64-avx2 quant=q4_k_m): a key collision or a hand-edited manifest; delete the entry and run `cargo metainfer prepare`, or restore it from git")
    );
    // An entry copied under another key's name.
    fs::rename(&e.dir, cache.dir.join(other.key())).unwrap();
    let err = cache.lookup(&other).unwrap_err().to_string();
    assert!(
        err.contains(&format!(
            "manifest.toml says key {key}, but the directory is {}",
            other.key()
        )),
        "{err}"
    );
}

#[test]
fn failed_gates_are_never_served() {
    let (_ws, cache) = cache();
    let c = constraints("generic");
    cache.write(&c, "d", &candidate("a", false)).unwrap();
    let err = cache.lookup(&c).unwrap_err().to_string();
    assert_eq!(
        err,
        format!("cache entry cache/{} did not pass its gates, so it is never served; see its gates.toml, then run `cargo metainfer prepare --refresh`", c.key())
    );
}

#[test]
fn bad_candidate_file_names_are_refused() {
    let (_ws, cache) = cache();
    let c = constraints("generic");
    for bad in [
        "../escape.rs",
        "/abs.rs",
        "a//b",
        "manifest.toml",
        "kernels/./x",
    ] {
        let mut cand = candidate("a", true);
        cand.files.insert(bad.to_string(), vec![]);
        assert!(
            matches!(
                cache.write(&c, "d", &cand),
                Err(CacheError::BadFileName { .. })
            ),
            "{bad}"
        );
    }
    let mut cand = candidate("a", true);
    cand.files.remove("gates.toml");
    assert!(cache.write(&c, "d", &cand).is_err());
    assert!(cache.lookup(&c).unwrap().is_none());
    assert!(leftovers(&cache).is_empty());
}

#[test]
fn concurrent_writers_of_one_key() {
    let (_ws, cache) = cache();
    let c = constraints("x86_64-avx2");
    let n = 8;
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let (cache, c, barrier) = (cache.clone(), c.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                cache.write(&c, "d", &candidate(&format!("writer {i}"), true))
            })
        })
        .collect();
    let entries: Vec<Entry> = handles
        .into_iter()
        .map(|h| h.join().unwrap().unwrap())
        .collect();
    // Every writer got the same, valid entry: the winner's.
    for e in &entries {
        assert_eq!(e, &entries[0]);
    }
    assert_eq!(cache.keys().unwrap(), [c.key()]);
    assert!(cache.lookup(&c).unwrap().is_some());
    assert!(leftovers(&cache).is_empty(), "{:?}", leftovers(&cache));
}

#[test]
fn replace_swaps_entries_whole() {
    let (_ws, cache) = cache();
    let c = constraints("generic");
    cache.write(&c, "old", &candidate("a", true)).unwrap();
    // write() keeps an existing entry...
    let kept = cache.write(&c, "new", &candidate("b", true)).unwrap();
    assert_eq!(kept.manifest.ckb_digest, "old");
    // ...replace() does not.
    let e = cache.replace(&c, "new", &candidate("b", true)).unwrap();
    assert_eq!(e.manifest.ckb_digest, "new");
    assert_eq!(
        fs::read_to_string(e.engine_path()).unwrap(),
        "pub struct Engine; // b\n"
    );
    assert!(leftovers(&cache).is_empty());
    // Concurrent replacers and readers: readers only ever see a whole entry or none.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (cache, c, stop) = (cache.clone(), c.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut seen = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some(e) = cache.lookup(&c).unwrap() {
                    assert!(e.manifest.gates_passed);
                    seen += 1;
                }
            }
            seen
        })
    };
    let writers: Vec<_> = (0..3)
        .map(|i| {
            let (cache, c) = (cache.clone(), c.clone());
            std::thread::spawn(move || {
                for j in 0..10 {
                    cache
                        .replace(&c, "d", &candidate(&format!("{i}.{j}"), true))
                        .unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    assert!(cache.lookup(&c).unwrap().is_some());
    assert!(leftovers(&cache).is_empty(), "{:?}", leftovers(&cache));
}

#[test]
fn import_keeps_the_manifest_and_update_gates_rewrites_it() {
    let (ws, cache) = cache();
    let c = constraints("generic");
    let e = cache.write(&c, "digest", &candidate("a", true)).unwrap();
    let other = Cache::new("vendor", ws.path());
    let copied = other.import(&e).unwrap();
    assert_eq!(copied.manifest, e.manifest);
    assert_eq!(
        other.import(&e).unwrap(),
        copied,
        "importing twice keeps the first copy"
    );

    let failed = cache
        .update_gates(&e, b"[gate.dot_f32]\nstatus = \"fail\"\n", false)
        .unwrap();
    assert!(!failed.manifest.gates_passed);
    assert_eq!(
        failed.manifest.files["gates.toml"],
        hash(b"[gate.dot_f32]\nstatus = \"fail\"\n")
    );
    assert_eq!(
        failed.manifest.files["engine.rs"],
        e.manifest.files["engine.rs"]
    );
    assert_eq!(failed.manifest.ckb_digest, "digest");
    assert!(matches!(
        cache.lookup(&c),
        Err(CacheError::GatesFailed { .. })
    ));
    let passed = cache.update_gates(&failed, b"ok\n", true).unwrap();
    assert!(cache.lookup(&c).unwrap().unwrap() == passed);
    assert!(leftovers(&cache).is_empty());
}

#[test]
fn sweep_removes_only_old_writer_leftovers() {
    let (_ws, cache) = cache();
    let c = constraints("generic");
    cache.write(&c, "d", &candidate("a", true)).unwrap();
    fs::create_dir_all(cache.dir.join(".tmp-dead-writer/kernels")).unwrap();
    fs::create_dir_all(cache.dir.join(".old-dead-writer")).unwrap();
    assert_eq!(
        cache.sweep(std::time::Duration::from_secs(3600)),
        0,
        "too young"
    );
    assert_eq!(cache.sweep(std::time::Duration::ZERO), 2);
    assert!(leftovers(&cache).is_empty());
    assert!(cache.lookup(&c).unwrap().is_some());
}
