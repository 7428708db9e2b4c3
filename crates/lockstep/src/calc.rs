//! `lockstep calc NETWORK.toml [--json]`: provable delay and backlog bounds of a
//! feed-forward network of rate-latency servers and shaped flows (SPEC §4), computed
//! exactly by `lockstep-netcalc`.
//!
//! Per flow: the end-to-end delay bound of the total flow analysis (TFA) and of the
//! separated flow analysis (SFA), the best one marked, and the deadline verdict. Per
//! server: the backlog bound against its buffer, the FIFO delay, the rules of thumb
//! and, where they apply, the SPEC §4 port formulas. Every bound is an exact fraction
//! in its unit next to a float (SPEC §7). Exit status 1 when a deadline or a buffer
//! check fails, 2 on bad input (naming file, line and field).

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use lockstep_netcalc::units::{round4, Shown, Unit};
use lockstep_netcalc::{Analysis, FlowBounds, Report, ServerBounds, Q};
use serde_json::{json, Value};

use crate::report::ResultDoc;
use crate::{CheckFailed, UsageError};

#[derive(Args, Debug)]
pub struct CalcArgs {
    /// The network file: [[server]] (name, rate, latency, buffer, multiplexing) and
    /// [[flow]] (name, path, rate, burst, peak, max_packet, deadline) tables.
    #[arg(value_name = "NETWORK.toml")]
    pub network: PathBuf,
    /// Print the SPEC §7 JSON document on stdout (the table goes to stderr).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: CalcArgs) -> Result<()> {
    let file = args.network.display().to_string();
    let text = std::fs::read_to_string(&args.network)
        .map_err(|e| UsageError(format!("{file}: cannot read it: {e}")))?;
    let adm = lockstep_netcalc::load(&text).map_err(|e| {
        let at = match e.line {
            Some(l) => format!("{file}:{l}"),
            None => file.clone(),
        };
        UsageError(format!("{at}: {}", field_message(&e)))
    })?;
    let report = adm.snapshot();
    let text = human(&file, &report);
    let late = report.late_flows().count();
    let overflowing = report.overflowing_servers().count();
    if args.json {
        eprint!("{text}");
        let mut doc = ResultDoc::new("calc", json!({ "network": file }));
        doc.insert(
            "flows",
            report.flows.iter().map(flow_json).collect::<Vec<_>>(),
        );
        doc.insert(
            "servers",
            report.servers.iter().map(server_json).collect::<Vec<_>>(),
        );
        doc.insert(
            "summary",
            json!({
                "flows": report.flows.len(),
                "servers": report.servers.len(),
                "late_flows": late,
                "overflowing_servers": overflowing,
            }),
        );
        doc.check_failed = late + overflowing > 0;
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{text}");
    }
    if late + overflowing > 0 {
        let mut why = Vec::new();
        if late > 0 {
            let names: Vec<&str> = report.late_flows().map(|f| f.name.as_str()).collect();
            why.push(format!("deadline missed by {}", names.join(", ")));
        }
        if overflowing > 0 {
            let names: Vec<&str> = report
                .overflowing_servers()
                .map(|s| s.name.as_str())
                .collect();
            why.push(format!("buffer too small at {}", names.join(", ")));
        }
        return Err(CheckFailed(why.join("; ")).into());
    }
    Ok(())
}

/// `flow[2] "f2".path[1]: unknown server "s9"` (the line goes in front).
fn field_message(e: &lockstep_netcalc::InputError) -> String {
    match &e.field {
        Some(f) => format!("{f}: {}", e.message),
        None => e.message.clone(),
    }
}

/// SPEC §7 bound: `{"exact": "965/12", "unit": "us", "value": 80.4167}`.
fn bound(q: &Q, unit: Unit) -> Value {
    let s = Shown::new(q, unit);
    json!({ "exact": s.exact.to_string(), "unit": unit.name(), "value": round4(s.value()) })
}

fn opt_bound(q: Option<&Q>, unit: Unit) -> Value {
    q.map(|q| bound(q, unit)).unwrap_or(Value::Null)
}

fn best_name(f: &FlowBounds) -> &'static str {
    match f.best() {
        Analysis::Tfa => "tfa",
        Analysis::Sfa => "sfa",
    }
}

fn flow_json(f: &FlowBounds) -> Value {
    json!({
        "name": f.name,
        "path": f.path,
        "tfa": bound(&f.tfa, Unit::Us),
        "tfa_per_hop": f.tfa_hops.iter().map(|d| bound(d, Unit::Us)).collect::<Vec<_>>(),
        "sfa": bound(&f.sfa, Unit::Us),
        "best": best_name(f),
        "bound": bound(f.bound(), Unit::Us),
        "deadline": opt_bound(f.deadline.as_ref(), Unit::Us),
        "meets_deadline": f.meets_deadline(),
    })
}

