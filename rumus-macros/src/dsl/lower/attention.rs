//! Attention layers in the DSL: `self.attn(x)` (self-attention), `self.attn(q, k, v)`, and a
//! trailing `causal` flag (`self.block(x, causal)`) that masks keys after each query.

use quote::quote;

use super::{Lowering, Result, Value, err};
use crate::dsl::ast::Expr;
use crate::model::layers::Layer;
use crate::shape::{Dim, Same, Shape};

impl Lowering<'_> {
    pub(super) fn attention(
        &mut self,
        layer: &Layer,
        embed: &Dim,
        block: bool,
        args: &[Expr],
        span: proc_macro2::Span,
    ) -> Result<Value> {
        let (field, ty) = (&layer.name, &layer.type_name);
        let (causal, tensors) = match args.split_last() {
            Some((Expr::Var(flag), rest)) if flag == "causal" => (true, rest),
            _ => (false, args),
        };
        let usage = if block {
            format!("`self.{field}(x)` or `self.{field}(x, causal)`")
        } else {
            format!(
                "`self.{field}(x)`, `self.{field}(query, key, value)`, with `causal` as a last argument to mask later keys"
            )
        };
        let mut inputs = Vec::new();
        for arg in tensors {
            let value = self.lower(arg)?;
            let (var, shape) = self.tensor(&value, arg.span(), &format!("layer `{field}`"))?;
            self.sequence(layer, embed, &shape, arg.span())?;
            inputs.push((var, shape, arg.span()));
        }
        match (inputs.as_slice(), block) {
            ([(x, shape, _)], true) => {
                let call = layer.call(
                    &[quote!(#x.as_dyn())],
                    |layer, x| quote!(#layer.forward_dyn(#(#x),*, None, #causal)),
                );
                Ok(self.emit(span, shape.clone(), call))
            }
            ([(x, shape, _)], false) => {
                let call = layer.call(&[quote!(#x.as_dyn())], |layer, x| {
                    let x = &x[0];
                    quote!(#layer.forward_dyn(#x, #x, #x, None, #causal))
                });
                Ok(self.emit(span, shape.clone(), call))
            }
            ([(q, query, _), (k, key, key_span), (v, value, value_span)], false) => {
                self.same_dim(&query.0[0], &key.0[0], *key_span, || {
                    format!("`{field}`: the key {key} has another batch than the query {query}")
                })?;
                for (a, axis) in [(0, "batch"), (1, "length")] {
                    self.same_dim(&key.0[a], &value.0[a], *value_span, || {
                        format!(
                            "`{field}`: the value {value} and the key {key} differ in {axis}; every key needs its value"
                        )
                    })?;
                }
                let out = Shape(vec![query.0[0].clone(), query.0[1].clone(), embed.clone()]);
                let inputs = [
                    quote!(#q.as_dyn()),
                    quote!(#k.as_dyn()),
                    quote!(#v.as_dyn()),
                ];
                let call = layer.call(
                    &inputs,
                    |layer, qkv| quote!(#layer.forward_dyn(#(#qkv),*, None, #causal)),
                );
                Ok(self.emit(span, out, call))
            }
            _ => err(
                span,
                format!(
                    "`{field}` is a {ty}; it takes {usage}, but {} tensor(s) were given",
                    inputs.len()
                ),
            ),
        }
    }

    /// Two dims that must be one size: an error now, a deferred check for consts, a check at
    /// run time for computed sizes.
    pub(super) fn same_dim(
        &mut self,
        a: &Dim,
        b: &Dim,
        span: proc_macro2::Span,
        message: impl Fn() -> String,
    ) -> Result<()> {
        match a.same(b) {
            Same::Yes | Same::Runtime => Ok(()),
            Same::Unknown => {
                self.defer_same(span, a, b, message());
                Ok(())
            }
            Same::No => err(span, format!("{} ({a} vs {b})", message())),
        }
    }
}
