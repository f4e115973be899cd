//! Structure-aware fuzzing of the GGUF header parser (the realization
//! ckb/realizations/gguf_reader/mmap.rs, included as the generator wraps it).
//!
//! The input is not bytes but a description of a GGUF file ([`Spec`]: version, metadata of every
//! value type with nested arrays, tensors of every ggml type with 1-4 dims, alignment, gaps,
//! data), which is serialized into a well-formed file and then, optionally, damaged by a few
//! targeted edits ([`Edit`]: a count, a length, a type id, a dim, an offset, a byte, a
//! truncation). Two oracles:
//! - an undamaged file must parse, and to exactly what was written (every key and value, every
//!   tensor's name, dims, type and offset, the alignment and the data offset);
//! - a damaged one must not panic, and whatever it accepts must be consistent (tensor data inside
//!   the file, aligned, disjoint; every getter callable on every key).
//!
//! cargo +nightly fuzz run gguf_structured -- -max_total_time=3600
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use metainfer_rt as rt;

#[allow(dead_code)]
mod gguf_reader {
    use super::*;
    include!("../../ckb/realizations/gguf_reader/mmap.rs");
}
use gguf_reader::*;

#[derive(Arbitrary, Debug, Clone)]
enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    Str(String),
    U64(u64),
    I64(i64),
    F64(f64),
    /// An array of `elem`'s type id (0..=12 by modulo), its elements generated of that type.
    Array { elem: u8, items: Vec<Value> },
}

#[derive(Arbitrary, Debug)]
struct Tensor {
    name: String,
    ty: u8,        // index into the known ggml types (modulo)
    dims: Vec<u8>, // 1..=4 used, each 1..=4; dims[0] is counted in blocks
    gap: u8,       // alignment units of padding before this tensor's data
}

#[derive(Arbitrary, Debug)]
enum Edit {
    /// Overwrite the tensor or metadata count with this value.
    TensorCount(u64),
    KvCount(u64),
    /// Overwrite the u64 at this (modulo) offset of the header: a string length, array count,
    /// dim or tensor offset, depending on where it lands.
    U64At(u16, u64),
    /// Overwrite the u32 at this offset: a type id, n_dims, element type or version.
    U32At(u16, u32),
    /// Overwrite one byte anywhere.
    Byte(u32, u8),
    /// Cut the file to this fraction (of 65536) of its length.
    Truncate(u16),
}

#[derive(Arbitrary, Debug)]
struct Spec {
    v3: bool,
    align_log2: Option<u8>, // general.alignment = 2^(x % 13) when present
    meta: Vec<(String, Value)>,
    tensors: Vec<Tensor>,
    edits: Vec<Edit>,
}

const TYPES: &[u32] = &[
    0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26,
    27, 28, 29, 30, 34, 35, 39, 40, 41,
];

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn type_id(v: &Value) -> u32 {
    match v {
        Value::U8(_) => 0,
        Value::I8(_) => 1,
        Value::U16(_) => 2,
        Value::I16(_) => 3,
        Value::U32(_) => 4,
        Value::I32(_) => 5,
        Value::F32(_) => 6,
        Value::Bool(_) => 7,
        Value::Str(_) => 8,
        Value::Array { .. } => 9,
        Value::U64(_) => 10,
        Value::I64(_) => 11,
        Value::F64(_) => 12,
    }
}

/// A value of type `ty` made from `v` (arrays hold one element type; coerce the others).
fn coerce(v: &Value, ty: u32) -> Value {
    let n = match v {
        Value::U8(x) => *x as i128,
        Value::I8(x) => *x as i128,
        Value::U16(x) => *x as i128,
        Value::I16(x) => *x as i128,
        Value::U32(x) => *x as i128,
        Value::I32(x) => *x as i128,
        Value::U64(x) => *x as i128,
        Value::I64(x) => *x as i128,
        Value::Bool(b) => *b as i128,
        Value::F32(x) => *x as i128,
        Value::F64(x) => *x as i128,
        Value::Str(s) => s.len() as i128,
        Value::Array { items, .. } => items.len() as i128,
    };
    match ty {
        0 => Value::U8(n as u8),
        1 => Value::I8(n as i8),
        2 => Value::U16(n as u16),
        3 => Value::I16(n as i16),
        4 => Value::U32(n as u32),
        5 => Value::I32(n as i32),
        6 => Value::F32(n as f32),
        7 => Value::Bool(n & 1 == 1),
        8 => Value::Str(format!("{n}")),
        10 => Value::U64(n as u64),
        11 => Value::I64(n as i64),
        12 => Value::F64(n as f64),
        _ => match v {
            Value::Array { .. } => v.clone(),
            _ => Value::Array { elem: 4, items: vec![v.clone()] },
        },
    }
}

