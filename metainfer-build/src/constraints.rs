//! Typed constraints: what an engine is generated for. Built from `key = value` arguments
//! (the attribute, the build.rs builder, a scanned source file) and validated against the CKB,
//! so every error names the offending key and lists what is allowed.

pub mod canonical;

use crate::ckb::{check::join, Ckb, Format, QuantKind, Target, TargetKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Every key an engine's constraints may have, in documentation order.
pub const KEYS: &[&str] = &[
    "model",
    "hw",
    "quant",
    "format",
    "max_seq",
    "batch",
    "tp",
    "features",
    "generator",
    "reference",
];

/// The keys that must be given.
pub const REQUIRED: &[&str] = &["model", "hw", "quant"];

/// One `key = value` argument as written by the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg {
    pub key: String,
    pub value: ArgValue,
}

impl Arg {
    pub fn new(key: impl Into<String>, value: ArgValue) -> Arg {
        Arg {
            key: key.into(),
            value,
        }
    }
    pub fn str(key: impl Into<String>, value: impl Into<String>) -> Arg {
        Arg::new(key, ArgValue::Str(value.into()))
    }
}

/// The value of an argument: a string, integer or boolean literal, or an array of strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgValue {
    Str(String),
    Int(i64),
    Bool(bool),
    List(Vec<String>),
}

impl ArgValue {
    fn kind(&self) -> &'static str {
        match self {
            ArgValue::Str(_) => "a string",
            ArgValue::Int(_) => "an integer",
            ArgValue::Bool(_) => "a boolean",
            ArgValue::List(_) => "an array",
        }
    }
}

/// A rejected set of constraints. `arg_index` is the argument the error belongs to (`None`:
/// the whole set, e.g. a missing key); `on_value` says whether it is about the argument's value
/// rather than its key, so a macro can put the error on the right span.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConstraintError {
    pub arg_index: Option<usize>,
    pub on_value: bool,
    pub message: String,
}

/// An optional part of the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Feature {
    /// Chat: the chat template and `Engine::chat`.
    Chat,
    /// An HTTP server section.
    Server,
}

impl Feature {
    pub const ALL: &'static [Feature] = &[Feature::Chat, Feature::Server];
    /// The features a constraint may ask for: `chat` is in every engine already, so asking
    /// for it would change only the key.
    pub const SUPPORTED: &'static [Feature] = &[Feature::Server];
    pub fn as_str(self) -> &'static str {
        match self {
            Feature::Chat => "chat",
            Feature::Server => "server",
        }
    }
}

/// Who fills the contract slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Generator {
    /// Only verified CKB realizations (deterministic, offline).
    #[default]
    Ckb,
    /// An LLM given the contract text, for every slot.
    Llm,
    /// The CKB where it covers a slot, the LLM for the gaps.
    Auto,
}

impl Generator {
    pub const ALL: &'static [Generator] = &[Generator::Ckb, Generator::Llm, Generator::Auto];
    pub fn as_str(self) -> &'static str {
        match self {
            Generator::Ckb => "ckb",
            Generator::Llm => "llm",
            Generator::Auto => "auto",
        }
    }
}

/// What the LLM implementer is shown besides the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reference {
    /// The contract text only.
    #[default]
    None,
    /// The contract and the CKB realization of the same contract.
    Contract,
    /// The contract and a realization of a sibling contract (e.g. another dot kernel).
    Sibling,
}

impl Reference {
    pub const ALL: &'static [Reference] =
        &[Reference::None, Reference::Contract, Reference::Sibling];
    pub fn as_str(self) -> &'static str {
        match self {
            Reference::None => "none",
            Reference::Contract => "contract",
            Reference::Sibling => "sibling",
        }
    }
}

