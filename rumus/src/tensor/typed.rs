//! The typed façade: [`Tensor<S>`] is a [`DynTensor`] whose shape type `S` the compiler checks.
//!
//! Runtime dims are checked once where data enters (`from_vec`, `try_shape`); past that
//! boundary, typed ops carry no shape checks of their own. Static dims can never disagree at
//! run time. Two tensors whose shapes contain the *same runtime dim type* (two `Dyn` batch
//! axes, say) are trusted to agree; if they do not, the op panics with the shape error, as
//! that is a logic error in the program rather than bad input. Code that handles shapes it
//! cannot trust stays on [`DynTensor`], where every op returns `Result`.

use std::marker::PhantomData;
use std::ops;

use crate::autograd::GradientStore;
use crate::dtype::DType;
use crate::element::Element;
use crate::error::{Result, ShapeError};
use crate::shape::{D, Dim, Shape};
use crate::tensor::DynTensor;

/// A tensor whose shape type `S` (a tuple of dims such as `(Dyn, D<784>)`) is checked by the
/// compiler. Zero-cost: it is a [`DynTensor`] plus a marker.
pub struct Tensor<S: Shape> {
    inner: DynTensor,
    shape: PhantomData<fn() -> S>,
}

impl<S: Shape> Clone for Tensor<S> {
    fn clone(&self) -> Self {
        Tensor {
            inner: self.inner.clone(),
            shape: PhantomData,
        }
    }
}

impl<S: Shape> std::fmt::Debug for Tensor<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor<{}>", S::describe())?;
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

/// Unwraps the result of a typed op whose shapes the types already proved. What can still
/// fail is decided at run time: two runtime sizes of one `Dyn` axis, operands on different
/// devices, a dtype the op does not take, GPU memory. Typed ops return values, as arithmetic
/// on numbers does, so these panic with the error's own message (which says what to do);
/// the same ops on `DynTensor` return them as errors.
fn proven<T>(result: Result<T>) -> T {
    result.unwrap_or_else(|e| panic!("a typed tensor op failed at run time: {e}"))
}

impl<S: Shape> Tensor<S> {
    /// Wraps a core tensor whose dims were already checked against `S`.
    pub(crate) fn wrap(inner: DynTensor) -> Self {
        debug_assert!(S::check(inner.dims(), "wrap").is_ok());
        Tensor {
            inner,
            shape: PhantomData,
        }
    }

    fn map(&self, f: impl FnOnce(&DynTensor) -> Result<DynTensor>) -> Self {
        Tensor::wrap(proven(f(&self.inner)))
    }

    /// Builds a tensor from `data` with explicit runtime `dims`, checked against `S`.
    pub fn from_vec_with_dims<T: Element>(
        data: Vec<T>,
        dims: &[usize],
    ) -> Result<Self, ShapeError> {
        S::check(dims, "from_vec")?;
        Ok(Tensor::wrap(DynTensor::from_vec(data, dims)?))
    }

