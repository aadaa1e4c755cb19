//! The values optimizer settings and state may take. The constructors refuse what PyTorch's
//! refuse (a negative learning rate, a beta of 1), and non-finite values too; state that
//! comes back from outside ([`Optimizer::load_state_dict`](super::Optimizer::load_state_dict),
//! checkpoints) is held to the same ranges before anything is changed. A NaN rate or moment
//! would otherwise turn every parameter into NaN on the next step, far from its cause.
//!
//! The checks return the problem as a sentence naming the value and what would be valid;
//! callers add where it came from (an optimizer's name, a checkpoint file).

use super::params::OptimizerState;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::storage::CpuBuffer;
use crate::tensor::DynTensor;

/// The largest step or epoch count accepted from saved state: 2^53. Counts up to it are exact
/// as `f64` (schedules compute with `epoch as f64`), and a run resumed there can count on for
/// 2^64 - 2^53 more steps before a `u64` counter overflows. No run gets anywhere near it, so a
/// larger count can only come from a damaged or hand-made file.
pub(crate) const MAX_COUNT: u64 = 1 << 53;

/// A problem with one value, as a sentence; `Ok` when the value is valid.
pub(crate) type Check = std::result::Result<(), String>;

/// `value` is finite and `>= 0` (learning rates, eps, weight decay, momentum).
pub(crate) fn non_negative(what: &str, value: f64) -> Check {
    if value.is_finite() && value >= 0.0 {
        return Ok(());
    }
    Err(format!(
        "{what} is {value}; it must be a finite number >= 0"
    ))
}

/// `value` is finite (dampening, which PyTorch does not bound).
pub(crate) fn finite(what: &str, value: f64) -> Check {
    if value.is_finite() {
        return Ok(());
    }
    Err(format!("{what} is {value}; it must be a finite number"))
}

/// `0 <= value < 1` (Adam's betas: a beta of 1 divides by zero in the bias correction).
pub(crate) fn fraction(what: &str, value: f64) -> Check {
    if (0.0..1.0).contains(&value) {
        return Ok(());
    }
    Err(format!("{what} is {value}; it must be in [0, 1)"))
}

/// `count <= MAX_COUNT` (step and epoch counters).
pub(crate) fn count(what: &str, count: u64) -> Check {
    if count <= MAX_COUNT {
        return Ok(());
    }
    Err(format!(
        "{what} is {count}; a step or epoch count must be at most 2^53 = {MAX_COUNT} (no run \
         counts that far: the value is damaged)"
    ))
}

/// The first failed check among an optimizer's settings, as the error of its constructor.
pub(crate) fn settings(op: &'static str, checks: impl IntoIterator<Item = Check>) -> Result<()> {
    checks
        .into_iter()
        .collect::<Check>()
        .map_err(|message| Error::InvalidArgument { op, message })
}

/// `base` to the power of a step or epoch count: `powi` for every count a run reaches (as the
/// optimizers always computed it), `powf` past `i32::MAX`, where `count as i32` would wrap.
pub(crate) fn pow_count(base: f64, count: u64) -> f64 {
    match i32::try_from(count) {
        Ok(n) => base.powi(n),
        Err(_) => base.powf(count as f64),
    }
}

/// Rates, step counts and buffer values of a snapshot, named as a checkpoint stores them
/// (`optimizer.lrs`, `optimizer.steps`, `optimizer.<group>.<index>.<buffer>`).
pub(crate) fn check_state(state: &OptimizerState) -> Check {
    for (g, &lr) in state.lrs.iter().enumerate() {
        non_negative(
            &format!("`optimizer.lrs` entry {g} (group {g}'s learning rate)"),
            lr,
        )?;
    }
    for (key, steps) in &state.steps {
        count(&format!("`optimizer.steps` of parameter `{key}`"), *steps)?;
    }
    for (key, buffer) in &state.buffers {
        check_buffer(key, buffer)?;
    }
    Ok(())
}

/// Buffers holding running sums or averages of squared gradients, which are never negative
/// (a negative one makes its square root, and so the parameter, NaN).
const SQUARED: [&str; 4] = ["exp_avg_sq", "max_exp_avg_sq", "square_avg", "sum"];