/// Validated, normalised constraints. Build with [`Constraints::from_args`]; every field holds
/// a value the CKB knows (`hw = "native"` is already resolved to a target id). Fields are in
/// the canonical (sorted) order; the manifest stores them as its `[constraints]` table.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Constraints {
    /// Most sequences decoded at once.
    pub batch: u32,
    /// The model family (`models/<family>.toml`), derived from `model`.
    pub family: String,
    /// Sorted, without duplicates.
    pub features: Vec<Feature>,
    /// Derived from the quant.
    pub format: Format,
    pub generator: Generator,
    /// A target id from `targets/`.
    pub hw: String,
    /// Context limit baked in; `None`: the model file's context length, read at load time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_seq: Option<u32>,
    /// As asked for: the family name or a preset name.
    pub model: String,
    /// A file-level quant id from `quants/`.
    pub quant: String,
    pub reference: Reference,
    /// Tensor-parallel degree (GPUs); 1 on CPU targets.
    pub tp: u32,
}

impl Constraints {
    /// Validates `args` against `ckb`. The first problem (in argument order, then missing
    /// keys, then combinations) is returned.
    pub fn from_args(args: &[Arg], ckb: &Ckb) -> Result<Constraints, ConstraintError> {
        Parser { ckb }.parse(args)
    }

    /// The canonical TOML text: sorted keys, defaults filled, derived keys (`family`,
    /// `format`) present, `hw` resolved; byte-for-byte stable across runs and platforms.
    pub fn canonical_toml(&self) -> String {
        canonical::to_canonical_toml(self)
    }

    /// The cache key: blake3 hex of [`Constraints::canonical_toml`].
    pub fn key(&self) -> String {
        canonical::key_of(&self.canonical_toml())
    }

    /// Parses constraints written by [`Constraints::canonical_toml`] (or a manifest's
    /// `[constraints]` table). No CKB validation.
    pub fn from_canonical_toml(text: &str) -> Result<Constraints, toml::de::Error> {
        toml::from_str(text)
    }

    /// The preset name when `model` names one rather than the family.
    pub fn preset(&self) -> Option<&str> {
        (self.model != self.family).then_some(self.model.as_str())
    }

    pub fn has_feature(&self, f: Feature) -> bool {
        self.features.contains(&f)
    }

    /// One line for humans: `model=qwen2 hw=x86_64-avx2 quant=q4_k_m` plus every non-default.
    pub fn summary(&self) -> String {
        let mut s = format!("model={} hw={} quant={}", self.model, self.hw, self.quant);
        if let Some(m) = self.max_seq {
            s += &format!(" max_seq={m}");
        }
        if self.batch != 1 {
            s += &format!(" batch={}", self.batch);
        }
        if self.tp != 1 {
            s += &format!(" tp={}", self.tp);
        }
        if !self.features.is_empty() {
            let f: Vec<&str> = self.features.iter().map(|f| f.as_str()).collect();
            s += &format!(" features={}", f.join(","));
        }
        if self.generator != Generator::Ckb {
            s += &format!(" generator={}", self.generator.as_str());
        }
        if self.reference != Reference::None {
            s += &format!(" reference={}", self.reference.as_str());
        }
        s
    }
}

struct Parser<'a> {
    ckb: &'a Ckb,
}

fn err_key(i: usize, message: String) -> ConstraintError {
    ConstraintError {
        arg_index: Some(i),
        on_value: false,
        message,
    }
}

fn err_value(i: usize, message: String) -> ConstraintError {
    ConstraintError {
        arg_index: Some(i),
        on_value: true,
        message,
    }
}

/// Values of the arguments that passed their own checks, with their indices.
#[derive(Default)]
struct Given<'a> {
    index: BTreeMap<&'a str, usize>,
    /// (as given, family, the preset's context length)
    model: Option<(String, String, Option<u32>)>,
    hw: Option<&'a Target>,
    quant: Option<String>,
    format: Option<Format>,
    max_seq: Option<u32>,
    batch: Option<u32>,
    tp: Option<u32>,
    features: Vec<Feature>,
    generator: Option<Generator>,
    reference: Option<Reference>,
}

