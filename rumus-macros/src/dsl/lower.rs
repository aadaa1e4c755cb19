//! Shape inference and code generation for a DSL body, in one pass: each op's result shape is
//! computed from its operands' shapes (a mismatch becomes a `compile_error!` on the offending
//! token, in plain numbers), and one typed Rust statement is emitted for it.

use std::collections::HashMap;

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::Ident;

use super::ast::{BinOp, Expr};
use crate::model::layers::{Layer, LayerKind};
use crate::shape::{Dim, Same, Shape};

/// A value in the body: a tensor bound to a generated variable, or a number.
#[derive(Clone)]
pub enum Value {
    Tensor { var: Ident, shape: Shape },
    Number(f64),
}

type Result<T> = syn::Result<T>;

fn err<T>(span: Span, message: impl Into<String>) -> Result<T> {
    Err(syn::Error::new(span, message.into()))
}

/// The state of one function being lowered.
pub struct Lowering<'a> {
    pub statements: Vec<TokenStream>,
    pub env: HashMap<String, Value>,
    /// Dim names in scope (bound by parameters or declared generics).
    pub dims: Vec<String>,
    pub layers: &'a [Layer],
    counter: usize,
}

const SHAPE_PRESERVING: &[&str] = &[
    "relu",
    "sigmoid",
    "tanh",
    "gelu",
    "gelu_tanh",
    "silu",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "neg",
    "abs",
    "erf",
    "contiguous",
];

impl<'a> Lowering<'a> {
    pub fn new(layers: &'a [Layer]) -> Self {
        Lowering {
            statements: Vec::new(),
            env: HashMap::new(),
            dims: Vec::new(),
            layers,
            counter: 0,
        }
    }

    fn fresh(&mut self) -> Ident {
        self.counter += 1;
        format_ident!("__rumus_t{}", self.counter)
    }

    /// Emits `let tmp: Tensor<shape> = wrap(dyn_expr?);` and returns the new value.
    fn emit(&mut self, span: Span, shape: Shape, dyn_expr: TokenStream) -> Value {
        let var = self.fresh();
        let ty = shape.to_type();
        self.statements.push(quote_spanned! {span=>
            let #var: ::rumus::Tensor<#ty> = ::rumus::__private::wrap(#dyn_expr?);
        });
        Value::Tensor { var, shape }
    }

