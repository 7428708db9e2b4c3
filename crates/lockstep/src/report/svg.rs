//! A small SVG toolkit for `report.html`: escaping, linear and log scales, "nice" tick
//! values, and a chart frame (plot area, grid, axes, tick labels, axis titles).
//!
//! Drawing our own SVG keeps the report one self-contained file that opens offline and
//! needs no JavaScript; the price is this module, kept deliberately small.

use std::fmt::Write;

/// Escapes text for HTML and SVG, in element content and in quoted attributes alike.
/// Every name in a report comes from a user's scenario file, so nothing is trusted.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A coordinate with one decimal, without a trailing `.0` (keeps the page small).
/// Non-finite values become 0 rather than invalid SVG.
pub fn n(v: f64) -> String {
    if !v.is_finite() {
        return "0".into();
    }
    let r = (v * 10.0).round() / 10.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r:.1}")
    }
}

/// Maps data values to a fraction of the axis length: 0 at `lo`, 1 at `hi`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    Linear {
        lo: f64,
        hi: f64,
    },
    /// Both bounds positive.
    Log {
        lo: f64,
        hi: f64,
    },
}

impl Scale {
    /// The fraction of the axis at `v` (outside `0..=1` for values outside the domain;
    /// a value ≤ 0 on a log scale maps to the low end).
    pub fn frac(&self, v: f64) -> f64 {
        let f = match *self {
            Scale::Linear { lo, hi } => (v - lo) / (hi - lo),
            Scale::Log { lo, hi } => {
                if v <= 0.0 {
                    return 0.0;
                }
                (v.log10() - lo.log10()) / (hi.log10() - lo.log10())
            }
        };
        if f.is_finite() {
            f
        } else {
            0.0
        }
    }
}

/// Linear ticks at multiples of a "nice" step (1, 2 or 5 × 10^k), and the domain
/// widened to the first and last tick so the data never touches the frame edge.
#[derive(Clone, Debug, PartialEq)]
pub struct LinearTicks {
    pub lo: f64,
    pub hi: f64,
    pub values: Vec<f64>,
    /// Decimals that print every tick exactly (`-k` for a step of m × 10^k, k < 0).
    pub decimals: usize,
}

/// Nice ticks for `lo..=hi` with about `target` intervals: the step is the smallest of
/// 1, 2, 5 × 10^k at least `(hi - lo) / target`. A degenerate range is widened first.
pub fn linear_ticks(lo: f64, hi: f64, target: usize) -> LinearTicks {
    let (mut lo, mut hi) = if lo.is_finite() && hi.is_finite() {
        (lo.min(hi), lo.max(hi))
    } else {
        (0.0, 1.0)
    };
    if hi - lo <= f64::EPSILON * hi.abs().max(lo.abs()) {
        // A single value: 0 gets 0..1, anything else ±10 % around it.
        if lo == 0.0 {
            hi = 1.0;
        } else {
            let pad = lo.abs() * 0.1;
            lo -= pad;
            hi += pad;
        }
    }
    let raw = (hi - lo) / target.max(1) as f64;
    let mut k = raw.log10().floor() as i32;
    let f = raw / pow10(k);
    let mut m = [1u32, 2, 5, 10]
        .into_iter()
        .find(|&m| f <= m as f64 * (1.0 + 1e-9))
        .unwrap_or(10);
    if m == 10 {
        m = 1;
        k += 1;
    }
    let step = m as f64 * pow10(k);
    let i0 = (lo / step + 1e-9).floor() as i64;
    let i1 = (hi / step - 1e-9).ceil() as i64;
    let values: Vec<f64> = (i0..=i1.max(i0))
        .map(|i| tick_value(i * m as i64, k))
        .collect();
    LinearTicks {
        lo: values.first().copied().unwrap_or(lo),
        hi: values.last().copied().unwrap_or(hi),
        decimals: if k < 0 { (-k) as usize } else { 0 },
        values,
    }
}

