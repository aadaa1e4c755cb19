//! Loading a state dict into a module, strictly or PyTorch's `strict=False` way, whole or
//! as one sub-module of a bigger file (a key prefix).

use std::collections::HashMap;

use super::module::{Module, StateDict};
use crate::autograd::no_grad;
use crate::error::{Error, Result, ShapeError};
use crate::tensor::DynTensor;

/// How [`Module::load_state_dict_with`] matches keys.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    strict: bool,
    prefix: String,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            strict: true,
            prefix: String::new(),
        }
    }
}

impl LoadOptions {
    /// Strict loading of the whole state dict (what [`Module::load_state_dict`] does).
    pub fn new() -> Self {
        Self::default()
    }

    /// With `false`, missing and unexpected keys are reported in the [`LoadReport`] instead
    /// of being errors, like PyTorch's `load_state_dict(..., strict=False)`: tensors the
    /// state lacks keep their values, keys the module lacks are ignored. A shape that differs
    /// is an error either way.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Loads only the keys under `prefix` (`"encoder"` or `"encoder."`), with the prefix
    /// taken off: one sub-module out of a file of a bigger model. Other keys are not
    /// "unexpected"; they belong to other modules.
    pub fn prefix(mut self, prefix: &str) -> Self {
        self.prefix = match prefix {
            "" => String::new(),
            p if p.ends_with('.') => p.to_string(),
            p => format!("{p}."),
        };
        self
    }
}

/// The keys [`Module::load_state_dict_with`] could not match, sorted (PyTorch's
/// `_IncompatibleKeys`). Both are empty after a strict load.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Tensors of the module the state did not have (they kept their values).
    pub missing_keys: Vec<String>,
    /// Keys of the state (prefix removed) that name nothing in the module.
    pub unexpected_keys: Vec<String>,
}

/// Checks everything, then copies the matched tensors in place. Floating-point tensors
/// convert between `f16`, `f32` and `f64` as PyTorch's `copy_` does; other dtypes must be
/// equal.
pub(super) fn load(
    module: &(impl Module + ?Sized),
    state: &StateDict,
    options: &LoadOptions,
) -> Result<LoadReport> {
    const OP: &str = "load_state_dict";
    let own = module.named_tensors();
    let given: HashMap<&str, &DynTensor> = state
        .iter()
        .filter_map(|(name, t)| Some((name.strip_prefix(options.prefix.as_str())?, t)))
        .collect();
    let mut report = LoadReport {
        missing_keys: (own.iter())
            .filter(|(name, _)| !given.contains_key(name.as_str()))
            .map(|(name, _)| name.clone())
            .collect(),
        unexpected_keys: (given.keys())
            .filter(|name| !own.iter().any(|(own, _)| own == *name))
            .map(|name| name.to_string())
            .collect(),
    };
    report.missing_keys.sort_unstable();
    report.unexpected_keys.sort_unstable();
    if options.strict && (!report.missing_keys.is_empty() || !report.unexpected_keys.is_empty()) {
        return Err(Error::InvalidArgument {
            op: OP,
            message: format!(
                "missing keys {}, unexpected keys {}{}; load with \
                 `LoadOptions::new().strict(false)` to keep what matches",
                some_names(&report.missing_keys),
                some_names(&report.unexpected_keys),
                under(&options.prefix)
            ),
        });
    }
    let matched: Vec<(&str, &DynTensor, &DynTensor)> = (own.iter())
        .filter_map(|(name, target)| Some((name.as_str(), target, *given.get(name.as_str())?)))
        .collect();
    let misfits: Vec<String> = matched
        .iter()
        .filter_map(|&(name, target, source)| misfit(name, target, source))
        .collect();
    if !misfits.is_empty() {
        return Err(ShapeError::Invalid {
            context: format!("{OP}{}", under(&options.prefix)),
            message: format!(
                "{} of {} matched tensors do not fit (nothing was loaded): {}",
                misfits.len(),
                matched.len(),
                some_misfits(&misfits)
            ),
        }
        .into());
    }
    let _guard = no_grad();
    for (_, target, source) in matched {
        let source = source.to_dtype(target.dtype())?.to(&target.device())?;
        target.copy_(&source)?;
    }
    Ok(report)
}

/// " (under `prefix`)" for a prefixed load, else nothing.
fn under(prefix: &str) -> String {
    match prefix {
        "" => String::new(),
        prefix => format!(" (under `{prefix}`)"),
    }
}

/// What keeps the state's `source` from loading into the module's `target` (a shape or a
/// dtype), with the likely cause where the shapes tell it; `None` when it fits.
fn misfit(name: &str, target: &DynTensor, source: &DynTensor) -> Option<String> {
    let (model, state) = (target.dims(), source.dims());
    if model != state {
        let reversed: Vec<usize> = state.iter().rev().copied().collect();
        let hint = if model.len() == 2 && reversed == model {
            " (the state holds it transposed, as Hugging Face's GPT-2 `Conv1D` layers do: \
             transpose it before loading)"
        } else if model.iter().product::<usize>() == state.iter().product::<usize>() {
            " (as many elements: a reshape or a packed layout?)"
        } else {
            ""
        };
        return Some(format!(
            "`{name}` has shape {model:?} in the model, {state:?} in the state{hint}"
        ));
    }
    let convertible = source.dtype() == target.dtype()
        || (is_floating(source.dtype()) && is_floating(target.dtype()));
    (!convertible).then(|| {
        format!(
            "`{name}` is {} in the model, {} in the state",
            target.dtype(),
            source.dtype()
        )
    })
}

/// Every misfit when few, else the first ten and how many more.
fn some_misfits(misfits: &[String]) -> String {
    const SHOWN: usize = 10;
    let shown = misfits[..misfits.len().min(SHOWN)].join("; ");
    match misfits.len().checked_sub(SHOWN) {
        Some(more) if more > 0 => format!("{shown}; and {more} more"),
        _ => shown,
    }
}

fn is_floating(dtype: crate::dtype::DType) -> bool {
    use crate::dtype::DType;
    matches!(dtype, DType::F16 | DType::F32 | DType::F64)
}

/// A sorted list of names for an error message: all of them when few, else the first ten
/// and how many more (a file of 160k foreign keys should not become a 2 MB message).
pub(super) fn some_names(names: &[impl AsRef<str>]) -> String {
    const SHOWN: usize = 10;
    let quoted: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
    if quoted.len() <= SHOWN {
        return format!("{quoted:?}");
    }
    format!("{:?} and {} more", &quoted[..SHOWN], quoted.len() - SHOWN)
}
