//! CUDA C → PTX with NVRTC, loaded at run time, so nothing of CUDA is needed to build the
//! crates. The CKB's `.cu` realizations are compiled with it by the `nvrtc` gate
//! (`tests/nvrtc_gate.rs`) for every cuda target's arch, and by the CUDA engines when they load.
//!
//! The library is found, in order: the path in `METAINFER_NVRTC_LIB` (e.g. the
//! `nvidia/cuda_nvrtc/lib/libnvrtc.so.12` that `pip install nvidia-cuda-nvrtc-cu12` installs;
//! when set, nothing else is tried), then `libnvrtc.so.12` / `libnvrtc.so` through the dynamic
//! loader's search path, then `$CUDA_PATH/lib64`, `/usr/local/cuda/lib64`. NVRTC loads its
//! builtins library (`libnvrtc-builtins.so.12.x`) from its own directory.
//!
//! NVRTC is called directly through `libloading` (nine C functions) rather than through cudarc:
//! cudarc's dynamic loading picks its own candidate paths and pins a CUDA version feature at
//! build time, while this gate must load exactly the library CI fetched.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
#[cfg(feature = "cuda")]
use std::path::Path;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The variable naming the NVRTC shared library to load.
pub const LIB_ENV: &str = "METAINFER_NVRTC_LIB";

/// What to do when the library is missing.
pub const INSTALL_HINT: &str = "run `pip install nvidia-cuda-nvrtc-cu12` and set METAINFER_NVRTC_LIB to the libnvrtc.so.12 it installs (<site-packages>/nvidia/cuda_nvrtc/lib/libnvrtc.so.12)";

#[derive(Debug, thiserror::Error)]
pub enum NvrtcError {
    #[error("nvrtc library not found: {reason}; {hint}", hint = INSTALL_HINT)]
    NotFound { reason: String },
    #[error("invalid cuda arch `{0}`: expected sm_XX with XX a compute capability, such as sm_80, sm_89, sm_90")]
    Arch(String),
    #[error("{name}: the source or its name contains a NUL byte")]
    Nul { name: String },
    #[error("{name}: nvrtc compilation for {arch} failed ({code}); program log:\n{log}")]
    Compile {
        name: String,
        arch: String,
        code: String,
        log: String,
    },
    #[error("{name}: nvrtc call {call} failed: {code}")]
    Call {
        name: String,
        call: &'static str,
        code: String,
    },
}

/// PTX and NVRTC's program log (warnings; empty when there were none).
#[derive(Debug, Clone)]
pub struct Compiled {
    pub ptx: String,
    pub log: String,
}

type Prog = *mut c_void;
type Res = c_int;

struct Lib {
    path: PathBuf,
    // Keeps the library mapped for the lifetime of the process (the fn pointers below point in).
    #[cfg(feature = "cuda")]
    _lib: libloading::Library,
    version: unsafe extern "C" fn(*mut c_int, *mut c_int) -> Res,
    error_string: unsafe extern "C" fn(Res) -> *const c_char,
    create: unsafe extern "C" fn(
        *mut Prog,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> Res,
    compile: unsafe extern "C" fn(Prog, c_int, *const *const c_char) -> Res,
    log_size: unsafe extern "C" fn(Prog, *mut usize) -> Res,
    log: unsafe extern "C" fn(Prog, *mut c_char) -> Res,
    ptx_size: unsafe extern "C" fn(Prog, *mut usize) -> Res,
    ptx: unsafe extern "C" fn(Prog, *mut c_char) -> Res,
    destroy: unsafe extern "C" fn(*mut Prog) -> Res,
}

#[cfg(feature = "cuda")]
fn candidates() -> Result<Vec<PathBuf>, String> {
    if let Some(p) = crate::env::var_os(LIB_ENV) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            return Err(format!("{LIB_ENV}={} is not a file", p.display()));
        }
        return Ok(vec![p]);
    }
    let names: &[&str] = if cfg!(windows) {
        &["nvrtc64_120_0.dll"]
    } else {
        &["libnvrtc.so.12", "libnvrtc.so"]
    };
    let mut v: Vec<PathBuf> = names.iter().map(PathBuf::from).collect();
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(c) = crate::env::var_os("CUDA_PATH") {
        dirs.push(Path::new(&c).join("lib64"));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    for d in dirs {
        for n in names {
            v.push(d.join(n));
        }
    }
    Ok(v)
}

