//! The `shaped-switch` scenario (loeser Fig. 4, Tables 4, 5 and 7): hosts A–E on a
//! Linux bridge whose port towards B sends at 100 Mbit/s (tc tbf, one FIFO). C, D and E
//! send at 40/32/20 Mbit/s, made to conform to a token bucket `(r, b)` by one of the
//! shapers the scenario compares (`shapers`, default all three):
//!
//! - `lockstep`: lockstep's own user-space bucket, refilled once per `Ts`
//!   (`probe stream --shape r,b,Ts --symmetric-burst`): every source empties its full
//!   bucket at the same instant, then sends what each refill allows;
//! - `tbf`, `htb`: the kernel qdisc on the sender's egress veth shapes unshaped traffic
//!   (`probe stream --greedy`: back to back from the same instant, held back only by
//!   the socket buffer once the qdisc queues). The qdisc commands come from `lockstep
//!   export`'s translation of the flow (`export::commands`), so a flow `(r, b)` maps to
//!   tc parameters in one place.
//!
//! A sends a small probe every period. Per (shaper, `Ts`) the report puts the loeser
//! bound for A's packets next to the observed maximum delay, the loss and the CPU time
//! shaping cost.
//!
//! **Mapping (r, b) to the kernel.** Both qdiscs get the bucket lockstep uses at that
//! `Ts`, `b = r·Ts + M` (tbf `burst b`; htb `rate r ceil r burst b cburst b`): a
//! kernel qdisc has no `Ts`, so for tbf and htb the `Ts` of a row only picks `b`. The
//! semantics differ, and so does the arrival curve each guarantees, which the bound of
//! the row uses:
//!
//! - lockstep adds `r·Ts` worth of tokens at once every `Ts` and sends while they last,
//!   so its output conforms to `(r, b + r·Ts)`, not `(r, b)`
//!   (`TokenBucket::affine_burst_nanobits`);
//! - tbf refills continuously (nanosecond clock, hrtimer watchdog) and sends a packet
//!   only when the tokens cover it: output `(r, b)` — loeser's convention, `t_max(b)`;
//! - htb also refills continuously, but lets a class send while its token count is
//!   not negative and charges the packet afterwards (at most one packet into debt):
//!   output `(r, b + M)`.
//!
//! tc keeps `burst` as a time (`b / r`, in 64 ns ticks), which may round away a few
//! bits; htb's `quantum` only shares bandwidth between sibling classes and plays no
//! part with one class. The tbf queue (`limit`) is set well above the socket buffer, so
//! a greedy sender is blocked by its socket rather than dropped by the qdisc.
//!
//! The scenario file is `[scenario] kind = "shaped-switch"` with its own fields; it
//! does not use the node/link/flow tables of the other scenarios. `lockstep sim run`
//! simulates it (`crate::sim::shaped`) with the bound computed here.

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::ops::Range;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use lockstep_core::units::{BitRate, Size};
use lockstep_core::{limits, ClockId, Duration};
use lockstep_netcalc::{fifo_port, PortFlow, Q};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::method::read_json;
use super::scenario::{ScenarioError, Source};
use super::topo::Topology;
use crate::export;
use lockstep_linux::now;
use lockstep_linux::proc::{Netns, Proc, Spec};
use lockstep_linux::rusage::{self, MachineCpu};
use lockstep_linux::tc::{self, QdiscStats};

/// What a UDP/IPv4 datagram adds on Ethernet (14 + 20 + 8 bytes; loeser's 1514-byte
/// frames count neither FCS nor preamble).
const FRAME_OVERHEAD: u64 = 42;
/// Bytes of a frame beyond its IP packet as the lab's port (tc tbf on a veth) and the
/// shapers count them: the Ethernet header.
pub const PORT_OVERHEAD: u64 = 14;
/// Queue of the switch port towards B, bytes (its tbf `limit`).
pub const PORT_QUEUE_LIMIT: u64 = 4_000_000;
/// loeser Table 4 (t_max, t_est, t_obs in µs; t_max/t_est include their 80 µs) and
/// Table 5 (CPU % of C, D, E), for Ts = 10 ms, 1 ms, 100 µs.
const LOESER: [(i64, [f64; 3], [f64; 3]); 3] = [
    (10_000_000, [9357.0, 9731.0, 8759.0], [4.1, 2.9, 2.3]),
    (1_000_000, [1380.0, 1345.0, 1300.0], [11.0, 9.0, 7.2]),
    (100_000, [582.0, 506.0, 438.0], [21.2, 17.2, 11.9]),
];
/// loeser Table 7 (Linux as the shaper; buckets C, D, E in bytes, t_max and t_obs in
/// µs, t_max including 80 µs): HTB on Linux 2.4.22 (10 ms tick), TBF on 2.6.0-test9
/// (1 ms tick). Shown next to our row of the same shaper at the `Ts` of that tick.
const LOESER_LINUX: [(ShaperKind, i64, [u64; 3], f64, f64); 2] = [
    (
        ShaperKind::Htb,
        10_000_000,
        [54022, 43536, 27810],
        9807.0,
        6928.0,
    ),
    (
        ShaperKind::Tbf,
        1_000_000,
        [6450, 5495, 4000],
        1372.0,
        995.0,
    ),
];
/// Names of the shaped senders, in the order of `rates`.
const SHAPED: [&str; 3] = ["c", "d", "e"];
/// The egress device of every host.
const HOST_DEV: &str = "eth0";
/// Queue of a kernel shaper (tbf `limit`): well above a UDP socket buffer's worth of
/// frames (the default 212992-byte buffer holds about 90 full frames), so a greedy
/// sender blocks on its socket instead of losing packets to the qdisc.
const KERNEL_QUEUE_LIMIT: Size = Size(1_000_000);

/// What makes C, D and E conform to their token bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ShaperKind {
    /// lockstep's user-space bucket refilled once per `Ts` (`probe stream --shape`).
    Lockstep,
    /// Linux `tbf` on the sender's egress.
    Tbf,
    /// Linux `htb`, one class, on the sender's egress.
    Htb,
}

impl ShaperKind {
    /// Every shaper, the default of `shapers`.
    pub const ALL: [ShaperKind; 3] = [ShaperKind::Lockstep, ShaperKind::Tbf, ShaperKind::Htb];