    /// Builds a tensor from `data`. Static axes take their declared size; a single runtime
    /// axis is inferred from the length of `data`.
    pub fn from_vec<T: Element>(data: Vec<T>) -> Result<Self, ShapeError> {
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

    /// Zeros (f32) with runtime `dims` checked against `S`.
    pub fn zeros_with_dims(dims: &[usize]) -> Result<Self, ShapeError> {
        S::check(dims, "zeros")?;
        Ok(Tensor::wrap(proven(DynTensor::zeros(dims, DType::F32))))
    }

    /// Standard normal samples (f32) with runtime `dims`, from the global generator.
    pub fn randn_with_dims(dims: &[usize]) -> Result<Self, ShapeError> {
        S::check(dims, "randn")?;
        Ok(Tensor::wrap(proven(DynTensor::randn(dims, DType::F32))))
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
    pub fn try_shape<S2: Shape>(self) -> Result<Tensor<S2>, ShapeError> {
        self.inner.try_shape()
    }

    pub fn dims(&self) -> &[usize] {
        self.inner.dims()
    }

    pub fn dtype(&self) -> DType {
        self.inner.dtype()
    }

    /// The device holding the elements.
    pub fn device(&self) -> crate::Device {
        self.inner.device()
    }

    /// This tensor on `device` (a copy on the graph; itself when already there).
    pub fn to(&self, device: &crate::Device) -> Result<Self> {
        Ok(Tensor::wrap(self.inner.to(device)?))
    }

    /// Marks this tensor as a parameter whose gradient is wanted.
    pub fn requires_grad_(self) -> Result<Self> {
        Ok(Tensor::wrap(self.inner.requires_grad_()?))
    }

    pub fn requires_grad(&self) -> bool {
        self.inner.requires_grad()
    }

    pub fn detach(&self) -> Self {
        Tensor::wrap(self.inner.detach())
    }

    /// The values in row-major order.
    pub fn to_vec<T: Element + Default>(&self) -> Result<Vec<T>> {
        self.inner.to_vec()
    }

    /// Converts the element type.
    pub fn to_dtype(&self, dtype: DType) -> Self {
        self.map(|t| t.to_dtype(dtype))
    }

    /// Sum of all elements.
    pub fn sum_all(&self) -> Tensor<()> {
        Tensor::wrap(proven(self.inner.sum_all()))
    }

    /// Mean of all elements.
    pub fn mean_all(&self) -> Tensor<()> {
        Tensor::wrap(proven(self.inner.mean_all()))
    }

    /// Softmax over the last axis.
    pub fn softmax(&self) -> Self {
        self.map(|t| t.softmax(-1))
    }

    /// Log-softmax over the last axis.
    pub fn log_softmax(&self) -> Self {
        self.map(|t| t.log_softmax(-1))
    }

    /// Reshapes to `S2`, checking the element count (and `S2`'s static dims) at run time.
    pub fn reshape<S2: Shape>(&self) -> Result<Tensor<S2>> {
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

    /// Back-propagates from this tensor, which must hold a single element.
    pub fn backward(&self) -> Result<GradientStore> {
        self.inner.backward()
    }

    pub fn add_scalar(&self, value: f64) -> Self {
        self.map(|t| t.add_scalar(value))
    }

    pub fn mul_scalar(&self, value: f64) -> Self {
        self.map(|t| t.mul_scalar(value))
    }

    pub fn leaky_relu(&self, negative_slope: f64) -> Self {
        self.map(|t| t.leaky_relu(negative_slope))
    }

    pub fn powf(&self, exponent: f64) -> Self {
        self.map(|t| t.powf(exponent))
    }

    pub fn clamp(&self, min: f64, max: f64) -> Self {
        self.map(|t| t.clamp(min, max))
    }
}

macro_rules! shape_preserving {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        impl<S: Shape> Tensor<S> {
            $(
                $(#[$doc])*
                pub fn $name(&self) -> Self {
                    self.map(DynTensor::$name)
                }
            )*
        }
    };
}

shape_preserving!(
    neg, exp, log, sqrt, rsqrt, abs, erf, relu, sigmoid, tanh, gelu, gelu_tanh, silu
);

impl<S: StaticShape> Tensor<S> {
    /// Zeros (f32).
    pub fn zeros() -> Self {
        Tensor::wrap(proven(DynTensor::zeros(&S::dims(), DType::F32)))
    }

    /// Ones (f32).
    pub fn ones() -> Self {
        Tensor::wrap(proven(DynTensor::ones(&S::dims(), DType::F32)))
    }

    /// Every element `value` (f32).
    pub fn full(value: f64) -> Self {
        Tensor::wrap(proven(DynTensor::full(&S::dims(), value, DType::F32)))
    }

    /// Standard normal samples (f32) from the global generator.
    pub fn randn() -> Self {
        Tensor::wrap(proven(DynTensor::randn(&S::dims(), DType::F32)))
    }

    /// Uniform samples in `[low, high)` (f32) from the global generator.
    pub fn uniform(low: f64, high: f64) -> Self {
        Tensor::wrap(proven(DynTensor::uniform(
            &S::dims(),
            low,
            high,
            DType::F32,
        )))
    }
}

impl Tensor<()> {
    /// The value of a scalar tensor as `f64`.
    pub fn value(&self) -> f64 {
        self.inner.to_f64_vec()[0]
    }
}

impl<M: Dim, K: Dim> Tensor<(M, K)> {
    /// Matrix product `[M, K] @ [K, N] -> [M, N]`.
    pub fn matmul<N: Dim>(&self, rhs: &Tensor<(K, N)>) -> Tensor<(M, N)> {
        Tensor::wrap(proven(self.inner.matmul(&rhs.inner)))
    }

    /// The transpose `[K, M]`.
    pub fn t(&self) -> Tensor<(K, M)> {
        Tensor::wrap(proven(self.inner.transpose(0, 1)))
    }

    /// `self @ weight^T + bias` (PyTorch's `F.linear`), the bias added by the product
    /// itself (see [`DynTensor::linear`]).
    pub fn linear<N: Dim>(
        &self,
        weight: &Tensor<(N, K)>,
        bias: Option<&Tensor<(N,)>>,
    ) -> Tensor<(M, N)> {
        let bias = bias.map(Tensor::as_dyn);
        Tensor::wrap(proven(self.inner.linear(&weight.inner, bias)))
    }
}

impl<B: Dim, M: Dim, K: Dim> Tensor<(B, M, K)> {
    /// Batched matrix product `[B, M, K] @ [B, K, N] -> [B, M, N]`.
    pub fn bmm<N: Dim>(&self, rhs: &Tensor<(B, K, N)>) -> Tensor<(B, M, N)> {
        Tensor::wrap(proven(self.inner.matmul(&rhs.inner)))
    }
}

impl DynTensor {
    /// Checks this tensor's dims against `S` and returns the typed tensor: the boundary
    /// where runtime shapes enter typed code.
    pub fn try_shape<S: Shape>(self) -> Result<Tensor<S>, ShapeError> {
        S::check(self.dims(), "try_shape")?;
        Ok(Tensor::wrap(self))
    }
}

impl GradientStore {
    /// The gradient of a typed tensor, with the tensor's own shape type.
    pub fn grad_of<S: Shape>(&self, tensor: &Tensor<S>) -> Result<Tensor<S>> {
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

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $core:ident) => {
        impl<S: Elementwise<R>, R: Shape> ops::$trait<&Tensor<R>> for &Tensor<S> {
            type Output = Tensor<S::Output>;
            fn $method(self, rhs: &Tensor<R>) -> Tensor<S::Output> {
                Tensor::wrap(proven(self.inner.$core(&rhs.inner)))
            }
        }
        impl<S: Elementwise<R>, R: Shape> ops::$trait<Tensor<R>> for Tensor<S> {
            type Output = Tensor<S::Output>;
            fn $method(self, rhs: Tensor<R>) -> Tensor<S::Output> {
                (&self).$method(&rhs)
            }
        }
        impl<S: Elementwise<R>, R: Shape> ops::$trait<&Tensor<R>> for Tensor<S> {
            type Output = Tensor<S::Output>;
            fn $method(self, rhs: &Tensor<R>) -> Tensor<S::Output> {
                (&self).$method(rhs)
            }
        }
        impl<S: Elementwise<R>, R: Shape> ops::$trait<Tensor<R>> for &Tensor<S> {
            type Output = Tensor<S::Output>;
            fn $method(self, rhs: Tensor<R>) -> Tensor<S::Output> {
                self.$method(&rhs)
            }
        }
    };
}

binary_operator!(Add, add, add);
binary_operator!(Sub, sub, sub);
binary_operator!(Mul, mul, mul);
binary_operator!(Div, div, div);

impl<S: Shape> ops::Neg for &Tensor<S> {
    type Output = Tensor<S>;
    fn neg(self) -> Tensor<S> {
        Tensor::neg(self)
    }
}

impl<S: Shape> ops::Mul<f64> for &Tensor<S> {
    type Output = Tensor<S>;
    fn mul(self, rhs: f64) -> Tensor<S> {
        self.mul_scalar(rhs)
    }
}

impl<S: Shape> ops::Add<f64> for &Tensor<S> {
    type Output = Tensor<S>;
    fn add(self, rhs: f64) -> Tensor<S> {
        self.add_scalar(rhs)
    }
}
