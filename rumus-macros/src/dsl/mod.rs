//! The tensor DSL shared by `tensor_fn!` and `#[model]` forward methods: parse, infer every
//! shape, emit typed Rust.

pub mod arguments;
pub mod ast;
pub mod lower;
pub mod parse;

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};

use ast::{DimAst, Expr, ShapeAst, TensorFn};
use lower::{Lowering, Value};

use crate::model::layers::Layer;
use crate::shape::{Dim, Same, Shape, dim_from_ident, is_generic_dim};

/// How a `_` of a `let` annotation is held: a size computed at run time, which the emitted
/// code leaves to the type system (see [`Lowering::annotated_call`]).
pub const INFERRED: &str = "_";

/// A `_` in a parameter's shape: a parameter names its sizes, so callers' shapes bind them
/// (`_` is for a `let` annotation of a call, or a returned size computed at run time).
fn refuse_inferred(shape: &ShapeAst, what: &str) -> syn::Result<()> {
    match shape.dims.iter().find_map(|d| match d {
        DimAst::Infer(span) => Some(*span),
        _ => None,
    }) {
        Some(span) => Err(syn::Error::new(
            span,
            format!(
                "`_` stands for a size computed at run time, in a `let` annotation (`let h: [B, 64, _, _] = self.block(x);`) or the return shape; {what} needs a name or a number here"
            ),
        )),
        None => Ok(()),
    }
}

/// A shape annotation resolved against the dims in scope.
fn resolve(lowering: &Lowering, shape: &ShapeAst) -> syn::Result<Shape> {
    shape
        .dims
        .iter()
        .map(|d| match d {
            DimAst::Lit(n) => Ok(Dim::Lit(*n)),
            DimAst::Name(name) => lowering.dim_name(name),
            DimAst::Infer(_) => Ok(Dim::Computed(INFERRED.into())),
        })
        .collect::<syn::Result<Vec<_>>>()
        .map(Shape)
}

/// Checks a value against its declared shape (a `let` annotation or the return shape),
/// pointing at the expression that produced it. Sizes computed at run time are checked when
/// the function runs; the value comes back with the declared shape.
fn check_declared(
    lowering: &mut Lowering,
    declared: &Shape,
    (var, found): (syn::Ident, Shape),
    expr: &Expr,
    what: Declared,
) -> syn::Result<Value> {
    if declared.rank() != found.rank() {
        return check_declared_sizes(lowering, declared, (var, found), expr, what);
    }
    // `_` takes the size the expression gives; the value is then held with a runtime size
    // there (`Dyn`, as the signature's `_`).
    let inferred = |d: &Dim| matches!(d, Dim::Computed(name) if name == INFERRED);
    if declared.0.iter().any(inferred) {
        let resolved = Shape(
            declared
                .0
                .iter()
                .zip(&found.0)
                .map(|(d, f)| if inferred(d) { f.clone() } else { d.clone() })
                .collect(),
        );
        let Value::Tensor { var, .. } =
            check_declared_sizes(lowering, &resolved, (var, found), expr, what)?
        else {
            unreachable!("a checked tensor stays a tensor")
        };
        let held = quote::format_ident!("{}_held", var);
        let ty = declared.to_type();
        lowering.statements.push(quote! {
            let #held: ::rumus::Tensor<#ty> = ::rumus::__private::wrap(::core::clone::Clone::clone(#var.as_dyn()));
        });
        return Ok(Value::Tensor {
            var: held,
            shape: declared.clone(),
        });
    }
    check_declared_sizes(lowering, declared, (var, found), expr, what)
}

