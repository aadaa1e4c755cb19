//! Tensor methods of the DSL (`x.softmax(1)`, `x.reshape([..])`, ...): the shape rule of
//! each [`Rule`] of the method table ([`crate::methods`]).

use quote::{format_ident, quote};
use syn::Ident;

use super::window::Window;
use super::{Lowering, Result, Value, err, number};
use crate::dsl::ast::Expr;
use crate::methods::Rule;
use crate::shape::{Dim, Shape};

impl Lowering<'_> {
    /// `receiver.name(args)`, `value` being the lowered `receiver`.
    pub(super) fn method(
        &mut self,
        (receiver, value): (&Expr, Value),
        name: &Ident,
        args: &[Expr],
    ) -> Result<Value> {
        let op = name.to_string();
        let span = name.span();
        let (var, shape) = self.tensor(&value, span, &format!("`.{op}()`"))?;
        let rank = shape.rank();
        let Some(method) = crate::methods::lookup(&op) else {
            return err(
                span,
                format!(
                    "unknown tensor method `{op}` on {shape}; see the tensor_fn! documentation for the supported ops"
                ),
            );
        };
        match method.rule {
            Rule::Same => {
                self.expect_args(args, 0, &op, &format!("x.{op}()"), span)?;
                Ok(self.emit(span, shape, quote!(#var.as_dyn().#name())))
            }
            Rule::SameInfallible => {
                self.expect_args(args, 0, &op, &format!("x.{op}()"), span)?;
                let call =
                    quote!(::core::result::Result::<_, ::rumus::Error>::Ok(#var.as_dyn().#name()));
                Ok(self.emit(span, shape, call))
            }
            Rule::Scalars(names) => {
                let usage = format!("x.{op}({})", names.join(", "));
                self.expect_args(args, names.len(), &op, &usage, span)?;
                let values = args
                    .iter()
                    .map(|a| number(a, &op))
                    .collect::<Result<Vec<f64>>>()?;
                Ok(self.emit(span, shape, quote!(#var.as_dyn().#name(#(#values),*))))
            }
            Rule::AlongAxis => {
                self.expect_args(args, 1, &op, &format!("x.{op}(axis)"), span)?;
                let axis = self.axis(&args[0], rank, &op, &shape)? as isize;
                Ok(self.emit(span, shape, quote!(#var.as_dyn().#name(#axis))))
            }
            Rule::Reduce { keepdim } => {
                self.expect_args(
                    args,
                    1,
                    &op,
                    &format!("x.{op}(axis) or x.{op}([axes])"),
                    span,
                )?;
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
            Rule::ReduceAll => {
                self.expect_args(args, 0, &op, &format!("x.{op}()"), span)?;
                Ok(self.emit(span, Shape(vec![]), quote!(#var.as_dyn().#name())))
            }
            Rule::ArgReduce => {
                self.expect_args(args, 1, &op, &format!("x.{op}(axis)"), span)?;
                let axis = self.axis(&args[0], rank, &op, &shape)?;
                let mut dims = shape.0.clone();
                dims.remove(axis);
                let axis = axis as isize;
                Ok(self.emit(span, Shape(dims), quote!(#var.as_dyn().#name(#axis, false))))
            }
            Rule::Binary(binop) => {
                self.expect_args(args, 1, &op, &format!("x.{op}(y)"), span)?;
                let rhs = self.lower(&args[0])?;
                let value = Value::Tensor { var, shape };
                self.binary(binop, value, rhs, (receiver, &args[0]), span)
            }
            Rule::Product { rank: wanted } => {
                self.expect_args(args, 1, &op, &format!("x.{op}(y)"), span)?;
                let rhs = self.lower(&args[0])?;
                let (_, rhs_shape) = self.tensor(&rhs, args[0].span(), &format!("`{op}`"))?;
                if let Some(wanted) = wanted {
                    for (s, at) in [(&shape, span), (&rhs_shape, args[0].span())] {
                        if s.rank() != wanted {
                            return err(
                                at,
                                format!(
                                    "`{op}` multiplies tensors of rank {wanted}, but this one is {s} (rank {}); use `@` for other ranks",
                                    s.rank()
                                ),
                            );
                        }
                    }
                }
                let value = Value::Tensor { var, shape };
                self.binary(
                    crate::dsl::ast::BinOp::Matmul,
                    value,
                    rhs,
                    (receiver, &args[0]),
                    span,
                )
            }
            Rule::Linear => self.linear((var, shape), args, span),
            Rule::Reshape => {
                self.expect_args(args, 1, &op, "x.reshape([B, 8, 64])", span)?;
                let target = self.reshape_target(&args[0], &shape)?;
                let runtime_dims =
                    self.runtime_dims_tokens(&target, &[(var.clone(), shape.clone())]);
                Ok(self.emit(span, target, quote!(#var.as_dyn().reshape(&#runtime_dims))))
            }
            Rule::Flatten => {
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
            Rule::Transpose => {
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
            Rule::MatrixTranspose => {
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
            Rule::Permute => {
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
                        return err(
                            item.span(),
                            format!(
                                "`permute` of {shape}: axis {a} appears twice; list each of the {rank} axes once"
                            ),
                        );
                    }
                    perm.push(a);
                }
                let out = Shape(perm.iter().map(|&p| shape.0[p].clone()).collect());
                Ok(self.emit(span, out, quote!(#var.as_dyn().permute(&[#(#perm),*]))))
            }
            Rule::Unsqueeze => {
                self.expect_args(args, 1, &op, "x.unsqueeze(axis)", span)?;
                let a = self.axis(&args[0], rank + 1, &op, &shape)?;
                let mut dims = shape.0.clone();
                dims.insert(a, Dim::Lit(1));
                let a = a as isize;
                Ok(self.emit(span, Shape(dims), quote!(#var.as_dyn().unsqueeze(#a))))
            }
            Rule::Squeeze => {
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
            Rule::Narrow => {
                self.expect_args(args, 3, &op, "x.narrow(axis, start, len)", span)?;
                let a = self.axis(&args[0], rank, &op, &shape)?;
                let start = self.int_arg(args, 1, &op, "a start", span)?;
                let len = self.int_arg(args, 2, &op, "a length", span)?;
                self.narrowed((var, shape), a, start..start + len, (args[2].span(), span))
            }
            Rule::Slice => {
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
                self.narrowed((var, shape), a, s as usize..e as usize, (*range_span, span))
            }
            Rule::SplitHeads => {
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
            Rule::MergeHeads => {
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
            Rule::Pool { exact } => {
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
                let label = format!("`{op}`");
                let (h, w) = self.spatial(&shape, &label, span)?;
                let window = Window::pool(kernel, stride, 0, exact);
                let out = Shape(vec![
                    shape.0[0].clone(),
                    shape.0[1].clone(),
                    window.output(&h, &label, &shape, args[0].span())?,
                    window.output(&w, &label, &shape, args[0].span())?,
                ]);
                let base = format_ident!("{}", op.trim_end_matches("_exact"));
                Ok(self.emit(
                    span,
                    out,
                    quote!(::rumus::__private::#base(#var.as_dyn(), #kernel, #stride)),
                ))
            }
            Rule::AdaptivePool => {
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
                self.spatial(&shape, "`adaptive_avg_pool2d`", span)?;
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
        }
    }
}
