//! Host models: how long after a frame start (or a packet's arrival) a simulated
//! node acts on it. `ideal` is zero; `fixed` is one value; `measured` draws from
//! the wake-up histogram of a `lockstep probe timer` result (so the simulator
//! predicts what that host would do).

use thiserror::Error;

use crate::rng::Rng;

/// A host's wake-up delay distribution.
#[derive(Clone, Debug, PartialEq)]
pub enum HostModel {
    /// Acts at the instant (the paper's hardware-timed routers).
    Ideal,
    /// Always this late (ns).
    Fixed(i64),
    /// Measured: values (ns) with their counts, drawn in proportion.
    Measured(Measured),
}

/// A measured distribution: bucket values and cumulative counts.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// Where it came from (shown in reports).
    pub source: String,
    values: Vec<i64>,
    cumulative: Vec<u64>,
}

/// A histogram that cannot be a host model.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ModelError {
    #[error("the histogram has no samples")]
    Empty,
    #[error("bucket {0} has a negative wake-up latency ({1} ns)")]
    Negative(usize, i64),
    #[error("bucket_ns has {0} values but count has {1}")]
    Lengths(usize, usize),
}

impl Measured {
    /// From histogram buckets: `values[i]` ns seen `counts[i]` times.
    pub fn new(source: String, values: &[i64], counts: &[u64]) -> Result<Measured, ModelError> {
        if values.len() != counts.len() {
            return Err(ModelError::Lengths(values.len(), counts.len()));
        }
        let mut v = Vec::new();
        let mut c = Vec::new();
        let mut total = 0u64;
        for (i, (&val, &n)) in values.iter().zip(counts).enumerate() {
            if val < 0 {
                return Err(ModelError::Negative(i, val));
            }
            if n == 0 {
                continue;
            }
            total = total.saturating_add(n);
            v.push(val);
            c.push(total);
        }
        if total == 0 {
            return Err(ModelError::Empty);
        }
        Ok(Measured {
            source,
            values: v,
            cumulative: c,
        })
    }

    fn draw(&self, rng: &mut Rng) -> i64 {
        let total = self.cumulative.last().copied().unwrap_or(1);
        let x = rng.below(total);
        let i = self.cumulative.partition_point(|&c| c <= x);
        self.values.get(i).copied().unwrap_or(0)
    }

    /// The largest value in the distribution.
    pub fn max(&self) -> i64 {
        self.values.iter().copied().max().unwrap_or(0)
    }

    pub fn samples(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or(0)
    }
}

impl HostModel {
    /// One wake-up delay (ns).
    pub fn draw(&self, rng: &mut Rng) -> i64 {
        match self {
            HostModel::Ideal => 0,
            HostModel::Fixed(v) => *v,
            HostModel::Measured(m) => m.draw(rng),
        }
    }

    /// How the model is named in output: `ideal`, `fixed:50us`, `measured (FILE)`.
    pub fn label(&self) -> String {
        match self {
            HostModel::Ideal => "ideal".into(),
            HostModel::Fixed(v) => format!("fixed:{}", lockstep_core::Duration(*v)),
            HostModel::Measured(m) => format!("measured ({}, {} samples)", m.source, m.samples()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_draws_follow_the_counts() {
        let m = Measured::new("t".into(), &[10, 20, 30], &[1, 0, 3]).unwrap();
        let h = HostModel::Measured(m);
        let mut rng = Rng::new(3);
        let draws: Vec<i64> = (0..4000).map(|_| h.draw(&mut rng)).collect();
        assert!(draws.iter().all(|&d| d == 10 || d == 30));
        let tens = draws.iter().filter(|&&d| d == 10).count();
        assert!((800..1200).contains(&tens), "{tens}");
        assert_eq!(
            Measured::new("t".into(), &[1], &[0]),
            Err(ModelError::Empty)
        );
        assert_eq!(
            Measured::new("t".into(), &[-1], &[2]),
            Err(ModelError::Negative(0, -1))
        );
        assert_eq!(HostModel::Fixed(50_000).label(), "fixed:50us");
    }
}