#[cfg(not(feature = "cuda"))]
fn load() -> Result<Lib, String> {
    Err(
        crate::feature::FeatureOff::cuda("NVRTC is loaded only with the `cuda` feature".into())
            .to_string(),
    )
}

#[cfg(feature = "cuda")]
fn load() -> Result<Lib, String> {
    let mut tried = Vec::new();
    for cand in candidates()? {
        // SAFETY: loading NVRTC runs its initialisers, which have no preconditions.
        match unsafe { libloading::Library::new(&cand) } {
            Ok(lib) => return bind(lib, cand),
            Err(e) => tried.push(e.to_string()), // the loader's message names the path
        }
    }
    Err(format!("tried {}", tried.join("; ")))
}

#[cfg(feature = "cuda")]
fn bind(lib: libloading::Library, path: PathBuf) -> Result<Lib, String> {
    macro_rules! sym {
        ($name:literal) => {{
            // SAFETY: the symbol is NVRTC's C function of that name; the type is its prototype
            // from nvrtc.h (nvrtcResult is a C enum, i.e. int; nvrtcProgram is a pointer).
            let s = unsafe { lib.get($name) }.map_err(|e| format!("{}: {e}", path.display()))?;
            *s
        }};
    }
    Ok(Lib {
        version: sym!(b"nvrtcVersion\0"),
        error_string: sym!(b"nvrtcGetErrorString\0"),
        create: sym!(b"nvrtcCreateProgram\0"),
        compile: sym!(b"nvrtcCompileProgram\0"),
        log_size: sym!(b"nvrtcGetProgramLogSize\0"),
        log: sym!(b"nvrtcGetProgramLog\0"),
        ptx_size: sym!(b"nvrtcGetPTXSize\0"),
        ptx: sym!(b"nvrtcGetPTX\0"),
        destroy: sym!(b"nvrtcDestroyProgram\0"),
        path,
        _lib: lib,
    })
}

fn lib() -> Result<&'static Lib, NvrtcError> {
    static LIB: OnceLock<Result<Lib, String>> = OnceLock::new();
    LIB.get_or_init(load)
        .as_ref()
        .map_err(|reason| NvrtcError::NotFound {
            reason: reason.clone(),
        })
}

/// `Ok(())` when NVRTC can be loaded, else why not (with the install hint).
pub fn available() -> Result<(), String> {
    lib().map(|_| ()).map_err(|e| e.to_string())
}

/// The loaded library's path and NVRTC version (`(12, 9)`).
pub fn version() -> Result<(PathBuf, (i32, i32)), NvrtcError> {
    let l = lib()?;
    let (mut maj, mut min) = (0, 0);
    // SAFETY: both pointers are valid for writes of a c_int.
    let r = unsafe { (l.version)(&mut maj, &mut min) };
    check(l, r, "<nvrtc>", "nvrtcVersion")?;
    Ok((l.path.clone(), (maj, min)))
}

fn code(l: &Lib, r: Res) -> String {
    // SAFETY: nvrtcGetErrorString returns a static NUL-terminated string for any value.
    let s = unsafe { (l.error_string)(r) };
    if s.is_null() {
        format!("nvrtc error {r}")
    } else {
        // SAFETY: non-null, NUL-terminated, static.
        unsafe { CStr::from_ptr(s) }
            .to_string_lossy()
            .to_lowercase()
    }
}

fn check(l: &Lib, r: Res, name: &str, call: &'static str) -> Result<(), NvrtcError> {
    if r == 0 {
        Ok(())
    } else {
        Err(NvrtcError::Call {
            name: name.to_string(),
            call,
            code: code(l, r),
        })
    }
}

/// The compute capability digits of `sm_XX` (`"89"`), or an error.
pub fn arch_digits(arch: &str) -> Result<&str, NvrtcError> {
    match arch.strip_prefix("sm_") {
        Some(d) if (2..=3).contains(&d.len()) && d.bytes().all(|b| b.is_ascii_digit()) => Ok(d),
        _ => Err(NvrtcError::Arch(arch.to_string())),
    }
}

/// Compiles CUDA C `src` (named `name` in NVRTC's log, e.g. `kernels_cuda/cuda.cu`) to PTX for
/// `compute_XX` where `arch` is `sm_XX`. The PTX's `.target` is `sm_XX`. Options: C++17,
/// device code by default, `--fmad=false` (see [`compile`]).
pub fn compile_ptx(src: &str, name: &str, arch: &str) -> Result<String, NvrtcError> {
    compile(src, name, arch, &[]).map(|c| c.ptx)
}

