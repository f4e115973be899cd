// GGUF model file reader: maps the file once, validates the whole header (metadata, tensor directory)
// before anything uses it, and hands out tensor data as slices of the map. Layout (little endian):
// "GGUF", version u32, n_tensors u64, n_kv u64, n_kv x (key, type u32, value), n_tensors x (name,
// n_dims u32, dims u64 x n_dims, type u32, offset u64), padding to `general.alignment`, data.
// Strings are a u64 byte length followed by UTF-8 bytes.

use std::collections::HashSet;

/// A ggml tensor type (the variants of ggml.h; ids, names and block sizes in GGML_TYPES).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum GgmlType {
    F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1,
    Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K,
    IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ4_NL, IQ3_S, IQ2_S, IQ4_XS,
    I8, I16, I32, I64, F64, IQ1_M, BF16, TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0,
}

// Every ggml tensor type a GGUF file may name: (type, id, name, elements per block, bytes per block).
const GGML_TYPES: &[(GgmlType, u32, &str, usize, usize)] = &[
    (GgmlType::F32, 0, "F32", 1, 4),             (GgmlType::F16, 1, "F16", 1, 2),
    (GgmlType::Q4_0, 2, "Q4_0", 32, 18),         (GgmlType::Q4_1, 3, "Q4_1", 32, 20),
    (GgmlType::Q5_0, 6, "Q5_0", 32, 22),         (GgmlType::Q5_1, 7, "Q5_1", 32, 24),
    (GgmlType::Q8_0, 8, "Q8_0", 32, 34),         (GgmlType::Q8_1, 9, "Q8_1", 32, 36),
    (GgmlType::Q2_K, 10, "Q2_K", 256, 84),       (GgmlType::Q3_K, 11, "Q3_K", 256, 110),
    (GgmlType::Q4_K, 12, "Q4_K", 256, 144),      (GgmlType::Q5_K, 13, "Q5_K", 256, 176),
    (GgmlType::Q6_K, 14, "Q6_K", 256, 210),      (GgmlType::Q8_K, 15, "Q8_K", 256, 292),
    (GgmlType::IQ2_XXS, 16, "IQ2_XXS", 256, 66), (GgmlType::IQ2_XS, 17, "IQ2_XS", 256, 74),
    (GgmlType::IQ3_XXS, 18, "IQ3_XXS", 256, 98), (GgmlType::IQ1_S, 19, "IQ1_S", 256, 50),
    (GgmlType::IQ4_NL, 20, "IQ4_NL", 32, 18),    (GgmlType::IQ3_S, 21, "IQ3_S", 256, 110),
    (GgmlType::IQ2_S, 22, "IQ2_S", 256, 82),     (GgmlType::IQ4_XS, 23, "IQ4_XS", 256, 136),
    (GgmlType::I8, 24, "I8", 1, 1),              (GgmlType::I16, 25, "I16", 1, 2),
    (GgmlType::I32, 26, "I32", 1, 4),            (GgmlType::I64, 27, "I64", 1, 8),
    (GgmlType::F64, 28, "F64", 1, 8),            (GgmlType::IQ1_M, 29, "IQ1_M", 256, 56),
    (GgmlType::BF16, 30, "BF16", 1, 2),          (GgmlType::TQ1_0, 34, "TQ1_0", 256, 54),
    (GgmlType::TQ2_0, 35, "TQ2_0", 256, 66),     (GgmlType::MXFP4, 39, "MXFP4", 32, 17),
    (GgmlType::NVFP4, 40, "NVFP4", 64, 36),      (GgmlType::Q1_0, 41, "Q1_0", 128, 18),
];

impl GgmlType {
    // This type's row of GGML_TYPES (every variant has one).
    fn entry(self) -> &'static (GgmlType, u32, &'static str, usize, usize) {
        GGML_TYPES.iter().find(|e| e.0 == self).unwrap_or(&GGML_TYPES[0])
    }

    /// The type with ggml id `id`; None for unknown and removed ids (4, 5, 31-33, 36-38).
    pub(crate) fn from_u32(id: u32) -> Option<GgmlType> {
        GGML_TYPES.iter().find(|e| e.1 == id).map(|e| e.0)
    }

    /// The ggml id of this type.
    pub(crate) fn id(self) -> u32 { self.entry().1 }
    /// ggml's name of this type, e.g. "Q4_K".
    pub(crate) fn name(self) -> &'static str { self.entry().2 }
    /// Elements per block (1 for the plain types).
    pub(crate) fn block_elems(self) -> usize { self.entry().3 }
    /// Bytes per block.
    pub(crate) fn block_bytes(self) -> usize { self.entry().4 }

    /// Bytes of a row of `n` elements; None when `n` is not a multiple of the block size or the
    /// size overflows.
    pub(crate) fn row_bytes(self, n: usize) -> Option<usize> {
        if n % self.block_elems() != 0 { return None; }
        (n / self.block_elems()).checked_mul(self.block_bytes())
    }
}

