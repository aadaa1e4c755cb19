//! `+ - * /` with NumPy broadcasting and `@` with batch broadcasting, on symbolic shapes.

use proc_macro2::Span;
use quote::{format_ident, quote};

use super::{Lowering, Result, Value, err};
use crate::dsl::ast::{BinOp, Expr};
use crate::shape::{Dim, Same, Shape};

impl Lowering<'_> {
    pub(super) fn binary(
        &mut self,
        op: BinOp,
        l: Value,
        r: Value,
        (lhs, rhs): (&Expr, &Expr),
        span: Span,
    ) -> Result<Value> {
        let (lspan, rspan) = (lhs.span(), rhs.span());
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
                    BinOp::Matmul => {
                        return err(
                            rspan,
                            format!("`@` needs two tensors, got {shape} @ a number"),
                        );
                    }
                };
                Ok(self.emit(span, shape, call))
            }
            (Value::Number(c), Value::Tensor { var, shape }) => {
                let call = match op {
                    BinOp::Add => quote!(#var.as_dyn().add_scalar(#c)),
                    BinOp::Sub => quote!(#var.as_dyn().rsub_scalar(#c)),
                    BinOp::Mul => quote!(#var.as_dyn().mul_scalar(#c)),
                    BinOp::Div => quote!(#var.as_dyn().powf(-1.0)?.mul_scalar(#c)),
                    BinOp::Matmul => {
                        return err(
                            lspan,
                            format!("`@` needs two tensors, got a number @ {shape}"),
                        );
                    }
                };
                Ok(self.emit(span, shape, call))
            }
            (Value::Tensor { var: a, shape: sa }, Value::Tensor { var: b, shape: sb }) => {
                if op == BinOp::Matmul {
                    let names = (operand_name(lhs), operand_name(rhs));
                    let shape = self.matmul_shape(&sa, &sb, rspan, names)?;
                    return Ok(self.emit(span, shape, quote!(#a.as_dyn().matmul(#b.as_dyn()))));
                }
                let hint = keepdim_hint((lhs, &sa), (rhs, &sb))
                    .or_else(|| self.width_hint((lhs, &sa), (rhs, &sb)));
                let shape = self.broadcast(&sa, &sb, sym, rspan, hint)?;
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
    pub(super) fn broadcast(
        &mut self,
        a: &Shape,
        b: &Shape,
        op: &str,
        span: Span,
        hint: Option<String>,
    ) -> Result<Shape> {
        let rank = a.rank().max(b.rank());
        let mut out = Vec::with_capacity(rank);
        for i in 0..rank {
            let da = (i + a.rank()).checked_sub(rank).map(|k| &a.0[k]);
            let db = (i + b.rank()).checked_sub(rank).map(|k| &b.0[k]);
            let dim = match (da, db) {
                (Some(x), None) | (None, Some(x)) => x.clone(),
                (Some(x), Some(y)) => match x.same(y) {
                    Same::Yes => x.clone(),
                    // The op checks the computed size when it runs; keep the better-known dim.
                    Same::Runtime if matches!(x, Dim::Computed(_)) => y.clone(),
                    Same::Runtime => x.clone(),
                    _ if y == &Dim::Lit(1) => x.clone(),
                    _ if x == &Dim::Lit(1) => y.clone(),
                    Same::Unknown => {
                        let axis = i as isize - rank as isize;
                        self.defer_same(span, x, y, format!("`{op}`: cannot broadcast {a} with {b} unless {x} == {y} (axis {axis})"));
                        x.clone()
                    }
                    Same::No => {
                        let axis = i as isize - rank as isize;
                        let hint = match (x, y) {
                            _ if hint.is_some() => hint.clone().unwrap_or_default(),
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

    pub(super) fn matmul_shape(
        &mut self,
        a: &Shape,
        b: &Shape,
        span: Span,
        (lhs, rhs): (String, String),
    ) -> Result<Shape> {
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
            Same::Yes | Same::Runtime => {}
            Same::Unknown => self.defer_same(
                span,
                k1,
                k2,
                format!(
                    "`@`: inner dims differ: lhs {a} has {k1} columns but rhs {b} has {k2} rows"
                ),
            ),
            Same::No => {
                let transposed = |name: &str, s: &Shape| {
                    let mut dims = s.0.clone();
                    let n = dims.len();
                    dims.swap(n - 1, n - 2);
                    let call = if n == 2 {
                        format!("{name}.t()")
                    } else {
                        format!("{name}.transpose({}, {})", n - 2, n - 1)
                    };
                    format!("`{call}` gives {}", Shape(dims))
                };
                let help = if b.rank() >= 2 && b2.0[b2.rank() - 1].same(k1) == Same::Yes {
                    format!(
                        "\n  help: transpose the right operand: {}",
                        transposed(&rhs, b)
                    )
                } else if a.rank() >= 2 && a2.0[a2.rank() - 2].same(k2) == Same::Yes {
                    format!(
                        "\n  help: transpose the left operand: {}",
                        transposed(&lhs, a)
                    )
                } else {
                    String::new()
                };
                return err(
                    span,
                    format!(
                        "`@`: inner dims differ: lhs {a} has {k1} columns but rhs {b} has {k2} rows; the last dim of the left operand must equal the second-to-last of the right{help}"
                    ),
                );
            }
        }
        let batch = self.broadcast(
            &Shape(a2.0[..a2.rank() - 2].to_vec()),
            &Shape(b2.0[..b2.rank() - 2].to_vec()),
            "@ (batch dims)",
            span,
            None,
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
}

/// How to name an operand in a hint: the variable when it is one.
fn operand_name(expr: &Expr) -> String {
    match expr {
        Expr::Var(name) => name.to_string(),
        Expr::Field(name) => format!("self.{name}"),
        _ => "(..)".to_string(),
    }
}

/// When one operand is the other with an axis reduced away (`x - x.max(1)`), the way to keep
/// that axis so the two broadcast.
fn keepdim_hint(lhs: (&Expr, &Shape), rhs: (&Expr, &Shape)) -> Option<String> {
    [(rhs, lhs), (lhs, rhs)]
        .into_iter()
        .find_map(|((expr, reduced), (_, full))| {
            if reduced.rank() + 1 != full.rank() {
                return None;
            }
            let axis = (0..full.rank()).find(|&i| {
                let mut rest = full.0.clone();
                rest.remove(i);
                rest.iter().zip(&reduced.0).all(|(a, b)| a.same(b) == Same::Yes)
            })?;
            let mut kept = reduced.0.clone();
            kept.insert(axis, Dim::Lit(1));
            let kept = Shape(kept);
            Some(match expr {
                Expr::Method { name, receiver, .. }
                    if matches!(name.to_string().as_str(), "sum" | "mean" | "max" | "min") =>
                {
                    format!(
                        "keep the reduced axis: `{}.{name}_keepdim({axis})` gives {kept}, which broadcasts with {full}",
                        operand_name(receiver)
                    )
                }
                _ => format!(
                    "insert the missing axis: `{}.unsqueeze({axis})` gives {kept}, which broadcasts with {full}",
                    operand_name(expr)
                ),
            })
        })
}
