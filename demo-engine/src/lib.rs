//! The demo app's engines: the qwen2 Q4_K_M (GGUF) and AWQ (Hugging Face checkpoint) engines,
//! the llama Q4_1 ones (SmolLM2) and the gemma3 Q4_K_M ones, each generated for several
//! targets, and one interface over them so the CLI can pick at run time from the file's
//! architecture and the cpu (the engines themselves never dispatch).
//!
//! - [`Coder`]: `hw = "x86_64-avx2"` — AVX2+FMA integer dot kernels;
//! - [`CoderPortable`]: `hw = "generic"` — scalar kernels, any CPU;
//! - [`CoderAvx512`]: `hw = "x86_64-avx512"` — the AVX2 kernels plus AVX-512 VNNI tiled prefill;
//! - [`CoderAwq`], [`CoderAwqPortable`]: the same for `quant = "awq"` (a checkpoint directory);
//! - [`Smol`], [`SmolAvx512`], [`SmolPortable`], [`SmolSm89`]: `model = "llama", quant =
//!   "q4_1"` for AVX2, AVX-512, any CPU and CUDA sm_89 (the family-generic decoder driven by
//!   ckb/models/llama.toml);
//! - [`LlamaQ4k`], [`LlamaQ4kAvx512`], [`LlamaQ4kPortable`]: `model = "llama", quant =
//!   "q4_k_m"` for AVX2, AVX-512 and any CPU, for the llama files most often downloaded
//!   (Llama 3.x Q4_K_M / Q4_K_S; [`load`] picks them from the file's `general.file_type`);
//! - [`Gemma`], [`GemmaAvx512`], [`GemmaPortable`]: `model = "gemma3", quant = "q4_k_m"` for
//!   AVX2, AVX-512 and any CPU (the same decoder with gemma3's parts from
//!   ckb/models/gemma3.toml: q/k norms, post norms, GeGLU, sliding-window layers; no CUDA engine
//!   yet);
//! - [`Qwen3`], [`Qwen3Avx512`], [`Qwen3Portable`]: `model = "qwen3", quant = "q4_k_m"` for AVX2,
//!   AVX-512 and any CPU (the same decoder again, driven by ckb/models/qwen3.toml: qwen2's graph
//!   without biases, with gemma3's per-head q/k norms and a head dim read from the file; no new
//!   Rust; no CUDA engine yet).

use metainfer::{GenParams, Message, Stats, TemplateKwargs};

#[metainfer::engine(model = "qwen2", hw = "x86_64-avx2", quant = "q4_k_m", features = ["server"], batch = 16)]
pub struct Coder;

#[metainfer::engine(model = "qwen2", hw = "generic", quant = "q4_k_m", features = ["server"])]
pub struct CoderPortable;

#[metainfer::engine(model = "qwen2", hw = "x86_64-avx512", quant = "q4_k_m", features = ["server"], batch = 16)]
pub struct CoderAvx512;

#[metainfer::engine(model = "qwen2", hw = "x86_64-avx2", quant = "awq", features = ["server"])]
pub struct CoderAwq;

#[metainfer::engine(model = "qwen2", hw = "generic", quant = "awq", features = ["server"])]
pub struct CoderAwqPortable;

#[metainfer::engine(model = "llama", hw = "x86_64-avx2", quant = "q4_1", features = ["server"], batch = 16)]
pub struct Smol;

#[metainfer::engine(model = "llama", hw = "x86_64-avx512", quant = "q4_1", features = ["server"], batch = 16)]
pub struct SmolAvx512;

#[metainfer::engine(model = "llama", hw = "generic", quant = "q4_1", features = ["server"])]
pub struct SmolPortable;

#[metainfer::engine(model = "llama", hw = "sm_89", quant = "q4_1", features = ["server"])]
pub struct SmolSm89;

#[metainfer::engine(model = "llama", hw = "x86_64-avx2", quant = "q4_k_m", features = ["server"])]
pub struct LlamaQ4k;