/// 10^k as the correctly rounded f64 (exact for k in 0..=22).
fn pow10(k: i32) -> f64 {
    if k >= 0 {
        10f64.powi(k)
    } else {
        1.0 / 10f64.powi(-k)
    }
}

/// `units × 10^k` computed so that decimal ticks (0.3, 0.7) are the nearest f64 to the
/// decimal value, not an accumulated `0.1 + 0.1 + 0.1`.
fn tick_value(units: i64, k: i32) -> f64 {
    if k >= 0 {
        units as f64 * 10f64.powi(k)
    } else {
        units as f64 / 10f64.powi(-k)
    }
}

/// Log-axis ticks inside `lo..=hi`: `major` at the powers of ten; when the range holds
/// fewer than `min_major` of them, also the 2× and 5× multiples, and when still fewer
/// than two, every 1…9× multiple. `minor` marks the remaining 2…9× multiples (grid
/// lines only).
#[derive(Clone, Debug, PartialEq)]
pub struct LogTicks {
    pub major: Vec<f64>,
    pub minor: Vec<f64>,
}

pub fn log_ticks(lo: f64, hi: f64, min_major: usize) -> LogTicks {
    let (lo, hi) = if lo > 0.0 && hi.is_finite() && hi >= lo {
        (lo, hi)
    } else {
        (1.0, 10.0)
    };
    let a = (lo.log10() - 1e-9).floor() as i32;
    let b = (hi.log10() + 1e-9).ceil() as i32;
    let inside = |v: f64| v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9);
    let multiples = |set: &[i64]| -> Vec<f64> {
        (a..=b)
            .flat_map(|k| set.iter().map(move |&m| tick_value(m, k)))
            .filter(|&v| inside(v))
            .collect()
    };
    let all: Vec<i64> = (1..=9).collect();
    let mut major = multiples(&[1]);
    if major.len() < min_major.max(2) {
        major = multiples(&[1, 2, 5]);
    }
    if major.len() < 2 {
        major = multiples(&all);
    }
    let minor = multiples(&all)
        .into_iter()
        .filter(|v| !major.contains(v))
        .collect();
    LogTicks { major, minor }
}

/// A power of ten written with a superscript exponent: `1`, `10`, `10³`, `10⁻⁴`; any
/// other value as `2×10⁻³`.
pub fn sci_label(v: f64) -> String {
    if v <= 0.0 || !v.is_finite() {
        return "0".into();
    }
    let k = (v.log10() + 1e-9).floor() as i32;
    let m = (v / pow10(k) * 1000.0).round() / 1000.0;
    let power = match k {
        0 => String::new(),
        1 => "10".into(),
        _ => format!("10{}", superscript(k)),
    };
    match (m == 1.0, k) {
        (true, 0) => "1".into(),
        (true, _) => power,
        (false, 0) => format!("{m}"),
        (false, _) => format!("{m}×{power}"),
    }
}

fn superscript(k: i32) -> String {
    k.to_string()
        .chars()
        .map(|c| match c {
            '-' => '⁻',
            '0' => '⁰',
            '1' => '¹',
            '2' => '²',
            '3' => '³',
            '4' => '⁴',
            '5' => '⁵',
            '6' => '⁶',
            '7' => '⁷',
            '8' => '⁸',
            _ => '⁹',
        })
        .collect()
}

/// A plain number for an axis label: the shortest form, no exponent (`0.5`, `20`,
/// `1000`).
pub fn plain_label(v: f64) -> String {
    let r = (v * 1e9).round() / 1e9;
    format!("{r}")
}

/// One labelled tick.
#[derive(Clone, Debug, PartialEq)]
pub struct Tick {
    pub value: f64,
    pub label: String,
}

/// An axis: its scale, labelled ticks, unlabelled minor grid lines and its title.
#[derive(Clone, Debug)]
pub struct Axis {
    pub scale: Scale,
    pub ticks: Vec<Tick>,
    pub minor: Vec<f64>,
    pub title: String,
    /// Grid lines across the plot at each tick.
    pub grid: bool,
}