/// Every element of a floating-point buffer is finite (a momentum or moment that is not
/// poisons its parameter on the next step), and `>= 0` in buffers of squares.
fn check_buffer(key: &str, buffer: &DynTensor) -> Check {
    let name = key.rsplit('.').next().unwrap_or(key);
    let (rule, valid): (&str, fn(f64) -> bool) = if SQUARED.contains(&name) {
        ("finite and >= 0", |v| v.is_finite() && v >= 0.0)
    } else {
        ("finite", f64::is_finite)
    };
    match first_invalid(buffer, valid) {
        Ok(None) => Ok(()),
        Ok(Some((at, value))) => Err(format!(
            "optimizer buffer `optimizer.{key}` holds {value} at element {at}; its values must \
             be {rule}"
        )),
        Err(e) => Err(format!(
            "optimizer buffer `optimizer.{key}` cannot be read: {e}"
        )),
    }
}

/// The first element (row-major position and value) of a floating-point tensor that is not
/// `valid`; integer and boolean tensors have none.
fn first_invalid(t: &DynTensor, valid: fn(f64) -> bool) -> Result<Option<(usize, f64)>> {
    fn scan<T: Copy>(
        values: &[T],
        to_f64: fn(T) -> f64,
        valid: fn(f64) -> bool,
    ) -> Option<(usize, f64)> {
        values
            .iter()
            .map(|&v| to_f64(v))
            .enumerate()
            .find(|&(_, v)| !valid(v))
    }
    let host = t.to(&Device::Cpu)?.contiguous_untracked()?;
    let range = host.contiguous_range().unwrap_or(0..0);
    host.with_buffer(|buffer, _| match buffer {
        CpuBuffer::F32(v) => scan(&v[range], f64::from, valid),
        CpuBuffer::F64(v) => scan(&v[range], |x| x, valid),
        CpuBuffer::F16(v) => scan(&v[range], half::f16::to_f64, valid),
        CpuBuffer::BF16(v) => scan(&v[range], half::bf16::to_f64, valid),
        CpuBuffer::I64(_) | CpuBuffer::Bool(_) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_name_the_value_and_what_is_valid() {
        assert!(non_negative("lr", 0.0).is_ok() && non_negative("lr", 1e300).is_ok());
        for bad in [-1e-9, f64::NAN, f64::INFINITY] {
            let message = non_negative("lr", bad).unwrap_err();
            assert!(
                message.starts_with(&format!("lr is {bad};"))
                    && message.contains("finite number >= 0"),
                "{message}"
            );
        }
        assert!(fraction("betas.0", 0.0).is_ok() && fraction("betas.0", 0.999).is_ok());
        for bad in [1.0, -0.1, f64::NAN] {
            assert!(fraction("betas.0", bad).unwrap_err().contains("[0, 1)"));
        }
        assert!(finite("dampening", -2.0).is_ok() && finite("dampening", f64::NAN).is_err());
        assert!(count("step", MAX_COUNT).is_ok());
        let message = count("step", u64::MAX).unwrap_err();
        assert!(message.contains("18446744073709551615") && message.contains("2^53"));
    }

    #[test]
    fn powers_of_huge_counts_do_not_wrap() {
        assert_eq!(pow_count(0.9, 3).to_bits(), 0.9f64.powi(3).to_bits());
        // `(1 << 32) as i32` is 0, which would make this 1.
        assert_eq!(pow_count(0.9, 1 << 32), 0.0);
        assert_eq!(pow_count(1.0, MAX_COUNT), 1.0);
    }

    #[test]
    fn constructors_refuse_what_pytorch_refuses_and_non_finite_values() {
        use crate::DType;
        use crate::optim::{
            Adagrad, AdagradConfig, Adam, AdamConfig, ParamGroup, Rmsprop, RmspropConfig, Sgd,
            SgdConfig,
        };
        let params = || {
            let p = DynTensor::zeros(&[2], DType::F32).unwrap();
            vec![p.requires_grad_().unwrap()]
        };
        let refused = |result: Result<()>| result.unwrap_err().to_string();
        let adam = |config| refused(Adam::new(params(), config).map(drop));
        let message = adam(AdamConfig {
            betas: (1.0, 0.999),
            ..AdamConfig::adam()
        });
        assert!(
            message.starts_with("Adam: betas.0 is 1; it must be in [0, 1)"),
            "{message}"
        );
        let message = adam(AdamConfig {
            eps: f64::NAN,
            ..AdamConfig::adam()
        });
        assert!(message.contains("eps is NaN"), "{message}");
        let message = adam(AdamConfig {
            lr: f64::INFINITY,
            ..AdamConfig::adam()
        });
        assert!(
            message.contains("group 0's learning rate is inf"),
            "{message}"
        );
        let message = refused(
            Sgd::with_groups(
                vec![ParamGroup::new(params(), 0.1).with_weight_decay(-0.5)],
                SgdConfig::default(),
            )
            .map(drop),
        );
        assert!(
            message.contains("group 0's weight decay is -0.5"),
            "{message}"
        );
        let sgd = SgdConfig {
            momentum: -0.9,
            ..SgdConfig::default()
        };
        assert!(refused(Sgd::new(params(), sgd).map(drop)).contains("momentum is -0.9"));
        let rmsprop = RmspropConfig {
            alpha: -0.1,
            ..RmspropConfig::default()
        };
        assert!(refused(Rmsprop::new(params(), rmsprop).map(drop)).contains("alpha is -0.1"));
        let adagrad = AdagradConfig {
            initial_accumulator_value: -1.0,
            ..AdagradConfig::default()
        };
        let message = refused(Adagrad::new(params(), adagrad).map(drop));
        assert!(
            message.contains("initial_accumulator_value is -1"),
            "{message}"
        );
        // PyTorch's defaults pass.
        assert!(Adam::new(params(), AdamConfig::adamw()).is_ok());
        assert!(Sgd::new(params(), SgdConfig::default()).is_ok());
        assert!(Rmsprop::new(params(), RmspropConfig::default()).is_ok());
        assert!(Adagrad::new(params(), AdagradConfig::default()).is_ok());
    }

    #[test]
    fn load_state_dict_checks_values_before_changing_anything() {
        use crate::DType;
        use crate::optim::{Adam, AdamConfig, Optimizer};
        let p = DynTensor::zeros(&[2], DType::F32).unwrap();
        let mut adam = Adam::new(vec![p.requires_grad_().unwrap()], AdamConfig::adam()).unwrap();
        let mut state = adam.state_dict().unwrap();
        state.lrs = vec![f64::NAN];
        let message = adam.load_state_dict(&state).unwrap_err().to_string();
        assert!(
            message.starts_with(
                "load_state_dict: `optimizer.lrs` entry 0 (group 0's learning rate) is NaN"
            ),
            "{message}"
        );
        assert_eq!(adam.lrs(), [1e-3]);
        state.lrs = vec![0.5];
        state.steps = vec![("0.0".into(), u64::MAX)];
        assert!(adam.load_state_dict(&state).is_err());
        assert_eq!(adam.lrs(), [1e-3]);
        state.steps = vec![("0.0".into(), MAX_COUNT)];
        adam.load_state_dict(&state).unwrap();
        assert_eq!(adam.lrs(), [0.5]);
    }

    #[test]
    fn buffers_of_squares_must_not_be_negative() {
        let tensor = |values: Vec<f32>| DynTensor::from_vec(values, &[2, 2]).unwrap();
        let fine = tensor(vec![0.0, 1.0, 2.0, 3.0]);
        let negative = tensor(vec![0.0, 1.0, -2.0, 3.0]);
        let nan = tensor(vec![0.0, f32::NAN, 2.0, 3.0]);
        assert!(check_buffer("0.0.exp_avg_sq", &fine).is_ok());
        assert!(check_buffer("0.0.exp_avg", &negative).is_ok());
        let message = check_buffer("0.0.exp_avg_sq", &negative).unwrap_err();
        assert!(
            message.contains("`optimizer.0.0.exp_avg_sq` holds -2 at element 2")
                && message.contains("finite and >= 0"),
            "{message}"
        );
        let message = check_buffer("1.3.momentum_buffer", &nan).unwrap_err();
        assert!(message.contains("holds NaN at element 1"), "{message}");
        // A transposed view is read in row-major order.
        let message = check_buffer("0.0.sum", &negative.transpose(0, 1).unwrap()).unwrap_err();
        assert!(message.contains("at element 1"), "{message}");
        let labels = DynTensor::from_vec(vec![-1i64, 2], &[2]).unwrap();
        assert!(check_buffer("0.0.sum", &labels).is_ok());
    }
}