#[metainfer::engine(model = "llama", hw = "x86_64-avx512", quant = "q4_k_m", features = ["server"])]
pub struct LlamaQ4kAvx512;

#[metainfer::engine(model = "llama", hw = "generic", quant = "q4_k_m", features = ["server"])]
pub struct LlamaQ4kPortable;

#[metainfer::engine(model = "gemma3", hw = "x86_64-avx2", quant = "q4_k_m", features = ["server"], batch = 16)]
pub struct Gemma;

#[metainfer::engine(model = "gemma3", hw = "x86_64-avx512", quant = "q4_k_m", features = ["server"], batch = 16)]
pub struct GemmaAvx512;

#[metainfer::engine(model = "gemma3", hw = "generic", quant = "q4_k_m", features = ["server"])]
pub struct GemmaPortable;

#[metainfer::engine(model = "qwen3", hw = "x86_64-avx2", quant = "q4_k_m", features = ["server"], batch = 16)]
pub struct Qwen3;

#[metainfer::engine(model = "qwen3", hw = "x86_64-avx512", quant = "q4_k_m", features = ["server"], batch = 16)]
pub struct Qwen3Avx512;

#[metainfer::engine(model = "qwen3", hw = "generic", quant = "q4_k_m", features = ["server"])]
pub struct Qwen3Portable;

// The CUDA engines (kernels in the entries' kernels/, PTX from NVRTC at generation time; the
// driver is loaded at run time, so these build on machines without CUDA). sm_89 PTX also runs
// on sm_90 GPUs (the driver JITs it); sm_90 is the native one for H100/H200.
#[metainfer::engine(model = "qwen2", hw = "sm_80", quant = "q4_k_m", features = ["server"])]
pub struct CoderSm80;

#[metainfer::engine(model = "qwen2", hw = "sm_89", quant = "q4_k_m", features = ["server"])]
pub struct CoderSm89;

#[metainfer::engine(model = "qwen2", hw = "sm_90", quant = "q4_k_m", features = ["server"])]
pub struct CoderSm90;

#[metainfer::engine(model = "qwen2", hw = "sm_80", quant = "awq", features = ["server"])]
pub struct CoderAwqSm80;

#[metainfer::engine(model = "qwen2", hw = "sm_89", quant = "awq", features = ["server"])]
pub struct CoderAwqSm89;

#[metainfer::engine(model = "qwen2", hw = "sm_90", quant = "awq", features = ["server"])]
pub struct CoderAwqSm90;

