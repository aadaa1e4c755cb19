//! Dynamic axes of an export: which constants of a traced graph depend on the sizes of the
//! input's dynamic axes, and how the graph computes them from the input's shape instead.
//!
//! A trace sees only numbers: the reshape of a `[B, T, C]` activation to `[B * T, C]` is
//! written with `[32, 64]` in it. So the forward pass is traced once at base sizes and once
//! more per dynamic axis with that axis's size changed by one. The graphs must be the same
//! but for their constants; a constant that changed is then read as what it is:
//!
//! - a short vector of whole numbers (reshape and expand targets, slice bounds), each entry
//!   a product `c * B^i * T^j` of the dynamic sizes, solved exactly from how it changed
//!   and written as `Shape` → `Mul` → `Concat` on the graph input;
//! - a tensor whose shape changed: filled with one value (`Expand` of it), `0, 1, .., n-1`
//!   (`Range`, as `arange` positions), or the causal mask `j > i` (`Greater` of two ranges).
//!
//! Anything else that changed (a size `T - 1`, a value read from the data) is an error
//! naming the constant and the node that reads it.

use super::export::{DynamicAxis, TracedGraph, trace_graph};
use super::proto::{Attribute, Dim, Initializer, Model, Node, ValueInfo};
use super::trace::{OP, initializer};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::nn::Module;
use crate::tensor::DynTensor;

/// Highest power of one dynamic size a traced size may hold (`B * T * T` holds 2 of `T`).
const MAX_POWER: u32 = 4;
/// Longest constant read as a vector of sizes (a reshape target, slice bounds).
const MAX_SIZE_VECTOR: usize = 64;

/// Traces `forward` at base sizes and at one changed size per axis of `axes`, and writes the
/// graph with those axes dynamic.
pub(super) fn export(
    model: &dyn Module,
    example: &DynTensor,
    forward: &dyn Fn(&DynTensor) -> Result<DynTensor>,
    axes: &[DynamicAxis],
) -> Result<Model> {
    check_axes(example, axes)?;
    let sizes = Sizes::choose(example, axes);
    let base = trace_graph(model, &resized(example, axes, &sizes.base)?, forward)?;
    let mut probes = Vec::with_capacity(axes.len());
    for (k, axis) in axes.iter().enumerate() {
        let probe = trace_graph(model, &resized(example, axes, &sizes.probe_of(k))?, forward)?;
        same_ops(&base, &probe, axis, (sizes.base[k], sizes.probe[k]))?;
        probes.push(probe);
    }

    let mut writer = ShapeWriter {
        axes,
        nodes: Vec::new(),
        initializers: Vec::new(),
        symbols: vec![None; axes.len()],
        counter: 0,
    };
    let mut kept = Vec::with_capacity(base.initializers.len());
    for (j, constant) in base.initializers.iter().enumerate() {
        let changed: Vec<&Initializer> = probes.iter().map(|p| &p.initializers[j]).collect();
        if changed.iter().all(|c| *c == constant) {
            kept.push(constant.clone());
            continue;
        }
        writer
            .constant(constant, &changed, &sizes)
            .map_err(|why| cannot_write(constant, &changed, &base.nodes, axes, &sizes, &why))?;
    }
    kept.append(&mut writer.initializers);

    let output_dims = (0..base.output_dims.len())
        .map(|i| {
            let probe_dims: Vec<i64> = probes.iter().map(|p| p.output_dims[i] as i64).collect();
            match Monomial::solve(base.output_dims[i] as i64, &probe_dims, &sizes) {
                Some(m) if m.is_constant() => Dim::Fixed(base.output_dims[i]),
                Some(m) => m
                    .single()
                    .map_or(Dim::Unknown, |k| Dim::Named(axes[k].name.clone())),
                None => Dim::Unknown,
            }
        })
        .collect();
    let input = ValueInfo {
        name: "input".into(),
        dtype: example.dtype(),
        dims: (0..example.rank())
            .map(|i| match axes.iter().find(|a| a.axis == i) {
                Some(axis) => Dim::Named(axis.name.clone()),
                None => Dim::Fixed(example.dims()[i]),
            })
            .collect(),
    };
    let shape_nodes = std::mem::take(&mut writer.nodes);
    let graph = TracedGraph {
        initializers: kept,
        ..base
    };
    Ok(graph.into_model(input, output_dims, shape_nodes))
}

