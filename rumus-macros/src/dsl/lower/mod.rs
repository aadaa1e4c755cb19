//! Shape inference and code generation for a DSL body, in one pass: each op's result shape is
//! computed from its operands' shapes (a mismatch becomes a `compile_error!` on the offending
//! token, in plain numbers), and one typed Rust statement is emitted for it.

mod arithmetic;
mod attention;
mod calls;
mod graph;
mod layers;
mod linear;
mod methods;
mod views;
mod width_hint;
mod window;

use std::collections::HashMap;

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::Ident;

use super::ast::Expr;
use crate::model::layers::Layer;
use crate::shape::{Dim, Shape};

/// A value in the body: a tensor bound to a generated variable, or a number.
#[derive(Clone)]
pub enum Value {
    Tensor { var: Ident, shape: Shape },
    Number(f64),
}

pub(super) type Result<T> = syn::Result<T>;

pub(super) fn err<T>(span: Span, message: impl Into<String>) -> Result<T> {
    Err(syn::Error::new(span, message.into()))
}

/// The state of one function being lowered.
pub struct Lowering<'a> {
    pub statements: Vec<TokenStream>,
    pub env: HashMap<String, Value>,
    /// Dim names in scope (bound by parameters or declared generics).
    pub dims: Vec<String>,
    pub layers: &'a [Layer],
    /// Element types of the parameters declared with one (`ids: [B, T; i64]`), by name;
    /// every other value is `f32`.
    pub elements: HashMap<String, TokenStream>,
    /// Names of the parameters that are not tensors (`graph: &Graph`): only layers that take
    /// one (the graph layers) may be handed them.
    pub context: Vec<String>,
    /// The expression each `let` bound, in order (a name bound twice appears twice): hints
    /// trace a value back to the layer that gave it its width.
    pub definitions: Vec<(String, Expr)>,
    counter: usize,
}

impl<'a> Lowering<'a> {
    pub fn new(layers: &'a [Layer]) -> Self {
        Lowering {
            statements: Vec::new(),
            env: HashMap::new(),
            dims: Vec::new(),
            layers,
            elements: HashMap::new(),
            context: Vec::new(),
            definitions: Vec::new(),
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

    /// Leaves an equality the macro cannot decide (a const it cannot see) to the compiler.
    fn defer_same(&mut self, span: Span, a: &Dim, b: &Dim, message: String) {
        self.statements
            .push(crate::shape::deferred_check(span, a, b, &message));
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
                let mut known: Vec<String> = self
                    .env
                    .iter()
                    .filter_map(|(n, v)| match v {
                        Value::Tensor { shape, .. } => Some(format!("`{n}` {shape}")),
                        Value::Number(_) => None,
                    })
                    .collect();
                known.sort();
                syn::Error::new(
                    name.span(),
                    format!(
                        "unknown tensor `{name}`; the tensors in scope are {}",
                        known.join(", ")
                    ),
                )
            }),
            Expr::Number(v, _) => Ok(Value::Number(*v)),
            Expr::Neg(inner, span) => match self.lower(inner)? {
                Value::Number(v) => Ok(Value::Number(-v)),
                Value::Tensor { var, shape } => {
                    Ok(self.emit(*span, shape, quote!(#var.as_dyn().neg())))
                }
            },
            Expr::Binary { op, lhs, rhs, span } => {
                let (l, r) = (self.lower(lhs)?, self.lower(rhs)?);
                self.binary(*op, l, r, (lhs, rhs), *span)
            }
            Expr::Method {
                receiver,
                name,
                args,
            } => {
                let value = self.lower(receiver)?;
                self.method((receiver, value), name, args)
            }
            Expr::Call { name, args } => self.call(name, args),
            Expr::Layer { field, args } => self.layer(field, args),
            Expr::Field(field) => self.parameter(field),
            Expr::Infer(span) | Expr::List(_, span) | Expr::Range(_, _, span) => err(
                *span,
                "a list, range or `_` is only allowed as an argument (shapes, axes, tensors to join)",
            ),
        }
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

    /// The element type of a value, as written (`f32` unless a parameter names another).
    pub(super) fn element_name(&self, var: &Ident) -> String {
        self.elements
            .get(&var.to_string())
            .map_or_else(|| "f32".to_string(), ToString::to_string)
    }

    /// `self.w`: a parameter tensor of the model, with the shape its type spells.
    fn parameter(&mut self, field: &Ident) -> Result<Value> {
        let layer = self.layers.iter().find(|l| l.name == *field);
        let shape = match layer.map(|l| &l.kind) {
            Some(crate::model::layers::LayerKind::Parameter { shape: Some(shape) }) => {
                shape.clone()
            }
            Some(crate::model::layers::LayerKind::Parameter { shape: None }) => {
                return err(
                    field.span(),
                    format!(
                        "the shape checker cannot read the shape of `{field}` from its type; declare it with static dims, e.g. `{field}: Tensor<(D<10>, D<784>)>`"
                    ),
                );
            }
            Some(_) => {
                return err(
                    field.span(),
                    format!("`{field}` is a layer; call it: `self.{field}(x)`"),
                );
            }
            None => return self.layer(field, &[]),
        };
        let var = self.fresh();
        let ty = shape.to_type();
        // `self` keeps the signature's hygiene; the rest keeps the user's span.
        let parameter = quote!(self.#field);
        self.statements.push(quote_spanned! {field.span()=>
            let #var: ::rumus::Tensor<#ty> = ::core::clone::Clone::clone(&#parameter);
        });
        Ok(Value::Tensor { var, shape })
    }

    /// The shape of a tensor variable, for error messages.
    pub(super) fn shape_of(&self, expr: &Expr) -> Option<Shape> {
        match expr {
            Expr::Var(name) => match self.env.get(&name.to_string()) {
                Some(Value::Tensor { shape, .. }) => Some(shape.clone()),
                _ => None,
            },
            _ => None,
        }
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
    pub(crate) fn runtime_dims_tokens(
        &self,
        target: &Shape,
        sources: &[(Ident, Shape)],
    ) -> TokenStream {
        let items = target.0.iter().map(|d| match d {
            Dim::Lit(n) => quote!(#n),
            Dim::Const(c) => crate::shape::const_path(c, proc_macro2::Span::call_site()),
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
                            let sym = crate::shape::dim_from_symbol(s);
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
}

pub(super) fn number(arg: &Expr, op: &str) -> Result<f64> {
    match arg {
        Expr::Number(v, _) => Ok(*v),
        Expr::Neg(inner, _) => number(inner, op).map(|v| -v),
        other => err(other.span(), format!("`{op}`: expected a number literal")),
    }
}