/// Writes `v` (without its type id) and returns what the parser must read back.
fn put_value(out: &mut Vec<u8>, v: &Value, depth: u32) -> MetaValue {
    match v {
        Value::U8(x) => {
            out.push(*x);
            MetaValue::Int(0, *x as i128)
        }
        Value::I8(x) => {
            out.extend_from_slice(&x.to_le_bytes());
            MetaValue::Int(1, *x as i128)
        }
        Value::U16(x) => {
            out.extend_from_slice(&x.to_le_bytes());
            MetaValue::Int(2, *x as i128)
        }
        Value::I16(x) => {
            out.extend_from_slice(&x.to_le_bytes());
            MetaValue::Int(3, *x as i128)
        }
        Value::U32(x) => {
            out.extend_from_slice(&x.to_le_bytes());
            MetaValue::Int(4, *x as i128)
        }
        Value::I32(x) => {
            out.extend_from_slice(&x.to_le_bytes());
            MetaValue::Int(5, *x as i128)
        }
        Value::U64(x) => {
            out.extend_from_slice(&x.to_le_bytes());
            MetaValue::Int(10, *x as i128)
        }
        Value::I64(x) => {
            out.extend_from_slice(&x.to_le_bytes());
            MetaValue::Int(11, *x as i128)
        }
        Value::F32(x) => {
            out.extend_from_slice(&x.to_le_bytes());
            MetaValue::Float(6, *x as f64)
        }
        Value::F64(x) => {
            out.extend_from_slice(&x.to_le_bytes());
            MetaValue::Float(12, *x)
        }
        Value::Bool(b) => {
            out.push(*b as u8);
            MetaValue::Bool(*b)
        }
        Value::Str(s) => {
            put_str(out, s);
            MetaValue::Str(s.clone())
        }
        Value::Array { elem, items } => {
            // Arrays nest at most 4 deep in what the reader accepts; deeper ones become u32.
            let mut et = (*elem % 13) as u32;
            if et == 9 && depth >= 3 {
                et = 4;
            }
            out.extend_from_slice(&et.to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            let vals: Vec<MetaValue> =
                items.iter().map(|i| put_value(out, &coerce(i, et), depth + 1)).collect();
            if et == 8 {
                let strs = vals
                    .into_iter()
                    .map(|v| match v {
                        MetaValue::Str(s) => s,
                        _ => unreachable!(),
                    })
                    .collect();
                MetaValue::StrArray(strs)
            } else {
                MetaValue::Array(et, vals)
            }
        }
    }
}

struct Expected {
    meta: Vec<(String, MetaValue)>,
    tensors: Vec<(String, Vec<u64>, u32, usize, usize)>, // name, dims, type id, offset, n_bytes
    alignment: usize,
    data_offset: usize,
    /// Where the counts are, for the edits.
    counts_at: usize,
}

fn serialize(spec: &Spec) -> (Vec<u8>, Expected) {
    let alignment = spec.align_log2.map_or(32, |a| 1usize << (a % 13));
    let mut meta: Vec<(String, Value)> = Vec::new();
    if spec.align_log2.is_some() {
        meta.push(("general.alignment".into(), Value::U32(alignment as u32)));
    }
    for (k, v) in spec.meta.iter().take(64) {
        if k != "general.alignment" && !meta.iter().any(|(m, _)| m == k) {
            meta.push((k.clone(), v.clone()));
        }
    }
    let mut out = b"GGUF".to_vec();
    out.extend_from_slice(&(if spec.v3 { 3u32 } else { 2 }).to_le_bytes());
    let counts_at = out.len();
    let mut names: Vec<&str> = Vec::new();
    let tensors: Vec<&Tensor> = spec
        .tensors
        .iter()
        .take(32)
        .filter(|t| {
            let fresh = !names.contains(&t.name.as_str());
            names.push(&t.name);
            fresh
        })
        .collect();
    out.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    out.extend_from_slice(&(meta.len() as u64).to_le_bytes());
    let mut exp_meta = Vec::new();
    for (k, v) in &meta {
        put_str(&mut out, k);
        out.extend_from_slice(&type_id(v).to_le_bytes());
        exp_meta.push((k.clone(), put_value(&mut out, v, 0)));
    }
    let mut exp_tensors = Vec::new();
    let mut at = 0usize;
    for t in &tensors {
        let ty = TYPES[t.ty as usize % TYPES.len()];
        let g = GgmlType::from_u32(ty).unwrap();
        let mut dims: Vec<u64> = t.dims.iter().take(4).map(|&d| (d % 4) as u64 + 1).collect();
        if dims.is_empty() {
            dims.push(1);
        }
        dims[0] *= g.block_elems() as u64;
        let n_bytes = (dims.iter().product::<u64>() as usize) / g.block_elems() * g.block_bytes();
        at += (t.gap % 4) as usize * alignment;
        put_str(&mut out, &t.name);
        out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
        for d in &dims {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&ty.to_le_bytes());
        out.extend_from_slice(&(at as u64).to_le_bytes());
        exp_tensors.push((t.name.clone(), dims, ty, at, n_bytes));
        at = (at + n_bytes).div_ceil(alignment) * alignment;
    }
    let data_offset = out.len().div_ceil(alignment) * alignment;
    out.resize(data_offset + at, 0xa5);
    (
        out,
        Expected {
            meta: exp_meta,
            tensors: exp_tensors,
            alignment,
            data_offset,
            counts_at,
        },
    )
}

include!("gguf_consistent.rs");

fuzz_target!(|spec: Spec| {
    let (mut data, exp) = serialize(&spec);
    if spec.edits.is_empty() {
        let h = match GgufHeader::parse(&data) {
            Ok(h) => h,
            Err(e) => panic!("a well-formed file was refused: {e}"),
        };
        // Floats compare by bits (NaN included) through their Debug form.
        assert_eq!(format!("{:?}", h.meta), format!("{:?}", exp.meta));
        let got: Vec<_> = h
            .tensors
            .iter()
            .map(|t| (t.name.clone(), t.dims.clone(), t.ty.id(), t.offset, t.n_bytes))
            .collect();
        assert_eq!(got, exp.tensors);
        assert_eq!(h.alignment, exp.alignment);
        assert_eq!(h.data_offset, exp.data_offset);
        consistent(&h, &data);
        return;
    }
    let header_len = exp.data_offset.max(1);
    for e in spec.edits.iter().take(4) {
        match *e {
            Edit::TensorCount(n) => data[exp.counts_at..exp.counts_at + 8].copy_from_slice(&n.to_le_bytes()),
            Edit::KvCount(n) => data[exp.counts_at + 8..exp.counts_at + 16].copy_from_slice(&n.to_le_bytes()),
            Edit::U64At(at, v) => {
                let at = at as usize % header_len.min(data.len());
                let end = (at + 8).min(data.len());
                data[at..end].copy_from_slice(&v.to_le_bytes()[..end - at]);
            }
            Edit::U32At(at, v) => {
                let at = at as usize % header_len.min(data.len());
                let end = (at + 4).min(data.len());
                data[at..end].copy_from_slice(&v.to_le_bytes()[..end - at]);
            }
            Edit::Byte(at, v) => {
                let n = data.len();
                data[at as usize % n] = v;
            }
            Edit::Truncate(_) => {}
        }
    }
    // Truncations last, so that the edits above always land inside the file.
    for e in spec.edits.iter().take(4) {
        if let Edit::Truncate(f) = *e {
            data.truncate(data.len() * f as usize / 65536);
        }
    }
    if let Ok(h) = GgufHeader::parse(&data) {
        consistent(&h, &data);
    }
});
