//! `lockstep sim compare LAB SIM`: a run of a scenario in the lab and the same
//! scenario simulated, side by side, flow by flow.
//!
//! Both result directories hold `summary.json` (the report: loss and slips per
//! flow) and, per run (`fifo/`, `tdp/`), each receiver's per-packet file (the lab
//! always writes them; `sim run --packets` does). From the packets: latency p50,
//! p99, p99.9 and jitter (max − min) of each side, and the two-sample
//! Kolmogorov–Smirnov distance between the two latency samples.
//!
//! Frames (time-driven runs): a packet is *clean* on one side when nothing on its
//! path was late for it — each router handled it within `--late` of its arrival and
//! sent it within `--late` of its frame's start, and each link between routers
//! (kernel send path, veth, tbf, kernel receive path) took less than `--late`, and
//! no router slipped it (its hop record says so: a packet sent after its frame
//! leaves at the start of a later one and would otherwise look on time). For every packet clean on both sides
//! (paired by flow and sequence number) the frames it left each router in, counted
//! from the frame it left the first router (the edge) in, must be the same: a
//! mismatch is a router that put the packet in another frame. The edge's own wait
//! (frames from arrival to departure) is compared too but counted apart: it depends
//! on the sources' phase, which the lab's senders pick from the wall clock.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use lockstep_core::frame::FrameClock;
use lockstep_core::stats::ks_statistic;
use lockstep_core::tdp::Delivery;
use lockstep_core::wire::NOT_FILLED;
use lockstep_core::Duration;
use serde::Serialize;

use crate::report::html::{FlowReport, LabReport, RunReport};
use crate::report::human::fmt_ns;
use crate::report::packets;
use crate::UsageError;

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// A `lockstep lab run` result directory.
    #[arg(value_name = "LAB_DIR")]
    pub lab: PathBuf,
    /// A `lockstep sim run --packets` result directory of the same scenario.
    #[arg(value_name = "SIM_DIR")]
    pub sim: PathBuf,
    /// How late a router may act on a packet for it to count as on time (default: a
    /// quarter of the frame).
    #[arg(long, value_name = "DUR", value_parser = crate::cli::parse_duration_nonneg)]
    pub late: Option<Duration>,
    /// Print the comparison as JSON.
    #[arg(long)]
    pub json: bool,
}

/// One side's figures for one flow.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Side {
    pub received: u64,
    pub lost: u64,
    pub slips: u64,
    pub p50_ns: Option<i64>,
    pub p99_ns: Option<i64>,
    pub p99_9_ns: Option<i64>,
    pub jitter_ns: Option<i64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FlowCompare {
    pub flow: String,
    pub lab: Side,
    pub sim: Side,
    /// Kolmogorov–Smirnov distance of the two latency samples.
    pub ks: Option<f64>,
}

/// Frame assignments of packets clean on both sides.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Frames {
    pub paired: u64,
    pub clean_both: u64,
    pub hops_compared: u64,
    pub hop_mismatches: u64,
    pub edge_wait_differs: u64,
    /// The first few mismatches: (flow, seq, lab frames, sim frames).
    pub examples: Vec<(String, u64, Vec<i64>, Vec<i64>)>,
}

#[derive(Clone, Debug, Serialize)]
pub struct RunCompare {
    pub run: String,
    pub tf_ns: Option<i64>,
    pub flows: Vec<FlowCompare>,
    pub frames: Option<Frames>,
}

