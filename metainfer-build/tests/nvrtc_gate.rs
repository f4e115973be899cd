//! Gate `nvrtc` (ckb/gates/nvrtc.toml), runnable without a GPU: every `.cu` realization in the
//! CKB compiles with NVRTC for the arch of every cuda target, with an empty program log (a
//! warning fails the gate), and the PTX targets that arch and has an `.entry` for each kernel
//! its contract's interface lists.
//!
//! Without NVRTC (see `metainfer_build::nvrtc` for where it is looked for) it prints
//! `skipped: <reason>` and passes, unless `METAINFER_REQUIRE_NVRTC=1` (CI sets it once it has
//! fetched the `nvidia-cuda-nvrtc-cu12` wheel), where a missing library fails. With
//! `METAINFER_PTX_OUT=DIR` it also writes `DIR/<contract>.<variant>.<arch>.ptx`.
#![allow(
    clippy::disallowed_methods,
    reason = "a test harness reads its own knobs and hands cargo's variables on"
)]

use metainfer_build::ckb::realization_file;
use metainfer_build::{nvrtc, Ckb};
use std::time::Instant;

/// The kernel name of an interface item `extern "C" __global__ void name(...)`.
fn kernel_name(item: &str) -> Option<&str> {
    let head = item.split('(').next()?;
    if !head.contains("__global__") {
        return None;
    }
    head.split_whitespace().last()
}

#[test]
fn kernel_name_parses_interface_items() {
    assert_eq!(
        kernel_name(r#"extern "C" __global__ void gemv_q4_k(const u8* w, int rows)"#),
        Some("gemv_q4_k")
    );
    assert_eq!(kernel_name("pub(crate) fn dot(x: &[f32]) -> f32"), None);
}

#[test]
fn nvrtc_gate() {
    if let Err(why) = nvrtc::available() {
        if std::env::var("METAINFER_REQUIRE_NVRTC").as_deref() == Ok("1") {
            panic!("METAINFER_REQUIRE_NVRTC=1 but {why}");
        }
        println!("skipped: {why}");
        return;
    }
    let (lib, (maj, min)) = nvrtc::version().expect("nvrtc version");
    println!("nvrtc {maj}.{min} from {}", lib.display());

    let ckb =
        Ckb::load(Ckb::default_root()).unwrap_or_else(|e| panic!("the ckb does not load: {e}"));
    let archs: Vec<&str> = ckb
        .targets
        .values()
        .filter(|t| t.kind == metainfer_build::ckb::TargetKind::Cuda)
        .map(|t| t.arch.as_str())
        .collect();
    assert!(!archs.is_empty(), "no cuda targets in ckb/targets");

    let mut failures = Vec::new();
    let mut compiled = 0usize;
    for (id, c) in &ckb.contracts {
        for r in &c.realizations {
            let Some(path) = realization_file(&ckb.root, id, &r.variant) else {
                continue;
            };
            if path.extension().is_none_or(|e| e != "cu") {
                continue;
            }
            let name = format!("ckb/realizations/{id}/{}.cu", r.variant);
            let src = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
            let kernels: Vec<&str> = c.interface.iter().filter_map(|i| kernel_name(i)).collect();
            if kernels.is_empty() {
                failures.push(format!(
                    "{name}: contract {id} lists no __global__ kernel in its interface"
                ));
            }
            for arch in &archs {
                let t0 = Instant::now();
                let out = match nvrtc::compile(&src, &name, arch, &[]) {
                    Ok(out) => out,
                    Err(e) => {
                        failures.push(e.to_string());
                        continue;
                    }
                };
                compiled += 1;
                if let Some(dir) = std::env::var_os("METAINFER_PTX_OUT") {
                    // For machines without NVRTC (scripts/device-check.sh carries these).
                    let f =
                        std::path::Path::new(&dir).join(format!("{id}.{}.{arch}.ptx", r.variant));
                    std::fs::create_dir_all(&dir)
                        .and_then(|_| std::fs::write(&f, &out.ptx))
                        .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
                }
                println!(
                    "{name} {arch}: {} bytes of ptx in {:.2}s",
                    out.ptx.len(),
                    t0.elapsed().as_secs_f64()
                );
                if !out.log.is_empty() {
                    failures.push(format!(
                        "{name} ({arch}): nvrtc warnings (the gate allows none):\n{}",
                        out.log
                    ));
                }
                let target = format!(".target {arch}");
                if !out
                    .ptx
                    .lines()
                    .any(|l| l.trim() == target || l.trim().starts_with(&format!("{target},")))
                {
                    failures.push(format!("{name} ({arch}): the ptx has no `{target}` line"));
                }
                for k in &kernels {
                    let entry = format!(".entry {k}(");
                    if !out.ptx.contains(&entry) {
                        failures.push(format!(
                            "{name} ({arch}): the ptx has no `.entry {k}` (interface of {id})"
                        ));
                    }
                }
            }
        }
    }
    assert!(
        compiled > 0 || !failures.is_empty(),
        "no .cu realizations in the ckb"
    );
    assert!(
        failures.is_empty(),
        "nvrtc gate: {} problem(s):\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
