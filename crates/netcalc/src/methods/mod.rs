//! Delay bounds by method, for `lockstep calc`: total flow analysis (TFA), separated
//! flow analysis (SFA), pay multiplexing only once (PMOO) and linear programs (LP),
//! each on the whole network at once.
//!
//! These are the tightest forms of each method this crate knows, and they share one
//! propagation of arrival curves ([`arrivals`]) that bounds what leaves a server
//! both per flow and per *bundle*: the flows that leave a server towards the same
//! next server are bounded together by the deconvolution of their sum, which charges
//! their bursts once instead of once per flow. They are not the admission
//! controller's analyses ([`crate::admission`]): those keep every bound monotone in
//! the traffic (admitting a flow never lowers another's bound), which the tighter
//! forms here do not promise.
//!
//! Every bound is exact (rationals) and valid: the property tests check each against
//! an exact fluid simulation of symmetric bursts.

pub mod arrivals;
mod cyclic;
pub mod diverge;
pub mod fixpoint;
pub mod lp;
pub mod plp;
pub(crate) mod pmoo;
mod sfa;
mod tfa;

use crate::model::{InputError, Network};
use crate::q::Q;

pub use arrivals::Arrivals;

/// An analysis method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    /// Total flow analysis: a delay bound per server, summed along the path.
    Tfa,
    /// Separated flow analysis: the residual service of every hop convolved, the
    /// flow's burst paid once.
    Sfa,
    /// Pay multiplexing only once: one residual service for the whole path, each
    /// cross flow's burst paid once (arbitrary multiplexing).
    Pmoo,
    /// Linear programs over the instants FIFO and the service curves relate along
    /// the path ([`lp`]) and over the servers upstream of it ([`plp`]), the smaller
    /// bound (FIFO paths; floating point, rounded up); on a cyclic network their
    /// fixed point ([`fixpoint`]).
    Lp,
}

impl Method {
    pub const ALL: [Method; 4] = [Method::Tfa, Method::Sfa, Method::Pmoo, Method::Lp];

    /// `tfa`, `sfa`, `pmoo`.
    pub fn name(self) -> &'static str {
        match self {
            Method::Tfa => "tfa",
            Method::Sfa => "sfa",
            Method::Pmoo => "pmoo",
            Method::Lp => "lp",
        }
    }

    /// The method named `s` (`tfa`, `sfa`, `pmoo`).
    pub fn parse(s: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// Why a method gives no bound for a flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoBound {
    /// The method does not apply to this flow (e.g. PMOO on a FIFO server).
    NotApplicable(String),
    /// The method's bound is infinite (a residual service of rate zero).
    Unbounded(String),
}

impl std::fmt::Display for NoBound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoBound::NotApplicable(why) => write!(f, "not applicable: {why}"),
            NoBound::Unbounded(why) => write!(f, "unbounded: {why}"),
        }
    }
}

/// One flow's end-to-end delay bound by one method, seconds.
pub type Bound = Result<Q, NoBound>;

/// The bounds of every flow of `net` (in its order) by `method`. The network must
/// be valid (as [`crate::parse_network`] and [`crate::Admission::new`] check it).
///
/// On a cyclic network (servers that depend on each other in a cycle, or a flow
/// that visits a server twice) the TFA is its fixed point ([`cyclic`]) and the LP
/// the fixed point of [`fixpoint`]; SFA and PMOO give no bound there.
pub fn bounds(net: &Network, method: Method) -> Result<Vec<Bound>, InputError> {
    bounds_with(net, method, Options::default())
}

/// What a network file does not say about its servers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Every server is a link of its rate sending whole packets (at most the largest
    /// `max_packet` of its flows): what leaves it is also bounded by `R t + M`. Used
    /// by the TFA of cyclic networks, where it keeps bursts from growing around the
    /// cycle.
    pub line_shaping: bool,
}

/// [`bounds`] with [`Options`].
pub fn bounds_with(net: &Network, method: Method, opts: Options) -> Result<Vec<Bound>, InputError> {
    bounds_until(net, method, opts, &|| false)
}

/// [`bounds_with`], asking `stop` before each flow (and each round of a cyclic
/// network's fixed point): once it answers yes the flows not analysed yet are left
/// out, so the vector is shorter than the network's flows (a cyclic network's fixed
/// point gives every bound or none). What `lockstep calc` runs, so that Ctrl-C ends a
/// long analysis with the bounds it has.
pub fn bounds_until(
    net: &Network,
    method: Method,
    opts: Options,
    stop: &dyn Fn() -> bool,
) -> Result<Vec<Bound>, InputError> {
    let mut out = Vec::with_capacity(net.flows.len());
    bounds_each(net, method, opts, stop, &mut |b| out.push(b))?;
    Ok(out)
}

