//! Structure-aware fuzzing of the safetensors header parser of the Hugging Face checkpoint reader
//! (the realization ckb/realizations/hf_reader/safetensors.rs, included as the generator wraps
//! it).
//!
//! The input describes a safetensors file ([`Spec`]: tensors of every dtype with 0-4 dims,
//! zero-sized ones included, gaps between their data, `__metadata__`, header padding), which is
//! serialized well-formed and then optionally damaged, in the JSON ([`JsonEdit`]: offsets out of
//! range, overlapping or reversed; shapes that overflow or disagree with the bytes; unknown or
//! missing dtypes; non-object values) and in the bytes ([`ByteEdit`]: the header length, any
//! byte, a truncation). Two oracles:
//! - an undamaged file must parse, to exactly the tensors written (dtype, shape, data range);
//! - a damaged one must not panic, and whatever it accepts must be consistent (each range inside
//!   the file, as long as its shape and dtype say, disjoint from the others).
//!
//! cargo +nightly fuzz run safetensors_structured -- -max_total_time=3600
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use metainfer_rt as rt;
use rt::serde_json::{json, Map, Value};

#[allow(dead_code)]
mod hf_reader {
    use super::*;
    const QUANT: &str = "awq";
    include!("../../ckb/realizations/hf_reader/safetensors.rs");

    /// Parses `bytes`; for each tensor accepted, (name, dtype, shape, data range).
    pub fn parse(bytes: &[u8]) -> Result<Vec<(String, String, Vec<usize>, (usize, usize))>, String> {
        let mut out = HashMap::new();
        st_parse(bytes, "fuzz.safetensors", 0, &mut out).map_err(|e| e.to_string())?;
        let mut v: Vec<_> = out
            .into_iter()
            .map(|(k, e)| (k, e.dtype, e.shape, e.data))
            .collect();
        v.sort();
        Ok(v)
    }

    pub fn dtype_size(d: &str) -> Option<usize> {
        st_dtype_size(d)
    }
}

const DTYPES: &[&str] = &[
    "F64", "I64", "U64", "F32", "I32", "U32", "F16", "BF16", "I16", "U16", "I8", "U8", "BOOL",
    "F8_E4M3", "F8_E5M2",
];

#[derive(Arbitrary, Debug)]
struct Tensor {
    name: String,
    dtype: u8,
    shape: Vec<u8>, // up to 4 dims, each 0..=5
    gap: u8,        // bytes of unused data before this tensor's
}

#[derive(Arbitrary, Debug)]
enum JsonEdit {
    Offsets(u8, u64, u64),
    OffsetsLen(u8, Vec<u64>),
    ShapeDim(u8, u8, u64),
    Dtype(u8, String),
    Remove(u8, u8), // remove dtype / shape / data_offsets
    NotAnObject(u8),
    NegativeDim(u8),
    HeaderNotAnObject,
}

#[derive(Arbitrary, Debug)]
enum ByteEdit {
    HeaderLen(u64),
    Byte(u32, u8),
    Truncate(u16),
}

#[derive(Arbitrary, Debug)]
struct Spec {
    tensors: Vec<Tensor>,
    metadata: Vec<(String, String)>,
    padding: u8,
    json_edits: Vec<JsonEdit>,
    byte_edits: Vec<ByteEdit>,
}

type Parsed = Vec<(String, String, Vec<usize>, (usize, usize))>;

fn build(spec: &Spec) -> (Map<String, Value>, Vec<u8>, Parsed) {
    let mut header = Map::new();
    if !spec.metadata.is_empty() {
        let m: Map<String, Value> = spec
            .metadata
            .iter()
            .take(8)
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        header.insert("__metadata__".into(), Value::Object(m));
    }
    let mut data = Vec::new();
    let mut expected = Vec::new();
    for t in spec.tensors.iter().take(16) {
        if t.name == "__metadata__" || header.contains_key(&t.name) {
            continue;
        }
        let dtype = DTYPES[t.dtype as usize % DTYPES.len()];
        let shape: Vec<usize> = t.shape.iter().take(4).map(|&d| (d % 6) as usize).collect();
        let n = shape.iter().product::<usize>() * hf_reader::dtype_size(dtype).unwrap();
        data.extend(std::iter::repeat(0u8).take((t.gap % 16) as usize));
        let b = data.len();
        data.extend(std::iter::repeat(0x5au8).take(n));
        header.insert(
            t.name.clone(),
            json!({"dtype": dtype, "shape": shape, "data_offsets": [b, b + n]}),
        );
        expected.push((t.name.clone(), dtype.to_string(), shape, (b, b + n)));
    }
    (header, data, expected)
}