/// What the CLI needs of an engine (`Send`: `demo-engine serve` moves it to the server's
/// threads).
pub trait Model: Send {
    fn encode(&self, text: &str) -> Vec<u32>;
    fn decode(&self, ids: &[u32]) -> String;
    fn generate_ids(
        &mut self,
        prompt: &[u32],
        p: &GenParams,
        on_token: &mut dyn FnMut(u32, &str) -> bool,
    ) -> Result<(Vec<u32>, Stats), metainfer::Error>;
    fn render_chat(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String, metainfer::Error> {
        self.render_chat_with(messages, add_generation_prompt, &TemplateKwargs::new())
    }
    /// render_chat with extra template variables (`{"enable_thinking": false}` for Qwen3).
    fn render_chat_with(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
        kwargs: &TemplateKwargs,
    ) -> Result<String, metainfer::Error>;
    /// Replaces the model file's chat template (an error, the old one kept, when it does not
    /// compile).
    fn set_chat_template(&mut self, source: &str) -> Result<(), metainfer::Error>;
    fn forward_all(&mut self, tokens: &[u32], pos: usize) -> Result<Vec<f32>, metainfer::Error>;
    fn n_vocab(&self) -> usize;
    fn max_seq(&self) -> usize;
    fn set_threads(&mut self, n: usize);
    fn reset(&mut self);
    /// Whether `id` ends a generation (eos, <|im_end|>, …).
    fn is_eog(&self, id: u32) -> bool;
    /// The BOS id when the model's files ask for one before every text (gemma), else None.
    fn bos_to_add(&self) -> Option<u32>;
    fn hw(&self) -> &'static str;
    /// The engine type's name (`Smol`, `LlamaQ4k`, ...).
    fn name(&self) -> &'static str;
    /// Requests its server runs at once (the engine's `batch`).
    fn server_slots(&self) -> usize;
    /// The engine behind the OpenAI-compatible server (the `server_openai` section the engine
    /// was generated with), bound to `addr` and not yet serving.
    fn into_server(
        self: Box<Self>,
        addr: &str,
        cfg: metainfer::rt::server::ServerConfig,
    ) -> std::io::Result<metainfer::rt::server::Server>;
    /// CUDA engines: whether decode steps replay a captured CUDA graph (default on); others
    /// have nothing to set.
    fn set_cuda_graph(&mut self, on: bool) {
        let _ = on;
    }
}

macro_rules! impl_model {
    ($t:ty, $hw:expr, cuda) => {
        impl_model!($t, $hw, fn set_cuda_graph(&mut self, on: bool) {
            (**self).set_cuda_graph(on)
        });
    };
    ($t:ty, $hw:expr $(, $extra:item)?) => {
        impl Model for $t {
            fn encode(&self, text: &str) -> Vec<u32> {
                self.tokenizer().encode(text, true)
            }
            fn decode(&self, ids: &[u32]) -> String {
                self.tokenizer().decode(ids)
            }
            fn generate_ids(
                &mut self,
                prompt: &[u32],
                p: &GenParams,
                on_token: &mut dyn FnMut(u32, &str) -> bool,
            ) -> Result<(Vec<u32>, Stats), metainfer::Error> {
                (**self).generate_ids(prompt, p, on_token)
            }
            fn render_chat_with(&self, messages: &[Message], add_generation_prompt: bool, kwargs: &TemplateKwargs) -> Result<String, metainfer::Error> {
                (**self).render_chat_with(messages, add_generation_prompt, kwargs)
            }
            fn set_chat_template(&mut self, source: &str) -> Result<(), metainfer::Error> {
                (**self).set_chat_template(source)
            }
            fn forward_all(&mut self, tokens: &[u32], pos: usize) -> Result<Vec<f32>, metainfer::Error> {
                (**self).forward_all(tokens, pos)
            }
            fn n_vocab(&self) -> usize {
                (**self).n_vocab()
            }
            fn max_seq(&self) -> usize {
                (**self).max_seq()
            }
            fn set_threads(&mut self, n: usize) {
                (**self).set_threads(n)
            }
            fn reset(&mut self) {
                (**self).reset()
            }
            fn is_eog(&self, id: u32) -> bool {
                self.tokenizer().is_eog(id)
            }
            fn bos_to_add(&self) -> Option<u32> {
                let t = self.tokenizer();
                t.bos_id().filter(|_| t.add_bos())
            }
            fn hw(&self) -> &'static str {
                $hw
            }
            fn name(&self) -> &'static str {
                stringify!($t)
            }
            fn server_slots(&self) -> usize {
                (**self).server_slots()
            }
            fn into_server(self: Box<Self>, addr: &str, cfg: metainfer::rt::server::ServerConfig) -> std::io::Result<metainfer::rt::server::Server> {
                (*self).into_inner().server(addr, cfg)
            }
            $($extra)?
        }
    };
}