/// [`check_declared`] for a declared shape without `_`.
fn check_declared_sizes(
    lowering: &mut Lowering,
    declared: &Shape,
    (var, found): (syn::Ident, Shape),
    expr: &Expr,
    what: Declared,
) -> syn::Result<Value> {
    let message = match &what {
        Declared::Let(name) => {
            format!("`{name}` is declared as {declared} but its expression produces {found}")
        }
        Declared::Return => format!(
            "the function is declared to return {declared} but this expression produces {found}"
        ),
    };
    let help = match &what {
        Declared::Let(name) => {
            format!("\n  help: declare `let {name}: {found}`, or fix the expression")
        }
        Declared::Return => format!("\n  help: declare `-> {found}`, or fix the expression"),
    };
    if declared.rank() != found.rank() {
        return Err(expr.error(format!("{message}{help}")));
    }
    let mut at_run_time = false;
    for (d, f) in declared.0.iter().zip(&found.0) {
        match d.same(f) {
            Same::Yes => {}
            Same::Runtime => at_run_time = true,
            Same::Unknown => {
                let check = crate::shape::deferred_check(expr.span(), d, f, &message);
                lowering.statements.push(check);
            }
            Same::No => return Err(expr.error(format!("{message}{help}"))),
        }
    }
    if !at_run_time {
        return Ok(Value::Tensor { var, shape: found });
    }
    let sources: Vec<(syn::Ident, Shape)> = lowering
        .env
        .values()
        .filter_map(|v| match v {
            Value::Tensor { var, shape } => Some((var.clone(), shape.clone())),
            Value::Number(_) => None,
        })
        .collect();
    let expected = lowering.runtime_dims_tokens(declared, &sources);
    let context = match &what {
        Declared::Let(name) => format!("`{name}` {declared}"),
        Declared::Return => format!("the return value {declared}"),
    };
    let checked = quote::format_ident!("{}_checked", var);
    let ty = declared.to_type();
    lowering.statements.push(quote! {
        let #checked: ::rumus::Tensor<#ty> = ::rumus::__private::wrap_dims(#var.as_dyn().clone(), &#expected, #context)?;
    });
    Ok(Value::Tensor {
        var: checked,
        shape: declared.clone(),
    })
}

/// What a declared shape belongs to.
enum Declared {
    Let(String),
    Return,
}