fn invalid(message: String) -> Error {
    Error::InvalidArgument { op: OP, message }
}

/// Each dynamic axis exists in the example, once, under a name of its own.
fn check_axes(example: &DynTensor, axes: &[DynamicAxis]) -> Result<()> {
    for (k, axis) in axes.iter().enumerate() {
        if axis.axis >= example.rank() {
            return Err(invalid(format!(
                "dynamic axis {} ({:?}) is past the example input's rank {} (dims {:?})",
                axis.axis,
                axis.name,
                example.rank(),
                example.dims()
            )));
        }
        if axis.name.is_empty() {
            return Err(invalid(format!(
                "dynamic axis {} has an empty name; name it (\"batch\", \"sequence\")",
                axis.axis
            )));
        }
        if let Some(earlier) = axes[..k]
            .iter()
            .find(|a| a.axis == axis.axis || a.name == axis.name)
        {
            return Err(invalid(format!(
                "dynamic axes {} ({:?}) and {} ({:?}) repeat an axis or a name; give each \
                 axis once, with a name of its own",
                earlier.axis, earlier.name, axis.axis, axis.name
            )));
        }
        if example.dims()[axis.axis] == 0 {
            return Err(invalid(format!(
                "the example input {:?} is empty along dynamic axis {} ({:?}); trace with at \
                 least one element there",
                example.dims(),
                axis.axis,
                axis.name
            )));
        }
    }
    Ok(())
}

/// The sizes of the dynamic axes in the base trace and in each axis's probe.
struct Sizes {
    base: Vec<usize>,
    probe: Vec<usize>,
}

impl Sizes {
    /// The example's sizes, 1 raised to 2 (at 1 broadcasting can hide ops); each probe one
    /// smaller, or one larger below 3 (so no probe is 1 either).
    fn choose(example: &DynTensor, axes: &[DynamicAxis]) -> Sizes {
        let base: Vec<usize> = axes.iter().map(|a| example.dims()[a.axis].max(2)).collect();
        let probe = base
            .iter()
            .map(|&n| if n >= 3 { n - 1 } else { n + 1 })
            .collect();
        Sizes { base, probe }
    }

    /// The base sizes with axis `k` at its probe size.
    fn probe_of(&self, k: usize) -> Vec<usize> {
        let mut sizes = self.base.clone();
        sizes[k] = self.probe[k];
        sizes
    }
}

/// `example` with each dynamic axis at the given size: cut, or extended by repeating its
/// leading slices (so token ids stay valid ids).
fn resized(example: &DynTensor, axes: &[DynamicAxis], sizes: &[usize]) -> Result<DynTensor> {
    let mut x = example.detach();
    for (axis, &n) in axes.iter().zip(sizes) {
        let have = x.dims()[axis.axis];
        let dim = axis.axis as isize;
        x = if n <= have {
            x.narrow(dim, 0, n)?
        } else {
            let mut parts = vec![x.clone()];
            let mut len = have;
            while len < n {
                let take = (n - len).min(have);
                parts.push(x.narrow(dim, 0, take)?);
                len += take;
            }
            DynTensor::cat(&parts.iter().collect::<Vec<_>>(), dim)?
        };
    }
    x.contiguous()
}