impl_model!(Coder, "x86_64-avx2");
impl_model!(CoderPortable, "generic");
impl_model!(CoderAvx512, "x86_64-avx512");
impl_model!(CoderAwq, "x86_64-avx2");
impl_model!(CoderAwqPortable, "generic");
impl_model!(CoderSm80, "sm_80", cuda);
impl_model!(CoderSm89, "sm_89", cuda);
impl_model!(CoderSm90, "sm_90", cuda);
impl_model!(CoderAwqSm80, "sm_80", cuda);
impl_model!(CoderAwqSm89, "sm_89", cuda);
impl_model!(CoderAwqSm90, "sm_90", cuda);
impl_model!(Smol, "x86_64-avx2");
impl_model!(SmolAvx512, "x86_64-avx512");
impl_model!(SmolPortable, "generic");
impl_model!(SmolSm89, "sm_89", cuda);
impl_model!(LlamaQ4k, "x86_64-avx2");
impl_model!(LlamaQ4kAvx512, "x86_64-avx512");
impl_model!(LlamaQ4kPortable, "generic");
impl_model!(Gemma, "x86_64-avx2");
impl_model!(GemmaAvx512, "x86_64-avx512");
impl_model!(GemmaPortable, "generic");
impl_model!(Qwen3, "x86_64-avx2");
impl_model!(Qwen3Avx512, "x86_64-avx512");
impl_model!(Qwen3Portable, "generic");

/// Which generated engine to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// AVX-512 (GGUF files) or AVX2 when the CPU has it, else generic.
    Auto,
    Avx2,
    /// AVX-512 with VNNI (GGUF files; checkpoints take the AVX2 engine).
    Avx512,
    Generic,
    /// A CUDA engine (GGUF files, or AWQ checkpoints).
    Cuda(Arch),
}

/// The cuda targets demo-engine has engines for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    Sm80,
    Sm89,
    Sm90,
}

impl std::str::FromStr for Which {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Which::Auto),
            "avx2" | "x86_64-avx2" => Ok(Which::Avx2),
            "avx512" | "x86_64-avx512" => Ok(Which::Avx512),
            "generic" => Ok(Which::Generic),
            "sm_80" => Ok(Which::Cuda(Arch::Sm80)),
            "sm_89" => Ok(Which::Cuda(Arch::Sm89)),
            "sm_90" => Ok(Which::Cuda(Arch::Sm90)),
            other => Err(format!(
                "unknown engine '{other}': use auto, avx512, avx2, generic, sm_80, sm_89 or sm_90"
            )),
        }
    }
}

/// Whether the cpu can run the `x86_64-avx2` engines (AVX2 and FMA).
pub fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the cpu can run the `x86_64-avx512` engines (AVX2, FMA, AVX-512 F/BW/VL and VNNI).
pub fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        has_avx2()
            && std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether `path` is a Hugging Face checkpoint (a directory, or a file beside a config.json)
/// rather than a GGUF file.
pub fn is_checkpoint(path: &std::path::Path) -> bool {
    path.is_dir()
        || (path.extension().is_some_and(|e| e != "gguf")
            && path.with_file_name("config.json").is_file())
}

/// The model families demo-engine has engines for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Qwen2,
    Llama,
    Gemma3,
    Qwen3,
}

/// The family of the model at `path`: qwen2 for checkpoints (the AWQ engines), else from the
/// GGUF's `general.architecture`; an architecture without engines here is an error that says
/// what would serve it.
pub fn family_of(path: &std::path::Path) -> Result<Family, metainfer::Error> {
    Ok(family_head(path)?.0)
}

/// The family of `path` and, for a GGUF file, its header (one scan): a checkpoint directory is
/// qwen2, the only family demo-engine has checkpoint (AWQ) engines for.
fn family_head(path: &std::path::Path) -> Result<(Family, Option<GgufHead>), metainfer::Error> {
    if is_checkpoint(path) {
        return Ok((Family::Qwen2, None));
    }
    let head = gguf_head(path)?;
    Ok((family_named(path, &head.arch)?, Some(head)))
}