/// [`bounds_until`] a flow at a time: `each` gets every flow's bound as soon as it is
/// known, in the network's order (a cyclic network's all at the end), so a caller
/// keeps what was found even while one long program is still being solved.
pub fn bounds_each(
    net: &Network,
    method: Method,
    opts: Options,
    stop: &dyn Fn() -> bool,
    each: &mut dyn FnMut(Bound),
) -> Result<(), InputError> {
    if is_cyclic(net) {
        let all = match method {
            Method::Tfa => cyclic::tfa(net, opts.line_shaping, stop)?,
            Method::Lp => fixed_point_lp_until(net, opts, stop)?,
            _ => vec![
                Err(NoBound::NotApplicable(format!(
                    "cyclic network ({} needs a feed-forward one)",
                    method.name().to_uppercase()
                )));
                net.flows.len()
            ],
        };
        all.into_iter().for_each(each);
        return Ok(());
    }
    let Some(arr) = Arrivals::of_until(net, stop)? else {
        return Ok(());
    };
    let flow = match method {
        Method::Tfa => tfa::flow,
        Method::Sfa => sfa::flow,
        Method::Pmoo => pmoo::flow,
        Method::Lp => lp::flow,
    };
    for f in 0..arr.paths.len() {
        if stop() {
            break;
        }
        each(flow(&arr, f));
    }
    Ok(())
}

/// One flow's separated bound along its whole path alone (no aggregate from a
/// server on), by each way of choosing the FIFO residuals.
#[derive(Clone, Debug)]
pub struct SfaByTheta {
    /// `θ = T + α_c(0+)/R` at every FIFO server.
    pub burst: Bound,
    /// `θ = T + b_c/R` at every FIFO server: the classic `β_{R − r_c, T + b_c/R}`.
    pub envelope: Bound,
    /// Every server's θ chosen jointly for the smallest bound (all-FIFO paths).
    pub optimal: Bound,
}

/// [`SfaByTheta`] for every flow of a feed-forward `net`: what the SFA chooses from,
/// for the property tests (the SFA of [`bounds`] is never above any of them).
pub fn sfa_by_theta(net: &Network) -> Result<Vec<SfaByTheta>, InputError> {
    let arr = Arrivals::of(net)?;
    Ok((0..arr.paths.len())
        .map(|f| SfaByTheta {
            burst: sfa::alone_by(&arr, f, sfa::Choice::Fixed(arrivals::Theta::Burst)),
            envelope: sfa::alone_by(&arr, f, sfa::Choice::Fixed(arrivals::Theta::Envelope)),
            optimal: sfa::alone_by(&arr, f, sfa::Choice::Optimal),
        })
        .collect())
}

/// The total flow analysis' delay bound of every flow at each hop of its path.
pub fn tfa_per_hop(net: &Network) -> Result<Vec<Result<Vec<Q>, NoBound>>, InputError> {
    tfa_per_hop_until(net, &|| false)
}

/// [`tfa_per_hop`], asking `stop` as [`bounds_until`] does: the flows not reached are
/// left out.
pub fn tfa_per_hop_until(
    net: &Network,
    stop: &dyn Fn() -> bool,
) -> Result<Vec<Result<Vec<Q>, NoBound>>, InputError> {
    if is_cyclic(net) {
        let why = NoBound::NotApplicable("cyclic network".into());
        return Ok(vec![Err(why); net.flows.len()]);
    }
    let Some(arr) = Arrivals::of_until(net, stop)? else {
        return Ok(Vec::new());
    };
    Ok((0..net.flows.len())
        .map_while(|f| (!stop()).then(|| tfa::hops(&arr, f)))
        .collect())
}

/// The total flow analysis by its fixed point (what cyclic networks get), on any
/// network of FIFO servers: what the property tests check against the simulation on
/// feed-forward ones.
pub fn fixed_point_tfa(net: &Network, opts: Options) -> Result<Vec<Bound>, InputError> {
    cyclic::tfa(net, opts.line_shaping, &|| false)
}

/// The LP analysis of a cyclic network ([`fixpoint`]), the servers ranked in the
/// network's order; no bound at all once `stop` says so.
fn fixed_point_lp_until(
    net: &Network,
    opts: Options,
    stop: &dyn Fn() -> bool,
) -> Result<Vec<Bound>, InputError> {
    let rank: Vec<usize> = (0..net.servers.len()).collect();
    let fp = fixpoint::run(net, opts.line_shaping, &rank, stop)?;
    Ok(fp.map_or_else(Vec::new, |fp| fp.bounds))
}

/// The LP fixed point on any network of FIFO servers with the hops to a server of
/// the same or lower `rank` cut: what the property tests check against the
/// simulation on feed-forward networks (cutting them where they need no cut).
pub fn fixed_point_lp(
    net: &Network,
    opts: Options,
    rank: &[usize],
) -> Result<fixpoint::FixedPoint, InputError> {
    let fp = fixpoint::run(net, opts.line_shaping, rank, &|| false)?;
    fp.ok_or_else(|| InputError::general("the fixed point was stopped"))
}

/// Whether the servers, ordered by the flows' paths, form a cycle (a flow visiting
/// a server twice is one).
pub fn is_cyclic(net: &Network) -> bool {
    arrivals::order(net).is_err()
}

#[cfg(test)]
mod tests;
