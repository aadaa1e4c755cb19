//! The typed façade: [`Tensor<S, E>`] is a [`DynTensor`] whose shape type `S` and element
//! type `E` (`f32` unless named) the compiler checks; its docs say what can still fail at run
//! time, and how (the `try_` forms).

use std::marker::PhantomData;
use std::ops;

use crate::autograd::GradientStore;
use crate::element::{Element, Float};
use crate::error::{Error, Result, ShapeError};
use crate::shape::{D, Dim, Shape};
use crate::tensor::DynTensor;

/// A tensor whose shape type `S` (a tuple of dims such as `(Dyn, D<784>)`) and element type
/// `E` are checked by the compiler. Zero-cost: it is a [`DynTensor`] plus a marker.
///
/// # What can fail, and how
///
/// - **Shapes** between static dims, and **element types**, are compile errors: `exp` of a
///   `Tensor<S, i64>`, `softmax` of a `Tensor<S, bool>` or a matrix product of `f32` with
///   `f64` does not compile, and an [`Embedding`](crate::nn::Embedding) takes
///   `Tensor<S, i64>` indices.
/// - **Data entering** typed code (`from_vec`, `try_shape`, a loader batch) is checked once,
///   for its runtime dims and its dtype, and returns `Result`.
/// - **What is left** is decided at run time: two runtime sizes of one `Dyn` axis that
///   disagree, operands on different devices, memory that cannot be had (a 4 TB `zeros()`, a
///   full GPU). Every typed op has a `try_` form that returns these as [`Result`]
///   (`try_matmul`, `try_add`, `try_exp`, `try_zeros`, ...); the plain form, and the
///   operators `+ - * /`, panic with the same message, as slice indexing does. Forwards written with `tensor_fn!` return `Result` and never panic for these.
///   Code that handles shapes it cannot trust can also stay on [`DynTensor`], where every op
///   returns `Result`.
///
/// # Example
///
/// ```
/// use rumus::prelude::*;
///
/// # fn main() -> rumus::Result<()> {
/// let x = Tensor::<(D<2>, D<3>)>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])?;
/// let ones = Tensor::<(D<3>, D<1>)>::from_vec(vec![1.0; 3])?;
/// let row_sums = x.matmul(&ones); // Tensor<(D<2>, D<1>)>, no Result: the shapes fit
/// assert_eq!(row_sums.to_vec()?, vec![6.0, 15.0]);
///
/// // Runtime sizes enter once, through a checked boundary.
/// let batch: Tensor<(Dyn, D<3>)> = DynTensor::zeros(&[4, 3], DType::F32)?.try_shape()?;
/// assert_eq!(batch.dims(), &[4, 3]);
/// let wrong = DynTensor::zeros(&[4, 2], DType::F32)?.try_shape::<(Dyn, D<3>)>();
/// assert!(wrong.is_err()); // axis 1 holds 2, the type says 3
/// # Ok(())
/// # }
/// ```
///
/// A product whose inner dims differ does not compile:
///
/// ```compile_fail,E0308
/// use rumus::prelude::*;
///
/// let x = Tensor::<(D<2>, D<3>)>::zeros();
/// let _ = x.matmul(&x); // expected `3`, found `2`
/// ```
pub struct Tensor<S: Shape, E: Element = f32> {
    inner: DynTensor,
    marker: PhantomData<fn() -> (S, E)>,
}

impl<S: Shape, E: Element> Clone for Tensor<S, E> {
    fn clone(&self) -> Self {
        Tensor {
            inner: self.inner.clone(),
            marker: PhantomData,
        }
    }
}

impl<S: Shape, E: Element> std::fmt::Debug for Tensor<S, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor<{}, {}>", S::describe(), E::DTYPE)?;
        self.inner.fmt(f)
    }
}

