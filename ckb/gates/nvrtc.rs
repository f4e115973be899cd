// Gate `nvrtc`: the CUDA realizations compile with NVRTC for every cuda target's arch.
//
// It runs in the generator, not inside an engine crate: `metainfer-build/tests/nvrtc_gate.rs`
// compiles each `realizations/<contract>/<variant>.cu` with `metainfer_build::nvrtc` for the
// arch of every `targets/*.toml` whose kind is `cuda`, fails on an NVRTC error or warning
// (with the program log), and checks the PTX for `.target sm_XX` and one `.entry <kernel>` per
// kernel the contract's interface lists. Without NVRTC it prints `skipped: <reason>`, unless
// METAINFER_REQUIRE_NVRTC=1 (set by .ci/run once it has fetched nvidia-cuda-nvrtc-cu12).
// The numeric checks of the kernels on a GPU are `metainfer-build/tests/cuda_kernels.rs`.
// This file holds no code, so including it in an engine crate adds nothing.