impl<'a> Parser<'a> {
    fn parse(&self, args: &'a [Arg]) -> Result<Constraints, ConstraintError> {
        let mut g = Given::default();
        for (i, arg) in args.iter().enumerate() {
            let key = arg.key.as_str();
            if !KEYS.contains(&key) {
                let hint = suggest(key, KEYS.iter().copied())
                    .map(|s| format!(" (did you mean `{s}`?)"))
                    .unwrap_or_default();
                return Err(err_key(
                    i,
                    format!(
                        "unknown key `{key}`{hint}; allowed keys: {}",
                        KEYS.join(", ")
                    ),
                ));
            }
            if let Some(first) = g.index.insert(key, i) {
                return Err(err_key(
                    i,
                    format!(
                        "duplicate key `{key}`: it is already given as argument {}; give each key once",
                        first + 1
                    ),
                ));
            }
            self.value(i, arg, &mut g)?;
        }
        for key in REQUIRED {
            if !g.index.contains_key(key) {
                return Err(ConstraintError {
                    arg_index: None,
                    on_value: false,
                    message: format!(
                        "missing key `{key}`; add {key} = \"…\", one of: {}",
                        self.allowed(key)
                    ),
                });
            }
        }
        self.combine(g)
    }

    fn allowed(&self, key: &str) -> String {
        match key {
            "model" => join(self.models().iter().map(|s| s.as_str())),
            "hw" => {
                let mut v = vec!["native"];
                v.extend(self.ckb.targets.keys().map(|s| s.as_str()));
                join(v)
            }
            "quant" => join(self.file_quants(None)),
            "format" => join(self.formats().iter().map(|f| f.as_str())),
            "features" => join(Feature::SUPPORTED.iter().map(|f| f.as_str())),
            "generator" => join(Generator::ALL.iter().map(|f| f.as_str())),
            "reference" => join(Reference::ALL.iter().map(|f| f.as_str())),
            _ => "a positive integer".to_string(),
        }
    }

    /// Families, then presets.
    fn models(&self) -> Vec<String> {
        let mut v: Vec<String> = self.ckb.models.keys().cloned().collect();
        for f in self.ckb.models.values() {
            v.extend(f.presets.iter().map(|p| p.name.clone()));
        }
        v
    }

