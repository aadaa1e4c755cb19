//! Which layer declaration gives an operand its width, so a residual or other element-wise
//! mismatch (`self.ff2(h) + x` with `ff2` ending at 128 and `x` at 64) can suggest the
//! declaration that makes the two equal, as a mismatch between two layers does.

use super::Lowering;
use crate::dsl::ast::{BinOp, Expr};
use crate::model::layers::{Layer, LayerKind};
use crate::shape::{Dim, Shape};

/// Ops that keep their input's shape: the width of their result is their input's.
const SHAPE_KEEPING: &[&str] = &[
    "relu",
    "gelu",
    "tanh",
    "sigmoid",
    "silu",
    "leaky_relu",
    "elu",
    "dropout",
    "softmax",
    "log_softmax",
    "exp",
    "abs",
    "neg",
    "sqrt",
    "sin",
    "cos",
];

impl Lowering<'_> {
    /// The layers that fix axis `axis` (counted from the front) of `expr`'s value: the
    /// Linear or convolution that produced it first, then the norms it went through (they
    /// would need the new width too). Empty when no layer of the model decides it. `expr`
    /// sits after the first `bound` `let`s, whose names it may use.
    fn width_layers(&self, expr: &Expr, (axis, rank): (usize, usize), bound: usize) -> Vec<Layer> {
        let through = |inner: Option<&Expr>| {
            inner.map_or_else(Vec::new, |e| self.width_layers(e, (axis, rank), bound))
        };
        match expr {
            Expr::Layer { field, args } => {
                let Some(layer) = self.layers.iter().find(|l| l.name == *field) else {
                    return Vec::new();
                };
                let last = axis + 1 == rank;
                match &layer.kind {
                    LayerKind::Linear { .. } if last => vec![layer.clone()],
                    LayerKind::Conv { .. } if axis == 1 => vec![layer.clone()],
                    LayerKind::LastAxisNorm { .. } if last => {
                        let mut found = through(args.first());
                        found.push(layer.clone());
                        found
                    }
                    LayerKind::BatchNorm { .. } | LayerKind::GroupNorm { .. } if axis == 1 => {
                        let mut found = through(args.first());
                        found.push(layer.clone());
                        found
                    }
                    LayerKind::ShapePreserving => through(args.first()),
                    _ => Vec::new(),
                }
            }
            Expr::Call { name, args } if SHAPE_KEEPING.contains(&name.to_string().as_str()) => {
                through(args.first())
            }
            Expr::Method { receiver, name, .. }
                if SHAPE_KEEPING.contains(&name.to_string().as_str()) =>
            {
                through(Some(receiver))
            }
            Expr::Neg(inner, _) => through(Some(inner)),
            Expr::Binary { op, lhs, rhs, .. } if *op != BinOp::Matmul => {
                let left = through(Some(lhs));
                if left.is_empty() {
                    through(Some(rhs))
                } else {
                    left
                }
            }
            Expr::Var(name) => {
                let name = name.to_string();
                // The latest `let` of that name before this expression.
                match self.definitions[..bound]
                    .iter()
                    .rposition(|(bound_name, _)| *bound_name == name)
                {
                    Some(at) => self.width_layers(&self.definitions[at].1, (axis, rank), at),
                    None => Vec::new(),
                }
            }
            _ => Vec::new(),
        }
    }

    /// For `lhs (op) rhs` whose static sizes differ at an axis (neither 1): the declarations
    /// that would make the operand a layer produces as wide as the other one.
    pub(super) fn width_hint(
        &self,
        (lhs, a): (&Expr, &Shape),
        (rhs, b): (&Expr, &Shape),
    ) -> Option<String> {
        if a.rank() != b.rank() {
            return None;
        }
        let rank = a.rank();
        let axis = (0..rank).find(|&i| {
            let (x, y) = (&a.0[i], &b.0[i]);
            x.lit().is_some()
                && y.lit().is_some()
                && x != y
                && x.lit() != Some(1)
                && y.lit() != Some(1)
        })?;
        [(lhs, a, b), (rhs, b, a)]
            .into_iter()
            .find_map(|(expr, own, other)| {
                let layers = self.width_layers(expr, (axis, rank), self.definitions.len());
                let (first, width) = (layers.first()?, &other.0[axis]);
                let declarations: Vec<String> = layers
                    .iter()
                    .map(|l| format!("`{}: {}`", l.name, declaration(l, width)))
                    .collect();
                let what = if axis == 1 && rank > 2 {
                    "channels"
                } else {
                    "features"
                };
                Some(format!(
                    "`{}` gives {} {what} where the other operand has {width}\n  help: declare {}",
                    first.name,
                    own.0[axis],
                    declarations.join(" and ")
                ))
            })
    }
}

/// `layer`'s type with `width` as its output width.
fn declaration(layer: &Layer, width: &Dim) -> String {
    let ty = &layer.type_name;
    match &layer.kind {
        LayerKind::Linear { input, .. } => format!("{ty}<{input}, {width}>"),
        LayerKind::Conv { input, kernel, .. } => format!("{ty}<{input}, {width}, {kernel}>"),
        LayerKind::GroupNorm { .. } => format!("GroupNorm<G, {width}> (G dividing {width})"),
        _ => format!("{ty}<{width}>"),
    }
}
