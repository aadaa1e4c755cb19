//! Constructors, including the seeded random ones. Only one test here touches the
//! process-wide generator, so reseeding it cannot race with another test.

use rumus::prelude::*;
use rumus::rng::Generator;

#[test]
fn constructors_fill_ranges_identity_and_seeded_randomness() {
    assert_eq!(
        DynTensor::arange(0.0, 5.0, 1.0, DType::I64)
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        vec![0, 1, 2, 3, 4]
    );
    assert_eq!(
        DynTensor::arange(1.0, 2.0, 0.25, DType::F64)
            .unwrap()
            .to_f64_vec(),
        vec![1.0, 1.25, 1.5, 1.75]
    );
    assert!(
        DynTensor::arange(0.0, 5.0, -1.0, DType::F32).is_err(),
        "a step that never reaches the end"
    );
    assert_eq!(
        DynTensor::eye(3, DType::F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    );
    assert_eq!(
        DynTensor::full(&[2, 2], 7.5, DType::F64)
            .unwrap()
            .to_f64_vec(),
        vec![7.5; 4]
    );
    assert_eq!(
        DynTensor::from_slice(&[true, false], &[2]).unwrap().dtype(),
        DType::Bool
    );

    // One seed, one stream: the same seed reproduces every random constructor.
    let draw = || {
        let a = DynTensor::randn(&[64], DType::F32).unwrap().to_f64_vec();
        let b = DynTensor::rand(&[64], DType::F64).unwrap().to_f64_vec();
        let c = DynTensor::uniform(&[64], -2.0, 3.0, DType::F32)
            .unwrap()
            .to_f64_vec();
        (a, b, c)
    };
    manual_seed(42);
    let first = draw();
    manual_seed(42);
    assert_eq!(first, draw());
    manual_seed(43);
    assert_ne!(first.0, draw().0);
    assert!(first.1.iter().all(|&v| (0.0..1.0).contains(&v)));
    assert!(first.2.iter().all(|&v| (-2.0..3.0).contains(&v)));

    // An explicit generator is a separate stream, unaffected by the global one.
    let mut g = Generator::new(5);
    let x = DynTensor::randn_with(&[8], 0.0, 1.0, DType::F64, &mut g).unwrap();
    let y = DynTensor::randn_with(&[8], 0.0, 1.0, DType::F64, &mut Generator::new(5)).unwrap();
    assert_eq!(x.to_f64_vec(), y.to_f64_vec());
}

#[test]
fn scalar_comparisons_of_integer_tensors_do_not_truncate_the_scalar() {
    let labels = DynTensor::from_vec(vec![0i64, 1, 2], &[3]).unwrap();
    assert_eq!(
        labels.lt_scalar(0.5).unwrap().to_vec::<bool>().unwrap(),
        vec![true, false, false]
    );
    assert_eq!(
        labels.ge_scalar(1.5).unwrap().to_vec::<bool>().unwrap(),
        vec![false, false, true]
    );
}
