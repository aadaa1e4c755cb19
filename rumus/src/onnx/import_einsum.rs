//! Imported ONNX `Einsum` over one or two operands, the forms `torch.einsum` exports
//! (`bhid,bhjd->bhij`, `bij,bjk->bik`, `i,j->ij`, `...ij->...ji`, `ij->i`), in rumus's own
//! ops: letters only one operand has and the output lacks are summed out first; two operands
//! then meet in one batched `matmul` over the letters they share (batch letters kept,
//! contracted letters summed), with permutes and reshapes around it. An ellipsis stands for
//! the same leading axes in every term (broadcast where one of them is 1), and an equation
//! without `->` gives its output as numpy does (the ellipsis, then the letters used once, in
//! alphabetical order). A letter repeated within one operand (a diagonal or a trace) and
//! three or more operands are refused when the file is loaded.

use super::import_ops::{Attributes, arg, invalid};
use super::limits::{self, Limits};
use crate::error::Result;
use crate::tensor::DynTensor;

/// An axis's name: a letter of the equation, or the k-th axis an ellipsis stands for,
/// counted so that the ellipses of all terms line up at their right ends.
#[derive(Clone, Copy, PartialEq, Eq, Debug, PartialOrd, Ord)]
enum Label {
    Ellipsis(usize),
    Letter(u8),
}

/// A parsed equation: each operand's axis labels (an ellipsis still unexpanded, at most
/// once per term) and the output's.
struct Equation {
    inputs: Vec<Term>,
    output: Option<Term>,
}

/// One term: its letters, and where among them an ellipsis stands (if it does).
#[derive(Clone)]
struct Term {
    letters: Vec<u8>,
    ellipsis: Option<usize>,
}

impl Term {
    fn parse(text: &str, equation: &str) -> Result<Term> {
        let mut letters = Vec::new();
        let mut ellipsis = None;
        let mut rest = text;
        while let Some(c) = rest.chars().next() {
            if rest.starts_with("...") {
                if ellipsis.is_some() {
                    return Err(refused(equation, "a term with two ellipses"));
                }
                ellipsis = Some(letters.len());
                rest = &rest[3..];
            } else if c.is_ascii_alphabetic() {
                letters.push(c as u8);
                rest = &rest[1..];
            } else {
                return Err(refused(
                    equation,
                    &format!("the character {c:?} (terms hold letters and `...`)"),
                ));
            }
        }
        Ok(Term { letters, ellipsis })
    }

    /// The labels of this term's axes when its ellipsis stands for `spread` axes and the
    /// widest ellipsis of the equation for `widest`.
    fn labels(&self, spread: usize, widest: usize) -> Vec<Label> {
        let letters = self.letters.iter().map(|&l| Label::Letter(l));
        match self.ellipsis {
            None => letters.collect(),
            Some(at) => {
                let mut labels: Vec<Label> = letters.collect();
                let stood = (widest - spread..widest).map(Label::Ellipsis);
                labels.splice(at..at, stood);
                labels
            }
        }
    }
}

fn refused(equation: &str, what: &str) -> crate::Error {
    invalid(format!(
        "Einsum \"{equation}\": {what} is not supported (rumus imports one or two operands \
         without repeated letters within a term)"
    ))
}

impl Equation {
    fn parse(equation: &str) -> Result<Equation> {
        let compact: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
        let (left, right) = match compact.split_once("->") {
            Some((l, r)) => (l, Some(r)),
            None => (compact.as_str(), None),
        };
        let inputs = left
            .split(',')
            .map(|t| Term::parse(t, equation))
            .collect::<Result<Vec<_>>>()?;
        let output = right.map(|r| Term::parse(r, equation)).transpose()?;
        if inputs.len() > 2 {
            return Err(refused(equation, &format!("{} operands", inputs.len())));
        }
        for term in inputs.iter().chain(&output) {
            let mut seen = term.letters.clone();
            seen.sort_unstable();
            if seen.windows(2).any(|w| w[0] == w[1]) {
                return Err(refused(equation, "a letter repeated within one term"));
            }
        }
        let missing = output.as_ref().and_then(|out| {
            out.letters
                .iter()
                .find(|l| !inputs.iter().any(|t| t.letters.contains(l)))
        });
        if let Some(&l) = missing {
            return Err(invalid(format!(
                "Einsum \"{equation}\": the output's letter {} is in no operand",
                l as char
            )));
        }
        Ok(Equation { inputs, output })
    }

