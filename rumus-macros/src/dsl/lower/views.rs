//! Shape rules shared by the view methods: narrowing and reshape targets.

use proc_macro2::Span;
use quote::quote;
use syn::Ident;

use super::{Lowering, Result, Value, err};
use crate::dsl::ast::Expr;
use crate::shape::{Dim, Shape};

impl Lowering<'_> {
    /// Entries `range` of `axis`; `arg_span` points at the range for errors.
    pub(super) fn narrowed(
        &mut self,
        (var, shape): (Ident, Shape),
        axis: usize,
        range: std::ops::Range<usize>,
        (arg_span, span): (Span, Span),
    ) -> Result<Value> {
        let (start, len) = (range.start, range.end - range.start);
        if let Some(size) = shape.0[axis].lit()
            && start + len > size
        {
            return err(
                arg_span,
                format!(
                    "range {start}..{} exceeds axis {axis} of {shape} (size {size})",
                    start + len
                ),
            );
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

    /// Resolves a shape list written in the body (`[B, T, 8, 64]`, `_` allowed once).
    pub(super) fn reshape_target(&self, arg: &Expr, from: &Shape) -> Result<Shape> {
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
                        return err(
                            *span,
                            format!("`reshape` of {from}: at most one `_` can be inferred"),
                        );
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
            inferred.extend(rest.iter().map(|s| crate::shape::dim_from_symbol(s)));
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
}