// The GGUF metadata value types by id: (name, smallest encoded size).
const GGUF_VALUE_TYPES: [(&str, u64); 13] = [
    ("u8", 1), ("i8", 1), ("u16", 2), ("i16", 2), ("u32", 4), ("i32", 4), ("f32", 4),
    ("bool", 1), ("string", 8), ("array", 12), ("u64", 8), ("i64", 8), ("f64", 8),
];

fn gguf_type_name(ty: u32) -> &'static str { GGUF_VALUE_TYPES.get(ty as usize).map_or("?", |t| t.0) }
fn gguf_is_int(ty: u32) -> bool { matches!(ty, 0..=5 | 10 | 11) }

/// One metadata value; integers and floats keep their GGUF value type id (0..=12).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum MetaValue {
    Int(u32, i128),             // type id (0-5, 10, 11), value
    Float(u32, f64),            // type id (6 = f32, 12 = f64), value
    Bool(bool),
    Str(String),
    Array(u32, Vec<MetaValue>), // element type id (not 8), [n] elements of that type
    StrArray(Vec<String>),      // [n] an array of element type 8 (string)
}

impl MetaValue {
    /// The GGUF name of the value's type, e.g. "u32" or "string array".
    pub(crate) fn type_name(&self) -> String {
        match self {
            MetaValue::Int(t, _) | MetaValue::Float(t, _) => gguf_type_name(*t).into(),
            MetaValue::Bool(_) => "bool".into(),
            MetaValue::Str(_) => "string".into(),
            MetaValue::Array(t, _) => format!("{} array", gguf_type_name(*t)),
            MetaValue::StrArray(_) => "string array".into(),
        }
    }

    /// The value when it is stored as any integer type.
    pub(crate) fn as_i128(&self) -> Option<i128> { if let MetaValue::Int(_, v) = *self { Some(v) } else { None } }
}

/// One entry of the tensor directory, validated against the file.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TensorInfo {
    pub(crate) name: String,
    pub(crate) dims: Vec<u64>, // [n_dims], dims[0] = ne0 = row length (contiguous), 1..=4 dims, all > 0
    pub(crate) ty: GgmlType,
    pub(crate) offset: usize,  // bytes from the start of the data section, aligned
    pub(crate) n_bytes: usize, // bytes of data: dims[0]/block_elems*block_bytes * dims[1..].product()
}

impl TensorInfo {
    /// Elements per row (ne0).
    pub(crate) fn row_len(&self) -> usize { self.dims.first().copied().unwrap_or(1) as usize }
    /// Number of rows: the product of all dims but the first.
    pub(crate) fn n_rows(&self) -> usize { self.dims.iter().skip(1).product::<u64>() as usize }
    /// Bytes of one row.
    pub(crate) fn row_bytes(&self) -> usize { self.row_len() / self.ty.block_elems() * self.ty.block_bytes() }
}

/// The parsed, validated header of a GGUF file.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct GgufHeader {
    pub(crate) version: u32,
    pub(crate) meta: Vec<(String, MetaValue)>, // [n_kv] in file order, keys unique
    pub(crate) tensors: Vec<TensorInfo>,       // [n_tensors] in file order, names unique
    pub(crate) alignment: usize,               // general.alignment (power of two), default 32
    pub(crate) data_offset: usize,             // file offset of the data section
}

const GGUF_MAX_ARRAY_DEPTH: u32 = 4; // an array of arrays of scalars has depth 2
const GGUF_MAX_DIMS: u32 = 4;
const GGUF_DEFAULT_ALIGNMENT: usize = 32;
// Counts read from the header reserve at most this many slots up front (a sparse file can claim
// billions of entries that its size seems to hold); arrays longer than GGUF_MAX_ARRAY are refused.
const GGUF_RESERVE: u64 = 1 << 16;
const GGUF_MAX_ARRAY: u64 = 1 << 24;