/// Expands one DSL function. `layers` are the fields of the model for methods, empty for
/// free functions.
pub fn expand(function: &TensorFn, layers: &[Layer]) -> TokenStream {
    match try_expand(function, layers) {
        Ok(tokens) => tokens,
        Err(error) => {
            // Keep the function's signature so callers type-check and only this error shows.
            let error = error.to_compile_error();
            let stub = stub(function);
            quote!(#error #stub)
        }
    }
}

/// The function's signature with a body that is never run, standing in for a function whose
/// expansion failed.
pub fn stub(function: &TensorFn) -> TokenStream {
    let signature = signature(function);
    quote! {
        #[allow(unused_variables)]
        #signature { ::core::unreachable!() }
    }
}

/// Dim generics of the function: declared ones plus single-letter names in the parameters.
fn generics(function: &TensorFn) -> Vec<syn::Ident> {
    let mut names: Vec<syn::Ident> = function.generics.clone();
    for param in &function.params {
        for dim in &param.shape.dims {
            if let DimAst::Name(ident) = dim {
                let name = ident.to_string();
                if is_generic_dim(&name) && !names.iter().any(|n| *n == name) {
                    names.push(ident.clone());
                }
            }
        }
    }
    names
}

fn shape_type_lenient(shape: &ShapeAst) -> TokenStream {
    let dims = shape.dims.iter().map(|d| match d {
        DimAst::Lit(n) => Dim::Lit(*n).to_type(),
        DimAst::Name(name) => dim_from_ident(&name.to_string()).to_type(),
        DimAst::Infer(_) => quote!(::rumus::Dyn),
    });
    quote!((#(#dims,)*))
}

/// `::rumus::Tensor<(shape), element>` of a parameter.
fn tensor_type(param: &ast::Param) -> TokenStream {
    let (ty, element) = (shape_type_lenient(&param.shape), param.element_type());
    quote!(::rumus::Tensor<#ty, #element>)
}

/// The items a function needs beside it (outside an impl block, for methods): the traits of
/// its parameters with named dims.
pub fn companions(function: &TensorFn) -> TokenStream {
    arguments::traits(function, tensor_type)
}

fn signature(function: &TensorFn) -> TokenStream {
    let TensorFn {
        attrs, vis, name, ..
    } = function;
    let generics = generics(function);
    let self_param = function.has_self.then(|| quote!(&self,));
    let mut params: Vec<TokenStream> = function
        .params
        .iter()
        .map(|p| {
            let ty = arguments::parameter_type(function, p, &tensor_type(p));
            let pname = &p.name;
            quote!(#pname: #ty)
        })
        .collect();
    for context in &function.context {
        let (name, ty) = (&context.name, &context.ty);
        params.insert(context.position.min(params.len()), quote!(#name: #ty));
    }
    let ret = shape_type_lenient(&function.ret);
    quote! {
        #(#attrs)*
        #[allow(clippy::too_many_arguments)]
        #vis fn #name<#(#generics: ::rumus::Dim),*>(#self_param #(#params),*) -> ::rumus::Result<::rumus::Tensor<#ret>>
    }
}

fn try_expand(function: &TensorFn, layers: &[Layer]) -> syn::Result<TokenStream> {
    for param in &function.params {
        refuse_inferred(&param.shape, &format!("the parameter `{}`", param.name))?;
    }
    let mut lowering = Lowering::new(layers);
    lowering.dims = function.generics.iter().map(ToString::to_string).collect();
    lowering.context = function
        .context
        .iter()
        .map(|c| c.name.to_string())
        .collect();
    for param in &function.params {
        for dim in &param.shape.dims {
            if let DimAst::Name(ident) = dim
                && let Dim::Var(name) = dim_from_ident(&ident.to_string())
                && !lowering.dims.contains(&name)
            {
                lowering.dims.push(name);
            }
        }
    }
    // Runtime dims that appear more than once are checked once, at entry.
    let fn_name = function.name.to_string();
    let mut binds = Vec::new();
    for name in &lowering.dims {
        let uses: Vec<(&syn::Ident, usize)> = function
            .params
            .iter()
            .flat_map(|p| {
                p.shape
                    .dims
                    .iter()
                    .enumerate()
                    .filter(|(_, d)| matches!(d, DimAst::Name(i) if i == name))
                    .map(move |(axis, _)| (&p.name, axis))
            })
            .collect();
        if uses.len() > 1 {
            for (param, axis) in uses {
                let param_name = param.to_string();
                binds.push(
                    quote!(__rumus_dims.bind(#name, #param.dims()[#axis], #param_name, #axis)?;),
                );
            }
        }
    }
    let binder = (!binds.is_empty()).then(|| {
        quote! {
            let mut __rumus_dims = ::rumus::__private::DimBinder::new(#fn_name);
            #(#binds)*
        }
    });

    for param in &function.params {
        let shape = resolve(&lowering, &param.shape)?;
        // Parameters arrive by reference; an owned handle (an `Arc` clone) lets every value
        // in the body be used the same way.
        let (name, ty, element) = (&param.name, shape.to_type(), param.element_type());
        lowering.elements.insert(name.to_string(), element.clone());
        lowering.statements.push(
            {
                let tensor = arguments::as_tensor(param);
                quote!(let #name: ::rumus::Tensor<#ty, #element> = ::core::clone::Clone::clone(#tensor);)
            },
        );
        lowering.env.insert(
            param.name.to_string(),
            Value::Tensor {
                var: param.name.clone(),
                shape,
            },
        );
    }

    // Runtime dims used by several parameters are checked once, on the typed parameters.
    lowering.statements.extend(binder);

    for stmt in &function.body {
        let value = match &stmt.annotation {
            Some(annotation) => {
                let declared = resolve(&lowering, annotation)?;
                if lowering.is_opaque_call(&stmt.expr) {
                    lowering.annotated_call(&stmt.expr, declared)?
                } else {
                    match lowering.lower(&stmt.expr)? {
                        Value::Tensor { var, shape } => check_declared(
                            &mut lowering,
                            &declared,
                            (var, shape),
                            &stmt.expr,
                            Declared::Let(stmt.name.to_string()),
                        )?,
                        number => number,
                    }
                }
            }
            // An opaque call without a declared shape fails inside `lower` with a hint.
            None => lowering.lower(&stmt.expr)?,
        };
        let bound = match value {
            Value::Tensor { var, shape } => {
                let (name, ty) = (&stmt.name, shape.to_type());
                let span = stmt.name.span();
                lowering
                    .statements
                    .push(quote_spanned!(span=> let #name: ::rumus::Tensor<#ty> = #var;));
                Value::Tensor {
                    var: name.clone(),
                    shape,
                }
            }
            number => number,
        };
        lowering.env.insert(stmt.name.to_string(), bound);
        lowering
            .definitions
            .push((stmt.name.to_string(), stmt.expr.clone()));
    }

    let ret = resolve(&lowering, &function.ret)?;
    let tail = lowering.lower(&function.tail)?;
    let Value::Tensor { var, shape } = tail else {
        return Err(syn::Error::new(
            function.tail.span(),
            format!("the function is declared to return {ret} but its last expression is a number"),
        ));
    };
    let Value::Tensor { var, .. } = check_declared(
        &mut lowering,
        &ret,
        (var, shape),
        &function.tail,
        Declared::Return,
    )?
    else {
        unreachable!("a checked tensor stays a tensor")
    };

    let signature = signature(function);
    let statements = &lowering.statements;
    Ok(quote! {
        #signature {
            #(#statements)*
            ::core::result::Result::Ok(#var.clone())
        }
    })
}
