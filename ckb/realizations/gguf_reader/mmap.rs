// GGUF model file reader: the file is memory-mapped once, the header (metadata and tensor
// directory) is parsed and validated completely before anything uses it, and tensor data is
// handed out as byte slices of the map. Layout (little endian): magic "GGUF", version u32 (2 or
// 3), tensor count u64, metadata count u64, metadata entries (key string, value type u32, value),
// tensor infos (name string, n_dims u32, dims u64 x n_dims with ne0 = row length first, type u32,
// offset u64 relative to the data section), padding to `general.alignment` (default 32), data.
// Strings are a u64 byte length followed by UTF-8 bytes (no terminator).

use std::collections::HashSet;

// Every ggml tensor type a GGUF file may name: (id, type, name, elements per block, bytes per block).
const GGML_TYPES: &[(u32, GgmlType, &str, usize, usize)] = &[
    (0, GgmlType::F32, "F32", 1, 4),
    (1, GgmlType::F16, "F16", 1, 2),
    (2, GgmlType::Q4_0, "Q4_0", 32, 18),
    (3, GgmlType::Q4_1, "Q4_1", 32, 20),
    (6, GgmlType::Q5_0, "Q5_0", 32, 22),
    (7, GgmlType::Q5_1, "Q5_1", 32, 24),
    (8, GgmlType::Q8_0, "Q8_0", 32, 34),
    (9, GgmlType::Q8_1, "Q8_1", 32, 36),
    (10, GgmlType::Q2_K, "Q2_K", 256, 84),
    (11, GgmlType::Q3_K, "Q3_K", 256, 110),
    (12, GgmlType::Q4_K, "Q4_K", 256, 144),
    (13, GgmlType::Q5_K, "Q5_K", 256, 176),
    (14, GgmlType::Q6_K, "Q6_K", 256, 210),
    (15, GgmlType::Q8_K, "Q8_K", 256, 292),
    (16, GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66),
    (17, GgmlType::IQ2_XS, "IQ2_XS", 256, 74),
    (18, GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98),
    (19, GgmlType::IQ1_S, "IQ1_S", 256, 50),
    (20, GgmlType::IQ4_NL, "IQ4_NL", 32, 18),
    (21, GgmlType::IQ3_S, "IQ3_S", 256, 110),
    (22, GgmlType::IQ2_S, "IQ2_S", 256, 82),
    (23, GgmlType::IQ4_XS, "IQ4_XS", 256, 136),
    (24, GgmlType::I8, "I8", 1, 1),
    (25, GgmlType::I16, "I16", 1, 2),
    (26, GgmlType::I32, "I32", 1, 4),
    (27, GgmlType::I64, "I64", 1, 8),
    (28, GgmlType::F64, "F64", 1, 8),
    (29, GgmlType::IQ1_M, "IQ1_M", 256, 56),
    (30, GgmlType::BF16, "BF16", 1, 2),
    (34, GgmlType::TQ1_0, "TQ1_0", 256, 54),
    (35, GgmlType::TQ2_0, "TQ2_0", 256, 66),
    (39, GgmlType::MXFP4, "MXFP4", 32, 17),
    (40, GgmlType::NVFP4, "NVFP4", 64, 36),
    (41, GgmlType::Q1_0, "Q1_0", 128, 18),
];

/// A ggml tensor type (the numeric ids are those of ggml.h / the GGUF spec).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    IQ2_XXS,
    IQ2_XS,
    IQ3_XXS,
    IQ1_S,
    IQ4_NL,
    IQ3_S,
    IQ2_S,
    IQ4_XS,
    I8,
    I16,
    I32,
    I64,
    F64,
    IQ1_M,
    BF16,
    TQ1_0,
    TQ2_0,
    MXFP4,
    NVFP4,
    Q1_0,
}