    fn file_quants(&self, format: Option<Format>) -> Vec<&'a str> {
        self.ckb
            .quants
            .values()
            .filter(|q| Ckb::is_file_quant(q) && format.is_none_or(|f| q.format == f))
            .map(|q| q.id.as_str())
            .collect()
    }

    /// The formats of the CKB's quants, sorted.
    fn formats(&self) -> Vec<Format> {
        let mut v: Vec<Format> = self.ckb.quants.values().map(|q| q.format).collect();
        v.sort();
        v.dedup();
        v
    }

    fn string<'v>(
        &self,
        i: usize,
        arg: &'v Arg,
        example: &str,
    ) -> Result<&'v str, ConstraintError> {
        match &arg.value {
            ArgValue::Str(s) => Ok(s),
            other => Err(err_value(
                i,
                format!(
                    "`{}` takes a string ({} = \"{example}\"), found {}",
                    arg.key,
                    arg.key,
                    other.kind()
                ),
            )),
        }
    }

    fn positive(&self, i: usize, arg: &Arg) -> Result<u32, ConstraintError> {
        match &arg.value {
            ArgValue::Int(n) if *n > 0 && *n <= u32::MAX as i64 => Ok(*n as u32),
            ArgValue::Int(n) if *n > 0 => Err(err_value(
                i,
                format!(
                    "`{}` = {n} is too large; the most allowed is {}",
                    arg.key,
                    u32::MAX
                ),
            )),
            ArgValue::Int(n) => Err(err_value(
                i,
                format!("`{}` must be a positive integer, found {n}", arg.key),
            )),
            other => Err(err_value(
                i,
                format!(
                    "`{}` takes a positive integer ({} = 4096), found {}",
                    arg.key,
                    arg.key,
                    other.kind()
                ),
            )),
        }
    }

    fn value(&self, i: usize, arg: &'a Arg, g: &mut Given<'a>) -> Result<(), ConstraintError> {
        let unknown = |what: &str, v: &str, key: &str| {
            let allowed = self.allowed(key);
            let hint = suggest(v, allowed.split(", "))
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            err_value(i, format!("unknown {what} `{v}`{hint}; allowed: {allowed}"))
        };
        match arg.key.as_str() {
            "model" => {
                let v = self.string(i, arg, "qwen2")?;
                let Some((family, preset)) = self.ckb.resolve_model(v) else {
                    return Err(unknown("model", v, "model"));
                };
                g.model = Some((
                    v.to_string(),
                    family.family.clone(),
                    preset.map(|p| p.context_length),
                ));
            }
            "hw" => {
                let v = self.string(i, arg, "x86_64-avx2")?;
                if v == "native" {
                    let Some(t) = native_target(self.ckb) else {
                        let cpus: Vec<&str> = self
                            .ckb
                            .targets
                            .values()
                            .filter(|t| t.kind == TargetKind::Cpu)
                            .map(|t| t.id.as_str())
                            .collect();
                        return Err(err_value(
                            i,
                            format!(
                                "hw `native`: this machine supports none of the cpu targets ({}); name a target instead, one of: {}",
                                join(cpus),
                                self.allowed("hw")
                            ),
                        ));
                    };
                    g.hw = Some(t);
                } else {
                    let Some(t) = self.ckb.targets.get(v) else {
                        return Err(unknown("hw", v, "hw"));
                    };
                    g.hw = Some(t);
                }
            }
            "quant" => {
                let v = self.string(i, arg, "q4_k_m")?;
                match self.ckb.quants.get(v) {
                    None => return Err(unknown("quant", v, "quant")),
                    Some(q) if !Ckb::is_file_quant(q) => {
                        return Err(err_value(
                            i,
                            format!(
                                "quant `{v}` is a tensor type, not a quantization of whole files (quants/{v}.toml lists no file_types); allowed: {}",
                                self.allowed("quant")
                            ),
                        ))
                    }
                    Some(q) => g.quant = Some(q.id.clone()),
                }
            }
            "format" => {
                let v = self.string(i, arg, "gguf")?;
                let Some(f) = self.formats().into_iter().find(|f| f.as_str() == v) else {
                    return Err(unknown("format", v, "format"));
                };
                g.format = Some(f);
            }
            "max_seq" => g.max_seq = Some(self.positive(i, arg)?),
            "batch" => {
                let n = self.positive(i, arg)?;
                if n > 64 {
                    return Err(err_value(
                        i,
                        format!(
                            "`batch` = {n} is too large: an engine serves at most 64 sequences at once (one KV slot each); use 1 to 64"
                        ),
                    ));
                }
                g.batch = Some(n);
            }
            "tp" => g.tp = Some(self.positive(i, arg)?),
            "features" => {
                let ArgValue::List(items) = &arg.value else {
                    return Err(err_value(
                        i,
                        format!(
                            "`features` takes an array of strings (features = [\"server\"]), found {}; allowed features: {}",
                            arg.value.kind(),
                            self.allowed("features")
                        ),
                    ));
                };
                for item in items {
                    if item == Feature::Chat.as_str() {
                        return Err(err_value(
                            i,
                            format!(
                                "feature `chat` changes nothing: every engine already has the chat template and `Engine::chat`; drop it (allowed features: {})",
                                self.allowed("features")
                            ),
                        ));
                    }
                    let Some(f) = Feature::SUPPORTED.iter().find(|f| f.as_str() == item) else {
                        return Err(unknown("feature", item, "features"));
                    };
                    if g.features.contains(f) {
                        return Err(err_value(
                            i,
                            format!("feature `{item}` is listed twice in `features`; list it once"),
                        ));
                    }
                    g.features.push(*f);
                }
                g.features.sort();
            }
            "generator" => {
                let v = self.string(i, arg, "ckb")?;
                let Some(x) = Generator::ALL.iter().find(|x| x.as_str() == v) else {
                    return Err(unknown("generator", v, "generator"));
                };
                g.generator = Some(*x);
            }
            "reference" => {
                let v = self.string(i, arg, "none")?;
                let Some(x) = Reference::ALL.iter().find(|x| x.as_str() == v) else {
                    return Err(unknown("reference", v, "reference"));
                };
                g.reference = Some(*x);
            }
            _ => unreachable!("keys are checked against KEYS first"),
        }
        Ok(())
    }

    fn combine(&self, g: Given<'a>) -> Result<Constraints, ConstraintError> {
        let (model, family, context) = g.model.clone().expect("model is required");
        let target = g.hw.expect("hw is required");
        let quant_id = g.quant.clone().expect("quant is required");
        let quant = &self.ckb.quants[&quant_id];
        let generator = g.generator.unwrap_or_default();

        if let Some(f) = g.format {
            if f != quant.format {
                return Err(err_key(
                    g.index["format"],
                    format!(
                        "conflicting keys: format = \"{f}\" but quant `{quant_id}` is a {} quant; drop `format` (it follows from the quant) or choose a {f} quant: {}",
                        quant.format,
                        join(self.file_quants(Some(f)))
                    ),
                ));
            }
        }
        let tp = g.tp.unwrap_or(1);
        if tp > 1 && target.kind != TargetKind::Cuda {
            let cudas: Vec<&str> = self
                .ckb
                .targets
                .values()
                .filter(|t| t.kind == TargetKind::Cuda)
                .map(|t| t.id.as_str())
                .collect();
            return Err(err_key(
                g.index["tp"],
                format!(
                    "impossible combination: tp = {tp} needs a cuda target, but hw `{}` is a {} target; use tp = 1 or a cuda hw: {}",
                    target.id,
                    target.kind,
                    join(cudas)
                ),
            ));
        }
        if tp > 1 {
            return Err(err_value(
                g.index["tp"],
                format!(
                    "`tp` = {tp} is not supported yet: cuda engines run on one device, so tensor parallelism would change nothing but the cache key; use tp = 1 or drop the key"
                ),
            ));
        }
        let batch = g.batch.unwrap_or(1);
        if batch > 1 && target.kind != TargetKind::Cpu {
            return Err(err_value(
                g.index["batch"],
                format!(
                    "impossible combination: batch = {batch} needs a cpu target (continuous batching runs in the cpu engines' server), but hw `{}` is a {} target; use batch = 1",
                    target.id, target.kind
                ),
            ));
        }
        if batch > 1 && !g.features.contains(&Feature::Server) {
            return Err(err_value(
                g.index["batch"],
                format!(
                    "`batch` = {batch} needs features = [\"server\"]: it is how many requests the server runs at once, one KV slot each (Engine::step, in every cpu engine, needs no key); add the feature or drop `batch`"
                ),
            ));
        }
        if let Some(r) = g
            .reference
            .filter(|r| *r != Reference::None && generator == Generator::Ckb)
        {
            return Err(err_key(
                g.index["reference"],
                format!(
                    "`reference` = \"{}\" changes nothing with generator = \"ckb\": only the llm implementer reads it; drop it, or set generator = \"llm\" or \"auto\"",
                    r.as_str()
                ),
            ));
        }
        if let (Some(m), Some(ctx)) = (g.max_seq, context) {
            if m > ctx {
                return Err(err_value(
                    g.index["max_seq"],
                    format!(
                        "impossible combination: max_seq = {m} exceeds the context length {ctx} of preset `{model}`; use max_seq <= {ctx}, or model = \"{family}\" to read the limit from the file"
                    ),
                ));
            }
        }
        if generator == Generator::Ckb {
            self.dot_coverage(&g, target, quant)?;
        }
        Ok(Constraints {
            batch,
            family,
            features: g.features,
            format: quant.format,
            generator,
            hw: target.id.clone(),
            max_seq: g.max_seq,
            model,
            quant: quant_id,
            reference: g.reference.unwrap_or_default(),
            tp,
        })
    }

    /// With the `ckb` implementer, every tensor type of the quant needs a dot-kernel
    /// realization whose variant the target accepts.
    fn dot_coverage(
        &self,
        g: &Given<'a>,
        target: &Target,
        quant: &crate::ckb::Quant,
    ) -> Result<(), ConstraintError> {
        for t in self.ckb.tensor_types(quant) {
            let Some(cid) = &t.contract else { continue };
            let Some(contract) = self.ckb.contracts.get(cid) else {
                continue;
            };
            let fits = contract
                .realizations
                .iter()
                .any(|r| target.variants.contains(&r.variant));
            if fits {
                continue;
            }
            let able: Vec<&str> = self
                .ckb
                .targets
                .values()
                .filter(|t| {
                    contract
                        .realizations
                        .iter()
                        .any(|r| t.variants.contains(&r.variant))
                })
                .map(|t| t.id.as_str())
                .collect();
            let what = if t.id == quant.id && quant.kind == QuantKind::TensorType {
                format!("quant `{}` needs", quant.id)
            } else {
                format!(
                    "quant `{}` contains tensor type `{}`, which needs",
                    quant.id, t.id
                )
            };
            return Err(err_value(
                g.index["quant"],
                format!(
                    "impossible combination: {what} the dot kernel `{cid}`, and the ckb has no realization of it for hw `{}`; use hw = one of: {}, or generator = \"auto\" to let the llm implementer fill it",
                    target.id,
                    join(able)
                ),
            ));
        }
        Ok(())
    }
}

