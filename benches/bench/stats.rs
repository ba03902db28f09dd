//! The two sides and their samples: the alternating order runs take,
//! and the median and mean the rows report.

pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// `n` runs per side, alternating which side goes first (stock, ours,
/// ours, stock, ...).
pub fn alternating(n: usize) -> Vec<Side> {
    (0..n).flat_map(|i| if i % 2 == 0 { [Side::Stock, Side::Ours] } else { [Side::Ours, Side::Stock] }).collect()
}

/// The samples of each side (stock, ours) of values taken in `order`.
pub fn by_side(order: &[Side], values: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let pick = |want: Side| order.iter().zip(values).filter(|(s, _)| **s == want).map(|(_, v)| *v).collect();
    (pick(Side::Stock), pick(Side::Ours))
}

/// Runs `f(side)` `n` times per side in [`alternating`] order; returns
/// the samples of each side.
pub fn interleaved<F: FnMut(Side) -> f64>(n: usize, mut f: F) -> (Vec<f64>, Vec<f64>) {
    let order = alternating(n);
    let values: Vec<f64> = order.iter().map(|&side| f(side)).collect();
    by_side(&order, &values)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Stock,
    Ours,
}

/// The mean of counts.
pub fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}
