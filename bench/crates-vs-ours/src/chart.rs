//! The same latency CCDF drawn by the report's svg.rs (the way report/ccdf.rs's
//! `chart` draws it) and by plotters' SVG backend.

use std::error::Error;
use std::fmt::Write;
use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use crate::latency::{samples, Shape};
use crate::svg::{self, esc, n, Axis, Chart};

/// The canvas, in SVG user units (= CSS pixels), for both.
const W: f64 = 620.0;
const H: f64 = 300.0;
const POINTS: usize = 200;
const SAMPLES: usize = 2_000_000;
const RENDERS: usize = 2001;

/// The report's run colours (Okabe–Ito), first three.
const COLORS: [&str; 3] = ["#D55E00", "#0072B2", "#009E73"];

/// The report page's rules for the classes svg.rs writes, with the page's font, so
/// that a chart stands alone as a file.
const STYLE: &str = r#"<style>svg{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}.plot{fill:#fff}.grid{stroke:#e3e7ed;fill:none}.minor{stroke:#f1f3f6;fill:none}.axis{stroke:#59606b;fill:none}.tick{font-size:11px;fill:#4a515c}.atitle{font-size:12px;fill:#2b313a;font-weight:600}.lgd{font-size:12px;fill:#30363f}</style>"#;

pub struct Series {
    pub name: &'static str,
    pub color: &'static str,
    /// (latency ns, share of samples above it), increasing latency.
    pub points: Vec<(i64, f64)>,
}

/// Three runs of one flow: FIFO under load, TDP, TDP with a loaded host.
fn series() -> Vec<Series> {
    let shapes = [
        (
            "FIFO",
            Shape {
                median_ns: 80_000.0,
                sigma: 0.25,
                tail_p: 1e-3,
                tail_from_ns: 150_000.0,
                alpha: 3.5,
                cap_ns: 1_200_000.0,
            },
        ),
        (
            "TDP",
            Shape {
                median_ns: 262_000.0,
                sigma: 0.02,
                tail_p: 1e-4,
                tail_from_ns: 275_000.0,
                alpha: 10.0,
                cap_ns: 420_000.0,
            },
        ),
        (
            "TDP, loaded host",
            Shape {
                median_ns: 268_000.0,
                sigma: 0.04,
                tail_p: 1e-3,
                tail_from_ns: 290_000.0,
                alpha: 6.0,
                cap_ns: 900_000.0,
            },
        ),
    ];
    shapes
        .iter()
        .enumerate()
        .map(|(i, &(name, shape))| {
            let mut v = samples(shape, SAMPLES, 7 + i as u64);
            v.sort_unstable();
            let len = v.len() as f64;
            // POINTS latencies at shares spaced evenly on the log axis, 1 … 1e-6.
            let points: Vec<(i64, f64)> = (0..POINTS)
                .map(|j| {
                    let share = 10f64.powf(-6.0 * j as f64 / (POINTS - 1) as f64);
                    let idx = (((1.0 - share) * len) as usize).min(v.len() - 1);
                    let x = v[idx];
                    let above = v.len() - v.partition_point(|&y| y <= x);
                    (x, above as f64 / len)
                })
                .collect();
            Series {
                name,
                color: COLORS[i % COLORS.len()],
                points,
            }
        })
        .collect()
}

/// The display unit of the report (html.rs `unit_for`).
fn unit_for(max_abs: f64) -> (f64, &'static str) {
    if max_abs < 1e7 {
        (1e3, "µs")
    } else if max_abs < 1e10 {
        (1e6, "ms")
    } else {
        (1e9, "s")
    }
}

/// The data's x range in display units, the smallest positive share, the unit.
fn ranges(series: &[Series]) -> (f64, f64, f64, f64, &'static str) {
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let lo = xs.clone().min().unwrap_or(0);
    let hi = xs.max().unwrap_or(1);
    let p_min = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|&p| p > 0.0)
        .fold(1.0f64, f64::min);
    let (div, unit) = unit_for(lo.unsigned_abs().max(hi.unsigned_abs()) as f64);
    let x0 = lo as f64 / div;
    let x1 = (hi as f64 / div).max(x0 + 1e-9);
    (x0, x1, div, p_min, unit)
}