/// A shape whose every axis is static, so it can be built without runtime sizes.
#[diagnostic::on_unimplemented(
    message = "shape `{Self}` has a runtime dimension, so its size is not known at compile time",
    label = "this shape needs runtime sizes",
    note = "use the `*_with_dims` constructors (e.g. `Tensor::<S>::zeros_with_dims(&[batch, 784])`) or make every axis static (`D<N>`)"
)]
pub trait StaticShape: Shape {
    /// The dims of the shape.
    fn dims() -> Vec<usize> {
        Self::all_static().expect("a static shape has only static dims")
    }
}

impl StaticShape for () {}
macro_rules! static_shape {
    ($($n:ident),+) => {
        impl<$(const $n: usize),+> StaticShape for ($(D<$n>,)+) {}
    };
}
static_shape!(N0);
static_shape!(N0, N1);
static_shape!(N0, N1, N2);
static_shape!(N0, N1, N2, N3);
static_shape!(N0, N1, N2, N3, N4);
static_shape!(N0, N1, N2, N3, N4, N5);

/// The plain form of a typed op: the `try_` form's value, or a panic with its error's
/// message (see the module docs for what can still fail at run time).
#[track_caller]
pub(crate) fn proven<T>(result: Result<T>) -> T {
    result.unwrap_or_else(|e| panic!("a typed tensor op failed at run time: {e}"))
}

/// Checks that `tensor` holds `E` values, for the boundaries where a [`DynTensor`] becomes
/// typed.
fn check_element<E: Element>(tensor: &DynTensor, op: &'static str) -> Result<()> {
    if tensor.dtype() == E::DTYPE {
        return Ok(());
    }
    Err(Error::DType {
        op,
        expected: E::DTYPE.name(),
        found: tensor.dtype(),
    })
}

impl<S: Shape, E: Element> Tensor<S, E> {
    /// Wraps a core tensor whose dims and dtype were already checked against `S` and `E`.
    pub(crate) fn wrap(inner: DynTensor) -> Self {
        debug_assert!(S::check(inner.dims(), "wrap").is_ok());
        debug_assert_eq!(inner.dtype(), E::DTYPE);
        Tensor {
            inner,
            marker: PhantomData,
        }
    }

    /// Builds a tensor from `data` with explicit runtime `dims`, checked against `S`.
    pub fn from_vec_with_dims(data: Vec<E>, dims: &[usize]) -> Result<Self, ShapeError> {
        S::check(dims, "from_vec")?;
        Ok(Tensor::wrap(DynTensor::from_vec(data, dims)?))
    }

    /// Builds a tensor from `data`. Static axes take their declared size; a single runtime
    /// axis is inferred from the length of `data`.
    pub fn from_vec(data: Vec<E>) -> Result<Self, ShapeError> {
        let statics = S::static_dims();
        let runtime: Vec<usize> = statics
            .iter()
            .enumerate()
            .filter(|(_, d)| d.is_none())
            .map(|(i, _)| i)
            .collect();
        let known: usize = statics.iter().flatten().product();
        let mut dims: Vec<usize> = statics.iter().map(|d| d.unwrap_or(1)).collect();
        match runtime.as_slice() {
            [] => {}
            [axis] if known > 0 && data.len().is_multiple_of(known) => {
                dims[*axis] = data.len() / known
            }
            [_] => {
                return Err(ShapeError::ElementCount {
                    context: format!("from_vec as {}", S::describe()),
                    shape: dims,
                    expected: known,
                    found: data.len(),
                });
            }
            _ => {
                return Err(ShapeError::Invalid {
                    context: format!("from_vec as {}", S::describe()),
                    message: "more than one runtime dim cannot be inferred from the data length; use `from_vec_with_dims`".into(),
                });
            }
        }
        Self::from_vec_with_dims(data, &dims)
    }

    /// Zeros with runtime `dims` checked against `S`.
    pub fn zeros_with_dims(dims: &[usize]) -> Result<Self> {
        S::check(dims, "zeros")?;
        Ok(Tensor::wrap(DynTensor::zeros(dims, E::DTYPE)?))
    }

    /// The untyped tensor (zero-cost) for dynamic code.
    pub fn erase(self) -> DynTensor {
        self.inner
    }

