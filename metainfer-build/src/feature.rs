//! [`FeatureOff`]: a generator feature (`llm`, `cuda`) that a constraint needs and this build
//! lacks. A leaf, so that the modules that need a feature (`llm`, `nvrtc`, `chain`) can say so
//! without depending on the entry points' error.

/// A cargo feature of the generator that a constraint needs and this build lacks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{why}, which is off in this build; turn it on: metainfer = {{ …, features = [\"{feature}\"] }} in Cargo.toml (from build.rs: metainfer-build = {{ …, features = [\"{feature}\"] }})")]
pub struct FeatureOff {
    /// The constraint key that needs it (`generator`, `hw`), where the error belongs.
    pub key: &'static str,
    pub feature: &'static str,
    pub why: String,
}

impl FeatureOff {
    /// The LLM client is off; `why` says what asked for it.
    pub fn llm(why: String) -> FeatureOff {
        FeatureOff {
            key: "generator",
            feature: "llm",
            why,
        }
    }

    /// NVRTC is off; `why` says what asked for it.
    pub fn cuda(why: String) -> FeatureOff {
        FeatureOff {
            key: "hw",
            feature: "cuda",
            why,
        }
    }
}