    /// Leaves an equality the macro cannot decide (a const it cannot see) to the type system.
    fn defer_same(&mut self, span: Span, a: &Dim, b: &Dim) {
        let (ta, tb) = (a.to_type(), b.to_type());
        self.statements
            .push(quote_spanned! {span=> ::rumus::__private::assert_same_dim::<#ta, #tb>(); });
    }

    fn tensor(&self, value: &Value, span: Span, what: &str) -> Result<(Ident, Shape)> {
        match value {
            Value::Tensor { var, shape } => Ok((var.clone(), shape.clone())),
            Value::Number(_) => err(span, format!("{what} needs a tensor here, not a number")),
        }
    }

    pub fn lower(&mut self, expr: &Expr) -> Result<Value> {
        match expr {
            Expr::Var(name) => self.env.get(&name.to_string()).cloned().ok_or_else(|| {
                syn::Error::new(name.span(), format!("unknown tensor `{name}`; tensors are the parameters and earlier `let` bindings"))
            }),
            Expr::Number(v, _) => Ok(Value::Number(*v)),
            Expr::Neg(inner, span) => match self.lower(inner)? {
                Value::Number(v) => Ok(Value::Number(-v)),
                Value::Tensor { var, shape } => Ok(self.emit(*span, shape, quote!(#var.as_dyn().neg()))),
            },
            Expr::Binary { op, lhs, rhs, span } => {
                let (l, r) = (self.lower(lhs)?, self.lower(rhs)?);
                self.binary(*op, l, r, lhs.span(), rhs.span(), *span)
            }
            Expr::Method { receiver, name, args } => {
                let value = self.lower(receiver)?;
                self.method(value, name, args)
            }
            Expr::Call { name, args } => self.call(name, args),
            Expr::Layer { field, args } => self.layer(field, args),
            Expr::Infer(span) | Expr::List(_, span) | Expr::Range(_, _, span) => {
                err(*span, "a list, range or `_` is only allowed as an argument (shapes, axes, tensors to join)")
            }
        }
    }

    fn binary(
        &mut self,
        op: BinOp,
        l: Value,
        r: Value,
        lspan: Span,
        rspan: Span,
        span: Span,
    ) -> Result<Value> {
        let sym = op.symbol();
        match (l, r) {
            (Value::Number(_), Value::Number(_)) => err(
                span,
                format!("`{sym}` of two numbers: one operand must be a tensor"),
            ),
            (Value::Tensor { var, shape }, Value::Number(c)) => {
                let call = match op {
                    BinOp::Add => quote!(#var.as_dyn().add_scalar(#c)),
                    BinOp::Sub => quote!(#var.as_dyn().sub_scalar(#c)),
                    BinOp::Mul => quote!(#var.as_dyn().mul_scalar(#c)),
                    BinOp::Div => quote!(#var.as_dyn().div_scalar(#c)),
                    BinOp::Matmul => return err(rspan, "`@` needs two tensors"),
                };
                Ok(self.emit(span, shape, call))
            }
            (Value::Number(c), Value::Tensor { var, shape }) => {
                let call = match op {
                    BinOp::Add => quote!(#var.as_dyn().add_scalar(#c)),
                    BinOp::Sub => quote!(#var.as_dyn().rsub_scalar(#c)),
                    BinOp::Mul => quote!(#var.as_dyn().mul_scalar(#c)),
                    BinOp::Div => quote!(#var.as_dyn().powf(-1.0)?.mul_scalar(#c)),
                    BinOp::Matmul => return err(lspan, "`@` needs two tensors"),
                };
                Ok(self.emit(span, shape, call))
            }
            (Value::Tensor { var: a, shape: sa }, Value::Tensor { var: b, shape: sb }) => {
                if op == BinOp::Matmul {
                    let shape = self.matmul_shape(&sa, &sb, rspan)?;
                    return Ok(self.emit(span, shape, quote!(#a.as_dyn().matmul(#b.as_dyn()))));
                }
                let shape = self.broadcast(&sa, &sb, sym, rspan)?;
                let method = format_ident!(
                    "{}",
                    match op {
                        BinOp::Add => "add",
                        BinOp::Sub => "sub",
                        BinOp::Mul => "mul",
                        _ => "div",
                    }
                );
                Ok(self.emit(span, shape, quote!(#a.as_dyn().#method(#b.as_dyn()))))
            }
        }
    }

    /// NumPy broadcasting on symbolic dims.
    fn broadcast(&mut self, a: &Shape, b: &Shape, op: &str, span: Span) -> Result<Shape> {
        let rank = a.rank().max(b.rank());
        let mut out = Vec::with_capacity(rank);
        for i in 0..rank {
            let da = (i + a.rank()).checked_sub(rank).map(|k| &a.0[k]);
            let db = (i + b.rank()).checked_sub(rank).map(|k| &b.0[k]);
            let dim = match (da, db) {
                (Some(x), None) | (None, Some(x)) => x.clone(),
                (Some(x), Some(y)) => match x.same(y) {
                    Same::Yes => x.clone(),
                    _ if y == &Dim::Lit(1) => x.clone(),
                    _ if x == &Dim::Lit(1) => y.clone(),
                    Same::Unknown => {
                        self.defer_same(span, x, y);
                        x.clone()
                    }
                    Same::No => {
                        let axis = i as isize - rank as isize;
                        let hint = match (x, y) {
                            (Dim::Var(_), Dim::Var(_)) => format!(
                                "`{x}` and `{y}` are different runtime dims; did you swap axes? (transpose or permute first)"
                            ),
                            _ => "sizes must be equal, or one of them 1".to_string(),
                        };
                        return err(
                            span,
                            format!(
                                "`{op}`: cannot broadcast {a} with {b}: axis {axis} is {x} vs {y}; {hint}"
                            ),
                        );
                    }
                },
                (None, None) => unreachable!(),
            };
            out.push(dim);
        }
        Ok(Shape(out))
    }

    fn matmul_shape(&mut self, a: &Shape, b: &Shape, span: Span) -> Result<Shape> {
        if a.rank() == 0 || b.rank() == 0 {
            return err(
                span,
                format!("`@`: both operands need at least one axis, got {a} and {b}"),
            );
        }
        let (a2, b2) = (
            if a.rank() == 1 {
                Shape(vec![Dim::Lit(1), a.0[0].clone()])
            } else {
                a.clone()
            },
            if b.rank() == 1 {
                Shape(vec![b.0[0].clone(), Dim::Lit(1)])
            } else {
                b.clone()
            },
        );
        let (k1, k2) = (&a2.0[a2.rank() - 1], &b2.0[b2.rank() - 2]);
        match k1.same(k2) {
            Same::Yes => {}
            Same::Unknown => self.defer_same(span, k1, k2),
            Same::No => {
                return err(
                    span,
                    format!(
                        "`@`: inner dims differ: lhs {a} has {k1} columns but rhs {b} has {k2} rows; the last dim of the left operand must equal the second-to-last of the right"
                    ),
                );
            }
        }
        let batch = self.broadcast(
            &Shape(a2.0[..a2.rank() - 2].to_vec()),
            &Shape(b2.0[..b2.rank() - 2].to_vec()),
            "@ (batch dims)",
            span,
        )?;
        let mut dims = batch.0;
        if a.rank() > 1 {
            dims.push(a2.0[a2.rank() - 2].clone());
        }
        if b.rank() > 1 {
            dims.push(b2.0[b2.rank() - 1].clone());
        }
        Ok(Shape(dims))
    }

    fn axis(&self, arg: &Expr, rank: usize, op: &str, shape: &Shape) -> Result<usize> {
        let value = arg.as_int().ok_or_else(|| {
            syn::Error::new(
                arg.span(),
                format!("`{op}`: the axis must be an integer literal"),
            )
        })?;
        let index = if value < 0 {
            value + rank as i64
        } else {
            value
        };
        if index < 0 || index >= rank as i64 {
            return err(
                arg.span(),
                format!(
                    "`{op}`: axis {value} is out of range for {shape} (rank {rank}; valid axes are {}..{rank})",
                    -(rank as i64)
                ),
            );
        }
        Ok(index as usize)
    }

    fn int_arg(&self, args: &[Expr], i: usize, op: &str, what: &str, span: Span) -> Result<usize> {
        let arg = args
            .get(i)
            .ok_or_else(|| syn::Error::new(span, format!("`{op}` needs {what}")))?;
        match arg.as_int() {
            Some(v) if v >= 0 => Ok(v as usize),
            _ => err(
                arg.span(),
                format!("`{op}`: {what} must be a non-negative integer literal"),
            ),
        }
    }

    fn expect_args(
        &self,
        args: &[Expr],
        n: usize,
        op: &str,
        usage: &str,
        span: Span,
    ) -> Result<()> {
        if args.len() != n {
            return err(span, format!("`{op}` takes {n} argument(s): `{usage}`"));
        }
        Ok(())
    }

    fn method(&mut self, value: Value, name: &Ident, args: &[Expr]) -> Result<Value> {
        let op = name.to_string();
        let span = name.span();
        let (var, shape) = self.tensor(&value, span, &format!("`.{op}()`"))?;
        let rank = shape.rank();
        if SHAPE_PRESERVING.contains(&op.as_str()) {
            self.expect_args(args, 0, &op, &format!("x.{op}()"), span)?;
            return Ok(self.emit(span, shape, quote!(#var.as_dyn().#name())));
        }
        match op.as_str() {
            "leaky_relu" | "powf" | "add_scalar" | "mul_scalar" => {
                self.expect_args(args, 1, &op, &format!("x.{op}(value)"), span)?;
                let v = number(&args[0], &op)?;
                Ok(self.emit(span, shape, quote!(#var.as_dyn().#name(#v))))
            }
            "clamp" => {
                self.expect_args(args, 2, &op, "x.clamp(min, max)", span)?;
                let (lo, hi) = (number(&args[0], &op)?, number(&args[1], &op)?);
                Ok(self.emit(span, shape, quote!(#var.as_dyn().clamp(#lo, #hi))))
            }
            "softmax" | "log_softmax" => {
                self.expect_args(args, 1, &op, &format!("x.{op}(axis)"), span)?;
                let axis = self.axis(&args[0], rank, &op, &shape)? as isize;
                Ok(self.emit(span, shape, quote!(#var.as_dyn().#name(#axis))))
            }
            "sum" | "mean" | "max" | "min" | "sum_keepdim" | "mean_keepdim" | "max_keepdim"
            | "min_keepdim" => {
                self.expect_args(
                    args,
                    1,
                    &op,
                    &format!("x.{op}(axis) or x.{op}([axes])"),
                    span,
                )?;
                let keepdim = op.ends_with("_keepdim");
                let base = format_ident!("{}", op.trim_end_matches("_keepdim"));
                let axis_args: Vec<Expr> = match &args[0] {
                    Expr::List(items, _) => items.clone(),
                    single => vec![single.clone()],
                };
                let mut axes = Vec::new();
                for a in &axis_args {
                    axes.push(self.axis(a, rank, &op, &shape)?);
                }
                let dims = shape.0.iter().enumerate().filter_map(|(i, d)| {
                    match (axes.contains(&i), keepdim) {
                        (false, _) => Some(d.clone()),
                        (true, true) => Some(Dim::Lit(1)),
                        (true, false) => None,
                    }
                });
                let out = Shape(dims.collect());
                let axes: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
                Ok(self.emit(
                    span,
                    out,
                    quote!(#var.as_dyn().#base(&[#(#axes),*], #keepdim)),
                ))
            }
            "sum_all" | "mean_all" => {
                self.expect_args(args, 0, &op, &format!("x.{op}()"), span)?;
                Ok(self.emit(span, Shape(vec![]), quote!(#var.as_dyn().#name())))
            }
            "argmax" | "argmin" => {
                self.expect_args(args, 1, &op, &format!("x.{op}(axis)"), span)?;
                let axis = self.axis(&args[0], rank, &op, &shape)?;
                let mut dims = shape.0.clone();
                dims.remove(axis);
                let axis = axis as isize;
                Ok(self.emit(span, Shape(dims), quote!(#var.as_dyn().#name(#axis, false))))
            }
            "reshape" => {
                self.expect_args(args, 1, &op, "x.reshape([B, 8, 64])", span)?;
                let target = self.reshape_target(&args[0], &shape)?;
                let runtime_dims =
                    self.runtime_dims_tokens(&target, &[(var.clone(), shape.clone())]);
                Ok(self.emit(span, target, quote!(#var.as_dyn().reshape(&#runtime_dims))))
            }
            "flatten" => {
                if args.is_empty() || args.len() > 2 {
                    return err(
                        span,
                        "`flatten` takes the first axis and optionally the last: `x.flatten(1)`",
                    );
                }
                let start = self.axis(&args[0], rank, &op, &shape)?;
                let end = match args.get(1) {
                    Some(a) => self.axis(a, rank, &op, &shape)?,
                    None => rank - 1,
                };
                if start > end {
                    return err(
                        args[0].span(),
                        format!("`flatten`: start axis {start} comes after end axis {end}"),
                    );
                }
                let mut dims = shape.0[..start].to_vec();
                dims.push(Dim::product(&shape.0[start..=end]));
                dims.extend_from_slice(&shape.0[end + 1..]);
                let (s, e) = (start as isize, end as isize);
                Ok(self.emit(span, Shape(dims), quote!(#var.as_dyn().flatten(#s, #e))))
            }
            "transpose" => {
                self.expect_args(args, 2, &op, "x.transpose(a, b)", span)?;
                let (a, b) = (
                    self.axis(&args[0], rank, &op, &shape)?,
                    self.axis(&args[1], rank, &op, &shape)?,
                );
                let mut dims = shape.0.clone();
                dims.swap(a, b);
                let (a, b) = (a as isize, b as isize);
                Ok(self.emit(span, Shape(dims), quote!(#var.as_dyn().transpose(#a, #b))))
            }
            "t" => {
                self.expect_args(args, 0, &op, "x.t()", span)?;
                if rank != 2 {
                    return err(
                        span,
                        format!(
                            "`t()` transposes a matrix, but the tensor is {shape} (rank {rank}); use `transpose(a, b)`"
                        ),
                    );
                }
                Ok(self.emit(
                    span,
                    Shape(vec![shape.0[1].clone(), shape.0[0].clone()]),
                    quote!(#var.as_dyn().transpose(0, 1)),
                ))
            }
            "permute" => {
                self.expect_args(args, 1, &op, "x.permute([0, 2, 1])", span)?;
                let Expr::List(items, list_span) = &args[0] else {
                    return err(
                        args[0].span(),
                        "`permute` takes a list of axes: `x.permute([0, 2, 1])`",
                    );
                };
                if items.len() != rank {
                    return err(
                        *list_span,
                        format!(
                            "`permute`: {} axes given for {shape} (rank {rank})",
                            items.len()
                        ),
                    );
                }
                let mut perm = Vec::new();
                for item in items {
                    let a = self.axis(item, rank, &op, &shape)?;
                    if perm.contains(&a) {
                        return err(item.span(), format!("`permute`: axis {a} appears twice"));
                    }
                    perm.push(a);
                }
                let out = Shape(perm.iter().map(|&p| shape.0[p].clone()).collect());
                Ok(self.emit(span, out, quote!(#var.as_dyn().permute(&[#(#perm),*]))))
            }
            "unsqueeze" => {
                self.expect_args(args, 1, &op, "x.unsqueeze(axis)", span)?;
                let a = self.axis(&args[0], rank + 1, &op, &shape)?;
                let mut dims = shape.0.clone();
                dims.insert(a, Dim::Lit(1));
                let a = a as isize;
                Ok(self.emit(span, Shape(dims), quote!(#var.as_dyn().unsqueeze(#a))))
            }
            "squeeze" => {
                self.expect_args(args, 1, &op, "x.squeeze(axis)", span)?;
                let a = self.axis(&args[0], rank, &op, &shape)?;
                if shape.0[a] != Dim::Lit(1) {
                    return err(
                        args[0].span(),
                        format!(
                            "`squeeze`: axis {a} of {shape} has size {}, not 1",
                            shape.0[a]
                        ),
                    );
                }
                let mut dims = shape.0.clone();
                dims.remove(a);
                let a = a as isize;
                Ok(self.emit(span, Shape(dims), quote!(#var.as_dyn().squeeze(#a))))
            }
            "narrow" => {
                self.expect_args(args, 3, &op, "x.narrow(axis, start, len)", span)?;
                let a = self.axis(&args[0], rank, &op, &shape)?;
                let start = self.int_arg(args, 1, &op, "a start", span)?;
                let len = self.int_arg(args, 2, &op, "a length", span)?;
                self.narrowed(var, shape, a, start, len, args[2].span(), span)
            }
            "slice" => {
                self.expect_args(args, 2, &op, "x.slice(axis, start..end)", span)?;
                let a = self.axis(&args[0], rank, &op, &shape)?;
                let Expr::Range(s, e, range_span) = &args[1] else {
                    return err(
                        args[1].span(),
                        "`slice` takes a range with literal ends: `x.slice(1, 0..4)`",
                    );
                };
                let (Some(s), Some(e)) = (s.as_int(), e.as_int()) else {
                    return err(
                        *range_span,
                        "`slice`: the range ends must be integer literals",
                    );
                };
                if s < 0 || e < s {
                    return err(
                        *range_span,
                        format!("`slice`: {s}..{e} is not a valid range"),
                    );
                }
                self.narrowed(
                    var,
                    shape,
                    a,
                    s as usize,
                    (e - s) as usize,
                    *range_span,
                    span,
                )
            }
            "split_heads" => {
                self.expect_args(args, 1, &op, "x.split_heads(heads)", span)?;
                let heads = self.int_arg(args, 0, &op, "the number of heads", span)?;
                if rank < 2 || heads == 0 {
                    return err(
                        span,
                        format!(
                            "`split_heads`: needs [.., T, E] and at least one head, got {shape}"
                        ),
                    );
                }
                let e = &shape.0[rank - 1];
                let Some(width) = e.lit() else {
                    return err(
                        span,
                        format!(
                            "`split_heads`: the embedding axis of {shape} is `{e}`, a runtime dim; a head split needs a static size"
                        ),
                    );
                };
                if width % heads != 0 {
                    return err(
                        args[0].span(),
                        format!(
                            "`split_heads`: {width} features of {shape} do not divide into {heads} heads ({width} % {heads} = {}); choose a head count that divides {width}",
                            width % heads
                        ),
                    );
                }
                let mut dims = shape.0[..rank - 2].to_vec();
                dims.extend([
                    Dim::Lit(heads),
                    shape.0[rank - 2].clone(),
                    Dim::Lit(width / heads),
                ]);
                let target = self.runtime_dims_tokens(
                    &Shape({
                        let mut d = shape.0[..rank - 1].to_vec();
                        d.extend([Dim::Lit(heads), Dim::Lit(width / heads)]);
                        d
                    }),
                    &[(var.clone(), shape.clone())],
                );
                let (a, b) = ((rank - 1) as isize, (rank - 2) as isize);
                Ok(self.emit(
                    span,
                    Shape(dims),
                    quote!(#var.as_dyn().reshape(&#target)?.transpose(#b, #a)),
                ))
            }
            "merge_heads" => {
                self.expect_args(args, 0, &op, "x.merge_heads()", span)?;
                if rank < 3 {
                    return err(
                        span,
                        format!("`merge_heads`: needs [.., H, T, D], got {shape}"),
                    );
                }
                let (h, t, d) = (&shape.0[rank - 3], &shape.0[rank - 2], &shape.0[rank - 1]);
                let mut dims = shape.0[..rank - 3].to_vec();
                dims.extend([t.clone(), Dim::product(&[h.clone(), d.clone()])]);
                let out = Shape(dims);
                let target = self.runtime_dims_tokens(&out, &[(var.clone(), shape.clone())]);
                let (a, b) = ((rank - 3) as isize, (rank - 2) as isize);
                Ok(self.emit(
                    span,
                    out,
                    quote!(#var.as_dyn().transpose(#a, #b)?.reshape(&#target)),
                ))
            }
            "max_pool2d" | "avg_pool2d" | "max_pool2d_exact" | "avg_pool2d_exact" => {
                if args.is_empty() || args.len() > 2 {
                    return err(
                        span,
                        format!("`{op}` takes a kernel size and optionally a stride: `x.{op}(2)`"),
                    );
                }
                let kernel = self.int_arg(args, 0, &op, "a kernel size", span)?;
                let stride = if args.len() == 2 {
                    self.int_arg(args, 1, &op, "a stride", span)?
                } else {
                    kernel
                };
                let exact = op.ends_with("_exact");
                let (h, w) = self.spatial(&shape, &op, span)?;
                let oh =
                    window_output(h, kernel, stride, 0, 1, exact, &op, &shape, args[0].span())?;
                let ow =
                    window_output(w, kernel, stride, 0, 1, exact, &op, &shape, args[0].span())?;
                let out = Shape(vec![
                    shape.0[0].clone(),
                    shape.0[1].clone(),
                    Dim::Lit(oh),
                    Dim::Lit(ow),
                ]);
                let base = format_ident!("{}", op.trim_end_matches("_exact"));
                Ok(self.emit(
                    span,
                    out,
                    quote!(::rumus::__private::#base(#var.as_dyn(), #kernel, #stride)),
                ))
            }
            "adaptive_avg_pool2d" => {
                self.expect_args(args, 1, &op, "x.adaptive_avg_pool2d([oh, ow])", span)?;
                let Expr::List(items, list_span) = &args[0] else {
                    return err(
                        args[0].span(),
                        "`adaptive_avg_pool2d` takes the output size as a list: `[1, 1]`",
                    );
                };
                let sizes: Vec<usize> = items
                    .iter()
                    .filter_map(|i| i.as_int())
                    .filter(|&v| v > 0)
                    .map(|v| v as usize)
                    .collect();
                if sizes.len() != 2 || items.len() != 2 {
                    return err(
                        *list_span,
                        "`adaptive_avg_pool2d`: the output size is two positive integer literals",
                    );
                }
                self.spatial(&shape, &op, span)?;
                let out = Shape(vec![
                    shape.0[0].clone(),
                    shape.0[1].clone(),
                    Dim::Lit(sizes[0]),
                    Dim::Lit(sizes[1]),
                ]);
                let (oh, ow) = (sizes[0], sizes[1]);
                Ok(self.emit(
                    span,
                    out,
                    quote!(::rumus::__private::adaptive_avg_pool2d(#var.as_dyn(), #oh, #ow)),
                ))
            }
            other => err(
                span,
                format!(
                    "unknown tensor method `{other}`; see the tensor_fn! documentation for the supported ops"
                ),
            ),
        }
    }

    fn narrowed(
        &mut self,
        var: Ident,
        shape: Shape,
        axis: usize,
        start: usize,
        len: usize,
        arg_span: Span,
        span: Span,
    ) -> Result<Value> {
        if let Some(size) = shape.0[axis].lit() {
            if start + len > size {
                return err(
                    arg_span,
                    format!(
                        "range {start}..{} exceeds axis {axis} of {shape} (size {size})",
                        start + len
                    ),
                );
            }
        }
        let mut dims = shape.0.clone();
        dims[axis] = Dim::Lit(len);
        let a = axis as isize;
        Ok(self.emit(
            span,
            Shape(dims),
            quote!(#var.as_dyn().narrow(#a, #start, #len)),
        ))
    }

    /// `[.., H, W]` of an image batch `[B, C, H, W]`, which must be static.
    fn spatial(&self, shape: &Shape, op: &str, span: Span) -> Result<(usize, usize)> {
        if shape.rank() != 4 {
            return err(
                span,
                format!(
                    "`{op}` takes an image batch [B, C, H, W], got {shape} (rank {})",
                    shape.rank()
                ),
            );
        }
        match (shape.0[2].lit(), shape.0[3].lit()) {
            (Some(h), Some(w)) => Ok((h, w)),
            _ => err(
                span,
                format!(
                    "`{op}` needs static spatial dims to compute its output size, but {shape} has runtime dims there; declare them as literals (e.g. [B, 1, 28, 28])"
                ),
            ),
        }
    }

    /// Resolves a shape list written in the body (`[B, T, 8, 64]`, `_` allowed once).
    fn reshape_target(&self, arg: &Expr, from: &Shape) -> Result<Shape> {
        let Expr::List(items, list_span) = arg else {
            return err(
                arg.span(),
                "`reshape` takes a shape list: `x.reshape([B, 8, 64])`",
            );
        };
        let mut dims = Vec::new();
        let mut infer = None;
        for item in items {
            match item {
                Expr::Infer(span) => {
                    if infer.is_some() {
                        return err(*span, "`reshape`: at most one `_` can be inferred");
                    }
                    infer = Some(dims.len());
                    dims.push(Dim::Lit(0));
                }
                Expr::Var(name) => dims.push(self.dim_name(name)?),
                other => match other.as_int() {
                    Some(v) if v >= 0 => dims.push(Dim::Lit(v as usize)),
                    _ => {
                        return err(
                            other.span(),
                            "`reshape`: dims are literals, dim names or `_`",
                        );
                    }
                },
            }
        }
        let (from_lit, mut from_syms) = from.numel();
        from_syms.sort();
        if let Some(slot) = infer {
            let mut known: Vec<Dim> = dims.clone();
            known.remove(slot);
            let (lit, syms) = Shape(known).numel();
            let mut rest = from_syms.clone();
            for s in &syms {
                match rest.iter().position(|r| r == s) {
                    Some(i) => drop(rest.remove(i)),
                    None => {
                        return err(
                            *list_span,
                            format!(
                                "`reshape`: cannot infer `_`: {s} appears in the target but not in {from}"
                            ),
                        );
                    }
                }
            }
            if lit == 0 || from_lit % lit != 0 {
                return err(
                    *list_span,
                    format!(
                        "`reshape`: cannot infer `_`: {from} has {} elements, not a multiple of {lit}",
                        Dim::product(&from.0)
                    ),
                );
            }
            let mut inferred = vec![Dim::Lit(from_lit / lit)];
            inferred.extend(rest.iter().map(|s| crate::shape::dim_from_ident(s)));
            dims[slot] = Dim::product(&inferred);
            return Ok(Shape(dims));
        }
        let target = Shape(dims);
        let (to_lit, mut to_syms) = target.numel();
        to_syms.sort();
        if (to_lit, &to_syms) != (from_lit, &from_syms) {
            return err(
                *list_span,
                format!(
                    "`reshape`: {from} has {} elements but {target} has {}; the element count must not change",
                    Dim::product(&from.0),
                    Dim::product(&target.0)
                ),
            );
        }
        Ok(target)
    }

    /// A dim name used in the body; it must be bound by a parameter or be a const.
    pub fn dim_name(&self, name: &Ident) -> Result<Dim> {
        let dim = crate::shape::dim_from_ident(&name.to_string());
        match &dim {
            Dim::Var(n) if !self.dims.contains(n) => err(
                name.span(),
                format!(
                    "unknown dim name `{n}`; dim names are bound by the parameters' shapes (e.g. `x: [{n}, 784]`) or declared in `<...>`"
                ),
            ),
            _ => Ok(dim),
        }
    }

    /// `[usize; N]` of a shape's runtime sizes: literals as numbers, runtime dims read from the
    /// tensors that have them.
    fn runtime_dims_tokens(&self, target: &Shape, sources: &[(Ident, Shape)]) -> TokenStream {
        let items = target.0.iter().map(|d| match d {
            Dim::Lit(n) => quote!(#n),
            Dim::Const(c) => {
                let c = format_ident!("{}", c);
                quote!(#c)
            }
            other => {
                // Find the dim in a source tensor; derived dims are products of found ones.
                let found = sources.iter().find_map(|(var, shape)| {
                    shape
                        .0
                        .iter()
                        .position(|x| x == other)
                        .map(|i| (var.clone(), i))
                });
                match found {
                    Some((var, i)) => quote!(#var.dims()[#i]),
                    None => {
                        let Dim::Derived { factor, symbols } = other else {
                            return quote!(0usize);
                        };
                        let parts = symbols.iter().map(|s| {
                            let sym = crate::shape::dim_from_ident(s);
                            let (var, i) = sources
                                .iter()
                                .find_map(|(var, shape)| {
                                    shape
                                        .0
                                        .iter()
                                        .position(|x| *x == sym)
                                        .map(|i| (var.clone(), i))
                                })
                                .expect("symbols of a derived dim come from the sources");
                            quote!(#var.dims()[#i])
                        });
                        quote!((#factor #(* #parts)*))
                    }
                }
            }
        });
        quote!([#(#items),*])
    }

    fn call(&mut self, name: &Ident, args: &[Expr]) -> Result<Value> {
        let op = name.to_string();
        if SHAPE_PRESERVING.contains(&op.as_str())
            || matches!(op.as_str(), "softmax" | "log_softmax")
        {
            let Some((first, rest)) = args.split_first() else {
                return err(name.span(), format!("`{op}` needs a tensor argument"));
            };
            let value = self.lower(first)?;
            return self.method(value, name, rest);
        }
        match op.as_str() {
            "cat" | "stack" => {
                self.expect_args(args, 2, &op, &format!("{op}([a, b], axis)"), name.span())?;
                let Expr::List(items, list_span) = &args[0] else {
                    return err(
                        args[0].span(),
                        format!("`{op}` takes a list of tensors: `{op}([a, b], 1)`"),
                    );
                };
                let mut parts = Vec::new();
                for item in items {
                    let v = self.lower(item)?;
                    parts.push((
                        self.tensor(&v, item.span(), &format!("`{op}`"))?,
                        item.span(),
                    ));
                }
                let Some(((_, first), _)) = parts.first().cloned() else {
                    return err(*list_span, format!("`{op}` needs at least one tensor"));
                };
                let rank = if op == "cat" {
                    first.rank()
                } else {
                    first.rank() + 1
                };
                let axis = self.axis(&args[1], rank, &op, &first)?;
                let mut total = Vec::new();
                for (i, ((_, shape), span)) in parts.iter().enumerate() {
                    if shape.rank() != first.rank() {
                        return err(
                            *span,
                            format!(
                                "`{op}`: tensor {i} is {shape} but tensor 0 is {first}; ranks differ"
                            ),
                        );
                    }
                    for (a, (x, y)) in shape.0.iter().zip(&first.0).enumerate() {
                        if op == "cat" && a == axis {
                            continue;
                        }
                        match x.same(y) {
                            Same::Yes => {}
                            Same::Unknown => self.defer_same(*span, x, y),
                            Same::No => {
                                let hint = if op == "cat" {
                                    format!("every axis except {axis} must match")
                                } else {
                                    "stacked tensors must have equal shapes".into()
                                };
                                return err(
                                    *span,
                                    format!(
                                        "`{op}`: tensor {i} is {shape} but tensor 0 is {first}; axis {a} is {x} vs {y} ({hint})"
                                    ),
                                );
                            }
                        }
                    }
                    if op == "cat" {
                        total.push(shape.0[axis].clone());
                    }
                }
                let mut dims = first.0.clone();
                if op == "cat" {
                    dims[axis] = sum_dims(&total).ok_or_else(|| syn::Error::new(*list_span, format!("`cat` along axis {axis} needs static sizes there to know the result; got {}", total.iter().map(ToString::to_string).collect::<Vec<_>>().join(" + "))))?;
                } else {
                    dims.insert(axis, Dim::Lit(parts.len()));
                }
                let vars: Vec<Ident> = parts.iter().map(|((v, _), _)| v.clone()).collect();
                let axis = axis as isize;
                let method = format_ident!("{}", op);
                Ok(self.emit(
                    name.span(),
                    Shape(dims),
                    quote!(::rumus::DynTensor::#method(&[#(#vars.as_dyn()),*], #axis)),
                ))
            }
            _ => err(
                name.span(),
                format!(
                    "`{op}(...)` is not an op the shape checker knows; to call another function, bind its result with a shape: `let y: [B, 10] = {op}(x);`"
                ),
            ),
        }
    }

    /// A call the macro has no shape rule for (a user module, another function), made with a
    /// declared result shape: the emitted `let` carries the type, so the type system checks
    /// the declaration.
    pub fn annotated_call(&mut self, expr: &Expr, shape: Shape) -> Result<Value> {
        let span = expr.span();
        let args = match expr {
            Expr::Layer { args, .. } | Expr::Call { args, .. } => args,
            _ => return err(span, "internal: annotated_call on a known op"),
        };
        let mut vars = Vec::new();
        for a in args {
            let v = self.lower(a)?;
            vars.push(self.tensor(&v, a.span(), "a call")?.0);
        }
        let call = match expr {
            Expr::Layer { field, .. } => {
                let [x] = vars.as_slice() else {
                    return err(span, format!("layer `{field}` takes one tensor"));
                };
                quote_spanned!(span=> ::rumus::nn::Forward::forward_typed(&self.#field, &#x)?)
            }
            Expr::Call { name, .. } => quote_spanned!(span=> #name(#(&#vars),*)?),
            _ => unreachable!("matched above"),
        };
        let var = self.fresh();
        let ty = shape.to_type();
        self.statements
            .push(quote_spanned! {span=> let #var: ::rumus::Tensor<#ty> = #call; });
        Ok(Value::Tensor { var, shape })
    }

    /// Whether `expr` is a call the macro has no shape rule for.
    pub fn is_opaque_call(&self, expr: &Expr) -> bool {
        match expr {
            Expr::Layer { field, .. } => self
                .layers
                .iter()
                .any(|l| l.name == *field && matches!(l.kind, LayerKind::Other)),
            Expr::Call { name, .. } => {
                let n = name.to_string();
                !(SHAPE_PRESERVING.contains(&n.as_str())
                    || matches!(n.as_str(), "softmax" | "log_softmax" | "cat" | "stack"))
            }
            _ => false,
        }
    }

    fn layer(&mut self, field: &Ident, args: &[Expr]) -> Result<Value> {
        let span = field.span();
        let Some(layer) = self.layers.iter().find(|l| l.name == *field).cloned() else {
            return err(span, format!("`self.{field}` is not a field of this model"));
        };
        let [arg] = args else {
            return err(
                span,
                format!("layer `{field}` takes one tensor: `self.{field}(x)`"),
            );
        };
        let value = self.lower(arg)?;
        let (var, shape) = self.tensor(&value, arg.span(), &format!("layer `{field}`"))?;
        match &layer.kind {
            LayerKind::Linear { input, output } => {
                let Some(last) = shape.0.last() else {
                    return err(
                        arg.span(),
                        format!(
                            "`{field}` is a Linear layer; it needs a tensor with a feature axis, got {shape}"
                        ),
                    );
                };
                match last.same(input) {
                    Same::Yes => {}
                    Same::Unknown => self.defer_same(arg.span(), last, input),
                    Same::No => {
                        let mut dims = shape.0.clone();
                        let expected = {
                            let n = dims.len();
                            dims[n - 1] = input.clone();
                            Shape(dims)
                        };
                        let out = layer_output_name(&layer);
                        return err(
                            span,
                            format!(
                                "`{field}` takes {expected} but receives {shape}\n  help: declare `{field}: Linear<{last}, {out}>`, or change the layer that feeds it"
                            ),
                        );
                    }
                }
                let mut dims = shape.0.clone();
                *dims.last_mut().expect("checked non-empty") = output.clone();
                Ok(self.emit(
                    span,
                    Shape(dims),
                    quote!(self.#field.forward_dyn(#var.as_dyn())),
                ))
            }
            LayerKind::Conv2d {
                input,
                output,
                kernel,
                options,
            } => {
                if shape.rank() != 4 {
                    return err(
                        arg.span(),
                        format!(
                            "`{field}` is a Conv2d layer; it takes [B, {input}, H, W] but receives {shape} (rank {})",
                            shape.rank()
                        ),
                    );
                }
                match shape.0[1].same(input) {
                    Same::Yes => {}
                    Same::Unknown => self.defer_same(arg.span(), &shape.0[1], input),
                    Same::No => {
                        return err(
                            span,
                            format!(
                                "`{field}` takes [B, {input}, H, W] but receives {shape} with {} channels\n  help: declare `{field}: Conv2d<{}, {output}, {kernel}>`",
                                shape.0[1], shape.0[1]
                            ),
                        );
                    }
                }
                let (h, w) = self.spatial(&shape, &format!("conv layer `{field}`"), span)?;
                let what = format!("conv layer `{field}`");
                let oh = window_output(
                    h,
                    *kernel,
                    options.stride,
                    options.padding,
                    options.dilation,
                    options.exact,
                    &what,
                    &shape,
                    span,
                )?;
                let ow = window_output(
                    w,
                    *kernel,
                    options.stride,
                    options.padding,
                    options.dilation,
                    options.exact,
                    &what,
                    &shape,
                    span,
                )?;
                let out = Shape(vec![
                    shape.0[0].clone(),
                    output.clone(),
                    Dim::Lit(oh),
                    Dim::Lit(ow),
                ]);
                Ok(self.emit(span, out, quote!(self.#field.forward_dyn(#var.as_dyn()))))
            }
            LayerKind::Parameter => err(
                span,
                format!(
                    "`{field}` is a parameter tensor, not a layer; use it as a value (`{field}` is not callable)"
                ),
            ),
            LayerKind::Other => err(
                span,
                format!(
                    "the shape checker does not know what `{field}` returns; bind the result with its shape, e.g. `let h: [B, 64] = self.{field}(x);` (the type system then checks it)"
                ),
            ),
        }
    }
}

fn layer_output_name(layer: &Layer) -> String {
    match &layer.kind {
        LayerKind::Linear { output, .. } => output.to_string(),
        _ => "_".into(),
    }
}

fn number(arg: &Expr, op: &str) -> Result<f64> {
    match arg {
        Expr::Number(v, _) => Ok(*v),
        Expr::Neg(inner, _) => number(inner, op).map(|v| -v),
        other => err(other.span(), format!("`{op}`: expected a number literal")),
    }
}

fn sum_dims(dims: &[Dim]) -> Option<Dim> {
    dims.iter()
        .map(Dim::lit)
        .sum::<Option<usize>>()
        .map(Dim::Lit)
}

/// Output size of a sliding window (conv or pool) along one axis.
#[allow(clippy::too_many_arguments)]
fn window_output(
    size: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
    exact: bool,
    op: &str,
    shape: &Shape,
    span: Span,
) -> Result<usize> {
    if kernel == 0 || stride == 0 {
        return err(
            span,
            format!("{op}: kernel size and stride must be at least 1"),
        );
    }
    let reach = dilation * (kernel - 1) + 1;
    let padded = size + 2 * padding;
    if reach > padded {
        return err(
            span,
            format!(
                "{op}: the kernel ({reach} wide) is larger than the input {shape} ({size} + 2*{padding} padding = {padded}); use a smaller kernel or more padding"
            ),
        );
    }
    let span_len = padded - reach;
    if exact && span_len % stride != 0 {
        return err(
            span,
            format!(
                "{op}: the output size is not integral for {shape}: ({padded} - {reach}) / {stride} = {:.2}; the last {} row(s) would be dropped (adjust padding or stride)",
                span_len as f64 / stride as f64,
                span_len % stride
            ),
        );
    }
    Ok(span_len / stride + 1)
}