    /// The untyped view of this tensor.
    pub fn as_dyn(&self) -> &DynTensor {
        &self.inner
    }

    /// Reinterprets the dims as shape `S2`, checking every static axis of `S2` at run time
    /// once: the way a `Dyn` axis becomes a static one (static meets dynamic keeps the static
    /// side).
    pub fn try_shape<S2: Shape>(self) -> Result<Tensor<S2, E>> {
        self.inner.try_typed()
    }

    /// The runtime size of each axis (static axes agree with `S`).
    pub fn dims(&self) -> &[usize] {
        self.inner.dims()
    }

    /// The runtime dtype, always `E::DTYPE`.
    pub fn dtype(&self) -> crate::DType {
        E::DTYPE
    }

    /// The device holding the elements.
    pub fn device(&self) -> crate::Device {
        self.inner.device()
    }

    /// This tensor on `device` (a copy on the graph; itself when already there).
    pub fn to(&self, device: &crate::Device) -> Result<Self> {
        Ok(Tensor::wrap(self.inner.to(device)?))
    }

    /// Whether gradients flow to or through this tensor.
    pub fn requires_grad(&self) -> bool {
        self.inner.requires_grad()
    }

    /// The same data (shared storage), cut from the graph: no gradient flows back through it.
    pub fn detach(&self) -> Self {
        Tensor::wrap(self.inner.detach())
    }

    /// The values in row-major order.
    pub fn to_vec(&self) -> Result<Vec<E>> {
        self.inner.to_vec()
    }

    /// The values converted to `E2` (float to integer truncates toward zero).
    pub fn try_to_dtype<E2: Element>(&self) -> Result<Tensor<S, E2>> {
        Ok(Tensor::wrap(self.inner.to_dtype(E2::DTYPE)?))
    }

    /// [`try_to_dtype`](Self::try_to_dtype), panicking on its error.
    #[track_caller]
    pub fn to_dtype<E2: Element>(&self) -> Tensor<S, E2> {
        proven(self.try_to_dtype())
    }

    /// Reshapes to `S2`, checking the element count (and `S2`'s static dims) at run time.
    pub fn reshape<S2: Shape>(&self) -> Result<Tensor<S2, E>> {
        let dims = match S2::all_static() {
            Some(dims) => dims,
            None => {
                let known: usize = S2::static_dims().iter().flatten().product();
                let wildcard: Vec<isize> = S2::static_dims()
                    .iter()
                    .map(|d| d.map_or(-1, |n| n as isize))
                    .collect();
                if known == 0 {
                    return Err(ShapeError::Invalid {
                        context: format!("reshape to {}", S2::describe()),
                        message: "cannot infer a runtime dim next to a zero-sized axis".into(),
                    }
                    .into());
                }
                return Ok(Tensor::wrap(self.inner.reshape_infer(&wildcard)?));
            }
        };
        Ok(Tensor::wrap(self.inner.reshape(&dims)?))
    }
}

impl<S: Shape, E: Float> Tensor<S, E> {
    /// Marks this tensor as a parameter whose gradient is wanted.
    pub fn requires_grad_(self) -> Result<Self> {
        Ok(Tensor::wrap(self.inner.requires_grad_()?))
    }

    /// [`DynTensor::register_hook`] on this tensor: `hook` sees its finished gradient in every
    /// backward pass and may return a replacement.
    pub fn register_hook(
        &self,
        hook: impl Fn(&DynTensor) -> Result<Option<DynTensor>> + Send + Sync + 'static,
    ) -> Result<crate::autograd::GradHookHandle> {
        self.inner.register_hook(hook)
    }

    /// Standard normal samples with runtime `dims`, from the global generator.
    pub fn randn_with_dims(dims: &[usize]) -> Result<Self> {
        S::check(dims, "randn")?;
        Ok(Tensor::wrap(DynTensor::randn(dims, E::DTYPE)?))
    }

    /// Back-propagates from this tensor, which must hold a single element.
    pub fn backward(&self) -> Result<GradientStore> {
        self.inner.backward()
    }