/// Ours: the chart as report/ccdf.rs builds it (a step path per run on a `Chart`),
/// with the legend the page puts in the figure caption drawn inside the plot.
pub fn ours(series: &[Series]) -> String {
    let (x0, x1, div, p_min, unit) = ranges(series);
    let chart = Chart {
        width: W,
        height: H,
        left: 62.0,
        right: 18.0,
        top: 20.0,
        bottom: 44.0,
        x: Axis::linear(x0, x1, 6, &format!("end-to-end latency L ({unit})")),
        y: Axis::log(
            p_min / 2.0,
            1.0,
            2,
            "share of packets slower",
            svg::sci_label,
        ),
    };
    let mut s = chart.open("latency CCDF of flow f1");
    let floor = p_min / 2.0;
    for c in series {
        let mut d = String::new();
        for (i, &(v, p)) in c.points.iter().enumerate() {
            let x = chart.px(v as f64 / div);
            if i == 0 {
                let _ = write!(d, "M{} {}", n(x), n(chart.py(1.0)));
            }
            let _ = write!(d, "H{}V{}", n(x), n(chart.py(p.max(floor))));
        }
        let _ = write!(
            s,
            r#"<path d="{d}" fill="none" stroke="{}" stroke-width="1.8" stroke-linejoin="round"/>"#,
            c.color
        );
    }
    // Legend: top right of the plot, one line per run.
    let widest = series
        .iter()
        .map(|c| svg::text_width(c.name, 12.0))
        .fold(0.0, f64::max);
    let (lw, lh) = (widest + 40.0, 8.0 + 17.0 * series.len() as f64);
    let (lx, ly) = (chart.x_end() - lw - 8.0, chart.top + 8.0);
    let _ = write!(
        s,
        r##"<rect x="{}" y="{}" width="{}" height="{}" fill="#fff" stroke="#d0d5dc" rx="3"/>"##,
        n(lx),
        n(ly),
        n(lw),
        n(lh)
    );
    for (i, c) in series.iter().enumerate() {
        let y = ly + 14.0 + 17.0 * i as f64;
        let _ = write!(
            s,
            r#"<path d="M{} {}h18" stroke="{}" stroke-width="2.5"/><text class="lgd" x="{}" y="{}">{}</text>"#,
            n(lx + 8.0),
            n(y - 4.0),
            c.color,
            n(lx + 32.0),
            n(y),
            esc(c.name)
        );
    }
    s.push_str(Chart::close());
    s
}

/// Ours as a file of its own: the SVG namespace, a size, and the page's style rules.
pub fn standalone(fragment: &str) -> String {
    let open = format!(r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" "#);
    let mut s = fragment.replacen("<svg ", &open, 1);
    if let Some(end) = s.find('>') {
        s.insert_str(end + 1, STYLE);
    }
    s
}

fn rgb(hex: &str) -> plotters::style::RGBColor {
    let c = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).unwrap_or(0);
    plotters::style::RGBColor(c(1), c(3), c(5))
}

/// plotters: the same data, canvas, axes, titles and legend.
pub fn plotters(series: &[Series]) -> Result<String, Box<dyn Error>> {
    use plotters::prelude::*;
    let (x0, x1, div, p_min, unit) = ranges(series);
    let floor = p_min / 2.0;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (W as u32, H as u32)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(58)
            .build_cartesian_2d(x0..x1, (floor..1.0f64).log_scale())?;
        chart
            .configure_mesh()
            .x_desc(format!("end-to-end latency L ({unit})"))
            .y_desc("share of packets slower")
            // `{:e}` alone prints the key points' float noise (9.999999999999999e-6).
            .y_label_formatter(&|v| format!("{v:.0e}"))
            .x_label_formatter(&|v| format!("{v}"))
            .label_style(("sans-serif", 11))
            .axis_desc_style(("sans-serif", 12))
            .draw()?;
        for c in series {
            let col = rgb(c.color);
            // The same step curve: from share 1, along and down at each point.
            let mut pts = Vec::with_capacity(2 * c.points.len() + 1);
            let mut prev = 1.0;
            for &(v, p) in &c.points {
                let x = v as f64 / div;
                pts.push((x, prev));
                prev = p.max(floor);
                pts.push((x, prev));
            }
            chart
                .draw_series(LineSeries::new(pts, col.stroke_width(2)))?
                .label(c.name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE)
            .border_style(RGBColor(0xd0, 0xd5, 0xdc))
            .label_font(("sans-serif", 12))
            .draw()?;
        root.present()?;
    }
    Ok(out)
}