/// The probe's graph has the base graph's nodes: the same ops on the same values with the
/// same attributes.
fn same_ops(
    base: &TracedGraph,
    probe: &TracedGraph,
    axis: &DynamicAxis,
    (at, other): (usize, usize),
) -> Result<()> {
    let changed = |what: String| {
        invalid(format!(
            "with input axis {} ({:?}) at {other} instead of {at} the forward pass writes a \
             different graph ({what}); a size that decides which ops run (a loop over the \
             axis, an `if` on its size, a shape-dependent choice inside a layer) cannot be \
             dynamic: leave axis {} static",
            axis.axis, axis.name, axis.axis
        ))
    };
    for (i, (a, b)) in base.nodes.iter().zip(&probe.nodes).enumerate() {
        if a == b {
            continue;
        }
        if a.op_type != b.op_type || a.inputs != b.inputs || a.outputs != b.outputs {
            return Err(changed(format!(
                "node {i} is {} ({}) at {at} and {} ({}) at {other}",
                a.op_type, a.name, b.op_type, b.name
            )));
        }
        let attribute = a
            .attributes
            .iter()
            .zip(&b.attributes)
            .find(|(x, y)| x != y)
            .map_or_else(
                || "its attributes".to_string(),
                |(x, y)| format!("{x:?} became {y:?}"),
            );
        return Err(changed(format!(
            "node {} ({}): {attribute}",
            a.name, a.op_type
        )));
    }
    if base.nodes.len() != probe.nodes.len() {
        return Err(changed(format!(
            "{} nodes at {at}, {} at {other}",
            base.nodes.len(),
            probe.nodes.len()
        )));
    }
    let names = |g: &TracedGraph| {
        g.initializers
            .iter()
            .map(|c| c.name.clone())
            .collect::<Vec<_>>()
    };
    if names(base) != names(probe) {
        return Err(changed("the graphs read different constants".into()));
    }
    Ok(())
}

/// The error for a constant that changed in a way none of the forms in the module docs
/// describes.
fn cannot_write(
    constant: &Initializer,
    changed: &[&Initializer],
    nodes: &[Node],
    axes: &[DynamicAxis],
    sizes: &Sizes,
    why: &str,
) -> Error {
    let reader = nodes
        .iter()
        .find(|n| n.inputs.contains(&constant.name))
        .map_or_else(String::new, |n| {
            format!(", read by {} ({})", n.name, n.op_type)
        });
    let axis_names: Vec<String> = changed
        .iter()
        .enumerate()
        .filter(|(_, c)| **c != constant)
        .map(|(k, _)| {
            format!(
                "axis {} ({:?}) from {} to {}",
                axes[k].axis, axes[k].name, sizes.base[k], sizes.probe[k]
            )
        })
        .collect();
    invalid(format!(
        "the constant {} ({:?} {}){reader} changes with input {}, and {why}; compute it \
         with tensor ops from the input, or leave that axis static",
        constant.name,
        constant.dims,
        constant.dtype,
        axis_names.join(" and ")
    ))
}

/// A size as a product of the dynamic sizes: `coefficient * Π size_k ^ powers[k]`.
#[derive(Clone, Debug, PartialEq)]
struct Monomial {
    coefficient: i64,
    powers: Vec<u32>,
}

impl Monomial {
    /// The product that is `base` at the base sizes and `probes[k]` with axis `k` at its
    /// probe size, if there is one.
    fn solve(base: i64, probes: &[i64], sizes: &Sizes) -> Option<Monomial> {
        let mut powers = Vec::with_capacity(probes.len());
        let mut denominator: i128 = 1;
        for (k, &probe) in probes.iter().enumerate() {
            let (at, other) = (sizes.base[k] as i128, sizes.probe[k] as i128);
            // probe / base = (other / at)^e, exactly (no product past i128 matches).
            let matches = |e: u32| {
                let lhs = at.checked_pow(e).and_then(|p| p.checked_mul(probe as i128));
                let rhs = other
                    .checked_pow(e)
                    .and_then(|p| p.checked_mul(base as i128));
                lhs.is_some() && lhs == rhs
            };
            let power = (0..=MAX_POWER).find(|&e| matches(e))?;
            denominator = denominator.checked_mul(at.pow(power))?;
            powers.push(power);
        }
        let base = base as i128;
        (base % denominator == 0).then(|| Monomial {
            coefficient: (base / denominator) as i64,
            powers,
        })
    }