    // The element-wise ops, softmax, the full reductions and the broadcasting `add`..`div`,
    // each as `try_name` (returning the run-time error) and `name` (panicking with it): they
    // come from the method table in rumus-macros, which `tensor_fn!` reads too, so the two
    // cannot drift (tests/method_table.rs).
    rumus_macros::__typed_methods!();
}

/// Constructors of shapes whose every axis is static.
impl<S: StaticShape, E: Element> Tensor<S, E> {
    /// Every element `value` (converted to `E`).
    pub fn try_full(value: f64) -> Result<Self> {
        Ok(Tensor::wrap(DynTensor::full(&S::dims(), value, E::DTYPE)?))
    }

    /// [`try_full`](Self::try_full), panicking on its error (memory that cannot be had).
    #[track_caller]
    pub fn full(value: f64) -> Self {
        proven(Self::try_full(value))
    }

    /// Zeros; [`try_zeros`](Self::try_zeros) returns the error of a size that cannot be had.
    #[track_caller]
    pub fn zeros() -> Self {
        Self::full(0.0)
    }

    /// Every element zero; an error for a size that cannot be had.
    pub fn try_zeros() -> Result<Self> {
        Self::try_full(0.0)
    }

    /// Ones; [`try_ones`](Self::try_ones) returns the error of a size that cannot be had.
    #[track_caller]
    pub fn ones() -> Self {
        Self::full(1.0)
    }

    /// Every element one; an error for a size that cannot be had.
    pub fn try_ones() -> Result<Self> {
        Self::try_full(1.0)
    }
}

impl<S: StaticShape, E: Float> Tensor<S, E> {
    /// Standard normal samples from the global generator.
    pub fn try_randn() -> Result<Self> {
        Ok(Tensor::wrap(DynTensor::randn(&S::dims(), E::DTYPE)?))
    }

    /// [`try_randn`](Self::try_randn), panicking on its error.
    #[track_caller]
    pub fn randn() -> Self {
        proven(Self::try_randn())
    }

    /// Uniform samples in `[low, high)` from the global generator; non-finite or crossed
    /// bounds are an error (see [`DynTensor::uniform`]).
    pub fn try_uniform(low: f64, high: f64) -> Result<Self> {
        Ok(Tensor::wrap(DynTensor::uniform(
            &S::dims(),
            low,
            high,
            E::DTYPE,
        )?))
    }

    /// [`try_uniform`](Self::try_uniform), panicking on its error (bounds that are not
    /// finite, or `low > high`).
    #[track_caller]
    pub fn uniform(low: f64, high: f64) -> Self {
        proven(Self::try_uniform(low, high))
    }
}

impl<E: Element> Tensor<(), E> {
    /// The value of a scalar tensor as `f64` (an error only when a GPU cannot read it back).
    pub fn value(&self) -> Result<f64> {
        Ok(self.inner.try_to_f64_vec()?[0])
    }
}

/// A right operand of [`Tensor::matmul`] for a left operand with `K` columns: a matrix
/// `[K, N]`. A trait rather than the type `Tensor<(K, N), E>` so that a mismatch (most often
/// a weight kept in PyTorch's `[out, in]` layout) says what to do instead of rustc's bare
/// "mismatched types".
#[diagnostic::on_unimplemented(
    message = "matmul: the left operand has `{K}` columns of `{E}`, so the right operand must be a `[{K}, N]` matrix of `{E}`, not `{Self}`",
    label = "not a `[{K}, N]` matrix of `{E}`",
    note = "a weight stored as [out_features, in_features] (PyTorch's layout) multiplies as `x.matmul(&w.t())`, or use `x.linear(&w, bias)`"
)]
pub trait MatmulRhs<K: Dim, E: Element> {
    /// The product's columns.
    type N: Dim;
    /// The operand as an untyped tensor.
    fn untyped(&self) -> &DynTensor;
}

#[diagnostic::do_not_recommend]
impl<K: Dim, N: Dim, E: Element> MatmulRhs<K, E> for Tensor<(K, N), E> {
    type N = N;
    fn untyped(&self) -> &DynTensor {
        &self.inner
    }
}