/// The family of a GGUF file whose `general.architecture` is `arch`.
fn family_named(path: &std::path::Path, arch: &str) -> Result<Family, metainfer::Error> {
    match arch {
        "qwen2" => Ok(Family::Qwen2),
        "llama" => Ok(Family::Llama),
        "gemma3" => Ok(Family::Gemma3),
        "qwen3" => Ok(Family::Qwen3),
        other => Err(metainfer::Error::Mismatch {
            what: format!("general.architecture of {}", path.display()),
            expected: "\"qwen2\", \"qwen3\", \"llama\" or \"gemma3\" (the families demo-engine has engines for)".into(),
            found: format!("{other:?}"),
            fix: format!("generate an engine with #[metainfer::engine(model = \"{other}\", ...)] if the ckb knows that family (cargo metainfer ckb ls)"),
        }),
    }
}

/// `general.architecture` of a GGUF file, read from its header without mapping the file.
pub fn gguf_arch(path: &std::path::Path) -> Result<String, metainfer::Error> {
    Ok(gguf_head(path)?.arch)
}

/// `general.file_type` of a GGUF file (llama.cpp's `llama_ftype`: 3 = Q4_1, 14 / 15 = Q4_K_S /
/// Q4_K_M, ...), None when the file does not say.
pub fn gguf_file_type(path: &std::path::Path) -> Result<Option<u32>, metainfer::Error> {
    Ok(gguf_head(path)?.file_type)
}

/// What [`load`] reads of a GGUF header.
struct GgufHead {
    arch: String,
    file_type: Option<u32>,
}

/// Scans the metadata of a GGUF file up to `general.architecture` and `general.file_type` (or
/// to its end), without mapping the file; a file without the architecture is an error.
fn gguf_head(path: &std::path::Path) -> Result<GgufHead, metainfer::Error> {
    use std::io::{BufReader, Read};
    let io = |source| metainfer::Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let bad =
        |why: String| metainfer::Error::format(format!("GGUF header of {}", path.display()), why);
    let mut r = BufReader::new(std::fs::File::open(path).map_err(io)?);
    let mut read = |n: usize| -> Result<Vec<u8>, metainfer::Error> {
        let mut b = vec![0u8; n];
        r.read_exact(&mut b).map_err(io)?;
        Ok(b)
    };
    let u32_of = |b: &[u8]| u32::from_le_bytes(b[..4].try_into().unwrap());
    let u64_of = |b: &[u8]| u64::from_le_bytes(b[..8].try_into().unwrap());
    let head = read(24)?;
    if &head[..4] != b"GGUF" {
        return Err(bad("not a GGUF file (no GGUF magic)".into()));
    }
    let n_kv = u64_of(&head[16..]);
    // Bytes of one value of scalar type `t` (GGUF value types 0..=12 but 8, string, and 9, array).
    let scalar = |t: u32| match t {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    };
    let (mut arch, mut file_type) = (None, None);
    for _ in 0..n_kv.min(1 << 20) {
        let len = u64_of(&read(8)?);
        if len > 1 << 16 {
            return Err(bad(format!("a metadata key of {len} bytes")));
        }
        let key = read(len as usize)?;
        let t = u32_of(&read(4)?);
        match t {
            8 => {
                let len = u64_of(&read(8)?);
                if len > 1 << 24 {
                    return Err(bad(format!("a string of {len} bytes")));
                }
                let v = read(len as usize)?;
                if key == b"general.architecture" {
                    arch = Some(
                        String::from_utf8(v)
                            .map_err(|_| bad("general.architecture is not UTF-8".into()))?,
                    );
                }
            }
            9 => {
                let et = u32_of(&read(4)?);
                let n = u64_of(&read(8)?);
                if n > 1 << 24 {
                    return Err(bad(format!("an array of {n} elements")));
                }
                for _ in 0..n {
                    match (et, scalar(et)) {
                        (8, _) => {
                            let len = u64_of(&read(8)?);
                            read(len.min(1 << 24) as usize)?;
                        }
                        (_, Some(size)) => {
                            read(size)?;
                        }
                        _ => return Err(bad(format!("array of value type {et}"))),
                    }
                }
            }
            t => {
                let v = read(scalar(t).ok_or_else(|| bad(format!("value type {t}")))?)?;
                if key == b"general.file_type" && (t == 4 || t == 5) {
                    file_type = Some(u32_of(&v));
                }
            }
        }
        if arch.is_some() && file_type.is_some() {
            break;
        }
    }
    let arch = arch.ok_or_else(|| bad("no general.architecture key".into()))?;
    Ok(GgufHead { arch, file_type })
}