    /// The output's labels: as written, or numpy's implicit order.
    fn output_labels(&self, widest: usize) -> Vec<Label> {
        match &self.output {
            Some(out) => out.labels(widest, widest),
            None => {
                let mut once: Vec<u8> = self
                    .inputs
                    .iter()
                    .flat_map(|t| t.letters.iter().copied())
                    .filter(|l| {
                        self.inputs
                            .iter()
                            .map(|t| t.letters.iter().filter(|m| *m == l).count())
                            .sum::<usize>()
                            == 1
                    })
                    .collect();
                once.sort_unstable();
                (0..widest)
                    .map(Label::Ellipsis)
                    .chain(once.into_iter().map(Label::Letter))
                    .collect()
            }
        }
    }
}

/// Checks the node's equation against its operand count when the file is loaded.
pub(super) fn check(a: &Attributes<'_>, operands: usize) -> Result<()> {
    let text = equation_of(a)?;
    let equation = Equation::parse(&text)?;
    if equation.inputs.len() != operands {
        return Err(invalid(format!(
            "Einsum \"{text}\" has {} terms for {operands} operands",
            equation.inputs.len()
        )));
    }
    Ok(())
}

fn equation_of(a: &Attributes<'_>) -> Result<String> {
    a.string("equation")
        .ok_or_else(|| invalid("Einsum without its equation attribute"))
}

/// An operand with a label per axis.
struct Labelled {
    tensor: DynTensor,
    labels: Vec<Label>,
}

impl Labelled {
    fn size(&self, label: Label) -> Option<usize> {
        let at = self.labels.iter().position(|&l| l == label)?;
        Some(self.tensor.dims()[at])
    }

    /// Sums out the axes whose labels `keep` rejects.
    fn sum_out(self, keep: impl Fn(Label) -> bool) -> Result<Labelled> {
        let gone: Vec<isize> = (0..self.labels.len())
            .filter(|&k| !keep(self.labels[k]))
            .map(|k| k as isize)
            .collect();
        if gone.is_empty() {
            return Ok(self);
        }
        let labels = self.labels.into_iter().filter(|&l| keep(l)).collect();
        Ok(Labelled {
            tensor: self.tensor.sum(&gone, false)?,
            labels,
        })
    }

    /// The tensor with its axes in the order of `labels` (a permutation of its own).
    fn ordered(&self, labels: &[Label]) -> Result<DynTensor> {
        let perm: Vec<usize> = labels
            .iter()
            .map(|l| self.labels.iter().position(|m| m == l).unwrap_or(0))
            .collect();
        self.tensor.permute(&perm)
    }
}

/// Runs `Einsum` on its operands.
pub(super) fn einsum(
    a: &Attributes<'_>,
    args: &[Option<&DynTensor>],
    limits: &Limits,
) -> Result<DynTensor> {
    let text = equation_of(a)?;
    let equation = Equation::parse(&text)?;
    let operands: Vec<&DynTensor> = (0..equation.inputs.len())
        .map(|k| arg(args, k))
        .collect::<Result<_>>()?;
    // How many axes each ellipsis stands for.
    let mut spreads = Vec::new();
    for (term, x) in equation.inputs.iter().zip(&operands) {
        let named = term.letters.len();
        let spread = match (term.ellipsis, x.rank().checked_sub(named)) {
            (None, Some(0)) => 0,
            (Some(_), Some(spread)) => spread,
            _ => {
                return Err(invalid(format!(
                    "Einsum \"{text}\": an operand of shape {:?} for the term with {named} \
                     letters{}",
                    x.dims(),
                    if term.ellipsis.is_some() {
                        " and an ellipsis"
                    } else {
                        ""
                    }
                )));
            }
        };
        spreads.push(spread);
    }
    let widest = spreads.iter().copied().max().unwrap_or(0);
    let output = equation.output_labels(widest);
    let labelled: Vec<Labelled> = equation
        .inputs
        .iter()
        .zip(&operands)
        .zip(&spreads)
        .map(|((term, x), &spread)| Labelled {
            tensor: (*x).clone(),
            labels: term.labels(spread, widest),
        })
        .collect();
    // Each label's size, equal wherever it appears (or 1, broadcast, for an ellipsis axis).
    let mut sizes: Vec<(Label, usize)> = Vec::new();
    for operand in &labelled {
        for (&label, &size) in operand.labels.iter().zip(operand.tensor.dims()) {
            match sizes.iter_mut().find(|(l, _)| *l == label) {
                None => sizes.push((label, size)),
                Some((_, known)) if *known == size => {}
                Some((Label::Ellipsis(_), known)) if *known == 1 || size == 1 => {
                    *known = (*known).max(size)
                }
                Some((_, known)) => {
                    return Err(invalid(format!(
                        "Einsum \"{text}\": an axis is {known} long in one operand and {size} \
                         in another"
                    )));
                }
            }
        }
    }
    let size_of = |label: Label| sizes.iter().find(|(l, _)| *l == label).map_or(1, |s| s.1);
    let out_dims: Vec<usize> = output.iter().map(|&l| size_of(l)).collect();
    let result = match labelled.len() {
        1 => {
            let only = labelled.into_iter().next().expect("one operand");
            only.sum_out(|l| output.contains(&l))?.ordered(&output)?
        }
        _ => {
            let mut pair = labelled.into_iter();
            let (left, right) = (pair.next().expect("two"), pair.next().expect("two"));
            let wanted = |other: &Labelled| {
                let (output, other_labels) = (&output, other.labels.clone());
                move |l: Label| output.contains(&l) || other_labels.contains(&l)
            };
            let left_kept = wanted(&right);
            let right_kept = wanted(&left);
            let (left, right) = (left.sum_out(left_kept)?, right.sum_out(right_kept)?);
            product(left, right, &output, limits)?
        }
    };
    result.broadcast_to(&out_dims)
}