    pub fn name(self) -> &'static str {
        match self {
            ShaperKind::Lockstep => "lockstep",
            ShaperKind::Tbf => "tbf",
            ShaperKind::Htb => "htb",
        }
    }

    pub fn parse(s: &str) -> Option<ShaperKind> {
        ShaperKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// The kernel qdisc, for tbf and htb.
    pub fn qdisc(self) -> Option<export::QdiscChoice> {
        match self {
            ShaperKind::Lockstep => None,
            ShaperKind::Tbf => Some(export::QdiscChoice::Tbf),
            ShaperKind::Htb => Some(export::QdiscChoice::Htb),
        }
    }

    /// The arrival curve the shaper's output keeps, given the bucket `b` (see the
    /// module documentation).
    pub fn envelope(self) -> &'static str {
        match self {
            ShaperKind::Lockstep => "(r, b + r·Ts): refilled once per Ts",
            ShaperKind::Tbf => "(r, b): continuous refill, tokens must cover the packet",
            ShaperKind::Htb => "(r, b + M): continuous refill, one packet of debt",
        }
    }
}

impl std::fmt::Display for ShaperKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    scenario: RawShaped,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShaped {
    #[allow(dead_code)]
    kind: String,
    name: Spanned<String>,
    port_rate: Spanned<String>,
    t_mux: Option<Spanned<String>>,
    ts: Spanned<Vec<Spanned<String>>>,
    rates: Spanned<Vec<Spanned<String>>>,
    payload: Option<Spanned<String>>,
    probe_period: Option<Spanned<String>>,
    probe_size: Option<Spanned<String>>,
    duration: Option<Spanned<String>>,
    strategy: Option<Spanned<String>>,
    shapers: Option<Spanned<toml::Value>>,
}

/// A checked `shaped-switch` scenario.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Shaped {
    pub name: String,
    pub port_rate: BitRate,
    pub t_mux: Duration,
    pub ts: Vec<Duration>,
    /// Rates of C, D, E.
    pub rates: Vec<BitRate>,
    /// UDP payload of the shaped flows.
    pub payload: Size,
    pub probe_period: Duration,
    pub probe_size: Size,
    pub duration: Duration,
    /// `--strategy` of the senders: sleep (default) leaves the CPU to the others on a
    /// small host; hybrid or spin wake more precisely but each keeps a core busy.
    pub strategy: String,
    /// The shapers compared, in the order of the runs (default lockstep, tbf, htb).
    pub shapers: Vec<ShaperKind>,
}

/// `shapers = ["lockstep", "tbf", "htb"]`: a non-empty array of distinct known names.
fn parse_shapers(src: &Source, v: &Spanned<toml::Value>) -> Result<Vec<ShaperKind>, ScenarioError> {
    const EXPECTED: &str = "expected an array of \"lockstep\", \"tbf\", \"htb\"";
    let span = v.span();
    let Some(items) = v.get_ref().as_array() else {
        return Err(src.error(
            &span,
            "scenario.shapers",
            format!("{EXPECTED}, like [\"lockstep\", \"tbf\"]"),
        ));
    };
    if items.is_empty() {
        return Err(src.error(
            &span,
            "scenario.shapers",
            format!("{EXPECTED}: give at least one (or leave the field out for all three)"),
        ));
    }
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let field = format!("scenario.shapers[{i}]");
        let kind = match item.as_str() {
            Some(name) => ShaperKind::parse(name).ok_or_else(|| {
                src.error(
                    &span,
                    &field,
                    format!("expected lockstep, tbf or htb, got \"{name}\""),
                )
            })?,
            None => {
                return Err(src.error(
                    &span,
                    &field,
                    format!("expected lockstep, tbf or htb, got {item}"),
                ))
            }
        };
        if out.contains(&kind) {
            return Err(src.error(&span, &field, format!("\"{kind}\" is listed twice")));
        }
        out.push(kind);
    }
    Ok(out)
}

fn dur(src: &Source, s: &Spanned<String>, field: &str) -> Result<Duration, ScenarioError> {
    Duration::parse(s.get_ref())
        .map_err(|e| src.error(&s.span(), field, e.to_string()))
        .and_then(|d| {
            if d.is_negative() {
                Err(src.error(&s.span(), field, "must not be negative"))
            } else {
                Ok(d)
            }
        })
}

fn positive(src: &Source, s: &Spanned<String>, field: &str) -> Result<Duration, ScenarioError> {
    let d = dur(src, s, field)?;
    if d.is_positive() {
        Ok(d)
    } else {
        Err(src.error(&s.span(), field, "must be above 0"))
    }
}

/// `d` within a limit of `lockstep_core::limits`, or the error at `s`.
fn within(
    src: &Source,
    s: &Spanned<String>,
    field: &str,
    check: Result<(), String>,
) -> Result<(), ScenarioError> {
    check.map_err(|m| src.error(&s.span(), field, m))
}

fn rate(src: &Source, s: &Spanned<String>, field: &str) -> Result<BitRate, ScenarioError> {
    match s.get_ref().parse::<BitRate>() {
        Ok(r) if r.0 > 0 => Ok(r),
        Ok(_) => Err(src.error(&s.span(), field, "must be above 0")),
        Err(e) => Err(src.error(&s.span(), field, e.to_string())),
    }
}

fn size(src: &Source, s: &Spanned<String>, field: &str) -> Result<Size, ScenarioError> {
    s.get_ref()
        .parse::<Size>()
        .map_err(|e| src.error(&s.span(), field, e.to_string()))
}