fn server_json(s: &ServerBounds) -> Value {
    let spec = s.spec_port.as_ref().map(|p| {
        json!({
            "g_max": bound(&p.g_max, Unit::Us),
            "backlog": bound(&p.backlog, Unit::Bytes),
            "backlog_exact": p.backlog_exact,
            "t_switch": bound(&p.delay, Unit::Us),
            "backlog_estimate": bound(&p.backlog_estimate, Unit::Bytes),
            "t_est": bound(&p.delay_estimate, Unit::Us),
        })
    });
    json!({
        "name": s.name,
        "multiplexing": s.multiplexing.name(),
        "rate": bound(&s.rate, Unit::Mbps),
        "latency": bound(&s.latency, Unit::Us),
        "flows": s.flows,
        "load": bound(&s.load, Unit::Mbps),
        "backlog": bound(&s.backlog, Unit::Bytes),
        "buffer": opt_bound(s.buffer.as_ref(), Unit::Bytes),
        "fits": s.fits(),
        "fifo_delay": opt_bound(s.fifo_delay.as_ref(), Unit::Us),
        "backlog_estimate": bound(&s.backlog_estimate, Unit::Bytes),
        "delay_estimate": bound(&s.delay_estimate, Unit::Us),
        "spec4": spec.unwrap_or(Value::Null),
    })
}

fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::from(" ");
        for (c, cell) in r.iter().enumerate() {
            let pad = widths[c].saturating_sub(cell.chars().count());
            let _ = write!(line, " {cell}{}", " ".repeat(pad));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn human(file: &str, r: &Report) -> String {
    let mut out = format!(
        "{file}: {} servers, {} flows (bounds exact; the fraction is the exact value)\n\nflows: end-to-end delay bounds (* best)\n",
        r.servers.len(),
        r.flows.len()
    );
    let mut rows = vec![vec![
        "flow".to_string(),
        "path".into(),
        "TFA".into(),
        "SFA".into(),
        "deadline".into(),
        "verdict".into(),
    ]];
    for f in &r.flows {
        let mark = |a: Analysis| if f.best() == a { "*" } else { " " };
        rows.push(vec![
            f.name.clone(),
            f.path.join(" > "),
            format!("{}{}", mark(Analysis::Tfa), Shown::new(&f.tfa, Unit::Us)),
            format!("{}{}", mark(Analysis::Sfa), Shown::new(&f.sfa, Unit::Us)),
            f.deadline
                .as_ref()
                .map(|d| Shown::new(d, Unit::Us).to_string())
                .unwrap_or_else(|| "-".into()),
            match f.meets_deadline() {
                Some(true) => "ok".into(),
                Some(false) => "LATE".into(),
                None => "-".into(),
            },
        ]);
    }
    out.push_str(&table(&rows));
    out.push_str("\nservers: backlog bound against the buffer\n");
    let mut rows = vec![vec![
        "server".to_string(),
        "mux".into(),
        "rate".into(),
        "load".into(),
        "flows".into(),
        "backlog".into(),
        "buffer".into(),
        "check".into(),
        "FIFO delay".into(),
    ]];
    for s in &r.servers {
        rows.push(vec![
            s.name.clone(),
            s.multiplexing.name().into(),
            Shown::new(&s.rate, Unit::Mbps).to_string(),
            Shown::new(&s.load, Unit::Mbps).to_string(),
            s.flows.to_string(),
            Shown::new(&s.backlog, Unit::Bytes).to_string(),
            s.buffer
                .as_ref()
                .map(|b| Shown::new(b, Unit::Bytes).to_string())
                .unwrap_or_else(|| "-".into()),
            match s.fits() {
                Some(true) => "fits".into(),
                Some(false) => "OVERFLOW".into(),
                None => "-".into(),
            },
            s.fifo_delay
                .as_ref()
                .map(|d| Shown::new(d, Unit::Us).to_string())
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    out.push_str(&table(&rows));
    let fifo: Vec<&ServerBounds> = r
        .servers
        .iter()
        .filter(|s| s.fifo_delay.is_some())
        .collect();
    if !fifo.is_empty() {
        out.push_str("\nFIFO servers: SPEC §4 (loeser Eq. 4, 6) where every flow arrives as a T-SPEC with the port's rate as peak, and the rules of thumb B_est, t_est (Eq. 5, 7)\n");
        let mut rows = vec![vec![
            "server".to_string(),
            "B (Eq. 4)".into(),
            "t_switch (Eq. 6)".into(),
            "B_est".into(),
            "t_est".into(),
        ]];
        for s in fifo {
            let (b, t) = match &s.spec_port {
                Some(p) => (
                    format!(
                        "{}{}",
                        Shown::new(&p.backlog, Unit::Bytes),
                        if p.backlog_exact {
                            ""
                        } else {
                            " (upper bound: t_mux > g_max)"
                        }
                    ),
                    Shown::new(&p.delay, Unit::Us).to_string(),
                ),
                None => ("-".into(), "-".into()),
            };
            rows.push(vec![
                s.name.clone(),
                b,
                t,
                Shown::new(&s.backlog_estimate, Unit::Bytes).to_string(),
                Shown::new(&s.delay_estimate, Unit::Us).to_string(),
            ]);
        }
        out.push_str(&table(&rows));
    }
    out
}
