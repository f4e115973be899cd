// Byte-level BPE (GPT-2 vocab, the family's pre-tokenizer regexes, special tokens cut out first), as llama.cpp does it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

/// The id of a byte the vocab has no token for (never a real id: vocabs have < u32::MAX / 2).
const NO_TOKEN: u32 = u32::MAX;

/// Token types as stored in `tokenizer.ggml.token_type` (llama.cpp `llama_token_type`).
pub(crate) const TOKEN_NORMAL: u8 = 1;
pub(crate) const TOKEN_UNKNOWN: u8 = 2;
pub(crate) const TOKEN_CONTROL: u8 = 3;
pub(crate) const TOKEN_USER_DEFINED: u8 = 4;
pub(crate) const TOKEN_BYTE: u8 = 6;

/// End-of-generation token names (llama.cpp's list, with the FIM pad/repo/file-sep tokens).
const EOG_NAMES: [&str; 12] = [
    "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<end_of_turn>",
    "<|end_of_text|>", "<EOT>", "_<EOT>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
];

/// A small hasher for token ids and texts (finished by murmur3's fmix64: the index bits see every input bit).
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
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
    fn write_u64(&mut self, v: u64) { self.0 = self.0.rotate_left(5) ^ v }
}

type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// Vocab text -> id: the texts concatenated plus an open-addressing table (no per-token allocation).
pub(crate) struct TextIndex {
    text: Vec<u8>,   // [sum of text lengths] every token's vocab text, concatenated
    offs: Vec<u32>,  // [n_vocab + 1] token i is text[offs[i]..offs[i+1]]
    slots: Vec<u32>, // [power of two >= 2 n_vocab] id + 1, 0 = empty
}

impl TextIndex {
    fn new(tokens: &[String]) -> TextIndex {
        let (mut text, mut offs) = (Vec::new(), vec![0u32]);
        for t in tokens {
            text.extend_from_slice(t.as_bytes());
            offs.push(text.len() as u32);
        }
        let mut idx = TextIndex { text, offs, slots: vec![0; (2 * tokens.len()).next_power_of_two().max(16)] };
        for i in 0..tokens.len() {
            if let Err(j) = idx.find(idx.get_text(i)) {
                idx.slots[j] = i as u32 + 1; // a duplicate text keeps the first id, as in llama.cpp
            }
        }
        idx
    }

    fn get_text(&self, i: usize) -> &[u8] { &self.text[self.offs[i] as usize..self.offs[i + 1] as usize] }

    /// Ok(the id of `t`), or Err(the empty slot where it would go).
    fn find(&self, t: &[u8]) -> Result<u32, usize> {
        let mut h = IdHasher::default();
        h.write(t);
        let mask = self.slots.len() - 1;
        let mut j = h.finish() as usize & mask;
        loop {
            match self.slots[j] {
                0 => return Err(j),
                s if self.get_text(s as usize - 1) == t => return Ok(s - 1),
                _ => j = (j + 1) & mask,
            }
        }
    }

    fn get(&self, t: &str) -> Option<u32> { self.find(t.as_bytes()).ok() }
}