impl Shaped {
    /// Parses and checks the file; errors name file, line and field.
    pub fn parse(file: &str, text: &str) -> Result<Shaped, ScenarioError> {
        let src = Source {
            file: file.to_string(),
            text: text.to_string(),
        };
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            src.error(&span, "", e.message().to_string())
        })?;
        let r = raw.scenario;
        let port_rate = rate(&src, &r.port_rate, "scenario.port_rate")?;
        let t_mux = match &r.t_mux {
            Some(s) => {
                let d = dur(&src, s, "scenario.t_mux")?;
                within(&src, s, "scenario.t_mux", limits::delay(d))?;
                d
            }
            None => Duration::ZERO,
        };
        if r.ts.get_ref().len() > limits::MAX_TFS {
            return Err(src.error(
                &r.ts.span(),
                "scenario.ts",
                format!(
                    "{} shaping intervals is above the limit of {} (each is a run per shaper)",
                    r.ts.get_ref().len(),
                    limits::MAX_TFS
                ),
            ));
        }
        let mut ts = Vec::new();
        for (i, s) in r.ts.get_ref().iter().enumerate() {
            let field = format!("scenario.ts[{i}]");
            let d = positive(&src, s, &field)?;
            within(&src, s, &field, limits::delay(d))?;
            ts.push(d);
        }
        if ts.is_empty() {
            return Err(src.error(&r.ts.span(), "scenario.ts", "give at least one Ts"));
        }
        let mut rates = Vec::new();
        for (i, s) in r.rates.get_ref().iter().enumerate() {
            rates.push(rate(&src, s, &format!("scenario.rates[{i}]"))?);
        }
        if rates.len() != SHAPED.len() {
            return Err(src.error(
                &r.rates.span(),
                "scenario.rates",
                "expected three rates (C, D, E)",
            ));
        }
        let total: u128 = rates.iter().map(|r| u128::from(r.0)).sum();
        if total >= u128::from(port_rate.0) {
            return Err(src.error(
                &r.rates.span(),
                "scenario.rates",
                "their sum must stay below port_rate (A's probe needs room too)",
            ));
        }
        let payload = match &r.payload {
            Some(s) => size(&src, s, "scenario.payload")?,
            None => Size(1472),
        };
        let probe_size = match &r.probe_size {
            Some(s) => size(&src, s, "scenario.probe_size")?,
            None => Size(64),
        };
        for (v, s, f) in [
            (payload, &r.payload, "scenario.payload"),
            (probe_size, &r.probe_size, "scenario.probe_size"),
        ] {
            if !(64..=1472).contains(&v.0) {
                let span: Range<usize> = s.as_ref().map(|s| s.span()).unwrap_or(0..0);
                return Err(src.error(&span, f, "expected 64B to 1472B (one Ethernet frame)"));
            }
        }
        let probe_period = match &r.probe_period {
            Some(s) => {
                let d = positive(&src, s, "scenario.probe_period")?;
                within(&src, s, "scenario.probe_period", limits::interval(d))?;
                within(&src, s, "scenario.probe_period", limits::duration(d))?;
                d
            }
            None => Duration::from_millis(1),
        };
        let duration = match &r.duration {
            Some(s) => {
                let d = positive(&src, s, "scenario.duration")?;
                within(&src, s, "scenario.duration", limits::sim_duration(d))?;
                d
            }
            None => Duration::from_secs(5),
        };
        let strategy = match &r.strategy {
            Some(st) => match st.get_ref().as_str() {
                v @ ("sleep" | "hybrid" | "spin") => v.to_string(),
                other => {
                    return Err(src.error(
                        &st.span(),
                        "scenario.strategy",
                        format!("expected sleep, hybrid or spin, got \"{other}\""),
                    ))
                }
            },
            None => "sleep".to_string(),
        };
        let shapers = match &r.shapers {
            None => ShaperKind::ALL.to_vec(),
            Some(v) => parse_shapers(&src, v)?,
        };
        let name = r.name.get_ref().trim().to_string();
        if name.is_empty() {
            return Err(src.error(&r.name.span(), "scenario.name", "must not be empty"));
        }
        let s = Shaped {
            name,
            port_rate,
            t_mux,
            ts,
            rates,
            payload,
            probe_period,
            probe_size,
            duration,
            strategy,
            shapers,
        };
        // the bound must be computable for every Ts (checks r < C, b ≥ M)
        for (i, t) in s.ts.iter().enumerate() {
            if let Err(e) = s.bound(*t) {
                let span = r.ts.get_ref().get(i).map(|x| x.span()).unwrap_or(0..0);
                return Err(src.error(&span, format!("scenario.ts[{i}]"), e.to_string()));
            }
        }
        Ok(s)
    }

    /// Bytes of the shaped flows' buckets at `ts`: `r·Ts + M` (loeser Table 3),
    /// rounded up to a whole byte.
    pub fn bucket_bytes(&self, rate: BitRate, ts: Duration) -> u64 {
        let bits = u128::from(rate.0) * ts.as_nanos().max(0) as u128;
        let bytes = bits.div_ceil(8 * 1_000_000_000);
        u64::try_from(bytes)
            .unwrap_or(u64::MAX)
            .saturating_add(self.payload.0 + FRAME_OVERHEAD)
    }

    /// The loeser bound for A's packets at `ts` behind lockstep's shaper: one FIFO
    /// port at `port_rate` with `t_mux`; C, D, E as token buckets `(r, bucket + r·Ts)`
    /// (the affine envelope of a `Ts`-refilled bucket,
    /// `TokenBucket::affine_burst_nanobits`), A as `(M/period, M)`.
    pub fn bound(&self, ts: Duration) -> Result<Bound, lockstep_netcalc::FifoPortError> {
        self.bound_of(ShaperKind::Lockstep, ts)
    }

    /// [`Shaped::bound`] with `b = bucket` for C, D, E when `envelope` is false:
    /// loeser's convention (Table 4), which leaves out the `r·Ts` a bucket refilled
    /// once per `Ts` can add (and the envelope of a tbf with `burst = bucket`).
    pub fn bound_with(
        &self,
        ts: Duration,
        envelope: bool,
    ) -> Result<Bound, lockstep_netcalc::FifoPortError> {
        self.bound_of(
            if envelope {
                ShaperKind::Lockstep
            } else {
                ShaperKind::Tbf
            },
            ts,
        )
    }

    /// The bound for A's packets when `kind` shapes C, D, E with the bucket of `ts`:
    /// each flow's burst is the one of [`ShaperKind::envelope`].
    pub fn bound_of(
        &self,
        kind: ShaperKind,
        ts: Duration,
    ) -> Result<Bound, lockstep_netcalc::FifoPortError> {
        self.bound_on_port(kind, ts, PORT_OVERHEAD)
    }

    /// [`Shaped::bound_of`] for a port that counts `overhead` bytes per frame beyond
    /// its IP packet ([`PORT_OVERHEAD`] in the lab; 38 on a real Ethernet port:
    /// header, FCS, preamble and gap) while the shapers still count frames of the
    /// payload and 42 bytes. In the port's bytes a flow of `f`-byte frames, `w` bytes
    /// each on the port, conforming to `(r, b)` conforms to `(r·w/f, b·w/f)` with
    /// `M = w`, exactly (every frame of a flow has the same size).
    pub fn bound_on_port(
        &self,
        kind: ShaperKind,
        ts: Duration,
        overhead: u64,
    ) -> Result<Bound, lockstep_netcalc::FifoPortError> {
        let c = Q::int(self.port_rate.0 as i64);
        let t_mux = Q::ratio(i128::from(self.t_mux.as_nanos()), 1_000_000_000).unwrap_or(Q::zero());
        let ts_s = Q::ratio(i128::from(ts.as_nanos()), 1_000_000_000).unwrap_or(Q::zero());
        // a frame's bytes on the port: the IP packet (at least 46 bytes) + overhead
        let on_port = |payload: u64| (payload + FRAME_OVERHEAD - 14).max(46) + overhead;
        let frame = self.payload.0 + FRAME_OVERHEAD;
        let m = Q::int((frame * 8) as i64);
        let scale =
            Q::ratio(i128::from(on_port(self.payload.0)), i128::from(frame)).unwrap_or(Q::one());
        let mut flows = Vec::new();
        for r in &self.rates {
            let rq = Q::int(r.0 as i64);
            let bucket = Q::int((self.bucket_bytes(*r, ts) * 8) as i64);
            let b = match kind {
                ShaperKind::Lockstep => &bucket + &(&rq * &ts_s),
                ShaperKind::Tbf => bucket,
                ShaperKind::Htb => &bucket + &m,
            };
            flows.push(PortFlow::new(&rq * &scale, &b * &scale, &m * &scale));
        }
        let ma = Q::int((on_port(self.probe_size.0) * 8) as i64);
        let period =
            Q::ratio(i128::from(self.probe_period.as_nanos()), 1_000_000_000).unwrap_or(Q::one());
        let ra = &ma / &period;
        flows.push(PortFlow::new(ra, ma.clone(), ma));
        let p = fifo_port(&c, &t_mux, &flows)?;
        Ok(Bound {
            delay: p.delay,
            delay_estimate: p.delay_estimate,
            backlog: p.backlog,
        })
    }

    /// Shaped flow `i` (C, D, E) as `lockstep export` takes it: on the host's egress
    /// device, rate `r`, burst = the bucket of `ts`, M = one frame, a queue of
    /// [`KERNEL_QUEUE_LIMIT`].
    pub fn kernel_flow(&self, i: usize, ts: Duration) -> Option<export::FlowSpec> {
        let host = SHAPED.get(i)?;
        let rate = *self.rates.get(i)?;
        Some(export::FlowSpec {
            name: host.to_string(),
            dev: HOST_DEV.to_string(),
            rate,
            burst: Size(self.bucket_bytes(rate, ts)),
            ceil: None,
            peak: None,
            max_packet: Size(self.payload.0 + FRAME_OVERHEAD),
            latency: None,
            limit: Some(KERNEL_QUEUE_LIMIT),
            matcher: export::FlowMatch::default(),
        })
    }

    /// The tc commands (arguments after `tc`, without the namespace) that make `kind`
    /// shape each of C, D, E at `ts`: `lockstep export`'s translation. Empty for
    /// lockstep's own shaper.
    pub fn kernel_commands(&self, kind: ShaperKind, ts: Duration) -> Vec<(String, Vec<String>)> {
        let Some(qdisc) = kind.qdisc() else {
            return Vec::new();
        };
        let opts = export::Options {
            qdisc,
            txtime_assist: false,
            reserved_prio: None,
        };
        let mut out = Vec::new();
        for (i, host) in SHAPED.iter().enumerate() {
            let Some(f) = self.kernel_flow(i, ts) else {
                continue;
            };
            let plan = export::Plan {
                flows: vec![f],
                ports: Vec::new(),
            };
            for dev in export::commands(&plan, &opts) {
                for c in dev.commands {
                    out.push((host.to_string(), c.argv));
                }
            }
        }
        out
    }

    /// The probe command lines of one run (without the executable and netns prefix).
    pub fn commands(
        &self,
        kind: ShaperKind,
        ts: Duration,
        start_at_ns: i64,
        dir: &Path,
    ) -> Vec<(String, Vec<String>)> {
        let d = self.duration.to_string();
        let idle = "1s".to_string();
        let p = |f: &str| dir.join(f).display().to_string();
        let mut v = vec![
            (
                "b".to_string(),
                vec![
                    "probe".into(),
                    "sink".into(),
                    "--bind".into(),
                    format!("{}:9000", addr("b")),
                    "--idle-timeout".into(),
                    idle.clone(),
                    "--json".into(),
                ],
            ),
            (
                "b".to_string(),
                vec![
                    "probe".into(),
                    "sink".into(),
                    "--bind".into(),
                    format!("{}:9001", addr("b")),
                    "--idle-timeout".into(),
                    idle,
                    "--json".into(),
                ],
            ),
            (
                "a".to_string(),
                vec![
                    "probe".into(),
                    "stream".into(),
                    "--to".into(),
                    format!("{}:9000", addr("b")),
                    "--period".into(),
                    self.probe_period.to_string(),
                    "--size".into(),
                    format!("{}B", self.probe_size.0),
                    "--start-at-ns".into(),
                    start_at_ns.to_string(),
                    "--strategy".into(),
                    self.strategy.clone(),
                    "-D".into(),
                    d.clone(),
                    "--json".into(),
                ],
            ),
        ];
        for (i, (h, r)) in SHAPED.iter().zip(&self.rates).enumerate() {
            let mut args: Vec<String> = vec![
                "probe".into(),
                "stream".into(),
                "--to".into(),
                format!("{}:9001", addr("b")),
                "--flow".into(),
                (i + 1).to_string(),
            ];
            match kind {
                ShaperKind::Lockstep => args.extend([
                    "--shape".into(),
                    format!("{}bit/s,{}B,{}", r.0, self.bucket_bytes(*r, ts), ts),
                    "--symmetric-burst".into(),
                ]),
                // unshaped: the qdisc on the host's egress shapes
                ShaperKind::Tbf | ShaperKind::Htb => args.push("--greedy".into()),
            }
            v.push((
                h.to_string(),
                args.into_iter()
                    .chain([
                        "--size".into(),
                        format!("{}B", self.payload.0),
                        "--start-at-ns".into(),
                        start_at_ns.to_string(),
                        "--strategy".into(),
                        self.strategy.clone(),
                        "-D".into(),
                        d.clone(),
                        "--json".into(),
                    ])
                    .collect(),
            ));
        }
        let _ = p;
        v
    }
}