/// [`compile_ptx`] with extra NVRTC options, returning the program log (warnings) too.
pub fn compile(src: &str, name: &str, arch: &str, extra: &[&str]) -> Result<Compiled, NvrtcError> {
    let digits = arch_digits(arch)?;
    let l = lib()?;
    let nul = || NvrtcError::Nul {
        name: name.to_string(),
    };
    let c_src = CString::new(src).map_err(|_| nul())?;
    let c_name = CString::new(name).map_err(|_| nul())?;
    let mut opts: Vec<CString> = vec![
        CString::new(format!("--gpu-architecture=compute_{digits}")).unwrap(),
        CString::new("--std=c++17").unwrap(),
        CString::new("--device-as-default-execution-space").unwrap(),
        // No implicit a*b+c contraction: dequantization must round as the CPU realizations do
        // (bit-equal); kernels write fmaf() where they want the fused form.
        CString::new("--fmad=false").unwrap(),
    ];
    for o in extra {
        opts.push(CString::new(*o).map_err(|_| nul())?);
    }
    let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();

    let mut prog: Prog = std::ptr::null_mut();
    // SAFETY: prog is valid for a write; src and name are NUL-terminated and outlive the
    // call; zero headers, so the header arrays may be null.
    let r = unsafe {
        (l.create)(
            &mut prog,
            c_src.as_ptr(),
            c_name.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    check(l, r, name, "nvrtcCreateProgram")?;
    let out = (|| {
        // SAFETY: prog was created above; opt_ptrs holds opts.len() valid C strings.
        let r = unsafe { (l.compile)(prog, opt_ptrs.len() as c_int, opt_ptrs.as_ptr()) };
        let log = program_log(l, prog, name)?;
        if r != 0 {
            return Err(NvrtcError::Compile {
                name: name.to_string(),
                arch: arch.to_string(),
                code: code(l, r),
                log,
            });
        }
        let mut n = 0usize;
        // SAFETY: prog compiled; n valid for a write.
        check(
            l,
            unsafe { (l.ptx_size)(prog, &mut n) },
            name,
            "nvrtcGetPTXSize",
        )?;
        let mut buf = vec![0u8; n.max(1)];
        // SAFETY: buf has the size NVRTC reported (including the NUL).
        check(
            l,
            unsafe { (l.ptx)(prog, buf.as_mut_ptr() as *mut c_char) },
            name,
            "nvrtcGetPTX",
        )?;
        Ok(Compiled {
            ptx: cstr_buf(buf),
            log,
        })
    })();
    // SAFETY: prog was created by nvrtcCreateProgram and is destroyed once.
    unsafe { (l.destroy)(&mut prog) };
    out
}

fn program_log(l: &Lib, prog: Prog, name: &str) -> Result<String, NvrtcError> {
    let mut n = 0usize;
    // SAFETY: prog is a live program; n valid for a write.
    check(
        l,
        unsafe { (l.log_size)(prog, &mut n) },
        name,
        "nvrtcGetProgramLogSize",
    )?;
    let mut buf = vec![0u8; n.max(1)];
    // SAFETY: buf has the size NVRTC reported (including the NUL).
    check(
        l,
        unsafe { (l.log)(prog, buf.as_mut_ptr() as *mut c_char) },
        name,
        "nvrtcGetProgramLog",
    )?;
    Ok(cstr_buf(buf).trim_end().to_string())
}

fn cstr_buf(mut buf: Vec<u8>) -> String {
    if let Some(z) = buf.iter().position(|&b| b == 0) {
        buf.truncate(z);
    }
    String::from_utf8_lossy(&buf).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_is_validated_before_loading() {
        assert_eq!(arch_digits("sm_89").unwrap(), "89");
        assert_eq!(arch_digits("sm_100").unwrap(), "100");
        for bad in ["89", "sm_", "sm_8x", "compute_89", "sm_1"] {
            let e = compile_ptx("", "x.cu", bad).unwrap_err();
            assert!(matches!(e, NvrtcError::Arch(_)), "{bad}: {e}");
            assert!(e.to_string().contains("sm_80"), "{e}");
        }
    }

    #[test]
    fn not_found_names_the_fix() {
        let e = NvrtcError::NotFound {
            reason: "tried libnvrtc.so.12".into(),
        };
        let s = e.to_string();
        assert!(
            s.contains("pip install nvidia-cuda-nvrtc-cu12") && s.contains(LIB_ENV),
            "{s}"
        );
    }
}