/// Loads `path` with the chosen engine of the file's family (`family_of`): a checkpoint
/// directory with the AWQ engines, anything else with the GGUF ones.
pub fn load(path: &std::path::Path, which: Which) -> Result<Box<dyn Model>, metainfer::Error> {
    // one header scan gives the family and (for llama) the file type
    let (family, head) = family_head(path)?;
    if let Family::Gemma3 | Family::Qwen3 = family {
        if let Which::Cuda(_) = which {
            let name = if family == Family::Gemma3 {
                "gemma3"
            } else {
                "qwen3"
            };
            return Err(metainfer::Error::Mismatch {
                what: "the file's architecture".into(),
                expected: "qwen2 or llama files (demo-engine's cuda engines)".into(),
                found: name.into(),
                fix: format!("use --engine auto, avx2 or generic: the ckb has no cuda forward for {name}'s parts (q/k norms) yet"),
            });
        }
        let gemma = family == Family::Gemma3;
        return Ok(match (uses_avx512(which), uses_avx2(which)) {
            (true, _) if gemma => Box::new(GemmaAvx512::load(path)?),
            (true, _) => Box::new(Qwen3Avx512::load(path)?),
            (_, true) if gemma => Box::new(Gemma::load(path)?),
            (_, true) => Box::new(Qwen3::load(path)?),
            _ if gemma => Box::new(GemmaPortable::load(path)?),
            _ => Box::new(Qwen3Portable::load(path)?),
        });
    }
    if family == Family::Llama {
        let k_quant = k_quant_llama(head.and_then(|h| h.file_type));
        return Ok(match which {
            // sm_89 PTX runs on sm_90 GPUs too (the driver JITs it).
            Which::Cuda(Arch::Sm89 | Arch::Sm90) => Box::new(SmolSm89::load(path)?),
            Which::Cuda(Arch::Sm80) => {
                return Err(metainfer::Error::Mismatch {
                    what: "the file's architecture".into(),
                    expected: "qwen2 files (demo-engine's sm_80 engines)".into(),
                    found: "llama".into(),
                    fix: "use --engine sm_89 on an Ada or newer GPU, or a cpu engine: demo-engine has no sm_80 llama engine".into(),
                })
            }
            _ if uses_avx512(which) && k_quant => Box::new(LlamaQ4kAvx512::load(path)?),
            _ if uses_avx512(which) => Box::new(SmolAvx512::load(path)?),
            _ if uses_avx2(which) && k_quant => Box::new(LlamaQ4k::load(path)?),
            _ if uses_avx2(which) => Box::new(Smol::load(path)?),
            _ if k_quant => Box::new(LlamaQ4kPortable::load(path)?),
            _ => Box::new(SmolPortable::load(path)?),
        });
    }
    if uses_avx512(which) && !is_checkpoint(path) {
        return Ok(Box::new(CoderAvx512::load(path)?));
    }
    let avx2 = match which {
        Which::Auto => has_avx2(),
        // Avx512 gets here only for a checkpoint: AWQ has no AVX-512 engine, so the AVX2 one.
        Which::Avx2 | Which::Avx512 => true,
        Which::Generic => false,
        Which::Cuda(arch) => {
            return Ok(match (is_checkpoint(path), arch) {
                (false, Arch::Sm80) => Box::new(CoderSm80::load(path)?),
                (false, Arch::Sm89) => Box::new(CoderSm89::load(path)?),
                (false, Arch::Sm90) => Box::new(CoderSm90::load(path)?),
                (true, Arch::Sm80) => Box::new(CoderAwqSm80::load(path)?),
                (true, Arch::Sm89) => Box::new(CoderAwqSm89::load(path)?),
                (true, Arch::Sm90) => Box::new(CoderAwqSm90::load(path)?),
            })
        }
    };
    Ok(match (is_checkpoint(path), avx2) {
        (false, true) => Box::new(Coder::load(path)?),
        (false, false) => Box::new(CoderPortable::load(path)?),
        (true, true) => Box::new(CoderAwq::load(path)?),
        (true, false) => Box::new(CoderAwqPortable::load(path)?),
    })
}

