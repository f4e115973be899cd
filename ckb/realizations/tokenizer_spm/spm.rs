// SentencePiece (SPM) vocab as llama.cpp runs it (tokenizer.ggml.model "llama": scores, token types,
// <0xXX> byte fallback): special tokens cut out first, spaces escaped to U+2581, bigram merges by score.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

/// The id of a byte the vocab has no token for (never a real id: vocabs have < u32::MAX / 2).
const NO_TOKEN: u32 = u32::MAX;
/// "No symbol" in the merge list's links.
const NONE: usize = usize::MAX;
/// SentencePiece's space, U+2581 LOWER ONE EIGHTH BLOCK.
const SPACE: &str = "\u{2581}";

/// Token types as stored in `tokenizer.ggml.token_type` (llama.cpp `llama_token_type`).
pub(crate) const TOKEN_NORMAL: u8 = 1;
pub(crate) const TOKEN_UNKNOWN: u8 = 2;
pub(crate) const TOKEN_CONTROL: u8 = 3;
pub(crate) const TOKEN_USER_DEFINED: u8 = 4;
pub(crate) const TOKEN_UNUSED: u8 = 5;
pub(crate) const TOKEN_BYTE: u8 = 6;

/// End-of-generation token names (llama.cpp's list, with the FIM pad/repo/file-sep tokens).
const EOG_NAMES: [&str; 12] = [
    "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<end_of_turn>",
    "<|end_of_text|>", "<EOT>", "_<EOT>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
];

/// A small hasher for vocab texts (finished by murmur3's fmix64: the index bits see every input bit).
#[derive(Default, Clone, Copy)]
struct TextHasher(u64);

