//! The two-sample Kolmogorov–Smirnov statistic: the largest distance between two
//! empirical distribution functions, `D = sup_x |F_a(x) − F_b(x)|`, in [0, 1]. Zero
//! for samples with the same distribution of values, one for samples that do not
//! overlap at all. Used to say how close the simulator's latency distribution is to
//! the lab's.

/// `D` of two samples (each sorted here, in place); `None` if either is empty.
pub fn ks_statistic(a: &mut [i64], b: &mut [i64]) -> Option<f64> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    a.sort_unstable();
    b.sort_unstable();
    // |i/na − j/nb| = |i·nb − j·na| / (na·nb): the maximum in integers, one division
    let (na, nb) = (a.len() as u128, b.len() as u128);
    let (mut i, mut j) = (0usize, 0usize);
    let mut d: u128 = 0;
    while i < a.len() && j < b.len() {
        // step both functions past the smaller value (past ties on both sides)
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] == x {
            i += 1;
        }
        while j < b.len() && b[j] == x {
            j += 1;
        }
        d = d.max((i as u128 * nb).abs_diff(j as u128 * na));
    }
    Some(d as f64 / (na * nb) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ks(a: &[i64], b: &[i64]) -> Option<f64> {
        ks_statistic(&mut a.to_vec(), &mut b.to_vec())
    }

    #[test]
    fn same_values_give_zero_and_disjoint_ones_one() {
        assert_eq!(ks(&[3, 1, 2], &[2, 3, 1, 1, 2, 3]), Some(0.0));
        assert_eq!(ks(&[1, 2, 3], &[10, 11]), Some(1.0));
        assert_eq!(ks(&[10, 11], &[1, 2, 3]), Some(1.0));
        assert_eq!(ks(&[], &[1]), None);
    }

    #[test]
    fn the_largest_gap_between_the_distribution_functions() {
        // F_a: 1→1/4, 2→2/4, 3→3/4, 4→1; F_b: 3→1/2, 5→1: largest gap at 2 (1/2 − 0)
        assert_eq!(ks(&[1, 2, 3, 4], &[3, 5]), Some(0.5));
        // ties across the samples are stepped together: at 2 both functions jump
        // (F_a 1/3 → 1, F_b 0 → 2/3), so the gap is 1/3, never 2/3
        assert_eq!(ks(&[1, 2, 2], &[2, 2, 5]), Some(1.0 / 3.0));
    }
}
