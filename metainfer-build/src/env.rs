//! The one place the generator reads its process environment (sqlx's `env()` pattern).
//!
//! `clippy.toml` disallows `std::env::var`, `var_os`, `vars` and `vars_os` everywhere else in
//! the workspace and CI runs clippy with `-D warnings`, so a new knob is added here or not at
//! all. The reasons: every variable that changes what the generator does can be found in one
//! file, and a malformed value is an error naming the variable and what it takes, never a
//! silent fallback to the default.
//!
//! The variables, by the module that uses them:
//!
//! | variable | read by | meaning |
//! |---|---|---|
//! | `METAINFER_MODE`, `CARGO_NET_OFFLINE`, `DOCS_RS` | [`crate::mode`] (and [`crate::chain::verify`] for `CARGO_NET_OFFLINE`) | auto / offline / refresh |
//! | `METAINFER_CACHE_DIR` | [`crate::cache`] | the cache directory (default `<workspace>/cache`) |
//! | `METAINFER_CKB_DIR` | [`crate::ckb`] | the CKB directory (default `ckb/` beside this crate) |
//! | `METAINFER_LLM_*` | [`crate::llm::config`], [`crate::chain::llm_fill`], [`BuildContext::chain_options`](crate::BuildContext::chain_options) | the LLM endpoint, its limits and the budget |
//! | `METAINFER_COMPILE_TIMEOUT_S` | [`BuildContext::chain_options`](crate::BuildContext::chain_options) | wall seconds for one candidate build (1800) |
//! | `METAINFER_GATE_TIMEOUT_S`, `METAINFER_GATE_MEMORY_MIB` | [`crate::chain::sandbox::Limits::gate_from_env`] | per-gate wall seconds (600), data memory (16384) |
//! | `METAINFER_REAL_MODEL_GATE` | [`crate::chain::verify`] | model files for the real-model gates (off when unset) |
//! | `METAINFER_NVRTC_LIB`, `CUDA_PATH`, `LD_LIBRARY_PATH` | [`crate::nvrtc`]; [`crate::chain::verify`] hands them on to the gates | where NVRTC (and the CUDA driver) is |
//! | `CARGO_TARGET_DIR` | [`crate::BuildContext::for_workspace`] | where the candidates are built (`<target>/metainfer`) |
//! | `OUT_DIR`, `CARGO_MANIFEST_DIR`, `CARGO` | [`crate::build_api`], [`crate::workspace`], [`crate::chain::verify`] | what cargo sets for build scripts and macros |

use std::ffi::OsString;
use std::path::PathBuf;

/// A variable that is set to something it cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name} is `{value}`; it must be {expected} (unset it for the default, {default})")]
pub struct EnvError {
    pub name: &'static str,
    pub value: String,
    /// What it takes, e.g. "a whole number above 0".
    pub expected: &'static str,
    /// The default, as shown to the user.
    pub default: String,
}

/// The value of `name`, `None` when unset or not unicode (then [`var_os`] is the one to use).
pub fn var(name: &str) -> Option<String> {
    #[allow(clippy::disallowed_methods, reason = "the choke point itself")]
    std::env::var(name).ok()
}

/// The raw value of `name` (paths, values handed on to a child process unchanged).
pub fn var_os(name: &str) -> Option<OsString> {
    #[allow(clippy::disallowed_methods, reason = "the choke point itself")]
    std::env::var_os(name)
}

/// The names of every variable set, for clearing a child's environment.
pub fn names() -> Vec<OsString> {
    #[allow(clippy::disallowed_methods, reason = "the choke point itself")]
    std::env::vars_os().map(|(k, _)| k).collect()
}

/// `name` as a path: `None` when unset or empty (an empty directory variable means "default").
pub fn path(name: &str) -> Option<PathBuf> {
    var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// `name` as a whole number above 0, `default` when unset or blank.
pub fn positive(name: &'static str, default: u64) -> Result<u64, EnvError> {
    parse_positive(name, lossy(name), default)
}

/// The value of `name` with anything that is not unicode replaced, so that it is reported
/// rather than taken for unset.
fn lossy(name: &str) -> Option<String> {
    var_os(name).map(|v| v.to_string_lossy().into_owned())
}

/// `name` as a switch: `1` / `true` / `yes` / `on` or `0` / `false` / `no` / `off` (any
/// case), `false` when unset or blank.
pub fn flag(name: &'static str) -> Result<bool, EnvError> {
    parse_flag(name, lossy(name))
}

fn parse_positive(name: &'static str, v: Option<String>, default: u64) -> Result<u64, EnvError> {
    let bad = |value: &str| EnvError {
        name,
        value: value.to_string(),
        expected: "a whole number above 0",
        default: default.to_string(),
    };
    match v.as_deref().map(str::trim) {
        None | Some("") => Ok(default),
        Some(t) => match t.parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(bad(t)),
        },
    }
}

fn parse_flag(name: &'static str, v: Option<String>) -> Result<bool, EnvError> {
    let Some(t) = v.as_deref().map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(false);
    };
    match t.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(EnvError {
            name,
            value: t.to_string(),
            expected: "1 or 0 (true / false, yes / no, on / off)",
            default: "off".to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Option<String> {
        Some(v.to_string())
    }

    #[test]
    fn positive_takes_numbers_above_zero_and_names_the_variable_otherwise() {
        assert_eq!(parse_positive("X_S", None, 600), Ok(600));
        assert_eq!(parse_positive("X_S", s("  "), 600), Ok(600));
        assert_eq!(parse_positive("X_S", s(" 30 "), 600), Ok(30));
        for bad in ["0", "-5", "ten", "1.5", "99999999999999999999"] {
            let e = parse_positive("X_S", s(bad), 600).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("X_S is `{bad}`; it must be a whole number above 0 (unset it for the default, 600)")
            );
        }
    }

    #[test]
    fn flag_reads_the_usual_spellings_and_refuses_others() {
        assert_eq!(parse_flag("F", None), Ok(false));
        assert_eq!(parse_flag("F", s("")), Ok(false));
        for on in ["1", "true", "TRUE", "yes", "On"] {
            assert_eq!(parse_flag("F", s(on)), Ok(true), "{on}");
        }
        for off in ["0", "false", "No", "off"] {
            assert_eq!(parse_flag("F", s(off)), Ok(false), "{off}");
        }
        let e = parse_flag("F", s("maybe")).unwrap_err();
        assert!(
            e.to_string().starts_with("F is `maybe`; it must be 1 or 0"),
            "{e}"
        );
    }
}