impl Hasher for TextHasher {
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h = (h ^ (h >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
        h = (h ^ (h >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_usize(&mut self, v: usize) { self.0 = self.0.rotate_left(5) ^ v as u64 }
}

/// One symbol of the merge list: bytes `at..at + n` of the escaped text (n = 0: merged away).
#[derive(Clone, Copy)]
struct Sym { at: usize, n: usize, prev: usize, next: usize }

/// A tokenizer read from the model file.
pub struct Tokenizer {
    pieces: Vec<u8>,     // [sum of piece lengths] what every token decodes to, concatenated
    offs: Vec<u32>,      // [n_vocab + 1] token i is pieces[offs[i]..offs[i+1]]
    types: Vec<u8>,      // [n_vocab] token type (TOKEN_*)
    keys: Vec<i32>,      // [n_vocab] the score as a totally ordered key (higher merges first)
    by_text: HashMap<Box<[u8]>, u32, BuildHasherDefault<TextHasher>>, // vocab text (as stored) -> id
    byte_ids: [u32; 256], // [256] id of <0xXX> (else of the one-byte text) per byte; NO_TOKEN: none
    special_lens: Vec<usize>, // [n_lens] distinct text lengths of the special tokens, descending
    special_first: [bool; 256], // [256] whether some special token starts with this byte
    special_pair: Vec<bool>,  // [65536] whether some special token (2+ bytes) starts with these two bytes
    add_space_prefix: bool,
    eos: Option<u32>,
    bos: Option<u32>,
    add_bos: bool,
    eog: Vec<u32>, // [n_eog] end-of-generation ids, ascending
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer").field("n_vocab", &self.n_vocab()).field("add_space_prefix", &self.add_space_prefix)
            .field("eos", &self.eos).field("bos", &self.bos).field("eog", &self.eog).finish()
    }
}

impl Tokenizer {
    /// Reads `tokenizer.ggml.*` from the model file and checks it.
    pub(crate) fn from_gguf(g: &Gguf) -> rt::Result<Tokenizer> {
        let err = rt::Error::Tokenizer;
        let model = g.get_str("tokenizer.ggml.model")?;
        if model != TOKENIZER_MODEL {
            return Err(rt::Error::Mismatch {
                what: "tokenizer.ggml.model".into(),
                expected: format!("{TOKENIZER_MODEL:?} (SentencePiece)"),
                found: format!("{model:?}"),
                fix: format!("use a {MODEL_ARCH} model file with a SentencePiece tokenizer, or generate an engine for this file's family"),
            });
        }
        let tokens = g.get_str_array("tokenizer.ggml.tokens")?;
        let n = tokens.len();
        if n == 0 || n > u32::MAX as usize / 2 || tokens.iter().map(|t| t.len()).sum::<usize>() > u32::MAX as usize {
            return Err(err(format!("tokenizer.ggml.tokens has {n} entries, or is too large")));
        }
        let per_token = |key: &str, m: usize| err(format!("{key} has {m} entries but tokenizer.ggml.tokens has {n}"));
        let types: Vec<u8> = match g.meta("tokenizer.ggml.token_type") {
            None => vec![TOKEN_NORMAL; n],
            Some(_) => {
                let raw = g.get_i32_array("tokenizer.ggml.token_type")?;
                if raw.len() != n {
                    return Err(per_token("tokenizer.ggml.token_type", raw.len()));
                }
                let check = |(i, &t): (usize, &i32)| match t {
                    1..=6 => Ok(t as u8),
                    _ => Err(err(format!("tokenizer.ggml.token_type[{i}] is {t}, must be 1..=6"))),
                };
                raw.iter().enumerate().map(check).collect::<rt::Result<_>>()?
            }
        };
        let scores = match g.meta("tokenizer.ggml.scores") {
            None => vec![0.0f32; n],
            Some(_) => spm_f32_array(g, "tokenizer.ggml.scores")?,
        };
        if scores.len() != n {
            return Err(per_token("tokenizer.ggml.scores", scores.len()));
        }
        if let Some(i) = scores.iter().position(|s| !s.is_finite()) {
            return Err(err(format!("tokenizer.ggml.scores[{i}] is {}, must be finite", scores[i])));
        }
        // f32::total_cmp's key; + 0.0 turns -0.0 into 0.0, which llama.cpp's `<` treats as equal.
        let key = |s: f32| {
            let k = (s + 0.0).to_bits() as i32;
            k ^ (((k >> 31) as u32) >> 1) as i32
        };
        let keys = scores.iter().map(|&s| key(s)).collect();

        let mut by_text = HashMap::with_capacity_and_hasher(n, Default::default());
        let (mut pieces, mut offs) = (Vec::with_capacity(n * 8), vec![0u32]);
        let (mut special_lens, mut special_first, mut special_pair) = (Vec::new(), [false; 256], vec![false; 1 << 16]);
        for (i, s) in tokens.iter().enumerate() {
            let b = s.as_bytes();
            if b.is_empty() {
                return Err(err(format!("tokenizer.ggml.tokens[{i}] is empty")));
            }
            if let Some(j) = by_text.insert(Box::from(b), i as u32) {
                return Err(err(format!("tokenizer.ggml.tokens[{i}] = {s:?} repeats token {j}")));
            }
            // The piece, as llama.cpp's token_to_piece (special = true) renders the token.
            match types[i] {
                TOKEN_NORMAL if s.contains(SPACE) => pieces.extend_from_slice(s.replace(SPACE, " ").as_bytes()),
                TOKEN_NORMAL => pieces.extend_from_slice(b),
                TOKEN_BYTE => {
                    let hex = s.strip_prefix("<0x").and_then(|h| h.strip_suffix('>')).filter(|h| h.len() == 2);
                    let byte = hex.and_then(|h| u8::from_str_radix(h, 16).ok());
                    pieces.push(byte.ok_or_else(|| err(format!("byte token {i} is {s:?}, expected <0xXX>")))?);
                }
                TOKEN_UNUSED => {}
                _ => {
                    // Control, unknown and user-defined tokens: matched in the text before SPM.
                    pieces.extend_from_slice(b);
                    special_lens.push(b.len());
                    special_first[b[0] as usize] = true;
                    if b.len() > 1 {
                        special_pair[(b[0] as usize) << 8 | b[1] as usize] = true;
                    }
                }
            }
            offs.push(pieces.len() as u32);
        }
        special_lens.sort_unstable_by(|a, b| b.cmp(a));
        special_lens.dedup();
        let mut byte_ids = [NO_TOKEN; 256];
        for (b, id) in byte_ids.iter_mut().enumerate() {
            let hex = by_text.get(format!("<0x{b:02X}>").as_bytes());
            *id = hex.or_else(|| by_text.get(&[b as u8][..])).copied().unwrap_or(NO_TOKEN);
        }

        let check_id = |key: &str| -> rt::Result<Option<u32>> {
            match g.get_u32_opt(key)? {
                Some(id) if id as usize >= n => Err(err(format!("{key} is {id}, but the vocab has {n} tokens"))),
                id => Ok(id),
            }
        };
        let eos = check_id("tokenizer.ggml.eos_token_id")?;
        let bos = check_id("tokenizer.ggml.bos_token_id")?;
        check_id("tokenizer.ggml.padding_token_id")?;
        check_id("tokenizer.ggml.unknown_token_id")?;
        let add_bos = g.get_bool_or("tokenizer.ggml.add_bos_token", ADD_BOS_DEFAULT)?;
        if add_bos && bos.is_none() {
            return Err(err("tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id is missing".into()));
        }
        // llama.cpp's default for SPM vocabs when the key is absent.
        let add_space_prefix = g.get_bool_or("tokenizer.ggml.add_space_prefix", true)?;

        let eog_type = |&id: &u32| matches!(types[id as usize], TOKEN_CONTROL | TOKEN_USER_DEFINED);
        let mut eog: Vec<u32> =
            EOG_NAMES.iter().filter_map(|name| by_text.get(name.as_bytes()).copied()).filter(eog_type).collect();
        eog.extend(eos);
        eog.sort_unstable();
        eog.dedup();
        Ok(Tokenizer {
            pieces, offs, types, keys, by_text, byte_ids, special_lens, special_first, special_pair,
            add_space_prefix, eos, bos, add_bos, eog,
        })
    }

    /// Vocabulary size (rows of the embedding / logits).
    pub fn n_vocab(&self) -> usize { self.types.len() }
    /// The id of the token whose vocab text (as stored in the model file) is `text`.
    pub fn token_id(&self, text: &str) -> Option<u32> { self.by_text.get(text.as_bytes()).copied() }
    /// True for control tokens (e.g. `<end_of_turn>`).
    pub fn is_control(&self, id: u32) -> bool { self.types.get(id as usize) == Some(&TOKEN_CONTROL) }
    /// End-of-generation ids: eos plus the end-of-turn tokens the vocab has.
    pub fn eog_ids(&self) -> &[u32] { &self.eog }
    /// True when `id` ends generation.
    pub fn is_eog(&self, id: u32) -> bool { self.eog.binary_search(&id).is_ok() }
    /// `tokenizer.ggml.eos_token_id`.
    pub fn eos_id(&self) -> Option<u32> { self.eos }
    /// `tokenizer.ggml.bos_token_id`.
    pub fn bos_id(&self) -> Option<u32> { self.bos }
    /// Whether a prompt gets the BOS token prepended (`tokenizer.ggml.add_bos_token`).
    pub fn add_bos(&self) -> bool { self.add_bos }

    /// What a token decodes to: U+2581 as a space, a byte token's byte, a special token's text;
    /// empty for an unused token or a bad id.
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        let i = id as usize;
        if i < self.types.len() { &self.pieces[self.offs[i] as usize..self.offs[i + 1] as usize] } else { &[] }
    }

    /// Text → ids; control tokens in the text are matched only with `parse_special`. No BOS is added.
    pub fn encode(&self, text: &str, parse_special: bool) -> Vec<u32> {
        let tb = text.as_bytes();
        // llama.cpp's tokenizer_st_partition: each special token in turn, longest text first (then
        // lowest id), takes its occurrences, left to right, that lie wholly in text no special has
        // taken yet. Taken spans are never shorter than the current length, so a span of that length
        // overlaps one exactly when one of its ends is taken.
        let pair = |i: usize| i + 1 < tb.len() && self.special_pair[(tb[i] as usize) << 8 | tb[i + 1] as usize];
        let starts: Vec<(usize, bool)> =
            (0..tb.len()).filter(|&i| self.special_first[tb[i] as usize]).map(|i| (i, pair(i))).collect();
        let mut taken = vec![false; if starts.is_empty() { 0 } else { tb.len() }];
        let (mut cuts, mut hits) = (Vec::new(), Vec::new()); // (start, end, id); (id, start)
        for &l in &self.special_lens {
            hits.clear();
            for &(i, _) in starts.iter().filter(|&&(i, pair)| (l == 1 || pair) && i + l <= tb.len()) {
                if taken[i] || taken[i + l - 1] {
                    continue;
                }
                let Some(&id) = self.by_text.get(&tb[i..i + l]) else { continue };
                let t = self.types[id as usize];
                if t == TOKEN_USER_DEFINED || (parse_special && (t == TOKEN_CONTROL || t == TOKEN_UNKNOWN)) {
                    hits.push((id, i));
                }
            }
            hits.sort_unstable();
            for &(id, i) in &hits {
                if !taken[i] && !taken[i + l - 1] {
                    taken[i..i + l].fill(true);
                    cuts.push((i, i + l, id));
                }
            }
        }
        cuts.sort_unstable();
        cuts.push((tb.len(), tb.len(), NO_TOKEN));
        let mut out = Vec::with_capacity(tb.len() / 3 + 4);
        let (mut start, mut prev_special) = (0, true);
        for (i, end, id) in cuts {
            if i > start {
                // A space is prepended (add_space_prefix) at the start and after every special token.
                let frag = &text[start..i];
                let frag = if self.add_space_prefix && prev_special { format!(" {frag}") } else { frag.to_string() };
                self.spm(&frag.replace(' ', SPACE), &mut out);
            }
            if id != NO_TOKEN {
                out.push(id);
            }
            (start, prev_special) = (end, id != NO_TOKEN);
        }
        out
    }

    /// llama.cpp's llm_tokenizer_spm_session on one escaped fragment: from its UTF-8 chars, merge the
    /// adjacent pair whose concatenation is the vocab token of highest score (leftmost on ties) until
    /// none is; symbols that are no token are emitted as byte tokens.
    fn spm(&self, s: &str, out: &mut Vec<u32>) {
        let b = s.as_bytes();
        let chars = s.char_indices().enumerate();
        let mut sym: Vec<Sym> = chars.map(|(j, (at, c))| Sym { at, n: c.len_utf8(), prev: j.wrapping_sub(1), next: j + 1 }).collect();
        let k = sym.len();
        if let Some(last) = sym.last_mut() {
            last.next = NONE;
        }
        let mut heap = BinaryHeap::new(); // (score key, Reverse(left), right, byte size)
        let bigram = |heap: &mut BinaryHeap<_>, sym: &[Sym], l: usize, r: usize| {
            if l == NONE || r == NONE {
                return;
            }
            let text = &b[sym[l].at..sym[l].at + sym[l].n + sym[r].n];
            if let Some(&id) = self.by_text.get(text) {
                heap.push((self.keys[id as usize], Reverse(l), r, text.len()));
            }
        };
        for j in 1..k {
            bigram(&mut heap, &sym, j - 1, j);
        }
        while let Some((_, Reverse(l), r, size)) = heap.pop() {
            if sym[l].n == 0 || sym[r].n == 0 || sym[l].n + sym[r].n != size {
                continue; // stale: one side was merged since
            }
            sym[l].n = size;
            sym[r].n = 0;
            let next = sym[r].next;
            sym[l].next = next;
            if next != NONE {
                sym[next].prev = l;
            }
            bigram(&mut heap, &sym, sym[l].prev, l);
            bigram(&mut heap, &sym, l, sym[l].next);
        }
        let mut j = if k > 0 { 0 } else { NONE };
        while j != NONE {
            let text = &b[sym[j].at..sym[j].at + sym[j].n];
            match self.by_text.get(text) {
                Some(&id) => out.push(id),
                None => out.extend(text.iter().map(|&c| self.byte_ids[c as usize]).filter(|&id| id != NO_TOKEN)),
            }
            j = sym[j].next;
        }
    }

    /// Ids → text: the tokens' pieces concatenated (the first one's leading space dropped when the
    /// vocab adds a space prefix, as llama.cpp's detokenize does), invalid UTF-8 replaced.
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut buf: Vec<u8> = ids.iter().flat_map(|&id| self.token_bytes(id)).copied().collect();
        let first = ids.first().map_or(&[][..], |&id| self.token_bytes(id));
        if self.add_space_prefix && first.first() == Some(&b' ') {
            buf.remove(0);
        }
        String::from_utf8_lossy(&buf).into_owned()
    }
}

/// An array of numbers stored as f32, f64 or integer (fitting i64) elements.
fn spm_f32_array(g: &Gguf, key: &str) -> rt::Result<Vec<f32>> {
    let v = g.meta(key).ok_or_else(|| rt::Error::format(key, "missing metadata key"))?;
    let conv = |x: &MetaValue| match *x {
        MetaValue::Float(_, f) => Some(f as f32),
        MetaValue::Int(_, i) if i <= i64::MAX as i128 => Some(i as f32),
        _ => None,
    };
    let a: Option<Vec<f32>> = match v {
        MetaValue::Array(t, items) if *t != 7 && *t != 9 => items.iter().map(conv).collect(),
        _ => None,
    };
    a.ok_or_else(|| rt::Error::format(key, format!("has type {}, expected f32 array", v.type_name())))
}
