//! Graph layers in the DSL: `self.conv(x, graph)`, node features `[N, IN]` and a graph passed
//! as a parameter that is not a tensor (`graph: &Graph`), giving `[N, OUT]`.

use proc_macro2::Span;
use quote::quote;

use super::{Lowering, Result, Value, err};
use crate::dsl::ast::Expr;
use crate::model::layers::Layer;
use crate::shape::{Dim, Same, Shape};

impl Lowering<'_> {
    pub(super) fn graph_layer(
        &mut self,
        layer: &Layer,
        (input, output): (&Dim, &Dim),
        args: &[Expr],
        span: Span,
    ) -> Result<Value> {
        let (field, ty) = (&layer.name, &layer.type_name);
        let [x, Expr::Var(graph)] = args else {
            return err(
                span,
                format!(
                    "`{field}` is a {ty}; it takes node features and the graph: `self.{field}(x, graph)`, with `graph: &Graph` a parameter of the function"
                ),
            );
        };
        if !self.context.contains(&graph.to_string()) {
            return err(
                graph.span(),
                format!(
                    "`{graph}` is not a graph parameter of this function; declare it as one, e.g. `{graph}: &Graph`"
                ),
            );
        }
        let value = self.lower(x)?;
        let (var, shape) = self.tensor(&value, x.span(), &format!("layer `{field}`"))?;
        if shape.rank() != 2 {
            return err(
                x.span(),
                format!("`{field}` takes node features [N, {input}], but receives {shape}"),
            );
        }
        let received = &shape.0[1];
        let message = || {
            let fix = if ty == "GatConv" {
                format!("give `{field}` {received} input features")
            } else {
                format!("declare `{field}: {ty}<{received}, {output}>`")
            };
            format!(
                "`{field}` takes node features [N, {input}], but receives {shape}; {fix}, or project the features to {input} first"
            )
        };
        match received.same(input) {
            Same::Yes | Same::Runtime => {}
            Same::Unknown => self.defer_same(x.span(), received, input, message()),
            Same::No => return err(x.span(), message()),
        }
        let call = layer.call(
            &[quote!(#var.as_dyn()), quote!(#graph)],
            |layer, x| quote!(#layer.forward_dyn(#(#x),*)),
        );
        let out = Shape(vec![shape.0[0].clone(), output.clone()]);
        Ok(self.emit(span, out, call))
    }
}
