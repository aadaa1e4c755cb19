//! `x.linear(w)` and `x.linear(w, b)`: PyTorch's `F.linear`, `[.., K]` with a weight `[N, K]`
//! (and a bias `[N]`) gives `[.., N]`.

use proc_macro2::Span;
use quote::quote;
use syn::Ident;

use super::{Lowering, Result, Value, err};
use crate::dsl::ast::Expr;
use crate::shape::{Dim, Same, Shape};

impl Lowering<'_> {
    pub(super) fn linear(
        &mut self,
        (var, shape): (Ident, Shape),
        args: &[Expr],
        span: Span,
    ) -> Result<Value> {
        if args.is_empty() || args.len() > 2 {
            return err(
                span,
                "`linear` takes a weight and optionally a bias: `x.linear(w)` or `x.linear(w, b)`",
            );
        }
        let mut operands = Vec::new();
        for (arg, what) in args.iter().zip(["the weight", "the bias"]) {
            let value = self.lower(arg)?;
            operands.push((self.tensor(&value, arg.span(), what)?, arg.span()));
        }
        let ((weight, w_shape), w_span) = operands[0].clone();
        if shape.rank() == 0 || w_shape.rank() != 2 {
            return err(
                w_span,
                format!(
                    "`linear` takes an input [.., K] and a weight [N, K], got {shape} and {w_shape}"
                ),
            );
        }
        let (k, n) = (&shape.0[shape.rank() - 1], &w_shape.0[0]);
        self.same_size(k, &w_shape.0[1], w_span, || {
            format!("`linear`: the input {shape} has {k} features but the weight {w_shape} takes {}; the weight is [out, in]", w_shape.0[1])
        })?;
        let bias = match operands.get(1) {
            Some(((bias, b_shape), b_span)) => {
                if b_shape.rank() != 1 {
                    return err(
                        *b_span,
                        format!("`linear`: the bias is [{n}], got {b_shape}"),
                    );
                }
                self.same_size(n, &b_shape.0[0], *b_span, || {
                    format!(
                        "`linear`: the weight {w_shape} gives {n} outputs but the bias is {b_shape}"
                    )
                })?;
                quote!(::core::option::Option::Some(#bias.as_dyn()))
            }
            None => quote!(::core::option::Option::None),
        };
        let mut dims = shape.0.clone();
        *dims.last_mut().expect("rank checked above") = n.clone();
        Ok(self.emit(
            span,
            Shape(dims),
            quote!(#var.as_dyn().linear(#weight.as_dyn(), #bias)),
        ))
    }

    /// Checks two sizes that must be equal: an error when they differ, a deferred check for
    /// a const, nothing for runtime dims (the op checks them when it runs).
    fn same_size(
        &mut self,
        a: &Dim,
        b: &Dim,
        span: Span,
        message: impl Fn() -> String,
    ) -> Result<()> {
        match a.same(b) {
            Same::Yes | Same::Runtime => Ok(()),
            Same::Unknown => {
                self.defer_same(span, a, b, message());
                Ok(())
            }
            Same::No => err(span, message()),
        }
    }
}