impl Axis {
    /// A linear axis over `lo..=hi` (widened to nice ticks), about `target` intervals.
    pub fn linear(lo: f64, hi: f64, target: usize, title: &str) -> Axis {
        let t = linear_ticks(lo, hi, target);
        Axis {
            scale: Scale::Linear { lo: t.lo, hi: t.hi },
            ticks: t
                .values
                .iter()
                .map(|&v| Tick {
                    value: v,
                    label: format!("{v:.*}", t.decimals),
                })
                .collect(),
            minor: Vec::new(),
            title: title.into(),
            grid: true,
        }
    }

    /// A log axis over exactly `lo..=hi`, labelled by `label`, with at least
    /// `min_major` labelled ticks where 1-2-5 steps can give them (see [`log_ticks`]).
    pub fn log(lo: f64, hi: f64, min_major: usize, title: &str, label: fn(f64) -> String) -> Axis {
        let t = log_ticks(lo, hi, min_major);
        let (lo, hi) = if lo > 0.0 && hi > lo {
            (lo, hi)
        } else {
            (1.0, 10.0)
        };
        Axis {
            scale: Scale::Log { lo, hi },
            ticks: t
                .major
                .iter()
                .map(|&v| Tick {
                    value: v,
                    label: label(v),
                })
                .collect(),
            minor: t.minor,
            title: title.into(),
            grid: true,
        }
    }

    /// Categories at `0.5, 1.5, …` of a `0..n` scale, no grid.
    pub fn categories(labels: &[String], title: &str) -> Axis {
        Axis {
            scale: Scale::Linear {
                lo: 0.0,
                hi: labels.len().max(1) as f64,
            },
            ticks: labels
                .iter()
                .enumerate()
                .map(|(i, l)| Tick {
                    value: i as f64 + 0.5,
                    label: l.clone(),
                })
                .collect(),
            minor: Vec::new(),
            title: title.into(),
            grid: false,
        }
    }
}

/// Approximate width of a text in the report's sans-serif font, for layout decisions
/// (margins, whether a label fits inside a bar).
pub fn text_width(s: &str, font_px: f64) -> f64 {
    s.chars().count() as f64 * font_px * 0.58
}

/// Shortens a label to about `max_px` wide, with an ellipsis.
pub fn fit(s: &str, max_px: f64, font_px: f64) -> String {
    if text_width(s, font_px) <= max_px {
        return s.to_string();
    }
    let keep = ((max_px / (font_px * 0.58)) as usize)
        .saturating_sub(1)
        .max(1);
    let mut t: String = s.chars().take(keep).collect();
    t.push('…');
    t
}

/// A chart: the SVG canvas (`width × height` user units), margins around the plot
/// area, and the two axes.
#[derive(Clone, Debug)]
pub struct Chart {
    pub width: f64,
    pub height: f64,
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
    pub x: Axis,
    pub y: Axis,
}

impl Chart {
    pub fn plot_width(&self) -> f64 {
        (self.width - self.left - self.right).max(1.0)
    }

    pub fn plot_height(&self) -> f64 {
        (self.height - self.top - self.bottom).max(1.0)
    }

    /// Pixel x of a data value.
    pub fn px(&self, v: f64) -> f64 {
        self.left + self.x.scale.frac(v) * self.plot_width()
    }

    /// Pixel y of a data value (up is larger).
    pub fn py(&self, v: f64) -> f64 {
        self.top + (1.0 - self.y.scale.frac(v)) * self.plot_height()
    }

    pub fn x_end(&self) -> f64 {
        self.width - self.right
    }

    pub fn y_end(&self) -> f64 {
        self.height - self.bottom
    }