/// Whether a cpu engine choice runs the `x86_64-avx512` engines: `auto` where the cpu has
/// AVX-512 F/BW/VL and VNNI, and `avx512` (whose engines then refuse a cpu without them).
fn uses_avx512(which: Which) -> bool {
    match which {
        Which::Auto => has_avx512(),
        Which::Avx512 => true,
        _ => false,
    }
}

/// Whether a cpu engine choice runs the `x86_64-avx2` engines: `auto` where the cpu has AVX2,
/// `avx2` and `avx512` (the AWQ checkpoints have no AVX-512 engine and take the AVX2 one).
fn uses_avx2(which: Which) -> bool {
    match which {
        Which::Auto => has_avx2(),
        Which::Avx2 | Which::Avx512 => true,
        Which::Generic | Which::Cuda(_) => false,
    }
}

/// Whether a llama file of `file_type` goes to [`LlamaQ4k`] (Q4_K_S, Q4_K_M) rather than the
/// Q4_1 engines (which also take the F32 test fixtures and files that do not say).
pub fn k_quant_llama(file_type: Option<u32>) -> bool {
    matches!(file_type, Some(14 | 15))
}

/// Perplexity as llama.cpp's `llama-perplexity` computes it: the tokens are cut into chunks of
/// `ctx`; each chunk is evaluated from an empty cache and the second half of its positions is
/// scored (each position's logits against the next token). Where the vocab adds BOS (gemma),
/// the text starts with it and every chunk's first token is replaced by it, as llama.cpp does.
/// Returns (ppl, its standard error, chunks).
pub fn perplexity(
    m: &mut dyn Model,
    tokens: &[u32],
    ctx: usize,
    mut progress: impl FnMut(usize, f64),
) -> Result<(f64, f64, usize), metainfer::Error> {
    let bos = m.bos_to_add();
    let tokens: Vec<u32> = bos.into_iter().chain(tokens.iter().copied()).collect();
    let n_chunks = tokens.len() / ctx;
    let first = ctx / 2;
    let n_vocab = m.n_vocab();
    let mut nlls = Vec::new();
    for c in 0..n_chunks {
        let mut chunk = tokens[c * ctx..(c + 1) * ctx].to_vec();
        if let Some(b) = bos {
            chunk[0] = b;
        }
        m.reset();
        let logits = m.forward_all(&chunk, 0)?;
        for j in first..ctx - 1 {
            let row = &logits[j * n_vocab..(j + 1) * n_vocab];
            let max = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max) as f64;
            let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
            let logp = row[chunk[j + 1] as usize] as f64 - max - sum.ln();
            nlls.push(-logp);
        }
        let mean = nlls.iter().sum::<f64>() / nlls.len() as f64;
        progress(c + 1, mean.exp());
    }
    if nlls.is_empty() {
        return Err(metainfer::Error::Params(format!(
            "the text has {} tokens, fewer than one chunk of --ctx {ctx}; use a longer file or a smaller --ctx",
            tokens.len()
        )));
    }
    let n = nlls.len() as f64;
    let mean = nlls.iter().sum::<f64>() / n;
    let var = nlls.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    let ppl = mean.exp();
    Ok((ppl, ppl * (var / n).sqrt(), n_chunks))
}