/// The bound for A's packets at one `Ts`, in seconds and bits (exact).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bound {
    /// Eq. 6.
    pub delay: Q,
    /// Eq. 7, the rule of thumb `Σb/C + t_mux`.
    pub delay_estimate: Q,
    /// Eq. 4, bits.
    pub backlog: Q,
}

fn addr(host: &str) -> Ipv4Addr {
    let i = ["a", "b", "c", "d", "e"]
        .iter()
        .position(|h| *h == host)
        .unwrap_or(0);
    Ipv4Addr::new(10, 77, 0, i as u8 + 1)
}

fn ns_name(host: &str) -> String {
    format!("ls-shp-{host}")
}

const HOSTS: [&str; 5] = ["a", "b", "c", "d", "e"];
const SWITCH: &str = "ls-shp-sw";

fn ip(args: &[&str]) -> Result<()> {
    lockstep_linux::cmd::ip(args)
        .map(|_| ())
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// Builds the switch: namespaces, veths, the bridge and the tbf on B's port; all of
/// it is removed when the returned topology is dropped.
fn build(s: &Shaped) -> Result<Topology> {
    let mut t = Topology::new();
    t.fresh_namespace(SWITCH)?;
    ip(&["-n", SWITCH, "link", "add", "br0", "type", "bridge"])?;
    t.up(SWITCH, "br0")?;
    for h in HOSTS {
        let ns = ns_name(h);
        let port = format!("p{h}");
        t.fresh_namespace(&ns)?;
        t.veth(&ns, HOST_DEV, SWITCH, &port)?;
        ip(&["-n", SWITCH, "link", "set", &port, "master", "br0"])?;
        t.up(SWITCH, &port)?;
        t.addr(&ns, HOST_DEV, addr(h), 24)?;
        t.up(&ns, HOST_DEV)?;
    }
    let rate = format!("{}bit", s.port_rate.0);
    lockstep_linux::cmd::tc(&[
        "-n",
        SWITCH,
        "qdisc",
        "add",
        "dev",
        "pb",
        "root",
        "tbf",
        "rate",
        &rate,
        "burst",
        "3028",
        "limit",
        &PORT_QUEUE_LIMIT.to_string(),
    ])
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(t)
}

/// The measured figures of one run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Observed {
    pub received: u64,
    pub lost: u64,
    /// Largest one-way delay of A's packets, application to application (the sink's
    /// `one_way`): includes both hosts' scheduling, which on a small shared machine
    /// running six probes can dominate.
    pub max_delay_ns: Option<i64>,
    /// Largest delay from A's kernel TX timestamp to B's kernel RX timestamp (the
    /// sink's `wire_stack`): the bridge and its queue, without the applications.
    pub max_net_delay_ns: Option<i64>,
    /// Rates C, D, E achieved on the wire (bit/s): below the reservation when the
    /// host could not keep up (or, with a kernel shaper, what the qdisc let through).
    pub shaper_wire_bps: Vec<Option<f64>>,
    /// Sender CPU load (CPU time / wall time) of C, D, E.
    pub cpu_load: Vec<Option<f64>>,
    /// Sender CPU time of C, D, E over the sending loop (getrusage of the sender
    /// process, user + system; on a tick-accounted kernel its system time includes the
    /// softirq work — qdisc, veth, bridge — that ran while it was on the CPU).
    pub cpu_ns: Vec<Option<i64>>,
    pub shaped_received: u64,
    /// Machine-wide CPU time over the sending window, all CPUs (`/proc/stat` deltas):
    /// catches the kernel shaper's work that runs outside the senders (tbf/htb
    /// watchdog timers and the transmit softirq they raise), but also every other
    /// process on the machine.
    pub machine: Option<MachineCpu>,
    /// The window `machine` covers.
    pub machine_window_ns: Option<i64>,
    /// Counters of the kernel shaper's root qdisc on C, D, E's egress (tbf, htb).
    pub qdisc: Vec<Option<QdiscStats>>,
    /// The tc commands that set up the kernel shaper (tbf, htb).
    pub kernel_commands: Vec<String>,
    /// A stop (SIGINT/SIGTERM) ended the run early: its processes were stopped and
    /// what they had measured read.
    pub interrupted: bool,
}

