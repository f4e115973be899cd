// Gate `nvrtc`: the CUDA realizations compile with NVRTC for every cuda target's arch.
//
// It runs in the generator, not inside an engine crate: `metainfer-build/tests/nvrtc_gate.rs`
// compiles each `realizations/<contract>/<variant>.cu` with `metainfer_build::nvrtc` for the
// arch of every `targets/*.toml` whose kind is `cuda`, fails on an NVRTC error or warning
// (with the program log), and checks the PTX for `.target sm_XX` and one `.entry <kernel>` per
// kernel the contract's interface lists. Without NVRTC it prints `skipped: <reason>`, unless
// METAINFER_REQUIRE_NVRTC=1 (set by .ci/run once it has fetched nvidia-cuda-nvrtc-cu12).
// The numeric checks of the kernels on a GPU are `metainfer-build/tests/cuda_kernels.rs`.
//
// Inside a cuda engine's crate (the only engines whose plans have kernels_cuda) it checks the
// PTX the cache entry carries: it is the one the engine loads (KERNELS_CUDA_PTX), it targets
// the engine's arch, and it has an `.entry` for every kernel the host code loads
// (KERNELS_CUDA_ENTRIES, from the contract's interface). Needs no GPU and no NVRTC.

#[test]
fn entry_ptx_has_every_kernel() {
    let ptx = METAINFER_KERNELS
        .iter()
        .find(|(n, _)| *n == KERNELS_CUDA_PTX)
        .map(|(_, b)| std::str::from_utf8(b).expect("the PTX is text"))
        .unwrap_or_else(|| panic!("the entry has no kernels/{KERNELS_CUDA_PTX}"));
    let target = format!(".target {CUDA_ARCH}");
    assert!(ptx.lines().any(|l| l.trim() == target || l.trim().starts_with(&format!("{target},"))), "the PTX lacks `{target}`");
    let missing: Vec<&str> = KERNELS_CUDA_ENTRIES
        .iter()
        .copied()
        .filter(|k| !ptx.lines().any(|l| l.contains(".entry") && l.split_whitespace().any(|w| w == *k || w.starts_with(&format!("{k}(")))))
        .collect();
    println!("GATE nvrtc arch={CUDA_ARCH} kernels={} missing={} ptx_bytes={}", KERNELS_CUDA_ENTRIES.len(), missing.len(), ptx.len());
    assert!(KERNELS_CUDA_ENTRIES.len() >= 20, "the contract names {} kernels", KERNELS_CUDA_ENTRIES.len());
    assert!(missing.is_empty(), "kernels without an .entry in the PTX: {missing:?}");
}

// Every tensor type the engine compiles has its three kernels (gemv_/gemm_/get_rows_<suffix>,
// the names the host code launches through cuda_suffix) in the contract's list and in the PTX:
// a type added to a quant without its kernels in the .cu fails here, not at load on a GPU.
#[test]
fn entry_ptx_has_kernels_of_every_type() {
    let ptx = METAINFER_KERNELS
        .iter()
        .find(|(n, _)| *n == KERNELS_CUDA_PTX)
        .map(|(_, b)| std::str::from_utf8(b).expect("the PTX is text"))
        .unwrap_or_else(|| panic!("the entry has no kernels/{KERNELS_CUDA_PTX}"));
    let mut missing = Vec::new();
    for &ty in COMPILED_TYPES {
        for k in ["gemv_", "gemm_", "get_rows_"].map(|p| format!("{p}{}", cuda_suffix(ty))) {
            let in_ptx = ptx.lines().any(|l| l.contains(".entry") && l.split_whitespace().any(|w| w == k || w.starts_with(&format!("{k}("))));
            if !KERNELS_CUDA_ENTRIES.contains(&k.as_str()) || !in_ptx {
                missing.push(k);
            }
        }
    }
    println!("GATE nvrtc_types types={} missing={}", COMPILED_TYPES.len(), missing.len());
    assert!(missing.is_empty(), "tensor types whose kernels are not in the contract's list or the PTX: {missing:?}");
}
