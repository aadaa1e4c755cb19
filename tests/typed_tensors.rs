//! The typed façade: shapes as types, the checked boundary, static meets dynamic.

use rumus::prelude::*;
use rumus::shape::{Unify, UnifyShape};

rumus::dim!(Batch);
rumus::dim!(Seq);

/// Compiles only when both arguments have the same type.
fn same_type<T>(_: std::marker::PhantomData<T>, _: std::marker::PhantomData<T>) {}

fn unified<A: Unify<B>, B: Dim>() -> std::marker::PhantomData<A::Output> {
    std::marker::PhantomData
}

#[test]
fn typed_tensor_is_zero_cost() {
    assert_eq!(
        std::mem::size_of::<Tensor<(D<2>, D<3>)>>(),
        std::mem::size_of::<DynTensor>()
    );
}

#[test]
fn static_meets_dynamic_keeps_the_static_side() {
    same_type(unified::<D<784>, Dyn>(), std::marker::PhantomData::<D<784>>);
    same_type(unified::<Dyn, D<784>>(), std::marker::PhantomData::<D<784>>);
    same_type(unified::<Batch, Dyn>(), std::marker::PhantomData::<Batch>);
    same_type(
        std::marker::PhantomData::<<(Dyn, D<3>) as UnifyShape<(D<2>, Dyn)>>::Output>,
        std::marker::PhantomData::<(D<2>, D<3>)>,
    );

    // One run-time check turns a runtime axis into a static one.
    let x = DynTensor::zeros(&[5, 784], DType::F32)
        .unwrap()
        .try_shape::<(Dyn, D<784>)>()
        .unwrap();
    let fixed: Tensor<(D<5>, D<784>)> = x.clone().try_shape().unwrap();
    assert_eq!(fixed.dims(), &[5, 784]);
    let err = x.try_shape::<(D<4>, D<784>)>().unwrap_err().to_string();
    assert!(
        err.contains("axis 0") && err.contains('5') && err.contains('4'),
        "{err}"
    );
}