/// The best CPU target this machine supports: its arch matches (or is `any`) and every
/// feature it lists is detected; most features wins, then the widest vectors.
pub fn native_target(ckb: &Ckb) -> Option<&Target> {
    ckb.targets
        .values()
        .filter(|t| t.kind == TargetKind::Cpu)
        .filter(|t| t.arch == "any" || t.arch == std::env::consts::ARCH)
        .filter(|t| t.features.iter().all(|f| cpu_has(f)))
        .max_by(|a, b| {
            (a.features.len(), a.vector_bits)
                .cmp(&(b.features.len(), b.vector_bits))
                .then_with(|| b.id.cmp(&a.id))
        })
}

/// Whether the build machine's CPU has `feature` (names as in `targets/*.toml`: `avx2`, `fma`,
/// `avx512f`, …). Unknown names count as absent.
pub fn cpu_has(feature: &str) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! detect {
            ($($name:tt),*) => {
                match feature {
                    $($name => std::arch::is_x86_feature_detected!($name),)*
                    "sse4_2" => std::arch::is_x86_feature_detected!("sse4.2"),
                    "sse4_1" => std::arch::is_x86_feature_detected!("sse4.1"),
                    "avx512_vnni" => std::arch::is_x86_feature_detected!("avx512vnni"),
                    _ => false,
                }
            };
        }
        detect!(
            "sse2",
            "sse3",
            "ssse3",
            "sse4.1",
            "sse4.2",
            "popcnt",
            "avx",
            "avx2",
            "fma",
            "f16c",
            "bmi1",
            "bmi2",
            "lzcnt",
            "avx512f",
            "avx512bw",
            "avx512vl",
            "avx512dq",
            "avx512cd",
            "avx512vnni",
            "avx512bf16",
            "avx512vbmi",
            "avxvnni"
        )
    }
    #[cfg(target_arch = "aarch64")]
    {
        match feature {
            "neon" => std::arch::is_aarch64_feature_detected!("neon"),
            "dotprod" => std::arch::is_aarch64_feature_detected!("dotprod"),
            "fp16" => std::arch::is_aarch64_feature_detected!("fp16"),
            "i8mm" => std::arch::is_aarch64_feature_detected!("i8mm"),
            "sve" => std::arch::is_aarch64_feature_detected!("sve"),
            _ => false,
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = feature;
        false
    }
}

/// The closest of `candidates` to `word` (edit distance at most 2), for "did you mean".
fn suggest<'c>(word: &str, candidates: impl IntoIterator<Item = &'c str>) -> Option<&'c str> {
    candidates
        .into_iter()
        .map(|c| (distance(word, c), c))
        .filter(|(d, c)| *d <= 2 && *d < c.len().max(word.len()))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
#[path = "constraints_tests.rs"]
mod tests;