/// The einsum of two operands whose every label is in the output or in the other operand:
/// one batched product, batch labels (both and the output) first, then the left's own, the
/// contracted ones (both, not the output) and the right's own.
fn product(
    left: Labelled,
    right: Labelled,
    output: &[Label],
    limits: &Limits,
) -> Result<DynTensor> {
    let both = |l: &Label| left.labels.contains(l) && right.labels.contains(l);
    let batch: Vec<Label> = output.iter().copied().filter(both).collect();
    let contracted: Vec<Label> = left
        .labels
        .iter()
        .copied()
        .filter(|l| both(l) && !output.contains(l))
        .collect();
    let own = |x: &Labelled| -> Vec<Label> {
        output
            .iter()
            .copied()
            .filter(|l| x.labels.contains(l) && !both(l))
            .collect()
    };
    let (left_own, right_own) = (own(&left), own(&right));
    // A batch axis one operand has at 1 (an ellipsis broadcast) takes the other's size.
    let batch_sizes: Vec<usize> = batch
        .iter()
        .map(|&l| left.size(l).unwrap_or(1).max(right.size(l).unwrap_or(1)))
        .collect();
    let grouped = |x: &Labelled, middle: &[Label], last: &[Label]| -> Result<DynTensor> {
        let order: Vec<Label> = batch.iter().chain(middle).chain(last).copied().collect();
        let mut dims = batch_sizes.clone();
        dims.extend(middle.iter().chain(last).map(|&l| x.size(l).unwrap_or(1)));
        let folded = [
            batch_sizes.iter().product::<usize>(),
            middle.iter().map(|&l| x.size(l).unwrap_or(1)).product(),
            last.iter().map(|&l| x.size(l).unwrap_or(1)).product(),
        ];
        x.ordered(&order)?.broadcast_to(&dims)?.reshape(&folded)
    };
    let lhs = grouped(&left, &left_own, &contracted)?;
    let rhs = grouped(&right, &contracted, &right_own)?;
    limits
        .check_work(
            "Einsum",
            limits::matmul_multiply_adds(lhs.dims(), rhs.dims()),
        )
        .map_err(invalid)?;
    let multiplied = lhs.matmul(&rhs)?;
    let labels: Vec<Label> = batch
        .iter()
        .chain(&left_own)
        .chain(&right_own)
        .copied()
        .collect();
    let mut dims = batch_sizes.clone();
    dims.extend(left_own.iter().map(|&l| left.size(l).unwrap_or(1)));
    dims.extend(right_own.iter().map(|&l| right.size(l).unwrap_or(1)));
    let unfolded = Labelled {
        tensor: multiplied.reshape(&dims)?,
        labels,
    };
    unfolded.ordered(output)
}