#[test]
fn from_vec_infers_one_runtime_dim_and_checks_static_ones() {
    let x = Tensor::<(Dyn, D<3>)>::from_vec(vec![1.0f32; 12]).unwrap();
    assert_eq!(x.dims(), &[4, 3]);
    let s = Tensor::<(D<2>, D<2>)>::from_vec(vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
    assert_eq!(s.to_vec().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
    assert!(Tensor::<(D<2>, D<2>)>::from_vec(vec![1.0f32; 5]).is_err());
    assert!(
        Tensor::<(Dyn, Dyn)>::from_vec(vec![1.0f32; 4]).is_err(),
        "two runtime dims need explicit dims"
    );
    let rank_err = DynTensor::zeros(&[2, 3, 4], DType::F32)
        .unwrap()
        .try_shape::<(Dyn, D<4>)>()
        .unwrap_err()
        .to_string();
    assert!(
        rank_err.contains("rank-2") && rank_err.contains("rank 3"),
        "{rank_err}"
    );
}

#[test]
fn named_runtime_dims() {
    let x = Tensor::<(Batch, Seq, D<4>)>::zeros_with_dims(&[2, 7, 4]).unwrap();
    assert_eq!(x.dims(), &[2, 7, 4]);
    let err = Tensor::<(Batch, Seq, D<4>)>::zeros_with_dims(&[2, 7, 5])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("[Batch, Seq, 4]") && err.contains("axis 2"),
        "{err}"
    );
}

#[test]
fn shapes_up_to_rank_six() {
    let x = Tensor::<(D<1>, D<2>, D<1>, D<2>, D<1>, D<2>)>::ones();
    assert_eq!(x.dims(), &[1, 2, 1, 2, 1, 2]);
    assert_eq!(x.sum_all().value().unwrap(), 8.0);
}

#[test]
fn typed_ops_and_gradients() {
    manual_seed(3);
    let w = Tensor::<(D<4>, D<3>)>::randn().requires_grad_().unwrap();
    let b = Tensor::<(Dyn, D<3>)>::from_vec(vec![0.5f32; 6]).unwrap();
    let x = Tensor::<(Dyn, D<4>)>::from_vec((0..8).map(|v| v as f32 / 8.0).collect()).unwrap();
    let h = (&x.matmul(&w) + &b).relu();
    let loss = (&h * &h).mean_all();
    let grads = loss.backward().unwrap();
    let gw: Tensor<(D<4>, D<3>)> = grads.grad_of(&w).unwrap();

    // The same computation on the untyped core gives the same gradient.
    let (xd, wd) = (x.as_dyn(), w.as_dyn());
    let hd = xd
        .matmul(wd)
        .unwrap()
        .add(b.as_dyn())
        .unwrap()
        .relu()
        .unwrap();
    let loss_d = hd.mul(&hd).unwrap().mean_all().unwrap();
    let gd = loss_d.backward().unwrap();
    assert_eq!(
        gw.to_vec().unwrap(),
        gd.grad(wd).unwrap().to_vec::<f32>().unwrap()
    );
    assert_eq!(w.t().dims(), &[3, 4]);
}

#[test]
fn typed_reshape_checks_element_count() {
    let x = Tensor::<(D<2>, D<6>)>::ones();
    let y: Tensor<(D<3>, D<4>)> = x.reshape().unwrap();
    assert_eq!(y.dims(), &[3, 4]);
    let z: Tensor<(Dyn, D<3>)> = x.reshape().unwrap();
    assert_eq!(z.dims(), &[4, 3]);
    assert!(x.reshape::<(D<5>, D<2>)>().is_err());
}

#[test]
fn batched_typed_matmul() {
    let a = Tensor::<(D<2>, D<3>, D<4>)>::ones();
    let b = Tensor::<(D<2>, D<4>, D<5>)>::full(0.5);
    let c = a.bmm(&b);
    assert_eq!(c.dims(), &[2, 3, 5]);
    assert!(c.to_vec().unwrap().iter().all(|&v| v == 2.0));
}

/// Two runtime sizes of one `Dyn` axis, or a size that cannot be allocated: the `try_` forms
/// return the error the plain forms panic with.
#[test]
fn try_forms_return_what_the_types_cannot_rule_out() {
    let x = Tensor::<(Dyn, Dyn)>::zeros_with_dims(&[2, 3]).unwrap();
    let w = Tensor::<(Dyn, D<4>)>::zeros_with_dims(&[5, 4]).unwrap();
    let message = x.try_matmul(&w).unwrap_err().to_string();
    assert!(message.contains("inner dimensions differ"), "{message}");
    let y = Tensor::<(Dyn, Dyn)>::zeros_with_dims(&[2, 4]).unwrap();
    assert!(x.try_add(&y).is_err());
    assert_eq!(x.try_add(&x).unwrap().dims(), &[2, 3]);
    assert!(
        x.try_exp()
            .unwrap()
            .to_vec()
            .unwrap()
            .iter()
            .all(|&v| v == 1.0)
    );

    let huge = Tensor::<(D<{ 1 << 29 }>, D<{ 1 << 29 }>)>::try_zeros();
    assert!(matches!(huge, Err(rumus::Error::OutOfMemory { .. })));
    let panic =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| x.matmul(&w))).unwrap_err();
    let text = panic.downcast_ref::<String>().unwrap();
    assert!(text.contains("inner dimensions differ"), "{text}");
}

#[test]
fn element_types_are_checked_where_data_enters() {
    let floats = DynTensor::zeros(&[2, 3], DType::F32).unwrap();
    let message = floats
        .clone()
        .try_typed::<(Dyn, D<3>), i64>()
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("expected i64") && message.contains("f32"),
        "{message}"
    );
    let typed: Tensor<(Dyn, D<3>)> = floats.try_shape().unwrap();
    let counts: Tensor<(Dyn, D<3>), i64> = typed.to_dtype();
    assert_eq!(counts.to_vec().unwrap(), vec![0i64; 6]);
    let indices = Tensor::<(D<3>,), i64>::from_vec(vec![4, 0, 2]).unwrap();
    assert_eq!(indices.dtype(), DType::I64);
    let doubles: Tensor<(D<3>,), f64> = indices.to_dtype();
    assert_eq!(doubles.to_vec().unwrap(), [4.0, 0.0, 2.0]);
}
