//! Fuzzes the GGUF header parser of the engine's model file reader (the realization
//! ckb/realizations/gguf_reader/mmap.rs, included exactly as the generator wraps it): parsing
//! arbitrary bytes must never panic, and whatever it accepts must be consistent.
//!
//! cargo +nightly fuzz run gguf_header   (from this directory; seed corpus: see README.md)
#![no_main]

use libfuzzer_sys::fuzz_target;
use metainfer_rt as rt;

#[allow(dead_code)]
mod gguf_reader {
    use super::*;
    include!("../../ckb/realizations/gguf_reader/mmap.rs");
}
use gguf_reader::*;

include!("gguf_consistent.rs");

fuzz_target!(|data: &[u8]| {
    let Ok(h) = GgufHeader::parse(data) else { return };
    consistent(&h, data);
});