struct GgufCursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> GgufCursor<'a> {
    fn remaining(&self) -> usize { self.buf.len().saturating_sub(self.pos) }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let rem = self.remaining();
        if n > rem {
            return Err(format!("unexpected end of file at byte {}: {n} bytes needed, {rem} left", self.pos));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u32(&mut self) -> Result<u32, String> { Ok(u32::from_le_bytes(self.array()?)) }
    fn u64(&mut self) -> Result<u64, String> { Ok(u64::from_le_bytes(self.array()?)) }

    fn string(&mut self) -> Result<String, String> {
        let at = self.pos;
        let n = self.u64()?;
        let rem = self.remaining() as u64;
        if n > rem {
            return Err(format!("string at byte {at} has length {n} but only {rem} bytes are left"));
        }
        let bytes = self.take(n as usize)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(format!("string at byte {at} is not valid UTF-8: {e}")),
        }
    }
}

// Reads one value of GGUF value type `ty` inside `depth` enclosing arrays.
fn gguf_read_value(c: &mut GgufCursor<'_>, ty: u32, depth: u32) -> Result<MetaValue, String> {
    Ok(match ty {
        0 => MetaValue::Int(ty, u8::from_le_bytes(c.array()?) as i128),
        1 => MetaValue::Int(ty, i8::from_le_bytes(c.array()?) as i128),
        2 => MetaValue::Int(ty, u16::from_le_bytes(c.array()?) as i128),
        3 => MetaValue::Int(ty, i16::from_le_bytes(c.array()?) as i128),
        4 => MetaValue::Int(ty, u32::from_le_bytes(c.array()?) as i128),
        5 => MetaValue::Int(ty, i32::from_le_bytes(c.array()?) as i128),
        10 => MetaValue::Int(ty, u64::from_le_bytes(c.array()?) as i128),
        11 => MetaValue::Int(ty, i64::from_le_bytes(c.array()?) as i128),
        6 => MetaValue::Float(ty, f32::from_le_bytes(c.array()?) as f64),
        12 => MetaValue::Float(ty, f64::from_le_bytes(c.array()?)),
        7 => match c.array::<1>()?[0] {
            0 => MetaValue::Bool(false),
            1 => MetaValue::Bool(true),
            other => return Err(format!("bool value is {other}, must be 0 or 1")),
        },
        8 => MetaValue::Str(c.string()?),
        9 => gguf_read_array(c, depth + 1)?,
        other => return Err(format!("value type {other} is not a GGUF value type (0..=12)")),
    })
}

// Reads an array (element type u32, count u64, elements) at nesting depth `depth` (1 = outermost).
fn gguf_read_array(c: &mut GgufCursor<'_>, depth: u32) -> Result<MetaValue, String> {
    if depth > GGUF_MAX_ARRAY_DEPTH {
        return Err(format!("arrays nested deeper than {GGUF_MAX_ARRAY_DEPTH} levels"));
    }
    let et = c.u32()?;
    let n = c.u64()?;
    let min = GGUF_VALUE_TYPES.get(et as usize).map(|t| t.1);
    let min = min.ok_or_else(|| format!("array element type {et} is not a GGUF value type (0..=12)"))?;
    let rem = c.remaining() as u64;
    if n.checked_mul(min).map_or(true, |t| t > rem) || n > GGUF_MAX_ARRAY {
        return Err(format!("array of {n} elements does not fit the {rem} bytes left, or is longer than the {GGUF_MAX_ARRAY} this reader accepts"));
    }
    if et == 8 {
        let mut v = Vec::with_capacity(n.min(GGUF_RESERVE) as usize);
        for k in 0..n {
            v.push(c.string().map_err(|e| format!("element {k}: {e}"))?);
        }
        return Ok(MetaValue::StrArray(v));
    }
    let mut v = Vec::with_capacity(n.min(GGUF_RESERVE) as usize);
    for k in 0..n {
        v.push(gguf_read_value(c, et, depth).map_err(|e| format!("element {k}: {e}"))?);
    }
    Ok(MetaValue::Array(et, v))
}

fn gguf_missing(key: &str) -> rt::Error {
    rt::Error::format(key, "missing metadata key")
}

fn gguf_wrong_type(key: &str, v: &MetaValue, expected: &str) -> rt::Error {
    rt::Error::format(key, format!("has type {}, expected {expected}", v.type_name()))
}