    /// A vertical marker across the plot at pixel `x`: a line in `color` dashed as
    /// `dash` (SVG dash array), with `label` ending just left of it `dy` below the
    /// plot's top (no label when empty).
    pub fn marker(&self, x: f64, color: &str, dash: &str, label: &str, dy: f64) -> String {
        let mut s = format!(
            r#"<line x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="{color}" stroke-width="1.5" stroke-dasharray="{dash}"/>"#,
            n(self.top),
            n(self.y_end()),
            x = n(x)
        );
        if !label.is_empty() {
            let _ = write!(
                s,
                r#"<text class="val" x="{}" y="{}" text-anchor="end">{}</text>"#,
                n(x - 3.0),
                n(self.top + dy),
                esc(label)
            );
        }
        s
    }

    /// Opens the `<svg>` and draws the background, grid, axes, tick labels and axis
    /// titles; the caller adds marks and then [`Chart::close`].
    pub fn open(&self, label: &str) -> String {
        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg class="chart" viewBox="0 0 {} {}" role="img" aria-label="{}"><rect class="plot" x="{}" y="{}" width="{}" height="{}"/>"#,
            n(self.width),
            n(self.height),
            esc(label),
            n(self.left),
            n(self.top),
            n(self.plot_width()),
            n(self.plot_height()),
        );
        let (x0, x1, y0, y1) = (self.left, self.x_end(), self.top, self.y_end());
        // Grid: minor first, so major lines sit on top.
        if self.x.grid {
            for &v in &self.x.minor {
                let x = self.px(v);
                let _ = write!(
                    s,
                    r#"<path class="minor" d="M{} {}V{}"/>"#,
                    n(x),
                    n(y0),
                    n(y1)
                );
            }
            for t in &self.x.ticks {
                let x = self.px(t.value);
                let _ = write!(
                    s,
                    r#"<path class="grid" d="M{} {}V{}"/>"#,
                    n(x),
                    n(y0),
                    n(y1)
                );
            }
        }
        if self.y.grid {
            for &v in &self.y.minor {
                let y = self.py(v);
                let _ = write!(
                    s,
                    r#"<path class="minor" d="M{} {}H{}"/>"#,
                    n(x0),
                    n(y),
                    n(x1)
                );
            }
            for t in &self.y.ticks {
                let y = self.py(t.value);
                let _ = write!(
                    s,
                    r#"<path class="grid" d="M{} {}H{}"/>"#,
                    n(x0),
                    n(y),
                    n(x1)
                );
            }
        }
        // Axes along the bottom and the left.
        let _ = write!(
            s,
            r#"<path class="axis" d="M{} {}H{}M{} {}V{}"/>"#,
            n(x0),
            n(y1),
            n(x1),
            n(x0),
            n(y0),
            n(y1)
        );
        for t in &self.x.ticks {
            let x = self.px(t.value);
            let _ = write!(
                s,
                r#"<path class="axis" d="M{} {}v5"/><text class="tick" x="{}" y="{}" text-anchor="middle">{}</text>"#,
                n(x),
                n(y1),
                n(x),
                n(y1 + 18.0),
                esc(&t.label)
            );
        }
        for t in &self.y.ticks {
            let y = self.py(t.value);
            let _ = write!(
                s,
                r#"<path class="axis" d="M{} {}h-5"/><text class="tick" x="{}" y="{}" text-anchor="end">{}</text>"#,
                n(x0),
                n(y),
                n(x0 - 8.0),
                n(y + 4.0),
                esc(&t.label)
            );
        }
        if !self.x.title.is_empty() {
            let _ = write!(
                s,
                r#"<text class="atitle" x="{}" y="{}" text-anchor="middle">{}</text>"#,
                n((x0 + x1) / 2.0),
                n(self.height - 6.0),
                esc(&self.x.title)
            );
        }
        if !self.y.title.is_empty() {
            // Horizontal, above the y axis: easier to read than rotated text.
            let _ = write!(
                s,
                r#"<text class="atitle" x="{}" y="{}" text-anchor="start">{}</text>"#,
                n(4.0),
                n((y0 - 10.0).max(12.0)),
                esc(&self.y.title)
            );
        }
        s
    }

    /// A centred message over the plot area (used for "no data").
    pub fn message(&self, text: &str) -> String {
        format!(
            r#"<text class="nodata" x="{}" y="{}" text-anchor="middle">{}</text>"#,
            n((self.left + self.x_end()) / 2.0),
            n((self.top + self.y_end()) / 2.0),
            esc(text)
        )
    }

    pub fn close() -> &'static str {
        "</svg>"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(
            esc(r#"<script>alert("x&y")</script> it's"#),
            "&lt;script&gt;alert(&quot;x&amp;y&quot;)&lt;/script&gt; it&#39;s"
        );
        assert_eq!(esc("R1→R2 µs"), "R1→R2 µs");
    }

    #[test]
    fn coordinates() {
        assert_eq!(n(12.0), "12");
        assert_eq!(n(12.04), "12");
        assert_eq!(n(12.06), "12.1");
        assert_eq!(n(-3.25), "-3.3");
        assert_eq!(n(f64::NAN), "0");
        assert_eq!(n(f64::INFINITY), "0");
    }

    #[test]
    fn nice_linear_ticks() {
        // 0..37 µs in about 5 intervals: raw step 7.4 → 10.
        let t = linear_ticks(0.0, 37.0, 5);
        assert_eq!(t.values, vec![0.0, 10.0, 20.0, 30.0, 40.0]);
        assert_eq!((t.lo, t.hi, t.decimals), (0.0, 40.0, 0));
        // About 8 intervals: raw 4.625 → 5.
        let t = linear_ticks(0.0, 37.0, 8);
        assert_eq!(
            t.values,
            vec![0.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0]
        );
        // Raw step 1.5 → 2; the domain widens to the ticks around the data.
        let t = linear_ticks(21.3, 28.7, 5);
        assert_eq!(t.values, vec![20.0, 22.0, 24.0, 26.0, 28.0, 30.0]);
        // Decimal steps print exactly: 0.3, not 0.30000000000000004.
        let t = linear_ticks(0.0, 0.87, 9);
        assert_eq!(t.decimals, 1);
        assert_eq!(t.values[3], 0.3);
        assert_eq!(t.values.len(), 10);
        assert_eq!(t.hi, 0.9);
        // A step that lands exactly on 1, 2, 5 stays there (0..100 in 5 → 20).
        assert_eq!(
            linear_ticks(0.0, 100.0, 5).values,
            vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
        );
        // Negative ranges.
        assert_eq!(
            linear_ticks(-12.0, 7.0, 4).values,
            vec![-15.0, -10.0, -5.0, 0.0, 5.0, 10.0]
        );
        // Degenerate and invalid ranges still give a usable axis.
        assert_eq!(
            linear_ticks(0.0, 0.0, 5).values,
            vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
        );
        let t = linear_ticks(250.0, 250.0, 4);
        assert!(t.lo < 250.0 && t.hi > 250.0 && t.values.len() >= 2);
        let t = linear_ticks(f64::NAN, 3.0, 5);
        assert_eq!((t.lo, t.hi), (0.0, 1.0));
        // Reversed bounds are swapped.
        assert_eq!(
            linear_ticks(37.0, 0.0, 5).values,
            vec![0.0, 10.0, 20.0, 30.0, 40.0]
        );
    }

    #[test]
    fn nice_ticks_cover_the_range_with_bounded_count() {
        // A deterministic sweep over many magnitudes and targets.
        for i in 0..200 {
            let lo = ((i * 37) % 101) as f64 * 0.37 - 10.0;
            let span = 1.7f64.powi(i % 40 - 10) * (1.0 + (i % 7) as f64);
            let hi = lo + span;
            for target in [3usize, 5, 8] {
                let t = linear_ticks(lo, hi, target);
                // Within rounding of the bounds (a tick one ulp inside is fine).
                let tol = span * 1e-6;
                assert!(t.lo <= lo + tol && t.hi >= hi - tol, "{lo}..{hi}: {t:?}");
                assert!(t.values.len() >= 2 && t.values.len() <= target + 3, "{t:?}");
                assert!(t.values.windows(2).all(|w| w[0] < w[1]));
            }
        }
    }

    #[test]
    fn log_scale_ticks() {
        let t = log_ticks(1e-4, 1.0, 2);
        assert_eq!(t.major, vec![1e-4, 1e-3, 1e-2, 1e-1, 1.0]);
        assert_eq!(t.minor.len(), 4 * 8);
        assert_eq!(t.minor.first(), Some(&2e-4));
        assert_eq!(t.minor.last(), Some(&0.9));
        // Bounds that are not powers of ten: only the decades inside.
        let t = log_ticks(3.0, 4500.0, 2);
        assert_eq!(t.major, vec![10.0, 100.0, 1000.0]);
        assert_eq!(t.minor.first(), Some(&3.0));
        assert_eq!(t.minor.last(), Some(&4000.0));
        // Less than a decade: 2× and 5× multiples join in.
        assert_eq!(log_ticks(15.0, 120.0, 2).major, vec![20.0, 50.0, 100.0]);
        // Asking for at least four labels: 1-2-5 steps over three decades.
        assert_eq!(
            log_ticks(18.0, 2700.0, 4).major,
            vec![20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0]
        );
        assert_eq!(log_ticks(1e-6, 1.0, 4).major.len(), 7);
        // Even narrower: every multiple.
        assert_eq!(log_ticks(20.0, 40.0, 2).major, vec![20.0, 30.0, 40.0]);
        // Invalid bounds fall back to one decade.
        assert_eq!(log_ticks(0.0, 5.0, 2).major, vec![1.0, 10.0]);
    }

    #[test]
    fn scales() {
        let lin = Scale::Linear { lo: 10.0, hi: 30.0 };
        assert_eq!(lin.frac(20.0), 0.5);
        assert_eq!(lin.frac(10.0), 0.0);
        let log = Scale::Log { lo: 1e-4, hi: 1.0 };
        assert_eq!(log.frac(1.0), 1.0);
        assert_eq!(log.frac(1e-2), 0.5);
        assert_eq!(log.frac(0.0), 0.0);
        let flat = Scale::Linear { lo: 5.0, hi: 5.0 };
        assert_eq!(flat.frac(5.0), 0.0);
    }

    #[test]
    fn labels() {
        assert_eq!(sci_label(1.0), "1");
        assert_eq!(sci_label(10.0), "10");
        assert_eq!(sci_label(1e-3), "10⁻³");
        assert_eq!(sci_label(1e-12), "10⁻¹²");
        assert_eq!(sci_label(1e5), "10⁵");
        assert_eq!(sci_label(2e-3), "2×10⁻³");
        assert_eq!(sci_label(5.0), "5");
        assert_eq!(plain_label(0.1), "0.1");
        assert_eq!(plain_label(1000.0), "1000");
        assert_eq!(plain_label(3e-3 * 10.0), "0.03");
        assert_eq!(fit("R1 residence", 200.0, 11.0), "R1 residence");
        assert_eq!(fit("a-very-long-router-name", 40.0, 10.0), "a-ver…");
    }

    #[test]
    fn chart_maps_and_closes() {
        let c = Chart {
            width: 400.0,
            height: 200.0,
            left: 50.0,
            right: 10.0,
            top: 20.0,
            bottom: 30.0,
            x: Axis::linear(0.0, 37.0, 5, "latency (µs)"),
            y: Axis::log(1e-4, 1.0, 2, "probability", sci_label),
        };
        assert_eq!(c.px(0.0), 50.0);
        assert_eq!(c.px(40.0), 390.0);
        assert_eq!(c.py(1.0), 20.0);
        assert_eq!(c.py(1e-4), 170.0);
        let mut s = c.open("a <b>");
        s.push_str(Chart::close());
        assert_eq!(s.matches("<svg").count(), 1);
        assert!(s.ends_with("</svg>"));
        assert!(s.contains(r#"aria-label="a &lt;b&gt;""#));
        assert!(s.contains(">10⁻²</text>"));
        assert!(s.contains(">30</text>"));
        assert!(!s.contains("NaN"));
    }
}