/// A tokenizer read from the model file.
pub struct Tokenizer {
    bytes: Vec<u8>,                 // [sum of token byte lengths] raw bytes of every token, concatenated
    offs: Vec<u32>,                 // [n_vocab + 1] token i is bytes[offs[i]..offs[i+1]]
    types: Vec<u8>,                 // [n_vocab] token type (TOKEN_*)
    by_text: TextIndex,             // vocab text (as stored in the file) -> id
    byte_ids: [u32; 256],           // [256] id of the single-byte token of each byte (NO_TOKEN: none)
    byte_chars: [char; 256],        // [256] GPT-2's byte -> unicode map (how the vocab spells bytes)
    ignore_merges: bool,            // a piece that is a vocab token is that token (PRE_IGNORE_MERGES)
    merges: IdMap<u64, (u32, u32)>, // (left id << 32 | right id) -> (rank, merged id)
    specials: Vec<(u32, bool)>,     // [n_special] (id, is_control) sorted by text length, longest first
    special_first: [bool; 256],     // [256] whether some special token starts with this byte
    regexes: Vec<rt::fancy_regex::Regex>, // the file's pre-tokenizer (PRE_TOKENIZERS), applied in order
    eos: Option<u32>,
    bos: Option<u32>,
    add_bos: bool,
    eog: Vec<u32>, // [n_eog] end-of-generation ids, ascending
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer").field("n_vocab", &self.n_vocab()).field("n_merges", &self.merges.len())
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
                expected: format!("{TOKENIZER_MODEL:?} (byte-level BPE)"),
                found: format!("{model:?}"),
                fix: format!("use a {MODEL_ARCH} model file with a byte-level BPE tokenizer, or generate an engine for this file's family"),
            });
        }
        let pre = g.get_str("tokenizer.ggml.pre")?;
        let Some(&(_, pre_regexes)) = PRE_TOKENIZERS.iter().find(|(name, _)| *name == pre) else {
            let known: Vec<&str> = PRE_TOKENIZERS.iter().map(|(name, _)| *name).collect();
            return Err(rt::Error::Mismatch {
                what: "tokenizer.ggml.pre".into(),
                expected: format!("one of {known:?}"),
                found: format!("{pre:?}"),
                fix: format!("use a file whose pre-tokenizer the {MODEL_ARCH} family knows, or add its regexes to [tokenizer].pre in the family's ckb/models/*.toml"),
            });
        };
        let tokens = g.get_str_array("tokenizer.ggml.tokens")?;
        let n = tokens.len();
        if n == 0 || n > u32::MAX as usize / 2 {
            return Err(err(format!("tokenizer.ggml.tokens has {n} entries")));
        }
        // Byte offsets are u32; decoded bytes are never longer than the texts.
        if tokens.iter().map(|t| t.len()).sum::<usize>() > u32::MAX as usize {
            return Err(err("tokenizer.ggml.tokens is too large".into()));
        }
        let types: Vec<u8> = match g.meta("tokenizer.ggml.token_type") {
            None => vec![TOKEN_NORMAL; n],
            Some(_) => {
                let raw = g.get_i32_array("tokenizer.ggml.token_type")?;
                if raw.len() != n {
                    let (key, m) = ("tokenizer.ggml.token_type", raw.len());
                    return Err(err(format!("{key} has {m} entries but tokenizer.ggml.tokens has {n}")));
                }
                let check = |(i, &t): (usize, &i32)| match t {
                    1..=6 => Ok(t as u8),
                    _ => Err(err(format!("tokenizer.ggml.token_type[{i}] is {t}, must be 1..=6"))),
                };
                raw.iter().enumerate().map(check).collect::<rt::Result<_>>()?
            }
        };
        // GPT-2 byte→unicode map: printable latin-1 bytes map to themselves, the other 68 to U+0100… in order.
        let (mut byte_chars, mut inv, mut extra) = (['\0'; 256], [-1i16; 0x144], 255); // inv: code point -> byte
        for b in 0..256u32 {
            let printable = (0x21..=0x7e).contains(&b) || (0xa1..=0xac).contains(&b) || (0xae..=0xff).contains(&b);
            extra += !printable as u32;
            let cp = if printable { b } else { extra };
            byte_chars[b as usize] = char::from_u32(cp).unwrap_or('\0');
            inv[cp as usize] = b as i16;
        }
        // Raw bytes of every token: byte-level decode for normal/byte tokens, text otherwise.
        let mut bytes = Vec::with_capacity(n * 8);
        let mut offs = vec![0u32];
        for (i, s) in tokens.iter().enumerate() {
            if s.is_empty() {
                return Err(err(format!("tokenizer.ggml.tokens[{i}] is empty")));
            }
            if types[i] == TOKEN_NORMAL || types[i] == TOKEN_BYTE {
                for c in s.chars() {
                    match inv.get(c as usize) {
                        Some(&b) if b >= 0 => bytes.push(b as u8),
                        _ => bytes.extend_from_slice(c.encode_utf8(&mut [0u8; 4]).as_bytes()),
                    }
                }
            } else {
                bytes.extend_from_slice(s.as_bytes());
            }
            offs.push(bytes.len() as u32);
        }
        let by_text = TextIndex::new(tokens);
        // A byte whose token the vocab lacks (SmolLM2 has no tokens for some control bytes) is
        // NO_TOKEN: it takes part in no merge and is dropped from the output, as llama.cpp drops it.
        let mut byte_ids = [NO_TOKEN; 256];
        for (b, c) in byte_chars.iter().enumerate() {
            byte_ids[b] = by_text.get(c.encode_utf8(&mut [0u8; 4])).unwrap_or(NO_TOKEN);
        }
        let merge_list = g.get_str_array("tokenizer.ggml.merges")?;
        let mut merges: IdMap<u64, (u32, u32)> = IdMap::with_capacity_and_hasher(merge_list.len(), Default::default());
        for (rank, m) in merge_list.iter().enumerate() {
            let bad = |why: &str| err(format!("tokenizer.ggml.merges[{rank}] = {m:?}: {why}"));
            let (a, b) = m.split_once(' ').ok_or_else(|| bad("expected two tokens separated by a space"))?;
            if a.is_empty() || b.is_empty() || b.contains(' ') {
                return Err(bad("expected two tokens separated by one space"));
            }
            let missing = |t: &str, what: &str| bad(&format!("{what}{t:?} is not in the vocab"));
            let id = |t: &str, what: &str| by_text.get(t).ok_or_else(|| missing(t, what));
            let (ia, ib, ij) = (id(a, "")?, id(b, "")?, id(&format!("{a}{b}"), "the merged token ")?);
            // The first (lowest) rank of a repeated pair wins.
            merges.entry(((ia as u64) << 32) | ib as u64).or_insert((rank as u32, ij));
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
        let add_bos = g.get_bool_or("tokenizer.ggml.add_bos_token", ADD_BOS_DEFAULT || PRE_ADD_BOS.contains(&pre))?;
        if add_bos && bos.is_none() {
            return Err(err("tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id is missing".into()));
        }

        let mut specials: Vec<(u32, bool)> = Vec::new();
        let mut special_first = [false; 256];
        for (i, &t) in types.iter().enumerate() {
            if t == TOKEN_CONTROL || t == TOKEN_UNKNOWN || t == TOKEN_USER_DEFINED {
                special_first[bytes[offs[i] as usize] as usize] = true;
                specials.push((i as u32, t != TOKEN_USER_DEFINED));
            }
        }
        let len_of = |id: u32| offs[id as usize + 1] - offs[id as usize];
        specials.sort_by(|x, y| len_of(y.0).cmp(&len_of(x.0)).then(x.0.cmp(&y.0)));

        let eog_type = |&id: &u32| matches!(types[id as usize], TOKEN_CONTROL | TOKEN_USER_DEFINED);
        let mut eog: Vec<u32> = EOG_NAMES.iter().filter_map(|name| by_text.get(name)).filter(eog_type).collect();
        eog.extend(eos);
        eog.sort_unstable();
        eog.dedup();
        let regexes = pre_regexes
            .iter()
            .map(|r| rt::fancy_regex::Regex::new(r).map_err(|e| err(format!("pre-tokenizer {pre:?} regex {r:?}: {e}"))))
            .collect::<rt::Result<Vec<_>>>()?;
        Ok(Tokenizer {
            bytes, offs, types, by_text, byte_ids, byte_chars, merges, specials, special_first, regexes, eos, bos, add_bos, eog,
            ignore_merges: PRE_IGNORE_MERGES.contains(&pre),
        })
    }

    /// Vocabulary size (rows of the embedding / logits).
    pub fn n_vocab(&self) -> usize { self.types.len() }
    /// The id of the token whose vocab text (as stored in the model file) is `text`.
    pub fn token_id(&self, text: &str) -> Option<u32> { self.by_text.get(text) }
    /// True for control tokens (e.g. `<|im_end|>`).
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

    /// Raw bytes of a token (its text for control / user-defined tokens); empty for a bad id.
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        let i = id as usize;
        if i < self.types.len() { &self.bytes[self.offs[i] as usize..self.offs[i + 1] as usize] } else { &[] }
    }

    /// Text → ids; control tokens in the text are matched only with `parse_special`. No BOS is added.
    pub fn encode(&self, text: &str, parse_special: bool) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 3 + 4);
        let tb = text.as_bytes();
        let (mut start, mut i) = (0, 0); // start of the pending plain-text segment, scan position
        while i < tb.len() {
            // The longest special token at i (control ones only with parse_special).
            let at_i = |&&(id, c): &&(u32, bool)| (parse_special || !c) && tb[i..].starts_with(self.token_bytes(id));
            match self.special_first[tb[i] as usize].then(|| self.specials.iter().find(at_i)).flatten() {
                Some(&(id, _)) => {
                    self.encode_plain(&text[start..i], &mut out);
                    out.push(id);
                    i += self.token_bytes(id).len();
                    start = i;
                }
                None => i += 1,
            }
        }
        self.encode_plain(&text[start..], &mut out);
        out
    }

    /// Pre-tokenizes a segment without special tokens and BPE-encodes every piece.
    fn encode_plain(&self, text: &str, out: &mut Vec<u32>) {
        let mut sym = Vec::new();
        self.split(0, text, &mut |piece| self.bpe(piece.as_bytes(), &mut sym, out));
    }

    /// Splits `text` with regex `r` into matches and the gaps between them (gaps are pieces too,
    /// as in llama.cpp's unicode_regex_split), each split further by the regexes after `r`; the
    /// last regex's pieces go to `emit`. A regex error (backtrack limit, never seen) leaves one rest piece.
    fn split(&self, r: usize, text: &str, emit: &mut dyn FnMut(&str)) {
        let Some(re) = self.regexes.get(r) else { return emit(text) };
        let mut last = 0;
        for m in re.find_iter(text).map_while(|m| m.ok()) {
            if m.start() > last {
                self.split(r + 1, &text[last..m.start()], emit);
            }
            self.split(r + 1, m.as_str(), emit);
            last = m.end();
        }
        if last < text.len() {
            self.split(r + 1, &text[last..], emit);
        }
    }

    fn merge_of(&self, a: u32, b: u32) -> Option<(u32, u32)> {
        self.merges.get(&(((a as u64) << 32) | b as u64)).copied()
    }

    /// BPE of one piece: its own token where ignore_merges and the vocab has it, else from byte
    /// tokens, merge the adjacent pair of lowest rank (leftmost on ties) until none has a merge;
    /// short pieces rescan the pairs, long ones use a heap.
    fn bpe(&self, piece: &[u8], sym: &mut Vec<u32>, out: &mut Vec<u32>) {
        if self.ignore_merges {
            let text: String = piece.iter().map(|&b| self.byte_chars[b as usize]).collect();
            if let Some(id) = self.by_text.get(&text) {
                return out.push(id);
            }
        }
        sym.clear();
        sym.extend(piece.iter().map(|&b| self.byte_ids[b as usize]));
        if sym.len() > 24 {
            self.bpe_heap(sym);
        } else {
            // The lowest-rank (then leftmost) pair: ((rank, merged id), position).
            let best = |s: &[u32]| (1..s.len()).filter_map(|j| Some((self.merge_of(s[j - 1], s[j])?, j - 1))).min();
            while let Some(((_, id), j)) = best(sym) {
                sym[j] = id;
                sym.remove(j + 1);
            }
        }
        out.extend(sym.iter().copied().filter(|&id| id != NO_TOKEN));
    }

    /// BPE for long pieces: a linked list of symbols (merged-away ones become u32::MAX) and a min-heap
    /// of candidate merges.
    fn bpe_heap(&self, sym: &mut Vec<u32>) {
        let n = sym.len();
        let mut prev: Vec<usize> = (0..n).map(|j| j.wrapping_sub(1)).collect(); // usize::MAX = none
        let mut next: Vec<usize> = (1..=n).collect(); // n = none
        let mut heap = BinaryHeap::new(); // Reverse((rank, left pos, left id, right id))
        let push = |heap: &mut BinaryHeap<_>, j: usize, a: u32, b: u32| {
            if let Some((rank, _)) = self.merge_of(a, b) {
                heap.push(Reverse((rank, j, a, b)));
            }
        };
        for j in 0..n - 1 {
            push(&mut heap, j, sym[j], sym[j + 1]);
        }
        while let Some(Reverse((_, j, a, b))) = heap.pop() {
            let k = next[j];
            if k >= n || sym[j] != a || sym[k] != b {
                continue; // stale entry
            }
            let Some((_, id)) = self.merge_of(a, b) else { continue };
            sym[j] = id;
            sym[k] = u32::MAX;
            next[j] = next[k];
            if next[k] < n {
                prev[next[k]] = j;
                push(&mut heap, j, id, sym[next[k]]);
            }
            if prev[j] != usize::MAX {
                push(&mut heap, prev[j], sym[prev[j]], id);
            }
        }
        sym.retain(|&s| s != u32::MAX);
    }

    /// Ids → text: the tokens' bytes concatenated, invalid UTF-8 replaced, unknown ids skipped.
    pub fn decode(&self, ids: &[u32]) -> String {
        let buf: Vec<u8> = ids.iter().flat_map(|&id| self.token_bytes(id)).copied().collect();
        String::from_utf8_lossy(&buf).into_owned()
    }
}