/// What would make a file depend on more than itself.
fn outside(svg: &str) -> String {
    let found: Vec<&str> = [
        "<script",
        "href=",
        "url(",
        "@import",
        "@font-face",
        "<image",
        "<foreignObject",
    ]
    .into_iter()
    .filter(|k| svg.contains(k))
    .collect();
    if found.is_empty() {
        "none".into()
    } else {
        found.join(" ")
    }
}

fn count(svg: &str, tag: &str) -> usize {
    svg.matches(tag).count()
}

pub fn run(out: &Path) -> Result<(), Box<dyn Error>> {
    let series = series();
    let pts: Vec<usize> = series.iter().map(|s| s.points.len()).collect();
    let fragment = ours(&series);
    let file = standalone(&fragment);
    let plot = plotters(&series)?;
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("ours.svg"), &file)?;
    std::fs::write(out.join("plotters.svg"), &plot)?;

    let (mut t_ours, mut t_plot) = (Vec::new(), Vec::new());
    for i in 0..RENDERS {
        for which in [i % 2, 1 - i % 2] {
            let start = Instant::now();
            if which == 0 {
                black_box(standalone(&ours(black_box(&series))));
                t_ours.push(start.elapsed().as_secs_f64() * 1e6);
            } else {
                black_box(plotters(black_box(&series))?);
                t_plot.push(start.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[v.len() / 10], v[v.len() * 9 / 10])
    };
    let (om, o10, o90) = med(&mut t_ours);
    let (pm, p10, p90) = med(&mut t_plot);
    println!("@ render_us_ours {om:.1}");
    println!("@ render_us_plotters {pm:.1}");

    println!();
    println!(
        "== chart: latency CCDF, 3 series of {:?} points, log y, linear x, {W}×{H}; files in {}",
        pts,
        out.display()
    );
    println!("{:<44} {:>16} {:>16}", "", "svg.rs (ours)", "plotters");
    println!(
        "{:<44} {:>16} {:>16}",
        "bytes, standalone .svg file",
        file.len(),
        plot.len()
    );
    println!(
        "{:<44} {:>16} {:>16}",
        "bytes, as report.html embeds it",
        fragment.len(),
        "—"
    );
    println!(
        "{:<44} {:>16} {:>16}",
        format!("render µs, median of {RENDERS}"),
        format!("{om:.1}"),
        format!("{pm:.1}")
    );
    println!(
        "{:<44} {:>16} {:>16}",
        "render µs, p10–p90",
        format!("{o10:.1}–{o90:.1}"),
        format!("{p10:.1}–{p90:.1}")
    );
    println!(
        "{:<44} {:>16} {:>16}",
        "external references (script, href, url…)",
        outside(&file),
        outside(&plot)
    );
    println!(
        "{:<44} {:>16} {:>16}",
        "elements text/path/polyline/line/rect",
        format!(
            "{}/{}/{}/{}/{}",
            count(&file, "<text"),
            count(&file, "<path"),
            count(&file, "<polyline"),
            count(&file, "<line"),
            count(&file, "<rect")
        ),
        format!(
            "{}/{}/{}/{}/{}",
            count(&plot, "<text"),
            count(&plot, "<path"),
            count(&plot, "<polyline"),
            count(&plot, "<line"),
            count(&plot, "<rect")
        )
    );
    Ok(())
}