impl GgmlType {
    fn entry(self) -> &'static (u32, GgmlType, &'static str, usize, usize) {
        // Every variant has exactly one row in GGML_TYPES (checked by the gates).
        let mut i = 0;
        while i < GGML_TYPES.len() {
            if GGML_TYPES[i].1 == self {
                return &GGML_TYPES[i];
            }
            i += 1;
        }
        &GGML_TYPES[0]
    }

    /// The type with ggml id `id`; None for unknown and removed ids (4, 5, 31-33, 36-38).
    pub(crate) fn from_u32(id: u32) -> Option<GgmlType> {
        GGML_TYPES.iter().find(|e| e.0 == id).map(|e| e.1)
    }

    /// The ggml id of this type.
    pub(crate) fn id(self) -> u32 {
        self.entry().0
    }

    /// ggml's name of this type, e.g. "Q4_K".
    pub(crate) fn name(self) -> &'static str {
        self.entry().2
    }

    /// Elements per block (1 for the plain types).
    pub(crate) fn block_elems(self) -> usize {
        self.entry().3
    }

    /// Bytes per block.
    pub(crate) fn block_bytes(self) -> usize {
        self.entry().4
    }

    /// Bytes of a row of `n` elements; None when `n` is not a multiple of the block size or
    /// the size overflows.
    pub(crate) fn row_bytes(self, n: usize) -> Option<usize> {
        if n % self.block_elems() != 0 {
            return None;
        }
        (n / self.block_elems()).checked_mul(self.block_bytes())
    }

    /// Every type, in id order.
    pub(crate) fn all() -> impl Iterator<Item = GgmlType> {
        GGML_TYPES.iter().map(|e| e.1)
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A typed array of metadata values (all elements have the one element type of the array).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum MetaArray {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    Str(Vec<String>),
    Array(Vec<MetaArray>), // arrays of arrays (each inner array typed on its own)
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

impl MetaArray {
    pub(crate) fn len(&self) -> usize {
        match self {
            MetaArray::U8(v) => v.len(),
            MetaArray::I8(v) => v.len(),
            MetaArray::U16(v) => v.len(),
            MetaArray::I16(v) => v.len(),
            MetaArray::U32(v) => v.len(),
            MetaArray::I32(v) => v.len(),
            MetaArray::F32(v) => v.len(),
            MetaArray::Bool(v) => v.len(),
            MetaArray::Str(v) => v.len(),
            MetaArray::Array(v) => v.len(),
            MetaArray::U64(v) => v.len(),
            MetaArray::I64(v) => v.len(),
            MetaArray::F64(v) => v.len(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The GGUF name of the element type, e.g. "i32".
    pub(crate) fn elem_type_name(&self) -> &'static str {
        match self {
            MetaArray::U8(_) => "u8",
            MetaArray::I8(_) => "i8",
            MetaArray::U16(_) => "u16",
            MetaArray::I16(_) => "i16",
            MetaArray::U32(_) => "u32",
            MetaArray::I32(_) => "i32",
            MetaArray::F32(_) => "f32",
            MetaArray::Bool(_) => "bool",
            MetaArray::Str(_) => "string",
            MetaArray::Array(_) => "array",
            MetaArray::U64(_) => "u64",
            MetaArray::I64(_) => "i64",
            MetaArray::F64(_) => "f64",
        }
    }

    /// The elements as i64 when the element type is an integer type.
    pub(crate) fn to_i64_vec(&self) -> Option<Vec<i64>> {
        Some(match self {
            MetaArray::U8(v) => v.iter().map(|&x| x as i64).collect(),
            MetaArray::I8(v) => v.iter().map(|&x| x as i64).collect(),
            MetaArray::U16(v) => v.iter().map(|&x| x as i64).collect(),
            MetaArray::I16(v) => v.iter().map(|&x| x as i64).collect(),
            MetaArray::U32(v) => v.iter().map(|&x| x as i64).collect(),
            MetaArray::I32(v) => v.iter().map(|&x| x as i64).collect(),
            MetaArray::I64(v) => v.clone(),
            MetaArray::U64(v) => {
                let mut out = Vec::with_capacity(v.len());
                for &x in v {
                    out.push(i64::try_from(x).ok()?);
                }
                out
            }
            _ => return None,
        })
    }
}

/// One metadata value; the 13 GGUF value types (ids 0..=12).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum MetaValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    Str(String),
    Array(MetaArray),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl MetaValue {
    /// The GGUF name of the value's type, e.g. "u32" or "string array".
    pub(crate) fn type_name(&self) -> String {
        match self {
            MetaValue::U8(_) => "u8".into(),
            MetaValue::I8(_) => "i8".into(),
            MetaValue::U16(_) => "u16".into(),
            MetaValue::I16(_) => "i16".into(),
            MetaValue::U32(_) => "u32".into(),
            MetaValue::I32(_) => "i32".into(),
            MetaValue::F32(_) => "f32".into(),
            MetaValue::Bool(_) => "bool".into(),
            MetaValue::Str(_) => "string".into(),
            MetaValue::Array(a) => format!("{} array", a.elem_type_name()),
            MetaValue::U64(_) => "u64".into(),
            MetaValue::I64(_) => "i64".into(),
            MetaValue::F64(_) => "f64".into(),
        }
    }

    /// The value as an integer when it is stored as any integer type.
    pub(crate) fn as_i128(&self) -> Option<i128> {
        Some(match *self {
            MetaValue::U8(v) => v as i128,
            MetaValue::I8(v) => v as i128,
            MetaValue::U16(v) => v as i128,
            MetaValue::I16(v) => v as i128,
            MetaValue::U32(v) => v as i128,
            MetaValue::I32(v) => v as i128,
            MetaValue::U64(v) => v as i128,
            MetaValue::I64(v) => v as i128,
            _ => return None,
        })
    }

    /// The value as a float when it is stored as a float or an integer type.
    pub(crate) fn as_f64(&self) -> Option<f64> {
        match *self {
            MetaValue::F32(v) => Some(v as f64),
            MetaValue::F64(v) => Some(v),
            _ => self.as_i128().map(|v| v as f64),
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::Str(s) => Some(s),
            _ => None,
        }
    }

    pub(crate) fn as_bool(&self) -> Option<bool> {
        match *self {
            MetaValue::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub(crate) fn as_array(&self) -> Option<&MetaArray> {
        match self {
            MetaValue::Array(a) => Some(a),
            _ => None,
        }
    }
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
    pub(crate) fn row_len(&self) -> usize {
        self.dims.first().copied().unwrap_or(1) as usize
    }

    /// Number of rows: the product of all dims but the first.
    pub(crate) fn n_rows(&self) -> usize {
        self.dims.iter().skip(1).product::<u64>() as usize
    }

    /// Total number of elements.
    pub(crate) fn n_elems(&self) -> usize {
        self.dims.iter().product::<u64>() as usize
    }

    /// Bytes of one row.
    pub(crate) fn row_bytes(&self) -> usize {
        self.row_len() / self.ty.block_elems() * self.ty.block_bytes()
    }

    /// The dims as written by ggml, e.g. "[896, 151936]".
    pub(crate) fn shape_string(&self) -> String {
        let d: Vec<String> = self.dims.iter().map(|d| d.to_string()).collect();
        format!("[{}]", d.join(", "))
    }
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

// Deepest nesting of arrays accepted (an array of arrays of scalars has depth 2).
const GGUF_MAX_ARRAY_DEPTH: u32 = 4;
// Largest number of dimensions of a ggml tensor.
const GGUF_MAX_DIMS: u32 = 4;
const GGUF_DEFAULT_ALIGNMENT: usize = 32;

struct GgufCursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> GgufCursor<'a> {
    fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let rem = self.remaining();
        if n > rem {
            return Err(format!(
                "unexpected end of file at byte {}: {} bytes needed, {} left",
                self.pos, n, rem
            ));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.array::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.array()?))
    }

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

    // Reads `n` fixed-size elements after checking that they fit the remaining input.
    fn fixed_vec<T, const N: usize>(&mut self, n: u64, conv: fn([u8; N]) -> T) -> Result<Vec<T>, String> {
        let total = n.checked_mul(N as u64).filter(|&t| t <= self.remaining() as u64);
        let total = match total {
            Some(t) => t as usize,
            None => {
                return Err(format!(
                    "array of {n} elements of {N} bytes does not fit the {} bytes left",
                    self.remaining()
                ))
            }
        };
        let bytes = self.take(total)?;
        Ok(bytes.chunks_exact(N).map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            conv(a)
        }).collect())
    }
}

fn gguf_bool(b: u8) -> Result<bool, String> {
    match b {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(format!("bool value is {other}, must be 0 or 1")),
    }
}

// Smallest encoded size of one value of GGUF value type `ty`, None for unknown types.
fn gguf_min_value_size(ty: u32) -> Option<u64> {
    match ty {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        8 => Some(8),
        9 => Some(12),
        10..=12 => Some(8),
        _ => None,
    }
}

fn gguf_read_array(c: &mut GgufCursor<'_>, depth: u32) -> Result<MetaArray, String> {
    if depth > GGUF_MAX_ARRAY_DEPTH {
        return Err(format!("arrays nested deeper than {GGUF_MAX_ARRAY_DEPTH} levels"));
    }
    let et = c.u32()?;
    let n = c.u64()?;
    let min = gguf_min_value_size(et).ok_or_else(|| format!("array element type {et} is not a GGUF value type (0..=12)"))?;
    let rem = c.remaining() as u64;
    if n.checked_mul(min).map_or(true, |t| t > rem) {
        return Err(format!("array of {n} elements does not fit the {rem} bytes left"));
    }
    Ok(match et {
        0 => MetaArray::U8(c.fixed_vec::<u8, 1>(n, |a| a[0])?),
        1 => MetaArray::I8(c.fixed_vec::<i8, 1>(n, |a| a[0] as i8)?),
        2 => MetaArray::U16(c.fixed_vec(n, u16::from_le_bytes)?),
        3 => MetaArray::I16(c.fixed_vec(n, i16::from_le_bytes)?),
        4 => MetaArray::U32(c.fixed_vec(n, u32::from_le_bytes)?),
        5 => MetaArray::I32(c.fixed_vec(n, i32::from_le_bytes)?),
        6 => MetaArray::F32(c.fixed_vec(n, f32::from_le_bytes)?),
        7 => {
            let raw = c.fixed_vec::<u8, 1>(n, |a| a[0])?;
            let mut v = Vec::with_capacity(raw.len());
            for (k, b) in raw.into_iter().enumerate() {
                v.push(gguf_bool(b).map_err(|e| format!("element {k}: {e}"))?);
            }
            MetaArray::Bool(v)
        }
        8 => {
            let mut v = Vec::with_capacity(n as usize);
            for k in 0..n {
                v.push(c.string().map_err(|e| format!("element {k}: {e}"))?);
            }
            MetaArray::Str(v)
        }
        9 => {
            let mut v = Vec::with_capacity(n as usize);
            for k in 0..n {
                v.push(gguf_read_array(c, depth + 1).map_err(|e| format!("element {k}: {e}"))?);
            }
            MetaArray::Array(v)
        }
        10 => MetaArray::U64(c.fixed_vec(n, u64::from_le_bytes)?),
        11 => MetaArray::I64(c.fixed_vec(n, i64::from_le_bytes)?),
        _ => MetaArray::F64(c.fixed_vec(n, f64::from_le_bytes)?),
    })
}

fn gguf_read_value(c: &mut GgufCursor<'_>, ty: u32) -> Result<MetaValue, String> {
    Ok(match ty {
        0 => MetaValue::U8(c.u8()?),
        1 => MetaValue::I8(c.u8()? as i8),
        2 => MetaValue::U16(c.u16()?),
        3 => MetaValue::I16(c.u16()? as i16),
        4 => MetaValue::U32(c.u32()?),
        5 => MetaValue::I32(c.u32()? as i32),
        6 => MetaValue::F32(f32::from_bits(c.u32()?)),
        7 => MetaValue::Bool(gguf_bool(c.u8()?)?),
        8 => MetaValue::Str(c.string()?),
        9 => MetaValue::Array(gguf_read_array(c, 1)?),
        10 => MetaValue::U64(c.u64()?),
        11 => MetaValue::I64(c.u64()? as i64),
        12 => MetaValue::F64(f64::from_bits(c.u64()?)),
        other => return Err(format!("value type {other} is not a GGUF value type (0..=12)")),
    })
}

fn gguf_missing(key: &str) -> rt::Error {
    rt::Error::format(key, "missing metadata key")
}

fn gguf_wrong_type(key: &str, v: &MetaValue, expected: &str) -> rt::Error {
    rt::Error::format(key, format!("has type {}, expected {expected}", v.type_name()))
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
        if n_kv.checked_mul(13).map_or(true, |t| t > rem) {
            return Err(f("metadata_kv_count", format!("is {n_kv}, more entries than the {rem} bytes left can hold")));
        }
        if n_tensors.checked_mul(24).map_or(true, |t| t > rem) {
            return Err(f("tensor_count", format!("is {n_tensors}, more tensors than the {rem} bytes left can hold")));
        }

        let mut meta: Vec<(String, MetaValue)> = Vec::with_capacity(n_kv as usize);
        let mut keys: HashSet<String> = HashSet::with_capacity(n_kv as usize);
        for i in 0..n_kv as usize {
            let key = c.string().map_err(|d| f(format!("metadata[{i}].key"), d))?;
            let field = |part: &str| format!("metadata[{i}] '{key}'.{part}");
            let ty = c.u32().map_err(|d| f(field("type"), d))?;
            let value = gguf_read_value(&mut c, ty).map_err(|d| f(field("value"), d))?;
            if !keys.insert(key.clone()) {
                return Err(f(field("key"), "duplicate metadata key"));
            }
            meta.push((key, value));
        }

        let mut alignment = GGUF_DEFAULT_ALIGNMENT;
        if let Some((_, v)) = meta.iter().find(|(k, _)| k == "general.alignment") {
            let a = v.as_i128().ok_or_else(|| f("general.alignment", format!("has type {}, expected u32", v.type_name())))?;
            if a <= 0 || a > u32::MAX as i128 || (a & (a - 1)) != 0 {
                return Err(f("general.alignment", format!("is {a}, must be a power of two")));
            }
            alignment = a as usize;
        }

        let mut tensors: Vec<TensorInfo> = Vec::with_capacity(n_tensors as usize);
        let mut names: HashSet<String> = HashSet::with_capacity(n_tensors as usize);
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
                n_elems = n_elems
                    .checked_mul(d)
                    .filter(|&n| n <= i64::MAX as u64)
                    .ok_or_else(|| f(field("dims"), "the number of elements overflows"))?;
                dims.push(d);
            }
            let ty_id = c.u32().map_err(|d| f(field("type"), d))?;
            let ty = GgmlType::from_u32(ty_id)
                .ok_or_else(|| f(field("type"), format!("is {ty_id}, not a known ggml tensor type")))?;
            let be = ty.block_elems() as u64;
            if dims[0] % be != 0 {
                return Err(f(
                    field("dims[0]"),
                    format!("row length {} is not a multiple of the {} block size {be}", dims[0], ty.name()),
                ));
            }
            let n_bytes = (n_elems / be)
                .checked_mul(ty.block_bytes() as u64)
                .filter(|&n| n <= bytes.len() as u64)
                .ok_or_else(|| f(field("dims"), format!("{} data of shape {dims:?} is larger than the file", ty.name())))?;
            let offset = c.u64().map_err(|d| f(field("offset"), d))?;
            if offset % alignment as u64 != 0 {
                return Err(f(field("offset"), format!("is {offset}, not a multiple of the alignment {alignment}")));
            }
            if offset > bytes.len() as u64 {
                return Err(f(field("offset"), format!("is {offset}, beyond the end of the file ({} bytes)", bytes.len())));
            }
            tensors.push(TensorInfo { name, dims, ty, offset: offset as usize, n_bytes: n_bytes as usize });
        }

        // The data section starts at the next multiple of the alignment.
        let end = c.pos;
        let data_offset = end
            .checked_add(alignment - 1)
            .map(|v| v / alignment * alignment)
            .ok_or_else(|| f("data_offset", "overflows"))?;
        for (i, t) in tensors.iter().enumerate() {
            let start = data_offset.checked_add(t.offset);
            let stop = start.and_then(|s| s.checked_add(t.n_bytes));
            if stop.map_or(true, |s| s > bytes.len()) {
                return Err(f(
                    format!("tensor[{i}] '{}'.offset", t.name),
                    format!(
                        "data [{} + {}, +{} bytes) runs past the end of the file ({} bytes); the file is truncated or corrupt",
                        data_offset,
                        t.offset,
                        t.n_bytes,
                        bytes.len()
                    ),
                ));
            }
        }
        let mut order: Vec<usize> = (0..tensors.len()).collect();
        order.sort_by_key(|&i| (tensors[i].offset, tensors[i].n_bytes));
        for w in order.windows(2) {
            let (a, b) = (&tensors[w[0]], &tensors[w[1]]);
            if a.offset + a.n_bytes > b.offset {
                return Err(f(
                    format!("tensor[{}] '{}'.offset", w[1], b.name),
                    format!("data at {} overlaps tensor[{}] '{}' at {} (+{} bytes)", b.offset, w[0], a.name, a.offset, a.n_bytes),
                ));
            }
        }
        Ok(GgufHeader { version, meta, tensors, alignment, data_offset })
    }

    /// The metadata value stored under `key`.
    pub(crate) fn meta(&self, key: &str) -> Option<&MetaValue> {
        self.meta.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn need(&self, key: &str) -> rt::Result<&MetaValue> {
        self.meta(key).ok_or_else(|| gguf_missing(key))
    }

    fn int_in(&self, key: &str, v: &MetaValue, lo: i128, hi: i128, what: &str) -> rt::Result<i128> {
        let x = v.as_i128().ok_or_else(|| gguf_wrong_type(key, v, what))?;
        if x < lo || x > hi {
            return Err(rt::Error::format(key, format!("is {x}, does not fit {what}")));
        }
        Ok(x)
    }

    /// An integer stored as any integer type that fits u32.
    pub(crate) fn get_u32(&self, key: &str) -> rt::Result<u32> {
        let v = self.need(key)?;
        Ok(self.int_in(key, v, 0, u32::MAX as i128, "u32")? as u32)
    }

    pub(crate) fn get_u32_opt(&self, key: &str) -> rt::Result<Option<u32>> {
        match self.meta(key) {
            None => Ok(None),
            Some(v) => Ok(Some(self.int_in(key, v, 0, u32::MAX as i128, "u32")? as u32)),
        }
    }

    /// An integer stored as any integer type that fits u64.
    pub(crate) fn get_u64(&self, key: &str) -> rt::Result<u64> {
        let v = self.need(key)?;
        Ok(self.int_in(key, v, 0, u64::MAX as i128, "u64")? as u64)
    }

    /// An integer stored as any integer type that fits i64.
    pub(crate) fn get_i64(&self, key: &str) -> rt::Result<i64> {
        let v = self.need(key)?;
        Ok(self.int_in(key, v, i64::MIN as i128, i64::MAX as i128, "i64")? as i64)
    }

    /// A number stored as f32, f64 or an integer type.
    pub(crate) fn get_f32(&self, key: &str) -> rt::Result<f32> {
        let v = self.need(key)?;
        v.as_f64().map(|x| x as f32).ok_or_else(|| gguf_wrong_type(key, v, "f32"))
    }

    pub(crate) fn get_f32_opt(&self, key: &str) -> rt::Result<Option<f32>> {
        match self.meta(key) {
            None => Ok(None),
            Some(v) => v.as_f64().map(|x| Some(x as f32)).ok_or_else(|| gguf_wrong_type(key, v, "f32")),
        }
    }

    pub(crate) fn get_str(&self, key: &str) -> rt::Result<&str> {
        let v = self.need(key)?;
        v.as_str().ok_or_else(|| gguf_wrong_type(key, v, "string"))
    }

    pub(crate) fn get_str_opt(&self, key: &str) -> rt::Result<Option<&str>> {
        match self.meta(key) {
            None => Ok(None),
            Some(v) => v.as_str().map(Some).ok_or_else(|| gguf_wrong_type(key, v, "string")),
        }
    }

    /// A bool; `default` when the key is absent, an error when it has another type.
    pub(crate) fn get_bool_or(&self, key: &str, default: bool) -> rt::Result<bool> {
        match self.meta(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| gguf_wrong_type(key, v, "bool")),
        }
    }

    /// An array of any element type.
    pub(crate) fn get_array(&self, key: &str) -> rt::Result<&MetaArray> {
        let v = self.need(key)?;
        v.as_array().ok_or_else(|| gguf_wrong_type(key, v, "array"))
    }

    /// An array of strings (borrowed from the header).
    pub(crate) fn get_str_array(&self, key: &str) -> rt::Result<&[String]> {
        let v = self.need(key)?;
        match v {
            MetaValue::Array(MetaArray::Str(s)) => Ok(s),
            _ => Err(gguf_wrong_type(key, v, "string array")),
        }
    }

    fn int_array(&self, key: &str, lo: i64, hi: i64, what: &str) -> rt::Result<Vec<i64>> {
        let v = self.need(key)?;
        let a = v.as_array().and_then(|a| a.to_i64_vec()).ok_or_else(|| gguf_wrong_type(key, v, what))?;
        if let Some((k, x)) = a.iter().enumerate().find(|(_, &x)| x < lo || x > hi) {
            return Err(rt::Error::format(format!("{key}[{k}]"), format!("is {x}, does not fit {what}")));
        }
        Ok(a)
    }

    /// An array of integers stored as any integer element type, each fitting i32.
    pub(crate) fn get_i32_array(&self, key: &str) -> rt::Result<Vec<i32>> {
        Ok(self.int_array(key, i32::MIN as i64, i32::MAX as i64, "i32 array")?.into_iter().map(|x| x as i32).collect())
    }

    /// An array of integers stored as any integer element type, each fitting u32.
    pub(crate) fn get_u32_array(&self, key: &str) -> rt::Result<Vec<u32>> {
        Ok(self.int_array(key, 0, u32::MAX as i64, "u32 array")?.into_iter().map(|x| x as u32).collect())
    }

    /// An array of numbers stored as f32, f64 or integer elements.
    pub(crate) fn get_f32_array(&self, key: &str) -> rt::Result<Vec<f32>> {
        let v = self.need(key)?;
        match v {
            MetaValue::Array(MetaArray::F32(a)) => Ok(a.clone()),
            MetaValue::Array(MetaArray::F64(a)) => Ok(a.iter().map(|&x| x as f32).collect()),
            MetaValue::Array(a) => a
                .to_i64_vec()
                .map(|a| a.into_iter().map(|x| x as f32).collect())
                .ok_or_else(|| gguf_wrong_type(key, v, "f32 array")),
            _ => Err(gguf_wrong_type(key, v, "f32 array")),
        }
    }

    /// The directory entry of tensor `name`.
    pub(crate) fn tensor(&self, name: &str) -> rt::Result<&TensorInfo> {
        self.tensors
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| rt::Error::format(format!("tensor '{name}'"), "missing from the model file"))
    }
}

