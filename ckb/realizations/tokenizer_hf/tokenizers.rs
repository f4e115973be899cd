// The checkpoint's tokenizer.json, run by the `tokenizers` crate (rt::tokenizers). Streaming
// needs each token's raw bytes: for a byte-level vocabulary they are the token's characters
// through the inverse of GPT-2's bytes_to_unicode; added tokens are their content.

use std::collections::HashMap;

// End-of-turn names that end generation when the vocabulary has them as special tokens
// (the list llama.cpp uses, as tokenizer_bpe does).
const HF_EOG_NAMES: [&str; 8] = ["<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<end_of_turn>", "<|end_of_text|>", "<EOT>"];

/// Text <-> ids with the checkpoint's tokenizer.json.
pub struct Tokenizer {
    hf: rt::tokenizers::Tokenizer,    // special tokens matched in the text
    plain: rt::tokenizers::Tokenizer, // special tokens encoded as text
    pieces: Vec<Vec<u8>>,             // [n_vocab] raw bytes of each id
    control: Vec<bool>,               // [n_vocab] special added tokens
    by_text: HashMap<String, u32>,    // token text (as in tokenizer.json) -> id
    eog: Vec<u32>,                    // [n_eog] ascending
    eos: Option<u32>,
    bos: Option<u32>,
    add_bos: bool,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer").field("n_vocab", &self.pieces.len()).field("eos", &self.eos).field("bos", &self.bos).field("eog", &self.eog).finish()
    }
}

// GPT-2's bytes_to_unicode, inverted: the character a byte-level vocabulary writes for each byte.
fn hf_byte_of_char() -> HashMap<char, u8> {
    let mut map = HashMap::new();
    let mut n = 0u32;
    for b in 0..=255u8 {
        let printable = matches!(b, 33..=126 | 161..=172 | 174..=255);
        let c = if printable {
            b as u32
        } else {
            n += 1;
            255 + n
        };
        map.insert(char::from_u32(c).unwrap_or('\u{0}'), b);
    }
    map
}

// A token named by tokenizer_config.json: a string, or an object with `content`.
fn hf_token_text(v: Option<&rt::serde_json::Value>) -> Option<&str> {
    match v? {
        rt::serde_json::Value::String(s) => Some(s),
        o => o.get("content")?.as_str(),
    }
}

impl Tokenizer {
    /// Builds the tokenizer from the checkpoint's tokenizer.json and tokenizer_config.json.
    pub(crate) fn from_gguf(g: &Gguf) -> rt::Result<Tokenizer> {
        if g.tokenizer_json.is_empty() {
            return Err(rt::Error::format("tokenizer.json", format!("missing from {}; the engine needs the checkpoint's tokenizer", g.dir.display())));
        }
        let hf = rt::tokenizers::Tokenizer::from_bytes(&g.tokenizer_json)
            .map_err(|e| rt::Error::format("tokenizer.json", format!("the tokenizers crate cannot load it: {e}")))?;
        let mut plain = hf.clone();
        plain.set_encode_special_tokens(true);
        let by_text: HashMap<String, u32> = hf.get_vocab(true).into_iter().collect();
        let n = by_text.values().map(|&id| id as usize + 1).max().unwrap_or(0);
        let byte_of = hf_byte_of_char();
        let mut pieces = vec![Vec::new(); n];
        for (text, &id) in &by_text {
            let bytes: Option<Vec<u8>> = text.chars().map(|c| byte_of.get(&c).copied()).collect();
            pieces[id as usize] = bytes.unwrap_or_else(|| text.as_bytes().to_vec());
        }
        let mut control = vec![false; n];
        for (id, t) in hf.get_added_tokens_decoder() {
            if let Some(p) = pieces.get_mut(id as usize) {
                *p = t.content.as_bytes().to_vec();
                control[id as usize] = t.special;
            }
        }
        let tc = &g.tokenizer_config;
        let named = |key: &str| -> rt::Result<Option<u32>> {
            match hf_token_text(tc.get(key)) {
                None => Ok(None),
                Some(t) => by_text.get(t).copied().map(Some).ok_or_else(|| {
                    rt::Error::format(format!("tokenizer_config.json: {key}"), format!("{t:?} is not a token of tokenizer.json"))
                }),
            }
        };
        let config_ids = |key: &str| -> Vec<u32> {
            match g.config.get(key) {
                Some(rt::serde_json::Value::Array(a)) => a.iter().filter_map(|v| v.as_u64()).map(|v| v as u32).collect(),
                Some(v) => v.as_u64().map(|v| v as u32).into_iter().collect(),
                None => Vec::new(),
            }
        };
        let eos = named("eos_token")?.or_else(|| config_ids("eos_token_id").first().copied());
        let bos = named("bos_token")?;
        let add_bos = tc.get("add_bos_token").and_then(|b| b.as_bool()).unwrap_or(false);
        if add_bos && bos.is_none() {
            return Err(rt::Error::format("tokenizer_config.json: add_bos_token", "is true but bos_token names no token"));
        }
        let mut eog: Vec<u32> = HF_EOG_NAMES.iter().filter_map(|t| by_text.get(*t).copied()).filter(|&id| control[id as usize]).collect();
        eog.extend(eos);
        eog.extend(config_ids("eos_token_id").into_iter().filter(|&id| (id as usize) < n));
        eog.sort_unstable();
        eog.dedup();
        Ok(Tokenizer { hf, plain, pieces, control, by_text, eog, eos, bos, add_bos })
    }

    /// Ids in the vocabulary (the largest id + 1).
    pub fn n_vocab(&self) -> usize { self.pieces.len() }
    /// The id of a token written as tokenizer.json writes it.
    pub fn token_id(&self, text: &str) -> Option<u32> { self.by_text.get(text).copied() }
    /// Whether `id` is a special added token.
    pub fn is_control(&self, id: u32) -> bool { self.control.get(id as usize).copied().unwrap_or(false) }
    /// End-of-generation ids: eos, config.json's eos_token_id(s) and the end-of-turn tokens.
    pub fn eog_ids(&self) -> &[u32] { &self.eog }
    /// Whether `id` ends generation.
    pub fn is_eog(&self, id: u32) -> bool { self.eog.binary_search(&id).is_ok() }
    /// tokenizer_config.json's eos_token (else config.json's first eos_token_id).
    pub fn eos_id(&self) -> Option<u32> { self.eos }
    /// tokenizer_config.json's bos_token.
    pub fn bos_id(&self) -> Option<u32> { self.bos }
    /// tokenizer_config.json's add_bos_token.
    pub fn add_bos(&self) -> bool { self.add_bos }

    /// The raw bytes of token `id` (empty for an id outside the vocabulary).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        self.pieces.get(id as usize).map(|p| &p[..]).unwrap_or(&[])
    }

    /// Token ids of `text` (no BOS added). With `parse_special`, special tokens written in the
    /// text become their ids; otherwise they are encoded as text.
    pub fn encode(&self, text: &str, parse_special: bool) -> Vec<u32> {
        let tok = if parse_special { &self.hf } else { &self.plain };
        // A byte-level BPE encodes every text; a tokenizer.json whose model cannot (no unk token
        // for a character outside its vocabulary) yields no ids rather than a wrong prefix.
        tok.encode(text, false).map(|e| e.get_ids().to_vec()).unwrap_or_default()
    }

    /// The text of `ids`: their bytes concatenated, invalid UTF-8 replaced.
    pub fn decode(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids.iter().flat_map(|&id| self.token_bytes(id).iter().copied()).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}