    fn is_constant(&self) -> bool {
        self.powers.iter().all(|&p| p == 0)
    }

    /// The axis this is the size of, if it is exactly one dynamic size.
    fn single(&self) -> Option<usize> {
        let mut ones = self.powers.iter().enumerate().filter(|(_, p)| **p != 0);
        match (self.coefficient, ones.next(), ones.next()) {
            (1, Some((k, 1)), None) => Some(k),
            _ => None,
        }
    }
}

/// Writes the nodes that compute changed constants from the input's shape.
struct ShapeWriter<'a> {
    axes: &'a [DynamicAxis],
    nodes: Vec<Node>,
    initializers: Vec<Initializer>,
    /// The `[1]` size of each dynamic axis, once a node reads it.
    symbols: Vec<Option<String>>,
    counter: usize,
}

impl ShapeWriter<'_> {
    fn fresh(&mut self, stem: &str) -> String {
        self.counter += 1;
        format!("/shape/{stem}_{}", self.counter)
    }

    fn node(
        &mut self,
        op_type: &'static str,
        inputs: Vec<String>,
        output: String,
        attributes: Vec<Attribute>,
    ) -> String {
        let name = self.fresh(op_type);
        self.nodes.push(Node {
            op_type,
            name,
            inputs,
            outputs: vec![output.clone()],
            attributes,
        });
        output
    }

    /// A new value computed by one node.
    fn value(
        &mut self,
        op_type: &'static str,
        inputs: Vec<String>,
        attrs: Vec<Attribute>,
    ) -> String {
        let output = self.fresh("v");
        self.node(op_type, inputs, output, attrs)
    }

    fn constant_tensor(&mut self, tensor: &DynTensor) -> Result<String> {
        let name = self.fresh("constant");
        self.initializers.push(initializer(&name, tensor)?);
        Ok(name)
    }

    fn ints(&mut self, values: &[i64]) -> Result<String> {
        self.constant_tensor(&DynTensor::from_vec(values.to_vec(), &[values.len()])?)
    }

    fn scalar(&mut self, value: f64, dtype: DType) -> Result<String> {
        self.constant_tensor(&DynTensor::scalar(value, dtype)?)
    }

    /// The `[1]` size of dynamic axis `k`.
    fn symbol(&mut self, k: usize) -> String {
        if let Some(name) = &self.symbols[k] {
            return name.clone();
        }
        let axis = self.axes[k].axis as i64;
        let name = self.value(
            "Shape",
            vec!["input".into()],
            vec![
                Attribute::Int("start", axis),
                Attribute::Int("end", axis + 1),
            ],
        );
        self.symbols[k] = Some(name.clone());
        name
    }

    /// `m` as a `[1]` int64 value.
    fn monomial(&mut self, m: &Monomial) -> Result<String> {
        let mut factors = Vec::new();
        if m.coefficient != 1 || m.is_constant() {
            factors.push(self.ints(&[m.coefficient])?);
        }
        for (k, &power) in m.powers.iter().enumerate() {
            for _ in 0..power {
                factors.push(self.symbol(k));
            }
        }
        let mut product = factors.remove(0);
        for factor in factors {
            product = self.value("Mul", vec![product, factor], vec![]);
        }
        Ok(product)
    }

    /// `entries` as an `[n]` int64 vector: runs of constants as one constant, the rest
    /// computed.
    fn sizes_vector(&mut self, entries: &[Monomial]) -> Result<String> {
        let mut parts = Vec::new();
        let mut run: Vec<i64> = Vec::new();
        for m in entries {
            if m.is_constant() {
                run.push(m.coefficient);
                continue;
            }
            if !run.is_empty() {
                parts.push(self.ints(&std::mem::take(&mut run))?);
            }
            parts.push(self.monomial(m)?);
        }
        if !run.is_empty() {
            parts.push(self.ints(&run)?);
        }
        Ok(self.value("Concat", parts, vec![Attribute::Int("axis", 0)]))
    }

    /// `m` as a rank-0 value of `dtype` (a `Range` bound).
    fn count(&mut self, m: &Monomial, dtype: DType) -> Result<String> {
        let vector = self.monomial(m)?;
        let scalar_shape = self.ints(&[])?;
        let count = self.value("Reshape", vec![vector, scalar_shape], vec![]);
        Ok(self.cast(count, dtype))
    }

    /// `value` (int64) as `dtype`.
    fn cast(&mut self, value: String, dtype: DType) -> String {
        if dtype == DType::I64 {
            return value;
        }
        let to = super::proto::elem_type(dtype);
        self.value("Cast", vec![value], vec![Attribute::Int("to", to)])
    }

    /// Nodes that give `base.name` the value that is `base` at the base sizes and
    /// `probes[k]` with axis `k` changed; an `Err` says why there are none.
    fn constant(
        &mut self,
        base: &Initializer,
        probes: &[&Initializer],
        sizes: &Sizes,
    ) -> std::result::Result<(), String> {
        let written = if probes.iter().all(|p| p.dims == base.dims) {
            self.sizes_constant(base, probes, sizes)?
        } else {
            self.reshaped_constant(base, probes, sizes)?
        };
        self.node("Identity", vec![written], base.name.clone(), vec![]);
        Ok(())
    }

    /// A constant of unchanged shape: whole numbers, each a product of dynamic sizes.
    fn sizes_constant(
        &mut self,
        base: &Initializer,
        probes: &[&Initializer],
        sizes: &Sizes,
    ) -> std::result::Result<String, String> {
        let numel: usize = base.dims.iter().product();
        let values = |c: &Initializer| whole_numbers(c).filter(|_| numel <= MAX_SIZE_VECTOR);
        let not_sizes = || {
            format!(
                "it is not a vector of at most {MAX_SIZE_VECTOR} whole numbers (a shape, slice \
                 bounds) that could be computed from the dynamic sizes"
            )
        };
        let base_values = values(base).ok_or_else(not_sizes)?;
        let probe_values: Vec<Vec<i64>> = probes
            .iter()
            .map(|p| values(p).ok_or_else(not_sizes))
            .collect::<std::result::Result<_, _>>()?;
        let entries: Vec<Monomial> = (0..numel)
            .map(|i| {
                let changed: Vec<i64> = probe_values.iter().map(|p| p[i]).collect();
                Monomial::solve(base_values[i], &changed, sizes).ok_or_else(|| {
                    format!(
                        "its entry {i} ({} at the base sizes, {changed:?} at the others) is not \
                         a product of the dynamic sizes",
                        base_values[i]
                    )
                })
            })
            .collect::<std::result::Result<_, _>>()?;
        let written = (|| -> Result<String> {
            let mut vector = self.sizes_vector(&entries)?;
            if base.dims != [numel] {
                let dims: Vec<i64> = base.dims.iter().map(|&d| d as i64).collect();
                let shape = self.ints(&dims)?;
                vector = self.value("Reshape", vec![vector, shape], vec![]);
            }
            Ok(self.cast(vector, base.dtype))
        })();
        written.map_err(|e| e.to_string())
    }

    /// A constant whose shape changed: one value everywhere, `0..n`, or the causal mask.
    fn reshaped_constant(
        &mut self,
        base: &Initializer,
        probes: &[&Initializer],
        sizes: &Sizes,
    ) -> std::result::Result<String, String> {
        if probes.iter().any(|p| p.dims.len() != base.dims.len()) {
            return Err("its rank changes".into());
        }
        let dims: Vec<Monomial> = (0..base.dims.len())
            .map(|i| {
                let changed: Vec<i64> = probes.iter().map(|p| p.dims[i] as i64).collect();
                Monomial::solve(base.dims[i] as i64, &changed, sizes).ok_or_else(|| {
                    format!(
                        "its dim {i} ({} at the base sizes, {changed:?} at the others) is not a \
                         product of the dynamic sizes",
                        base.dims[i]
                    )
                })
            })
            .collect::<std::result::Result<_, _>>()?;
        let all = || std::iter::once(base).chain(probes.iter().copied());
        let written = if let Some(element) =
            filled(base).filter(|e| all().all(|c| filled(c) == Some(*e)))
        {
            // One value everywhere: that value expanded to the shape.
            (|| -> Result<String> {
                let name = self.fresh("constant");
                self.initializers.push(Initializer {
                    name: name.clone(),
                    dtype: base.dtype,
                    dims: Vec::new(),
                    raw: element.to_vec(),
                });
                let shape = self.sizes_vector(&dims)?;
                Ok(self.value("Expand", vec![name, shape], vec![]))
            })()
        } else if dims.len() == 1 && all().all(is_arange) {
            (|| -> Result<String> {
                let (zero, one) = (self.scalar(0.0, base.dtype)?, self.scalar(1.0, base.dtype)?);
                let limit = self.count(&dims[0], base.dtype)?;
                Ok(self.value("Range", vec![zero, limit, one], vec![]))
            })()
        } else if dims.len() == 2 && all().all(is_causal_mask) {
            (|| -> Result<String> {
                let rows = self.positions(&dims[0], 1)?;
                let columns = self.positions(&dims[1], 0)?;
                Ok(self.value("Greater", vec![columns, rows], vec![]))
            })()
        } else {
            return Err("its values are none of one value repeated, 0..n, or a causal mask".into());
        };
        written.map_err(|e| e.to_string())
    }

    /// `0..n` (int64) with a unit axis inserted at `axis`: `[n, 1]` or `[1, n]`.
    fn positions(&mut self, n: &Monomial, axis: i64) -> Result<String> {
        let (zero, one) = (self.scalar(0.0, DType::I64)?, self.scalar(1.0, DType::I64)?);
        let limit = self.count(n, DType::I64)?;
        let range = self.value("Range", vec![zero, limit, one], vec![]);
        let axes = self.ints(&[axis])?;
        Ok(self.value("Unsqueeze", vec![range, axes], vec![]))
    }
}