fn gguf_int_in(key: &str, v: &MetaValue, lo: i128, hi: i128, what: &str) -> rt::Result<i128> {
    let x = v.as_i128().ok_or_else(|| gguf_wrong_type(key, v, what))?;
    if x < lo || x > hi {
        return Err(rt::Error::format(key, format!("is {x}, does not fit {what}")));
    }
    Ok(x)
}

impl GgufHeader {
    /// Parses and validates the header of a GGUF file held in `bytes` (the whole file: the
    /// tensor data ranges are checked against its length). Never panics.
    pub(crate) fn parse(bytes: &[u8]) -> rt::Result<GgufHeader> {
        fn f(field: impl Into<String>, detail: impl Into<String>) -> rt::Error {
            rt::Error::format(field, detail)
        }
        let mut c = GgufCursor { buf: bytes, pos: 0 };
        let magic = c.take(4).map_err(|d| f("magic", d))?;
        if magic != b"GGUF" {
            return Err(f("magic", format!("is {magic:02x?}, expected \"GGUF\" (47 47 55 46); not a GGUF file")));
        }
        let version = c.u32().map_err(|d| f("version", d))?;
        if version != 2 && version != 3 {
            return Err(f("version", format!("is {version}, only GGUF versions 2 and 3 are supported")));
        }
        let n_tensors = c.u64().map_err(|d| f("tensor_count", d))?;
        let n_kv = c.u64().map_err(|d| f("metadata_kv_count", d))?;
        // Each metadata entry takes at least 13 bytes, each tensor info at least 24.
        let rem = c.remaining() as u64;
        for (field, n, min) in [("metadata_kv_count", n_kv, 13u64), ("tensor_count", n_tensors, 24)] {
            if n.checked_mul(min).map_or(true, |t| t > rem) {
                return Err(f(field, format!("is {n}, more entries than the {rem} bytes left can hold")));
            }
        }

        let mut meta: Vec<(String, MetaValue)> = Vec::with_capacity(n_kv.min(GGUF_RESERVE) as usize);
        let mut keys: HashSet<String> = HashSet::with_capacity(n_kv.min(GGUF_RESERVE) as usize);
        for i in 0..n_kv as usize {
            let key = c.string().map_err(|d| f(format!("metadata[{i}].key"), d))?;
            let field = |part: &str| format!("metadata[{i}] '{key}'.{part}");
            let ty = c.u32().map_err(|d| f(field("type"), d))?;
            let value = gguf_read_value(&mut c, ty, 0).map_err(|d| f(field("value"), d))?;
            if !keys.insert(key.clone()) {
                return Err(f(field("key"), "duplicate metadata key"));
            }
            meta.push((key, value));
        }

        let mut alignment = GGUF_DEFAULT_ALIGNMENT;
        if let Some((_, v)) = meta.iter().find(|(k, _)| k == "general.alignment") {
            let wrong = || f("general.alignment", format!("has type {}, expected u32", v.type_name()));
            let a = v.as_i128().ok_or_else(wrong)?;
            if a <= 0 || a > u32::MAX as i128 || (a & (a - 1)) != 0 {
                return Err(f("general.alignment", format!("is {a}, must be a power of two")));
            }
            alignment = a as usize;
        }

        let mut tensors: Vec<TensorInfo> = Vec::with_capacity(n_tensors.min(GGUF_RESERVE) as usize);
        let mut names: HashSet<String> = HashSet::with_capacity(n_tensors.min(GGUF_RESERVE) as usize);
        for i in 0..n_tensors as usize {
            let name = c.string().map_err(|d| f(format!("tensor[{i}].name"), d))?;
            let field = |part: &str| format!("tensor[{i}] '{name}'.{part}");
            if !names.insert(name.clone()) {
                return Err(f(field("name"), "duplicate tensor name"));
            }
            let n_dims = c.u32().map_err(|d| f(field("n_dims"), d))?;
            if n_dims == 0 || n_dims > GGUF_MAX_DIMS {
                return Err(f(field("n_dims"), format!("is {n_dims}, must be 1..={GGUF_MAX_DIMS}")));
            }
            let mut dims = Vec::with_capacity(n_dims as usize);
            let mut n_elems: u64 = 1;
            for j in 0..n_dims as usize {
                let d = c.u64().map_err(|e| f(field(&format!("dims[{j}]")), e))?;
                if d == 0 || d > i64::MAX as u64 {
                    return Err(f(field(&format!("dims[{j}]")), format!("is {d}, must be in 1..=2^63-1")));
                }
                let n = n_elems.checked_mul(d).filter(|&n| n <= i64::MAX as u64);
                n_elems = n.ok_or_else(|| f(field("dims"), "the number of elements overflows"))?;
                dims.push(d);
            }
            let ty_id = c.u32().map_err(|d| f(field("type"), d))?;
            let ty = GgmlType::from_u32(ty_id)
                .ok_or_else(|| f(field("type"), format!("is {ty_id}, not a known ggml tensor type")))?;
            let be = ty.block_elems() as u64;
            if dims[0] % be != 0 {
                let detail = format!("row length {} is not a multiple of the {} block size {be}", dims[0], ty.name());
                return Err(f(field("dims[0]"), detail));
            }
            let n_bytes = (n_elems / be).checked_mul(ty.block_bytes() as u64).filter(|&n| n <= bytes.len() as u64);
            let too_big = || f(field("dims"), format!("{} data of shape {dims:?} is larger than the file", ty.name()));
            let n_bytes = n_bytes.ok_or_else(too_big)?;
            let offset = c.u64().map_err(|d| f(field("offset"), d))?;
            if offset % alignment as u64 != 0 {
                return Err(f(field("offset"), format!("is {offset}, not a multiple of the alignment {alignment}")));
            }
            if offset > bytes.len() as u64 {
                let detail = format!("is {offset}, beyond the end of the file ({} bytes)", bytes.len());
                return Err(f(field("offset"), detail));
            }
            tensors.push(TensorInfo { name, dims, ty, offset: offset as usize, n_bytes: n_bytes as usize });
        }

        // The data section starts at the next multiple of the alignment.
        let data_offset = c.pos.checked_add(alignment - 1).map(|v| v / alignment * alignment);
        let data_offset = data_offset.ok_or_else(|| f("data_offset", "overflows"))?;
        for (i, t) in tensors.iter().enumerate() {
            let stop = data_offset.checked_add(t.offset).and_then(|s| s.checked_add(t.n_bytes));
            if stop.map_or(true, |s| s > bytes.len()) {
                let (d, at, n, len) = (data_offset, t.offset, t.n_bytes, bytes.len());
                let range = format!("data [{d} + {at}, +{n} bytes) runs past the end of the file ({len} bytes)");
                let detail = format!("{range}; the file is truncated or corrupt");
                return Err(f(format!("tensor[{i}] '{}'.offset", t.name), detail));
            }
        }
        let mut order: Vec<usize> = (0..tensors.len()).collect();
        order.sort_by_key(|&i| (tensors[i].offset, tensors[i].n_bytes));
        for w in order.windows(2) {
            let (a, b) = (&tensors[w[0]], &tensors[w[1]]);
            if a.offset + a.n_bytes > b.offset {
                let (at, n, other) = (a.offset, a.n_bytes, w[0]);
                let detail = format!("data at {} overlaps tensor[{other}] '{}' at {at} (+{n} bytes)", b.offset, a.name);
                return Err(f(format!("tensor[{}] '{}'.offset", w[1], b.name), detail));
            }
        }
        Ok(GgufHeader { version, meta, tensors, alignment, data_offset })
    }

