//! The canonical TOML text of a set of constraints: the only input of the cache key, so its
//! format is fixed here by hand (one `key = value` line per field, keys sorted, basic strings,
//! no comments) rather than left to a serializer whose output may change between versions.

use crate::constraints::Constraints;
use std::fmt::Write;

/// See [`Constraints::canonical_toml`].
pub fn to_canonical_toml(c: &Constraints) -> String {
    let mut lines: Vec<(&str, String)> = vec![
        ("batch", c.batch.to_string()),
        ("family", string(&c.family)),
        ("features", array(c.features.iter().map(|f| f.as_str()))),
        ("format", string(c.format.as_str())),
        ("generator", string(c.generator.as_str())),
        ("hw", string(&c.hw)),
        ("model", string(&c.model)),
        ("quant", string(&c.quant)),
        ("reference", string(c.reference.as_str())),
        ("tp", c.tp.to_string()),
    ];
    if let Some(m) = c.max_seq {
        lines.push(("max_seq", m.to_string()));
    }
    lines.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = String::new();
    for (k, v) in lines {
        let _ = writeln!(out, "{k} = {v}");
    }
    out
}

/// blake3 hex of `text`.
pub fn key_of(text: &str) -> String {
    blake3::hash(text.as_bytes()).to_hex().to_string()
}

fn array<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<String> = items.map(string).collect();
    format!("[{}]", v.join(", "))
}

/// A TOML basic string.
pub(crate) fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
