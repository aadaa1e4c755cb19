//! Parsing the DSL: a Rust-like function whose tensor parameters and return value are
//! annotated with shapes in brackets, and whose body uses `@` for matrix products.

use syn::parse::{Parse, ParseStream};
use syn::{Attribute, Ident, Token, Visibility, bracketed, parenthesized};

use super::ast::{BinOp, ContextParam, DimAst, Expr, Param, ShapeAst, Stmt, TensorFn};

impl Parse for ShapeAst {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let (shape, element) = shape_with_element(input)?;
        match element {
            Some(element) => Err(syn::Error::new(
                element.span(),
                "only parameters name an element type; results and `let` shapes are f32",
            )),
            None => Ok(shape),
        }
    }
}

/// `[B, 784]`, or `[B, T; i64]` with the element type after a `;`.
fn shape_with_element(input: ParseStream) -> syn::Result<(ShapeAst, Option<Ident>)> {
    let content;
    bracketed!(content in input);
    let mut dims = Vec::new();
    let mut element = None;
    while !content.is_empty() {
        if content.peek(Token![;]) {
            content.parse::<Token![;]>()?;
            element = Some(content.parse()?);
            break;
        }
        if content.peek(syn::LitInt) {
            let lit: syn::LitInt = content.parse()?;
            dims.push(DimAst::Lit(lit.base10_parse()?));
        } else if content.peek(Token![_]) {
            let underscore: Token![_] = content.parse()?;
            dims.push(DimAst::Infer(underscore.span));
        } else {
            dims.push(DimAst::Name(content.parse()?));
        }
        if !content.is_empty() && !content.peek(Token![;]) {
            content.parse::<Token![,]>()?;
        }
    }
    if !content.is_empty() {
        return Err(content.error("expected `]` after the element type"));
    }
    let shape = ShapeAst { dims };
    Ok((shape, element))
}

impl Parse for TensorFn {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis: Visibility = input.parse()?;
        input.parse::<Token![fn]>()?;
        let name: Ident = input.parse()?;
        let mut generics = Vec::new();
        if input.peek(Token![<]) {
            input.parse::<Token![<]>()?;
            while !input.peek(Token![>]) {
                generics.push(input.parse()?);
                if !input.peek(Token![>]) {
                    input.parse::<Token![,]>()?;
                }
            }
            input.parse::<Token![>]>()?;
        }
        let content;
        parenthesized!(content in input);
        let mut has_self = false;
        if content.peek(Token![&]) && content.peek2(Token![self]) {
            content.parse::<Token![&]>()?;
            content.parse::<Token![self]>()?;
            has_self = true;
            if !content.is_empty() {
                content.parse::<Token![,]>()?;
            }
        }
        let mut params = Vec::new();
        let mut context = Vec::new();
        while !content.is_empty() {
            let name: Ident = content.parse()?;
            content.parse::<Token![:]>()?;
            if content.peek(Token![&]) {
                // A parameter that is not a tensor (`graph: &Graph`), passed through.
                context.push(ContextParam {
                    name,
                    ty: content.parse()?,
                    position: params.len() + context.len(),
                });
                if !content.is_empty() {
                    content.parse::<Token![,]>()?;
                }
                continue;
            }
            if !content.peek(syn::token::Bracket) {
                return Err(syn::Error::new(
                    content.span(),
                    format!(
                        "parameter `{name}` needs a shape in brackets, e.g. `{name}: [B, 784]` (or a reference type for what is not a tensor, e.g. `graph: &Graph`)"
                    ),
                ));
            }
            let (shape, element) = shape_with_element(&content)?;
            params.push(Param {
                name,
                shape,
                element,
            });
            if !content.is_empty() {
                content.parse::<Token![,]>()?;
            }
        }
        input.parse::<Token![->]>()?;
        if !input.peek(syn::token::Bracket) {
            return Err(
                input.error("the return value needs a shape in brackets, e.g. `-> [B, 10]`")
            );
        }
        let ret: ShapeAst = input.parse()?;
        let body_content;
        syn::braced!(body_content in input);
        let (body, tail) = parse_block(&body_content)?;
        Ok(TensorFn {
            attrs,
            vis,
            name,
            generics,
            has_self,
            owner: None,
            params,
            context,
            ret,
            body,
            tail,
        })
    }
}

fn parse_block(input: ParseStream) -> syn::Result<(Vec<Stmt>, Expr)> {
    let mut body = Vec::new();
    while input.peek(Token![let]) {
        input.parse::<Token![let]>()?;
        let name: Ident = input.parse()?;
        let annotation = if input.peek(Token![:]) {
            input.parse::<Token![:]>()?;
            Some(input.parse()?)
        } else {
            None
        };
        input.parse::<Token![=]>()?;
        let expr = parse_expr(input, 0)?;
        input.parse::<Token![;]>()?;
        body.push(Stmt {
            name,
            annotation,
            expr,
        });
    }
    if input.is_empty() {
        return Err(input.error("the body must end with the returned tensor expression"));
    }
    let tail = parse_expr(input, 0)?;
    if !input.is_empty() {
        return Err(input.error(
            "unexpected tokens after the returned expression (statements are `let` bindings)",
        ));
    }
    Ok((body, tail))
}