// The other products are written out rather than generated from the method table: their
// signatures are what a shape mistake's error note shows.
impl<M: Dim, K: Dim, E: Float> Tensor<(M, K), E> {
    /// Matrix product `[M, K] @ [K, N] -> [M, N]`; panics where
    /// [`try_matmul`](Self::try_matmul) returns an error.
    #[track_caller]
    pub fn matmul<R: MatmulRhs<K, E>>(&self, rhs: &R) -> Tensor<(M, R::N), E> {
        proven(self.try_matmul(rhs))
    }

    /// Matrix product `[M, K] @ [K, N] -> [M, N]`, returning the run-time error (dtype,
    /// device, memory) instead of panicking.
    pub fn try_matmul<R: MatmulRhs<K, E>>(&self, rhs: &R) -> Result<Tensor<(M, R::N), E>> {
        Ok(Tensor::wrap(self.inner.matmul(rhs.untyped())?))
    }

    /// The transpose `[K, M]` (a view).
    #[track_caller]
    pub fn t(&self) -> Tensor<(K, M), E> {
        proven(self.try_t())
    }

    /// The transpose `[K, M]` (a view), returning the run-time error instead of panicking.
    pub fn try_t(&self) -> Result<Tensor<(K, M), E>> {
        Ok(Tensor::wrap(self.inner.transpose(0, 1)?))
    }

    /// `self @ weight^T + bias` (PyTorch's `F.linear`), the bias added by the product
    /// itself (see [`DynTensor::linear`]); panics where [`try_linear`](Self::try_linear)
    /// returns an error.
    #[track_caller]
    pub fn linear<N: Dim>(
        &self,
        weight: &Tensor<(N, K), E>,
        bias: Option<&Tensor<(N,), E>>,
    ) -> Tensor<(M, N), E> {
        proven(self.try_linear(weight, bias))
    }

    /// `self @ weight^T + bias` (PyTorch's `F.linear`), returning the run-time error instead
    /// of panicking.
    pub fn try_linear<N: Dim>(
        &self,
        weight: &Tensor<(N, K), E>,
        bias: Option<&Tensor<(N,), E>>,
    ) -> Result<Tensor<(M, N), E>> {
        let bias = bias.map(Tensor::as_dyn);
        Ok(Tensor::wrap(self.inner.linear(&weight.inner, bias)?))
    }
}

impl<B: Dim, M: Dim, K: Dim, E: Float> Tensor<(B, M, K), E> {
    /// Batched matrix product `[B, M, K] @ [B, K, N] -> [B, M, N]`; panics where
    /// [`try_bmm`](Self::try_bmm) returns an error.
    #[track_caller]
    pub fn bmm<N: Dim>(&self, rhs: &Tensor<(B, K, N), E>) -> Tensor<(B, M, N), E> {
        proven(self.try_bmm(rhs))
    }

    /// Batched matrix product `[B, M, K] @ [B, K, N] -> [B, M, N]`, returning the run-time
    /// error instead of panicking.
    pub fn try_bmm<N: Dim>(&self, rhs: &Tensor<(B, K, N), E>) -> Result<Tensor<(B, M, N), E>> {
        Ok(Tensor::wrap(self.inner.matmul(&rhs.inner)?))
    }
}

impl DynTensor {
    /// Checks this tensor's dims against `S` and that it holds `f32` values, and returns
    /// the typed tensor: the boundary where runtime shapes enter typed code. Tensors of
    /// other element types enter with [`try_typed`](DynTensor::try_typed).
    pub fn try_shape<S: Shape>(self) -> Result<Tensor<S>> {
        self.try_typed()
    }

    /// [`try_shape`](DynTensor::try_shape) for any element type:
    /// `indices.try_typed::<(Dyn, D<16>), i64>()`.
    pub fn try_typed<S: Shape, E: Element>(self) -> Result<Tensor<S, E>> {
        S::check(self.dims(), "try_shape")?;
        check_element::<E>(&self, "try_shape")?;
        Ok(Tensor::wrap(self))
    }
}