/// Bytes per element of a constant's dtype.
fn element_size(dtype: DType) -> usize {
    match dtype {
        DType::Bool => 1,
        DType::F16 | DType::BF16 => 2,
        DType::F32 => 4,
        DType::F64 | DType::I64 => 8,
    }
}

/// The constant's values, where it is int64 or a float holding whole numbers only.
fn whole_numbers(c: &Initializer) -> Option<Vec<i64>> {
    let chunks = c.raw.chunks_exact(element_size(c.dtype));
    let whole = |v: f64| (v.fract() == 0.0 && v.abs() < 9.0e15).then_some(v as i64);
    match c.dtype {
        DType::I64 => Some(
            chunks
                .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
                .collect(),
        ),
        DType::F32 => chunks
            .map(|b| whole(f32::from_le_bytes(b.try_into().unwrap()) as f64))
            .collect(),
        DType::F64 => chunks
            .map(|b| whole(f64::from_le_bytes(b.try_into().unwrap())))
            .collect(),
        _ => None,
    }
}

/// The one element every position of `c` holds, as bytes.
fn filled(c: &Initializer) -> Option<&[u8]> {
    let mut chunks = c.raw.chunks_exact(element_size(c.dtype));
    let first = chunks.next()?;
    chunks.all(|e| e == first).then_some(first)
}

/// Whether `c` is `0, 1, .., n-1`.
fn is_arange(c: &Initializer) -> bool {
    whole_numbers(c).is_some_and(|v| v.iter().enumerate().all(|(i, &x)| x == i as i64))
}

/// Whether `c` is the `[T, S]` bool mask that is `true` where `j > i`.
fn is_causal_mask(c: &Initializer) -> bool {
    let columns = c.dims[1];
    c.dtype == DType::Bool
        && c.raw
            .iter()
            .enumerate()
            .all(|(k, &b)| (b != 0) == (k % columns > k / columns))
}