fn peek_binop(input: ParseStream) -> Option<(BinOp, u8)> {
    if input.peek(Token![+]) && !input.peek(Token![+=]) {
        Some((BinOp::Add, 1))
    } else if input.peek(Token![-]) && !input.peek(Token![-=]) && !input.peek(Token![->]) {
        Some((BinOp::Sub, 1))
    } else if input.peek(Token![*]) && !input.peek(Token![*=]) {
        Some((BinOp::Mul, 2))
    } else if input.peek(Token![/]) && !input.peek(Token![/=]) {
        Some((BinOp::Div, 2))
    } else if input.peek(Token![@]) {
        Some((BinOp::Matmul, 2))
    } else {
        None
    }
}

/// Precedence climbing: `+ -` bind looser than `* / @`, all left-associative.
fn parse_expr(input: ParseStream, min_prec: u8) -> syn::Result<Expr> {
    let mut lhs = parse_unary(input)?;
    while let Some((op, prec)) = peek_binop(input) {
        if prec <= min_prec {
            break;
        }
        let span = input.span();
        match op {
            BinOp::Add => drop(input.parse::<Token![+]>()?),
            BinOp::Sub => drop(input.parse::<Token![-]>()?),
            BinOp::Mul => drop(input.parse::<Token![*]>()?),
            BinOp::Div => drop(input.parse::<Token![/]>()?),
            BinOp::Matmul => drop(input.parse::<Token![@]>()?),
        }
        let rhs = parse_expr(input, prec)?;
        lhs = Expr::Binary {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
            span,
        };
    }
    Ok(lhs)
}

fn parse_unary(input: ParseStream) -> syn::Result<Expr> {
    if input.peek(Token![-]) {
        let span = input.parse::<Token![-]>()?.spans[0];
        return Ok(Expr::Neg(Box::new(parse_unary(input)?), span));
    }
    let mut expr = parse_primary(input)?;
    while input.peek(Token![.]) && !input.peek(Token![..]) {
        input.parse::<Token![.]>()?;
        let name: Ident = input.parse()?;
        let args = parse_args(input)?;
        expr = Expr::Method {
            receiver: Box::new(expr),
            name,
            args,
        };
    }
    if input.peek(Token![..]) {
        let span = input.parse::<Token![..]>()?.spans[0];
        let end = parse_unary(input)?;
        expr = Expr::Range(Box::new(expr), Box::new(end), span);
    }
    Ok(expr)
}

fn parse_args(input: ParseStream) -> syn::Result<Vec<Expr>> {
    let content;
    parenthesized!(content in input);
    let mut args = Vec::new();
    while !content.is_empty() {
        args.push(parse_expr(&content, 0)?);
        if !content.is_empty() {
            content.parse::<Token![,]>()?;
        }
    }
    Ok(args)
}

fn parse_primary(input: ParseStream) -> syn::Result<Expr> {
    if input.peek(syn::token::Paren) {
        let content;
        parenthesized!(content in input);
        return parse_expr(&content, 0);
    }
    if input.peek(syn::token::Bracket) {
        let content;
        let bracket = bracketed!(content in input);
        let mut items = Vec::new();
        while !content.is_empty() {
            items.push(parse_expr(&content, 0)?);
            if !content.is_empty() {
                content.parse::<Token![,]>()?;
            }
        }
        return Ok(Expr::List(items, bracket.span.join()));
    }
    if input.peek(syn::LitInt) {
        let lit: syn::LitInt = input.parse()?;
        return Ok(Expr::Number(lit.base10_parse::<f64>()?, lit.span()));
    }
    if input.peek(syn::LitFloat) {
        let lit: syn::LitFloat = input.parse()?;
        return Ok(Expr::Number(lit.base10_parse::<f64>()?, lit.span()));
    }
    if input.peek(Token![_]) {
        let underscore = input.parse::<Token![_]>()?;
        return Ok(Expr::Infer(underscore.span));
    }
    if input.peek(Token![self]) {
        input.parse::<Token![self]>()?;
        input.parse::<Token![.]>()?;
        let field: Ident = input.parse()?;
        if !input.peek(syn::token::Paren) {
            return Ok(Expr::Field(field));
        }
        let args = parse_args(input)?;
        return Ok(Expr::Layer { field, args });
    }
    let name: Ident = input.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            "expected a tensor, a number, a call or `self.layer(...)`",
        )
    })?;
    if input.peek(syn::token::Paren) {
        let args = parse_args(input)?;
        return Ok(Expr::Call { name, args });
    }
    Ok(Expr::Var(name))
}