/// A memory-mapped GGUF file with its validated header.
pub(crate) struct Gguf {
    pub(crate) mmap: rt::memmap2::Mmap, // the whole file, read-only
    pub(crate) header: GgufHeader,
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

    /// A GGUF file held in memory (copied into an anonymous map), e.g. for tests.
    pub(crate) fn from_bytes(bytes: &[u8]) -> rt::Result<Gguf> {
        let header = GgufHeader::parse(bytes)?;
        let io = |source: std::io::Error| rt::Error::Io { path: std::path::PathBuf::from("<memory>"), source };
        let mut m = rt::memmap2::MmapMut::map_anon(bytes.len().max(1)).map_err(io)?;
        m[..bytes.len()].copy_from_slice(bytes);
        let mmap = m.make_read_only().map_err(io)?;
        Ok(Gguf { mmap, header })
    }

    /// The whole file.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.mmap
    }

    pub(crate) fn meta(&self, key: &str) -> Option<&MetaValue> {
        self.header.meta(key)
    }
    pub(crate) fn get_u32(&self, key: &str) -> rt::Result<u32> {
        self.header.get_u32(key)
    }
    pub(crate) fn get_u32_opt(&self, key: &str) -> rt::Result<Option<u32>> {
        self.header.get_u32_opt(key)
    }
    pub(crate) fn get_u64(&self, key: &str) -> rt::Result<u64> {
        self.header.get_u64(key)
    }
    pub(crate) fn get_i64(&self, key: &str) -> rt::Result<i64> {
        self.header.get_i64(key)
    }
    pub(crate) fn get_f32(&self, key: &str) -> rt::Result<f32> {
        self.header.get_f32(key)
    }
    pub(crate) fn get_f32_opt(&self, key: &str) -> rt::Result<Option<f32>> {
        self.header.get_f32_opt(key)
    }
    pub(crate) fn get_str(&self, key: &str) -> rt::Result<&str> {
        self.header.get_str(key)
    }
    pub(crate) fn get_str_opt(&self, key: &str) -> rt::Result<Option<&str>> {
        self.header.get_str_opt(key)
    }
    pub(crate) fn get_bool_or(&self, key: &str, default: bool) -> rt::Result<bool> {
        self.header.get_bool_or(key, default)
    }
    pub(crate) fn get_array(&self, key: &str) -> rt::Result<&MetaArray> {
        self.header.get_array(key)
    }
    pub(crate) fn get_str_array(&self, key: &str) -> rt::Result<&[String]> {
        self.header.get_str_array(key)
    }
    pub(crate) fn get_i32_array(&self, key: &str) -> rt::Result<Vec<i32>> {
        self.header.get_i32_array(key)
    }
    pub(crate) fn get_u32_array(&self, key: &str) -> rt::Result<Vec<u32>> {
        self.header.get_u32_array(key)
    }
    pub(crate) fn get_f32_array(&self, key: &str) -> rt::Result<Vec<f32>> {
        self.header.get_f32_array(key)
    }
    pub(crate) fn tensor(&self, name: &str) -> rt::Result<&TensorInfo> {
        self.header.tensor(name)
    }

    /// The data of tensor `t` (a directory entry of this file; empty for an entry that is not).
    pub(crate) fn tensor_data(&self, t: &TensorInfo) -> &[u8] {
        let start = self.header.data_offset.saturating_add(t.offset);
        self.mmap.get(start..start.saturating_add(t.n_bytes)).unwrap_or(&[])
    }
}