impl GradientStore {
    /// The gradient of a typed tensor, with the tensor's own shape and element type.
    pub fn grad_of<S: Shape, E: Float>(&self, tensor: &Tensor<S, E>) -> Result<Tensor<S, E>> {
        Ok(Tensor::wrap(self.grad(tensor.as_dyn())?.clone()))
    }
}

/// Shapes that combine element-wise, and the shape of the result: equal shapes, or a row
/// vector broadcast over the rows of a matrix (`[B, N] + [N]`, a bias).
#[diagnostic::on_unimplemented(
    message = "element-wise op between shapes `{Self}` and `{Rhs}`, which do not match",
    label = "this operand's shape does not fit",
    note = "typed element-wise ops take equal shapes, or `[B, N]` with `[N]`; for other broadcasts use `tensor_fn!` or the untyped `DynTensor`"
)]
pub trait Elementwise<Rhs: Shape>: Shape {
    /// Shape of the result: the larger operand's shape.
    type Output: Shape;
}

#[diagnostic::do_not_recommend]
impl<S: Shape> Elementwise<S> for S {
    type Output = S;
}

#[diagnostic::do_not_recommend]
impl<B: Dim, N: Dim> Elementwise<(N,)> for (B, N) {
    type Output = (B, N);
}

/// `&a + &b` and the other operators call the typed op of the same name (which panics on
/// a run-time error; `try_add` and friends return it).
macro_rules! binary_operator {
    ($trait:ident, $method:ident) => {
        impl<S: Elementwise<R>, R: Shape, E: Float> ops::$trait<&Tensor<R, E>> for &Tensor<S, E> {
            type Output = Tensor<S::Output, E>;
            #[track_caller]
            fn $method(self, rhs: &Tensor<R, E>) -> Tensor<S::Output, E> {
                Tensor::$method(self, rhs)
            }
        }
        impl<S: Elementwise<R>, R: Shape, E: Float> ops::$trait<Tensor<R, E>> for Tensor<S, E> {
            type Output = Tensor<S::Output, E>;
            #[track_caller]
            fn $method(self, rhs: Tensor<R, E>) -> Tensor<S::Output, E> {
                Tensor::$method(&self, &rhs)
            }
        }
        impl<S: Elementwise<R>, R: Shape, E: Float> ops::$trait<&Tensor<R, E>> for Tensor<S, E> {
            type Output = Tensor<S::Output, E>;
            #[track_caller]
            fn $method(self, rhs: &Tensor<R, E>) -> Tensor<S::Output, E> {
                Tensor::$method(&self, rhs)
            }
        }
        impl<S: Elementwise<R>, R: Shape, E: Float> ops::$trait<Tensor<R, E>> for &Tensor<S, E> {
            type Output = Tensor<S::Output, E>;
            #[track_caller]
            fn $method(self, rhs: Tensor<R, E>) -> Tensor<S::Output, E> {
                Tensor::$method(self, &rhs)
            }
        }
    };
}

binary_operator!(Add, add);
binary_operator!(Sub, sub);
binary_operator!(Mul, mul);
binary_operator!(Div, div);

impl<S: Shape, E: Float> ops::Neg for &Tensor<S, E> {
    type Output = Tensor<S, E>;
    #[track_caller]
    fn neg(self) -> Tensor<S, E> {
        Tensor::neg(self)
    }
}

impl<S: Shape, E: Float> ops::Mul<f64> for &Tensor<S, E> {
    type Output = Tensor<S, E>;
    #[track_caller]
    fn mul(self, rhs: f64) -> Tensor<S, E> {
        self.mul_scalar(rhs)
    }
}

impl<S: Shape, E: Float> ops::Add<f64> for &Tensor<S, E> {
    type Output = Tensor<S, E>;
    #[track_caller]
    fn add(self, rhs: f64) -> Tensor<S, E> {
        self.add_scalar(rhs)
    }
}