    /// The metadata value stored under `key`.
    pub(crate) fn meta(&self, key: &str) -> Option<&MetaValue> {
        self.meta.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn need(&self, key: &str) -> rt::Result<&MetaValue> { self.meta(key).ok_or_else(|| gguf_missing(key)) }

    /// An integer stored as any integer type that fits u32; None when the key is absent.
    pub(crate) fn get_u32_opt(&self, key: &str) -> rt::Result<Option<u32>> {
        let conv = |v| gguf_int_in(key, v, 0, u32::MAX as i128, "u32").map(|x| x as u32);
        self.meta(key).map(conv).transpose()
    }

    /// An integer stored as any integer type that fits u32.
    pub(crate) fn get_u32(&self, key: &str) -> rt::Result<u32> { self.get_u32_opt(key)?.ok_or_else(|| gguf_missing(key)) }

    /// A number stored as f32, f64 or an integer type.
    pub(crate) fn get_f32(&self, key: &str) -> rt::Result<f32> {
        match *self.need(key)? {
            MetaValue::Float(_, x) => Ok(x as f32),
            MetaValue::Int(_, x) => Ok(x as f64 as f32),
            ref v => Err(gguf_wrong_type(key, v, "f32")),
        }
    }

    /// A string; None when the key is absent.
    pub(crate) fn get_str_opt(&self, key: &str) -> rt::Result<Option<&str>> {
        match self.meta(key) {
            None => Ok(None),
            Some(MetaValue::Str(s)) => Ok(Some(s)),
            Some(v) => Err(gguf_wrong_type(key, v, "string")),
        }
    }

    /// A string.
    pub(crate) fn get_str(&self, key: &str) -> rt::Result<&str> { self.get_str_opt(key)?.ok_or_else(|| gguf_missing(key)) }

    /// A bool; `default` when the key is absent, an error when it has another type.
    pub(crate) fn get_bool_or(&self, key: &str, default: bool) -> rt::Result<bool> {
        match self.meta(key) {
            None => Ok(default),
            Some(MetaValue::Bool(b)) => Ok(*b),
            Some(v) => Err(gguf_wrong_type(key, v, "bool")),
        }
    }

    /// An array of strings (borrowed from the header).
    pub(crate) fn get_str_array(&self, key: &str) -> rt::Result<&[String]> {
        match self.need(key)? {
            MetaValue::StrArray(s) => Ok(s),
            v => Err(gguf_wrong_type(key, v, "string array")),
        }
    }

    // An array of any integer element type with every element (fitting i64) in lo..=hi.
    fn int_array(&self, key: &str, lo: i128, hi: i128, what: &str) -> rt::Result<Vec<i128>> {
        let v = self.need(key)?;
        let a: Option<Vec<i128>> = match v {
            MetaValue::Array(t, items) if gguf_is_int(*t) => {
                items.iter().map(|x| x.as_i128().filter(|&x| x <= i64::MAX as i128)).collect()
            }
            _ => None,
        };
        let a = a.ok_or_else(|| gguf_wrong_type(key, v, what))?;
        if let Some((k, x)) = a.iter().enumerate().find(|(_, &x)| x < lo || x > hi) {
            return Err(rt::Error::format(format!("{key}[{k}]"), format!("is {x}, does not fit {what}")));
        }
        Ok(a)
    }

    /// An array of integers stored as any integer element type, each fitting i32.
    pub(crate) fn get_i32_array(&self, key: &str) -> rt::Result<Vec<i32>> {
        let a = self.int_array(key, i32::MIN as i128, i32::MAX as i128, "i32 array")?;
        Ok(a.into_iter().map(|x| x as i32).collect())
    }

    /// The directory entry of tensor `name`.
    pub(crate) fn tensor(&self, name: &str) -> rt::Result<&TensorInfo> {
        let t = self.tensors.iter().find(|t| t.name == name);
        t.ok_or_else(|| rt::Error::format(format!("tensor '{name}'"), "missing from the model file"))
    }
}

/// A memory-mapped GGUF file with its validated header (the header's getters apply through Deref).
pub(crate) struct Gguf {
    pub(crate) mmap: rt::memmap2::Mmap, // the whole file, read-only
    pub(crate) header: GgufHeader,
}

impl std::ops::Deref for Gguf {
    type Target = GgufHeader;

    fn deref(&self) -> &GgufHeader { &self.header }
}

impl Gguf {
    /// Maps and parses the file at `path`.
    pub(crate) fn open(path: &std::path::Path) -> rt::Result<Gguf> {
        let io = |source: std::io::Error| rt::Error::Io { path: path.to_path_buf(), source };
        let file = std::fs::File::open(path).map_err(io)?;
        // SAFETY: the map is read-only and private to this process; the engine requires that the
        // model file is not modified while it is loaded (as every mmap-based loader does).
        let mmap = unsafe { rt::memmap2::Mmap::map(&file) }.map_err(io)?;
        let header = GgufHeader::parse(&mmap)?;
        Ok(Gguf { mmap, header })
    }

    /// The whole file.
    pub(crate) fn bytes(&self) -> &[u8] { &self.mmap }

    /// The data of tensor `t` (a directory entry of this file; empty for an entry that is not).
    pub(crate) fn tensor_data(&self, t: &TensorInfo) -> &[u8] {
        let start = self.header.data_offset.saturating_add(t.offset);
        self.mmap.get(start..start.saturating_add(t.n_bytes)).unwrap_or(&[])
    }
}
