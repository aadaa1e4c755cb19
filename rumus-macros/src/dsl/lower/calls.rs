//! Free functions of the DSL (`cat`, `stack`, `relu(x)`) and calls whose shape the user declares.

use quote::{format_ident, quote, quote_spanned};
use syn::Ident;

use super::{Lowering, Result, Value, err};
use crate::dsl::ast::Expr;
use crate::model::layers::LayerKind;
use crate::shape::{Dim, Same, Shape};

impl Lowering<'_> {
    pub(super) fn call(&mut self, name: &Ident, args: &[Expr]) -> Result<Value> {
        let op = name.to_string();
        if crate::methods::callable(&op) {
            let Some((first, rest)) = args.split_first() else {
                return err(name.span(), format!("`{op}` needs a tensor argument"));
            };
            let value = self.lower(first)?;
            return self.method((first, value), name, rest);
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
                            Same::Yes | Same::Runtime => {}
                            Same::Unknown => self.defer_same(*span, x, y, format!("`{op}`: tensor {i} is {shape} but tensor 0 is {first}; axis {a} needs {x} == {y}")),
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
                    dims[axis] = sum_dims(&total).ok_or_else(|| syn::Error::new(*list_span, format!("`cat` along axis {axis} needs static sizes there to know the result, but {} have {}", parts.iter().map(|((_, s), _)| s.to_string()).collect::<Vec<_>>().join(" and "), total.iter().map(ToString::to_string).collect::<Vec<_>>().join(" + "))))?;
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
        let mut shapes = Vec::new();
        for a in args {
            let v = self.lower(a)?;
            let (var, shape) = self.tensor(&v, a.span(), "a call")?;
            vars.push(var);
            shapes.push(shape);
        }
        let call = match expr {
            Expr::Layer { field, .. } => {
                let ([x], [input]) = (vars.as_slice(), shapes.as_slice()) else {
                    return err(span, format!("layer `{field}` takes one tensor"));
                };
                // `self` keeps the signature's hygiene; the call keeps the user's span. The
                // input shape is explicit so a module that cannot take it fails on the named
                // `Forward` bound.
                let layer = quote!(self.#field);
                let in_ty = input.to_type();
                let element = self.elements.get(&x.to_string()).cloned();
                let element = element.unwrap_or_else(|| quote!(f32));
                let key = field.to_string();
                quote_spanned!(span=> ::rumus::__private::in_field(#key, || ::rumus::__private::forward::<_, #in_ty, #element>(&#layer, &#x))?)
            }
            Expr::Call { name, .. } => quote_spanned!(span=> #name(#(&#vars),*)?),
            _ => unreachable!("matched above"),
        };
        let var = self.fresh();
        let ty = shape.to_type();
        let inferred = |d: &Dim| matches!(d, Dim::Computed(n) if n == crate::dsl::INFERRED);
        if shape.0.iter().any(inferred) {
            // `_` sizes are whatever the module's `Forward::Out` says (a generic, `Dyn`);
            // past this `let` the value is held with those sizes as runtime (`Dyn`) ones.
            let written = shape
                .0
                .iter()
                .map(|d| if inferred(d) { quote!(_) } else { d.to_type() });
            let raw = self.fresh();
            self.statements.push(quote_spanned! {span=>
                let #raw: ::rumus::Tensor<(#(#written,)*)> = #call;
                let #var: ::rumus::Tensor<#ty> = ::rumus::__private::wrap(::core::clone::Clone::clone(#raw.as_dyn()));
            });
        } else {
            self.statements
                .push(quote_spanned! {span=> let #var: ::rumus::Tensor<#ty> = #call; });
        }
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
                !(crate::methods::callable(&n) || matches!(n.as_str(), "cat" | "stack"))
            }
            _ => false,
        }
    }
}

fn sum_dims(dims: &[Dim]) -> Option<Dim> {
    dims.iter()
        .map(Dim::lit)
        .sum::<Option<usize>>()
        .map(Dim::Lit)
}
