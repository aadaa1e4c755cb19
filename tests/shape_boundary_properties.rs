//! Properties of the constructors where runtime shapes enter: for any dims and any data
//! length they either build exactly the tensor asked for or return an error; they never
//! panic, overflow or abort on an impossible allocation.

use proptest::prelude::*;
use rumus::data::{Collate, Features, Sample};
use rumus::{D, DType, Dyn, DynTensor, Tensor};

/// The element count of `dims`, or `None` when it overflows. A zero anywhere makes it 0
/// whatever the other dims ([2^62, 2^62, 0] is as empty as [0, 2^62, 2^62]).
fn count(dims: &[usize]) -> Option<usize> {
    if dims.contains(&0) {
        return Some(0);
    }
    dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// Dims that are mostly small, sometimes zero, sometimes enormous.
fn dims_strategy() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(
        prop_oneof![
            6 => 0usize..5,
            1 => Just(usize::MAX / 3),
            1 => 1usize << 20..1usize << 40,
        ],
        0..6,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn from_vec_builds_exactly_the_shape_or_errs(dims in dims_strategy(), len in 0usize..70) {
        let result = DynTensor::from_vec(vec![1.5f32; len], &dims);
        match count(&dims) {
            Some(n) if n == len => {
                let t = result.unwrap();
                prop_assert_eq!(t.dims(), dims.as_slice());
                prop_assert_eq!(t.numel(), len);
            }
            _ => prop_assert!(result.is_err()),
        }
    }

    #[test]
    fn filled_constructors_err_instead_of_aborting(dims in dims_strategy()) {
        match count(&dims) {
            Some(n) if n <= 1 << 16 => {
                let t = DynTensor::zeros(&dims, DType::F32).unwrap();
                prop_assert_eq!(t.numel(), n);
            }
            // Overflowing counts and terabyte requests are errors, not panics or aborts.
            Some(n) if n >= 1 << 40 => prop_assert!(DynTensor::zeros(&dims, DType::F64).is_err()),
            None => {
                prop_assert!(DynTensor::zeros(&dims, DType::F32).is_err());
                prop_assert!(DynTensor::ones(&dims, DType::I64).is_err());
            }
            // Between the two, an allocation may or may not succeed; don't try it.
            Some(_) => {}
        }
    }

    #[test]
    fn typed_from_vec_infers_the_runtime_axis(len in 0usize..100) {
        let result = Tensor::<(Dyn, D<3>)>::from_vec(vec![0.0f32; len]);
        if len % 3 == 0 {
            prop_assert_eq!(result.unwrap().dims().to_vec(), vec![len / 3, 3]);
        } else {
            let message = result.unwrap_err().to_string();
            prop_assert!(message.contains("[1, 3]"), "{}", message);
        }
    }

    #[test]
    fn try_shape_accepts_exactly_the_matching_dims(dims in prop::collection::vec(0usize..6, 0..4)) {
        let n = count(&dims).unwrap();
        let t = DynTensor::from_vec(vec![0.0f32; n], &dims).unwrap();
        let fits = dims.len() == 3 && dims[0] == 2 && dims[2] == 4;
        let typed = t.clone().try_shape::<(D<2>, Dyn, D<4>)>();
        prop_assert_eq!(typed.is_ok(), fits);
        if let Err(e) = typed {
            let message = e.to_string();
            prop_assert!(message.contains("axis") || message.contains("rank"), "{}", message);
        }
        prop_assert!(t.try_shape::<(Dyn, Dyn, Dyn)>().is_ok() == (dims.len() == 3));
    }

    #[test]
    fn reshape_keeps_the_count_or_errs(dims in dims_strategy(), target in dims_strategy()) {
        let Some(n) = count(&dims).filter(|&n| n <= 1 << 12) else {
            return Ok(());
        };
        let t = DynTensor::from_vec(vec![2.0f32; n], &dims).unwrap();
        let result = t.reshape(&target);
        prop_assert_eq!(result.is_ok(), count(&target) == Some(n));
    }

    #[test]
    fn collation_stacks_equal_items_and_names_the_odd_one(
        sizes in prop::collection::vec(1usize..4, 1..8),
    ) {
        let items: Vec<Sample> = sizes
            .iter()
            .map(|&s| Sample::classified(Features::vector(vec![0.5; s]), 0))
            .collect();
        let result = Sample::collate(items);
        match sizes.iter().position(|&s| s != sizes[0]) {
            None => prop_assert_eq!(result.unwrap().input.dims().to_vec(), vec![sizes.len(), sizes[0]]),
            Some(odd) => {
                let message = result.unwrap_err().to_string();
                prop_assert!(message.contains(&format!("item {odd}")), "{}", message);
            }
        }
    }
}