fn nth_tensor(header: &mut Map<String, Value>, i: u8) -> Option<&mut Value> {
    let n = header.len();
    if n == 0 {
        return None;
    }
    header.values_mut().nth(i as usize % n)
}

/// Sets `key` of a tensor entry (that an earlier edit may have made a non-object).
fn set(t: &mut Value, key: &str, v: Value) {
    if let Some(o) = t.as_object_mut() {
        o.insert(key.into(), v);
    }
}

fn serialize(header: &Value, padding: u8, data: &[u8]) -> (Vec<u8>, usize) {
    let mut h = rt::serde_json::to_vec(header).unwrap();
    h.extend(std::iter::repeat(b' ').take((padding % 8) as usize));
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&h);
    let start = out.len();
    out.extend_from_slice(data);
    (out, start)
}

fuzz_target!(|spec: Spec| {
    let (mut header, data, mut expected) = build(&spec);
    if spec.json_edits.is_empty() && spec.byte_edits.is_empty() {
        let (bytes, start) = serialize(&Value::Object(header), spec.padding, &data);
        let got = match hf_reader::parse(&bytes) {
            Ok(v) => v,
            Err(e) => panic!("a well-formed file was refused: {e}"),
        };
        for e in &mut expected {
            e.3 = (e.3 .0 + start, e.3 .1 + start);
        }
        expected.sort();
        assert_eq!(got, expected);
        return;
    }
    let mut not_object = false;
    for e in spec.json_edits.iter().take(4) {
        match e {
            JsonEdit::Offsets(i, b, en) => {
                if let Some(t) = nth_tensor(&mut header, *i) {
                    set(t, "data_offsets", json!([b, en]));
                }
            }
            JsonEdit::OffsetsLen(i, v) => {
                if let Some(t) = nth_tensor(&mut header, *i) {
                    set(t, "data_offsets", json!(v));
                }
            }
            JsonEdit::ShapeDim(i, d, v) => {
                if let Some(t) = nth_tensor(&mut header, *i) {
                    if let Some(s) = t.get_mut("shape").and_then(|s| s.as_array_mut()) {
                        let n = s.len();
                        if n == 0 {
                            s.push(json!(v));
                        } else {
                            s[*d as usize % n] = json!(v);
                        }
                    }
                }
            }
            JsonEdit::Dtype(i, d) => {
                if let Some(t) = nth_tensor(&mut header, *i) {
                    set(t, "dtype", json!(d));
                }
            }
            JsonEdit::Remove(i, f) => {
                if let Some(Value::Object(t)) = nth_tensor(&mut header, *i) {
                    t.remove(["dtype", "shape", "data_offsets"][*f as usize % 3]);
                }
            }
            JsonEdit::NotAnObject(i) => {
                if let Some(t) = nth_tensor(&mut header, *i) {
                    *t = json!([1, 2, 3]);
                }
            }
            JsonEdit::NegativeDim(i) => {
                if let Some(t) = nth_tensor(&mut header, *i) {
                    set(t, "shape", json!([-1, 4]));
                }
            }
            JsonEdit::HeaderNotAnObject => not_object = true,
        }
    }
    let header = if not_object {
        json!([header])
    } else {
        Value::Object(header)
    };
    let (mut bytes, _) = serialize(&header, spec.padding, &data);
    for e in spec.byte_edits.iter().take(4) {
        match *e {
            ByteEdit::HeaderLen(n) => bytes[..8].copy_from_slice(&n.to_le_bytes()),
            ByteEdit::Byte(at, v) => {
                let n = bytes.len();
                bytes[at as usize % n] = v;
            }
            ByteEdit::Truncate(_) => {}
        }
    }
    // Truncations last, so that the edits above always land inside the file.
    for e in spec.byte_edits.iter().take(4) {
        if let ByteEdit::Truncate(f) = *e {
            bytes.truncate(bytes.len() * f as usize / 65536);
        }
    }
    if let Ok(got) = hf_reader::parse(&bytes) {
        let mut ranges = Vec::new();
        for (_, dtype, shape, (b, e)) in &got {
            assert!(b <= e && *e <= bytes.len());
            let size = hf_reader::dtype_size(dtype).unwrap();
            assert_eq!(shape.iter().product::<usize>() * size, e - b);
            if b < e {
                ranges.push((*b, *e));
            }
        }
        ranges.sort();
        for w in ranges.windows(2) {
            assert!(w[0].1 <= w[1].0);
        }
    }
});