pub fn run(args: CompareArgs) -> Result<()> {
    // reading two big result directories takes a while and cannot look at the stop
    // flag: on a thread of its own, each run's comparison passed on as it is done
    let args = std::sync::Arc::new(args);
    let a = args.clone();
    let (got, ended) =
        crate::stop::collect_unless_stopped(move |each: &dyn Fn(Result<RunCompare>)| {
            let docs = read_doc(&a.lab).and_then(|lab| Ok((lab, read_doc(&a.sim)?)));
            let (lab, sim) = match docs {
                Ok(d) => d,
                Err(e) => return each(Err(e)),
            };
            let mut common = 0;
            for l in &lab.report.runs {
                let Some(s) = sim.report.runs.iter().find(|s| s.label == l.label) else {
                    continue;
                };
                if crate::stop::stop_requested() {
                    return;
                }
                common += 1;
                let meta = lab.runs.iter().find(|m| m.label == l.label);
                each(compare_run(&a, meta, l, s));
            }
            if common == 0 {
                each(Err(UsageError(format!(
                    "{} and {}: no run in common (labels {:?} and {:?})",
                    a.lab.display(),
                    a.sim.display(),
                    lab.report.runs.iter().map(|r| &r.label).collect::<Vec<_>>(),
                    sim.report.runs.iter().map(|r| &r.label).collect::<Vec<_>>()
                ))
                .into()));
            }
        });
    let out = got.into_iter().collect::<Result<Vec<RunCompare>>>()?;
    match ended {
        Ok(()) if !crate::stop::stop_requested() => {}
        Err(e @ crate::stop::Cut::Panicked) => anyhow::bail!("comparing: {e}"),
        // stopped: the runs compared so far, then say so
        _ => {
            if args.json {
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                print!("{}", human(&out));
            }
            let done: Vec<&str> = out.iter().map(|r| r.run.as_str()).collect();
            return Err(crate::Interrupted(format!(
                "compared {} run(s) ({}) before the stop; the others not",
                out.len(),
                done.join(", ")
            ))
            .into());
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", human(&out));
    }
    Ok(())
}

/// What a result document says of each run besides its report.
#[derive(Clone, Debug, serde::Deserialize)]
struct RunMeta {
    label: String,
    /// `fifo`, `tdp`, `kernel`.
    mode: String,
    /// The run's directory (lab documents; a simulated run's is the same).
    #[serde(default)]
    dir: Option<String>,
}

/// A result directory's `summary.json`: its report and its runs.
struct Doc {
    report: LabReport,
    runs: Vec<RunMeta>,
}

fn read_doc(dir: &Path) -> Result<Doc> {
    #[derive(serde::Deserialize)]
    struct Results {
        report: Option<LabReport>,
        #[serde(default)]
        runs: Vec<RunMeta>,
    }
    #[derive(serde::Deserialize)]
    struct SummaryFile {
        results: Results,
    }
    let path = dir.join("summary.json");
    let f = File::open(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let doc: SummaryFile = serde_json::from_reader(BufReader::new(f))
        .with_context(|| format!("{}: not a lockstep result document", path.display()))?;
    let report = doc.results.report.ok_or_else(|| {
        UsageError(format!(
            "{}: no report in it (a lab run or sim run result is needed)",
            path.display()
        ))
    })?;
    Ok(Doc {
        report,
        runs: doc.results.runs,
    })
}

/// `FIFO` → `fifo`, `TDP TF=250us` → `tdp-tf-250us`: the run's directory, when the
/// document does not name it.
fn run_dir(label: &str) -> String {
    label.to_lowercase().replace([' ', '='], "-")
}

/// Every delivery of a run's per-packet files, by flow id then sequence number.
type Packets = BTreeMap<u32, BTreeMap<u64, Delivery>>;

fn read_packets(dir: &Path, sim_hint: bool) -> Result<Packets> {
    let mut out = Packets::new();
    // a run directory that is not there holds no per-packet file either
    let entries = std::fs::read_dir(dir).into_iter().flatten();
    let mut files = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.ends_with("-packets.csv") {
            continue;
        }
        files += 1;
        let f =
            File::open(e.path()).with_context(|| format!("cannot read {}", e.path().display()))?;
        for d in packets::read(BufReader::new(f)) {
            out.entry(d.probe.flow_id)
                .or_default()
                .insert(d.probe.seq, d);
        }
    }
    if files == 0 {
        let hint = if sim_hint {
            " (run sim run with --packets)"
        } else {
            ""
        };
        return Err(UsageError(format!("{}: no per-packet file{hint}", dir.display())).into());
    }
    Ok(out)
}

/// A run's flows with their ids: flows are numbered from 1 in the file's order.
fn flows_by_id(r: &RunReport) -> impl Iterator<Item = (u32, &FlowReport)> {
    r.flows.iter().zip(1u32..).map(|(f, id)| (id, f))
}

fn compare_run(
    args: &CompareArgs,
    meta: Option<&RunMeta>,
    l: &RunReport,
    s: &RunReport,
) -> Result<RunCompare> {
    let dir = meta
        .and_then(|m| m.dir.clone())
        .unwrap_or_else(|| run_dir(&l.label));
    let lab = read_packets(&args.lab.join(&dir), false)?;
    let sim = read_packets(&args.sim.join(&dir), true)?;
    let flows = flows_by_id(l)
        .filter_map(|(id, lf)| {
            let sf = s.flows.iter().find(|f| f.name == lf.name)?;
            Some(compare_flow(lf, sf, lab.get(&id), sim.get(&id)))
        })
        .collect();
    let tdp = meta.is_some_and(|m| m.mode == "tdp");
    let frames = match (tdp, l.tf_ns) {
        (true, Some(tf)) => Some(compare_frames(l, &lab, &sim, tf, args.late)?),
        _ => None,
    };
    Ok(RunCompare {
        run: l.label.clone(),
        tf_ns: l.tf_ns,
        flows,
        frames,
    })
}

fn compare_flow(
    lf: &FlowReport,
    sf: &FlowReport,
    lab: Option<&BTreeMap<u64, Delivery>>,
    sim: Option<&BTreeMap<u64, Delivery>>,
) -> FlowCompare {
    let mut a = latencies(lab);
    let mut b = latencies(sim);
    let ks = ks_statistic(&mut a, &mut b);
    FlowCompare {
        flow: lf.name.clone(),
        lab: side(&a, lf.lost, lf.slips),
        sim: side(&b, sf.lost, sf.slips),
        ks,
    }
}

fn latencies(p: Option<&BTreeMap<u64, Delivery>>) -> Vec<i64> {
    p.map(|m| m.values().map(Delivery::latency_ns).collect())
        .unwrap_or_default()
}

/// Exact percentiles of a sorted sample (nearest rank).
fn side(sorted: &[i64], lost: u64, slips: u64) -> Side {
    // nearest rank, in integers: the ceil(n · permille / 1000)-th smallest
    let q = |permille: usize| -> Option<i64> {
        let n = sorted.len();
        let rank = (n * permille).div_ceil(1000);
        sorted.get(rank.clamp(1, n.max(1)) - 1).copied()
    };
    Side {
        received: sorted.len() as u64,
        lost,
        slips,
        p50_ns: q(500),
        p99_ns: q(990),
        p99_9_ns: q(999),
        jitter_ns: sorted.first().zip(sorted.last()).map(|(lo, hi)| hi - lo),
    }
}

/// The edge's wait (frames from a packet's arrival at the first router to its
/// departure), then for each later router the frames from the edge's departure to
/// its own; `None` when a router acted late for the packet.
fn frames_of(d: &Delivery, clock: &FrameClock, late_ns: i64) -> Option<Vec<i64>> {
    let hops = d.probe.hops();
    let first = hops.first()?;
    let edge = clock.frame_of(first.tx_app_ns);
    let mut out = vec![edge - clock.frame_of(first.rx_kernel_ns)];
    let mut left: Option<i64> = None;
    for (i, h) in hops.iter().enumerate() {
        let arrived = if h.rx_kernel_ns != NOT_FILLED {
            h.rx_kernel_ns
        } else {
            h.rx_app_ns
        };
        let f = clock.frame_of(h.tx_app_ns);
        let start = clock.frame_start(f)?;
        let link_late = left.is_some_and(|l| arrived - l > late_ns);
        let late = h.rx_app_ns - arrived > late_ns || h.tx_app_ns - start > late_ns;
        if h.slipped || link_late || late {
            return None;
        }
        left = Some(h.tx_app_ns);
        if i > 0 {
            out.push(f - edge);
        }
    }
    Some(out)
}

fn compare_frames(
    l: &RunReport,
    lab: &Packets,
    sim: &Packets,
    tf_ns: i64,
    late: Option<Duration>,
) -> Result<Frames> {
    let clock = FrameClock::new(Duration(tf_ns), 1).map_err(|e| UsageError(e.to_string()))?;
    let late_ns = late.map_or(tf_ns / 4, |d| d.as_nanos());
    let mut fr = Frames::default();
    for (id, lf) in flows_by_id(l) {
        let (Some(a), Some(b)) = (lab.get(&id), sim.get(&id)) else {
            continue;
        };
        for (seq, da) in a {
            let Some(db) = b.get(seq) else { continue };
            fr.paired += 1;
            let (Some(x), Some(y)) = (
                frames_of(da, &clock, late_ns),
                frames_of(db, &clock, late_ns),
            ) else {
                continue;
            };
            fr.clean_both += 1;
            tally(&mut fr, &lf.name, *seq, x, y);
        }
    }
    Ok(fr)
}

/// Counts one clean pair's hops and differences.
fn tally(fr: &mut Frames, flow: &str, seq: u64, x: Vec<i64>, y: Vec<i64>) {
    if x[0] != y[0] {
        fr.edge_wait_differs += 1;
    }
    let hops = x.len().min(y.len()) - 1;
    fr.hops_compared += hops as u64;
    let bad = (1..=hops).filter(|&j| x[j] != y[j]).count() as u64;
    fr.hop_mismatches += bad;
    if bad > 0 && fr.examples.len() < 5 {
        fr.examples.push((flow.to_string(), seq, x, y));
    }
}

fn opt_ns(v: Option<i64>) -> String {
    v.map_or("-".into(), fmt_ns)
}

fn human(runs: &[RunCompare]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    for r in runs {
        let _ = writeln!(s, "{} — lab | simulated", r.run);
        let _ = writeln!(
            s,
            "{:<8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>5} {:>5} | {:>8} {:>9} {:>9} {:>9} {:>9} {:>5} {:>5} | {:>5}",
            "flow", "recv", "p50", "p99", "p99.9", "jitter", "lost", "slips",
            "recv", "p50", "p99", "p99.9", "jitter", "lost", "slips", "KS"
        );
        for f in &r.flows {
            let side = |x: &Side| {
                format!(
                    "{:>8} {:>9} {:>9} {:>9} {:>9} {:>5} {:>5}",
                    x.received,
                    opt_ns(x.p50_ns),
                    opt_ns(x.p99_ns),
                    opt_ns(x.p99_9_ns),
                    opt_ns(x.jitter_ns),
                    x.lost,
                    x.slips
                )
            };
            let ks = f.ks.map_or("-".into(), |k| format!("{k:.3}"));
            let _ = writeln!(
                s,
                "{:<8} {} | {} | {:>5}",
                f.flow,
                side(&f.lab),
                side(&f.sim),
                ks
            );
        }
        if let Some(fr) = &r.frames {
            let _ = writeln!(
                s,
                "frames: {} packets in both, {} on time in both: {} router hops compared, {} in another frame; edge wait differs for {}",
                fr.paired, fr.clean_both, fr.hops_compared, fr.hop_mismatches, fr.edge_wait_differs
            );
            for (flow, seq, x, y) in &fr.examples {
                let _ = writeln!(s, "  {flow} seq {seq}: lab {x:?}, simulated {y:?}");
            }
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_directories_follow_the_labels() {
        assert_eq!(run_dir("FIFO"), "fifo");
        assert_eq!(run_dir("TDP TF=250us"), "tdp-tf-250us");
    }

    /// A probe that arrived at the edge at `rx`, then (rx, tx) per router.
    fn probe(hops: &[(i64, i64)]) -> Delivery {
        use lockstep_core::wire::{HopKind, HopRecord, ProbeRepr};
        let mut probe = ProbeRepr::default();
        for (i, &(rx, tx)) in hops.iter().enumerate() {
            probe.hops[i] = HopRecord {
                node: i as u32 + 2,
                kind: HopKind::Router,
                rx_kernel_ns: rx,
                rx_app_ns: rx + 1_000,
                tx_app_ns: tx,
                slipped: false,
            };
            probe.hop_count += 1;
        }
        Delivery {
            probe,
            kernel_rx_ns: None,
            app_rx_ns: 0,
        }
    }

    #[test]
    fn frames_from_the_edge_and_what_makes_a_packet_late() {
        let clock = FrameClock::new(Duration(250_000), 1).unwrap();
        let late = 62_500;
        // edge: arrives in frame 4, leaves in 5; core: leaves 2 frames later
        let on_time = probe(&[(1_020_000, 1_255_000), (1_270_000, 1_755_000)]);
        assert_eq!(frames_of(&on_time, &clock, late), Some(vec![1, 2]));
        // the core sent it 100 us into its frame: late
        let late_tx = probe(&[(1_020_000, 1_255_000), (1_270_000, 1_850_000)]);
        assert_eq!(frames_of(&late_tx, &clock, late), None);
        // the link to the core took 100 us: late
        let late_link = probe(&[(1_020_000, 1_255_000), (1_355_000, 1_755_000)]);
        assert_eq!(frames_of(&late_link, &clock, late), None);
    }

    #[test]
    fn nearest_rank_percentiles_and_jitter() {
        let v: Vec<i64> = (1..=1000).collect();
        let s = side(&v, 2, 3);
        assert_eq!(
            (s.p50_ns, s.p99_ns, s.p99_9_ns),
            (Some(500), Some(990), Some(999))
        );
        assert_eq!(
            (s.jitter_ns, s.received, s.lost, s.slips),
            (Some(999), 1000, 2, 3)
        );
        assert_eq!(side(&[], 0, 0).p50_ns, None);
    }
}