impl Observed {
    /// Sender CPU time of C, D and E together (`None` if one is missing).
    pub fn cpu_total_ns(&self) -> Option<i64> {
        self.cpu_ns.iter().try_fold(0i64, |a, c| c.map(|c| a + c))
    }

    /// The share of all CPUs' time that was idle over the window: near 0, the lab's
    /// software network (veth backlogs, the bridge, the port's tbf) competed for CPU
    /// and its delays are not the wire's.
    pub fn idle_share(&self) -> Option<f64> {
        let m = self.machine?;
        let total = m.user_ns
            + m.nice_ns
            + m.system_ns
            + m.idle_ns
            + m.iowait_ns
            + m.irq_ns
            + m.softirq_ns
            + m.steal_ns;
        (total > 0).then(|| m.idle_ns as f64 / total as f64)
    }

    /// Machine softirq time as a share of one CPU over the window.
    pub fn softirq_load(&self) -> Option<f64> {
        let m = self.machine?;
        let w = self.machine_window_ns.filter(|w| *w > 0)?;
        Some(m.softirq_ns as f64 / w as f64)
    }
}

/// Names of the processes of one run, in the order of [`Shaped::commands`].
const PROCS: [&str; 6] = [
    "sink-a",
    "sink-shaped",
    "stream-a",
    "stream-c",
    "stream-d",
    "stream-e",
];

/// Starts `exe args` as `name` through `ip netns exec` in `host`'s namespace, stdout
/// to `dir/<name>.json`, stderr to `dir/<name>.log`. It stays in this process's
/// group, so a Ctrl-C at the terminal reaches it too.
fn spawn(name: &str, host: &str, exe: &Path, args: &[String], dir: &Path) -> Result<Proc> {
    let spec = Spec::new(name, exe)
        .args(args)
        .netns(Netns::Exec(ns_name(host)))
        .stdout(dir.join(format!("{name}.json")))
        .stderr(dir.join(format!("{name}.log")))
        .in_caller_group();
    Ok(spec.spawn()?)
}

/// Waits for each in turn; says which failed unless `quiet`. A stop asked of lockstep
/// is passed on to each (they write what they measured): `true` then.
fn wait_all<'a>(procs: impl Iterator<Item = &'a mut Proc>, quiet: bool) -> Result<bool> {
    let mut stopped = false;
    for p in procs {
        let e = p.wait_or_stop(crate::stop::CHILD_GRACE)?;
        stopped |= e.stopped;
        if !e.status.success() && !e.stopped && !quiet {
            eprintln!("  {} exited with {}", p.name(), e.status);
        }
    }
    Ok(stopped)
}

/// One run of `kind` at `ts`: build, set up the kernel shaper, start sinks then
/// streams, wait, collect, tear down.
pub fn run_one(
    s: &Shaped,
    kind: ShaperKind,
    ts: Duration,
    dir: &Path,
    quiet: bool,
) -> Result<Observed> {
    // removed when this returns, after the processes below
    let _net = build(s)?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut o = Observed::default();
    let qdisc_kind = kind.name();
    for (host, argv) in s.kernel_commands(kind, ts) {
        let ns = ns_name(&host);
        o.kernel_commands.push(lockstep_linux::cmd::command_line(
            "tc",
            &tc::in_netns_args(&ns, &argv),
        ));
        tc::run_in_netns(&ns, qdisc_kind, &argv)
            .with_context(|| format!("setting up {kind} on {ns}"))?;
    }
    let exe = std::env::current_exe().context("finding the lockstep binary")?;
    let start = now(ClockId::Monotonic).ns + 1_500_000_000;
    let cmds = s.commands(kind, ts, start, dir);
    let mut children: Vec<Proc> = Vec::new();
    for (i, (host, args)) in cmds.iter().enumerate() {
        let name = PROCS.get(i).copied().unwrap_or("extra");
        children.push(spawn(name, host, &exe, args, dir)?);
        if i == 1 {
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
    if !quiet {
        eprintln!("{kind} Ts {ts}: running {} …", s.duration);
    }
    // The machine's CPU time over the sending window: from the common start to
    // the moment the last shaped sender exits.
    while now(ClockId::Monotonic).ns < start && !crate::stop::stop_requested() {
        let left = start - now(ClockId::Monotonic).ns;
        std::thread::sleep(std::time::Duration::from_nanos(
            left.clamp(0, 20_000_000) as u64
        ));
    }
    let m0 = rusage::machine_cpu();
    let t0 = now(ClockId::Monotonic).ns;
    // streams first (A, C, D, E), then the sinks (they stop after an idle second)
    o.interrupted = wait_all(children.iter_mut().skip(2), quiet)?;
    let m1 = rusage::machine_cpu();
    o.machine_window_ns = Some(now(ClockId::Monotonic).ns - t0);
    o.machine = m0.zip(m1).map(|(a, b)| b.since(a));
    o.interrupted |= wait_all(children.iter_mut().take(2), quiet)?;
    if kind.qdisc().is_some() {
        for h in SHAPED {
            o.qdisc.push(
                tc::root_stats_in_netns(&ns_name(h), HOST_DEV)
                    .ok()
                    .flatten(),
            );
        }
    }
    if let Some(v) = read_json(&dir.join("sink-a.json")) {
        let r = &v["results"];
        o.received = r["totals"]["received"].as_u64().unwrap_or(0);
        o.lost = r["totals"]["lost"].as_u64().unwrap_or(0);
        o.max_delay_ns = r["one_way"]["max_ns"].as_i64();
        o.max_net_delay_ns = r["wire_stack"]["max_ns"].as_i64();
    }
    if let Some(v) = read_json(&dir.join("sink-shaped.json")) {
        o.shaped_received = v["results"]["totals"]["received"].as_u64().unwrap_or(0);
    }
    let frame_bits = ((s.payload.0 + FRAME_OVERHEAD) * 8) as f64;
    for n in ["stream-c", "stream-d", "stream-e"] {
        let v = read_json(&dir.join(format!("{n}.json")));
        let cpu = v.as_ref().map(|v| v["results"]["sender_cpu"].clone());
        o.cpu_load
            .push(cpu.as_ref().and_then(|c| c["load"].as_f64()));
        o.cpu_ns
            .push(cpu.as_ref().and_then(|c| c["total_ns"].as_i64()));
        // lockstep's shaper reports its wire rate; a greedy sender its packet rate
        o.shaper_wire_bps.push(v.as_ref().and_then(|v| {
            v["results"]["shaper"]["wire_rate_bps"]
                .as_f64()
                .or_else(|| {
                    v["results"]["achieved_pps"]
                        .as_f64()
                        .map(|pps| pps * frame_bits)
                })
        }));
    }
    Ok(o)
}

fn us(q: &Q) -> String {
    format!("{:.1}", q.to_f64() * 1e6)
}

/// One row of the table: a shaper at one `Ts`, measured or not (`lab plan`).
pub type Row = (ShaperKind, Duration, Option<Observed>);

/// loeser's figures for a row: Tables 4–5 for lockstep's shaper, Table 7 for the
/// Linux shaper at the `Ts` of its kernel's tick.
pub(crate) fn paper(kind: ShaperKind, ts: Duration) -> String {
    match kind {
        ShaperKind::Lockstep => {
            LOESER
                .iter()
                .find(|(n, _, _)| *n == ts.as_nanos())
                .map(|(_, d, c)| {
                    format!(
                        "T4 {} {} {}; T5 {}/{}/{}",
                        d[0], d[1], d[2], c[0], c[1], c[2]
                    )
                })
        }
        _ => LOESER_LINUX
            .iter()
            .find(|(k, n, _, _, _)| *k == kind && *n == ts.as_nanos())
            .map(|(_, _, b, tm, to)| format!("T7 b {}/{}/{}; {tm} - {to}", b[0], b[1], b[2])),
    }
    .unwrap_or_else(|| "-".into())
}

/// The table of one scenario: every (shaper, Ts) next to loeser's Tables 4, 5 and 7.
pub fn table(s: &Shaped, rows: &[Row]) -> String {
    let ms = |n: &Option<i64>| {
        n.map(|n| format!("{:.1}", n as f64 / 1e3))
            .unwrap_or_else(|| "-".into())
    };
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{:>8} {:>6} | {:>9} {:>9} {:>9} | {:>9} {:>9} | {:>6} {:>4} | {:>14} {:>7} {:>7} {:>6} | {:>14} | loeser t_max t_est t_obs µs; CPU %",
        "shaper", "Ts", "t_max µs", "t_est µs", "t_max(b)", "app µs", "net µs", "recv A", "lost", "CPU % C/D/E", "CPU ms", "sirq %", "idle %", "Mbit/s C/D/E"
    );
    for (kind, ts, o) in rows {
        let (tm, te) = match s.bound_of(*kind, *ts) {
            Ok(b) => (us(&b.delay), us(&b.delay_estimate)),
            Err(e) => (e.to_string(), String::new()),
        };
        let tl = s
            .bound_with(*ts, false)
            .map(|b| us(&b.delay))
            .unwrap_or_default();
        let list = |v: &[Option<f64>], scale: f64| {
            v.iter()
                .map(|l| {
                    l.map(|l| format!("{:.1}", l * scale))
                        .unwrap_or_else(|| "-".into())
                })
                .collect::<Vec<_>>()
                .join("/")
        };
        let dash = || "-".to_string();
        let (app, net, recv, lost, cpu, total, sirq, idle, rate) = match o {
            Some(o) => (
                ms(&o.max_delay_ns),
                ms(&o.max_net_delay_ns),
                o.received.to_string(),
                o.lost.to_string(),
                list(&o.cpu_load, 100.0),
                o.cpu_total_ns()
                    .map(|n| format!("{:.0}", n as f64 / 1e6))
                    .unwrap_or_else(dash),
                o.softirq_load()
                    .map(|l| format!("{:.1}", l * 100.0))
                    .unwrap_or_else(dash),
                o.idle_share()
                    .map(|l| format!("{:.0}", l * 100.0))
                    .unwrap_or_else(dash),
                list(&o.shaper_wire_bps, 1e-6),
            ),
            None => (
                dash(),
                dash(),
                dash(),
                dash(),
                dash(),
                dash(),
                dash(),
                dash(),
                dash(),
            ),
        };
        let _ = writeln!(
            t,
            "{:>8} {:>6} | {tm:>9} {te:>9} {tl:>9} | {app:>9} {net:>9} | {recv:>6} {lost:>4} | {cpu:>14} {total:>7} {sirq:>7} {idle:>6} | {rate:>14} | {}",
            kind.name(),
            ts.to_string(),
            paper(*kind, *ts)
        );
    }
    let _ = writeln!(
        t,
        "bound: loeser Eq. 6 (t_max) and Eq. 7 (t_est) for A's packets, one FIFO port at {} bit/s, t_mux {}; \
         bucket b = r·Ts + M for every shaper (tbf/htb have no Ts: the row's Ts picks b); \
         C/D/E as lockstep (r, b + r·Ts), tbf (r, b), htb (r, b + M); t_max(b): Eq. 6 with (r, b) (loeser's convention). \
         app = A's one-way max (application to application), net = kernel TX to RX timestamp max. \
         CPU % = each sender's CPU time (getrusage, user + system) / wall time; CPU ms = the three together; \
         sirq % = machine softirq time (/proc/stat, all CPUs, every process) / wall time; \
         idle % = the machine's idle share (near 0: the software network competed for CPU). \
         loeser: T4 t_max t_est t_obs µs (t_max/t_est add 80 µs), T5 CPU % C/D/E, T7 buckets B, t_max - t_obs µs",
        s.port_rate.0, s.t_mux
    );
    t
}

/// The rows of a scenario, shaper outer, `Ts` inner.
pub fn plan_rows(s: &Shaped) -> Vec<(ShaperKind, Duration)> {
    s.shapers
        .iter()
        .flat_map(|k| s.ts.iter().map(move |t| (*k, *t)))
        .collect()
}

/// `lab plan` for this scenario: the bounds and the commands.
pub fn describe(s: &Shaped) -> String {
    let rows: Vec<Row> = plan_rows(s)
        .into_iter()
        .map(|(k, t)| (k, t, None))
        .collect();
    let mut t = format!("scenario {} (shaped-switch): OK\n", s.name);
    t.push_str(&table(s, &rows));
    for (kind, ts) in plan_rows(s) {
        let _ = writeln!(t, "\n{kind} Ts {ts}: {}", kind.envelope());
        for (h, argv) in s.kernel_commands(kind, ts) {
            let _ = writeln!(
                t,
                "  {}",
                lockstep_linux::cmd::command_line("tc", &tc::in_netns_args(&ns_name(&h), &argv))
            );
        }
        for (h, args) in s.commands(kind, ts, 0, Path::new(".")) {
            let _ = writeln!(t, "  {}: lockstep {}", ns_name(&h), args.join(" "));
        }
    }
    t
}

fn q_json(q: Option<&Q>) -> serde_json::Value {
    match q {
        Some(q) => serde_json::json!({ "exact": q.to_string(), "float": q.to_f64() }),
        None => serde_json::Value::Null,
    }
}

/// What a summary.json row says of the bound at (`kind`, `ts`) for a port counting
/// `overhead` bytes per frame beyond the IP packet ([`Shaped::bound_on_port`]): the
/// buckets, the envelope, the bounds exact (strings of seconds or bits) and as floats.
pub fn bound_json(
    s: &Shaped,
    kind: ShaperKind,
    ts: Duration,
    overhead: u64,
) -> serde_json::Map<String, serde_json::Value> {
    let b = s.bound_on_port(kind, ts, overhead).ok();
    let bb = s.bound_on_port(ShaperKind::Tbf, ts, overhead).ok();
    let v = serde_json::json!({
        "shaper": kind,
        "ts": ts.to_string(),
        "ts_ns": ts.as_nanos(),
        "bucket_bytes": s.rates.iter().map(|r| s.bucket_bytes(*r, ts)).collect::<Vec<_>>(),
        "envelope": kind.envelope(),
        "bound_s": b.as_ref().map(|b| b.delay.to_string()),
        "bound_estimate_s": b.as_ref().map(|b| b.delay_estimate.to_string()),
        "backlog_bits": b.as_ref().map(|b| b.backlog.to_string()),
        "bound_b_bucket_s": bb.as_ref().map(|b| b.delay.to_string()),
        "bound": q_json(b.as_ref().map(|b| &b.delay)),
        "bound_estimate": q_json(b.as_ref().map(|b| &b.delay_estimate)),
    });
    match v {
        serde_json::Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}

/// The summary.json entry of a row.
fn row_json(s: &Shaped, (kind, ts, o): &Row) -> serde_json::Value {
    let mut m = bound_json(s, *kind, *ts, PORT_OVERHEAD);
    let lab = serde_json::json!({
        "sender_cpu_total_ns": o.as_ref().and_then(|o| o.cpu_total_ns()),
        "softirq_load": o.as_ref().and_then(|o| o.softirq_load()),
        "machine_idle_share": o.as_ref().and_then(|o| o.idle_share()),
        "observed": o,
    });
    if let serde_json::Value::Object(l) = lab {
        m.extend(l);
    }
    serde_json::Value::Object(m)
}

/// report.html of the scenario: one run per row, A's probe flow in each, the table
/// and its legend as notes.
fn html_report(
    s: &Shaped,
    doc: &crate::report::ResultDoc,
    out: &Path,
    rows: &[Row],
    tab: &str,
) -> crate::report::html::LabReport {
    use crate::report::html::{summary_of, FlowReport, LabReport, RunReport};
    let runs = rows
        .iter()
        .map(|(kind, ts, o)| {
            let dir = out.join(row_dir(*kind, *ts));
            let sink = read_json(&dir.join("sink-a.json"));
            let sent = read_json(&dir.join("stream-a.json"))
                .and_then(|v| v["results"]["sent"].as_u64())
                .unwrap_or(0);
            let latency = sink
                .as_ref()
                .map(|v| summary_of(&v["results"]["one_way"]))
                .unwrap_or_default();
            RunReport {
                label: format!("{kind} Ts={ts}"),
                tf_ns: None,
                flows: vec![FlowReport {
                    name: "A→B probe".to_string(),
                    latency,
                    sent,
                    received: o.as_ref().map_or(0, |o| o.received),
                    lost: o.as_ref().map_or(0, |o| o.lost),
                    ..FlowReport::default()
                }],
                hops: Vec::new(),
                bound_note: None,
            }
        })
        .collect();
    LabReport::for_doc(
        format!("lockstep lab: {} (shaped-switch)", s.name),
        &s.name,
        doc,
        runs,
        tab,
    )
}

/// Where a row's files go under the output directory.
fn row_dir(kind: ShaperKind, ts: Duration) -> String {
    format!("{kind}-ts-{ts}")
}

/// `lab run` for this scenario.
pub fn run(
    s: &Shaped,
    duration: Option<Duration>,
    output: Option<PathBuf>,
    quiet: bool,
    gates: &crate::gates::GateArgs,
) -> Result<()> {
    super::run::require_root("lab run")?;
    let mut s = s.clone();
    if let Some(d) = duration {
        s.duration = d;
    }
    for kind in &s.shapers {
        if kind.qdisc().is_some() {
            tc::require_qdisc(kind.name()).map_err(|e| crate::EnvError(e.to_string()))?;
        }
    }
    let out = output.unwrap_or_else(|| super::run::default_output(&s.name));
    let mut rows: Vec<Row> = Vec::new();
    let planned = plan_rows(&s);
    for &(kind, ts) in &planned {
        if crate::stop::stop_requested() {
            break;
        }
        let dir = out.join(row_dir(kind, ts));
        let o = run_one(&s, kind, ts, &dir, quiet)?;
        let stopped = o.interrupted;
        rows.push((kind, ts, Some(o)));
        if stopped {
            break;
        }
    }
    // what a stop left undone: the row it cut short, the rows not run
    let interrupted = crate::stop::stop_requested().then(|| {
        let mut t = match rows.last() {
            Some((k, t, Some(o))) if o.interrupted => format!("{k} Ts {t} stopped early"),
            _ => "stopped between rows".to_string(),
        };
        let rest: Vec<String> = planned[rows.len()..]
            .iter()
            .map(|(k, t)| format!("{k} Ts {t}"))
            .collect();
        if !rest.is_empty() {
            t.push_str(&format!("; not run: {}", rest.join(", ")));
        }
        t
    });
    let mut tab = table(&s, &rows);
    if let Some(i) = &interrupted {
        tab.push_str(&format!("interrupted by SIGINT/SIGTERM: {i}\n"));
    }
    let mut doc = crate::report::ResultDoc::new("lab.shaped-switch", &s);
    let per: Vec<serde_json::Value> = rows.iter().map(|r| row_json(&s, r)).collect();
    doc.insert("runs", &per);
    if let Some(i) = &interrupted {
        doc.insert("interrupted", i);
    }
    let report = html_report(&s, &doc, &out, &rows, &tab);
    let crossings = gates.check_runs(&report.runs);
    let failed = gates.record(&mut doc, &crossings);
    // what report.html shows, so that `lockstep report` can make it again
    doc.insert("report", &report);
    let html = crate::report::html::render(&report);
    crate::report::write_atomic(&out.join("report.html"), html.as_bytes())?;
    let text = serde_json::to_string_pretty(&doc)?;
    crate::report::write_atomic(&out.join("summary.json"), text.as_bytes())?;
    print!("{tab}");
    if let Some(i) = interrupted {
        crate::say::say!("results: {}", out.display());
        return Err(crate::Interrupted(i).into());
    }
    let silent: Vec<String> = rows
        .iter()
        .filter(|(_, _, o)| o.as_ref().is_some_and(|o| o.received == 0))
        .map(|(k, t, _)| format!("{k} Ts {t}"))
        .collect();
    if !silent.is_empty() {
        bail!(
            "A's packets did not arrive in {} (see {})",
            silent.join(", "),
            out.display()
        );
    }
    crate::say::say!("results: {}", out.display());
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

#[cfg(test)]
#[path = "shaped_tests.rs"]
mod tests;
