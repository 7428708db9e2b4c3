//! `lockstep sim gen`: an ordinary scenario file of a generated network — a ring, a
//! square grid or a k-ary fat-tree of routers — with `F` reserved flows between
//! random routers (each with a sender and a receiver host of its own), routed on
//! shortest paths, at a rate that loads the busiest link to the given fraction.
//! A flow's two routers are drawn again until its path crosses no more routers than
//! its probes have room to record (`(size − 92) / 32`: 12 at the default 500 bytes),
//! so in a large network flows are local. Each reserved frame carries as many
//! packets as the rate needs. Routers get only the flows' routes (`routing =
//! "flows"`). Seeded: the same arguments write the same file.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use lockstep_core::units::{BitRate, Size};
use lockstep_core::wire::probe::{HEADER_LEN, HOP_LEN};
use lockstep_core::{limits, Duration};
use lockstep_plan::scenario::IP_UDP_HEADERS;
use lockstep_sim::rng::Rng;

use crate::cli::{parse_sim_duration, parse_tf};
use crate::UsageError;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Topology {
    Ring,
    Grid,
    FatTree,
}

#[derive(Args, Debug)]
pub struct GenArgs {
    /// ring, grid (the largest square of at most N routers) or fat-tree (the largest
    /// k-ary fat-tree of at most N routers: 5k²/4 switches).
    #[arg(long, value_enum)]
    pub topology: Topology,
    /// Routers (at most).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(2..=200_000))]
    pub routers: u32,
    /// Reserved flows, each between two random routers at most as far apart as the
    /// probes' hop records reach (see --size).
    #[arg(long, value_name = "F", value_parser = clap::value_parser!(u32).range(1..=200_000))]
    pub flows: u32,
    /// Share of the busiest link's capacity the flows reserve, in (0, 1].
    #[arg(long, value_name = "X", default_value_t = 0.5, value_parser = parse_load)]
    pub load: f64,
    /// Rate of every link (at most 1 Tbit/s).
    #[arg(long, value_name = "RATE", default_value = "100Mbit/s", value_parser = parse_bit_rate)]
    pub link_rate: BitRate,
    /// Deprecated: --link-rate in Mbit/s (a bare number, or a rate).
    #[arg(long, value_name = "MBIT", hide = true, conflicts_with = "link_rate", value_parser = parse_mbit)]
    pub mbit: Option<BitRate>,
    /// IP packet size of every flow (348B to 1500B; a bare number is bytes); it bounds
    /// a flow's path to (size − 92 bytes) / 32 routers (a hop record each).
    #[arg(long, value_name = "SIZE", default_value = "500B", value_parser = parse_packet_size)]
    pub size: u32,
    /// Time-frame (1us to 10s).
    #[arg(long, value_name = "DUR", default_value = "1ms", value_parser = parse_tf, allow_hyphen_values = true)]
    pub tf: Duration,
    /// Frames per cycle (2 to 100000).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(2..=i64::from(limits::MAX_K)))]
    pub k: u32,
    /// Forwarding delay per router, frames (1 to k - 1).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    pub d: u32,
    /// Simulated traffic time written into the scenario (at most 1 day).
    #[arg(long, value_name = "DUR", default_value = "1s", value_parser = parse_sim_duration, allow_hyphen_values = true)]
    pub duration: Duration,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where to write the scenario.
    #[arg(long, short = 'o', value_name = "FILE.toml")]
    pub output: PathBuf,
}

fn parse_load(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 1.0 => Ok(x),
        _ => Err(format!(
            "expected a share of the link in (0, 1], got \"{s}\""
        )),
    }
}

/// Routers and their links (each once, `a < b`).
struct Graph {
    n: usize,
    links: Vec<(u32, u32)>,
    adj: Vec<Vec<u32>>,
}

impl Graph {
    fn new(n: usize, links: Vec<(u32, u32)>) -> Graph {
        let mut adj = vec![Vec::new(); n];
        for &(a, b) in &links {
            adj[a as usize].push(b);
            adj[b as usize].push(a);
        }
        Graph { n, links, adj }
    }

    /// A shortest path from `a` to `b` (routers), by breadth-first search.
    #[cfg(test)]
    fn path(&self, a: u32, b: u32, ws: &mut Search) -> Vec<u32> {
        self.path_within(a, b, usize::MAX, ws).unwrap_or_default()
    }

    /// A shortest path from `a` to `b` (routers) of at most `max` routers, by a
    /// breadth-first search that goes no further; `None` if `b` is further away.
    fn path_within(&self, a: u32, b: u32, max: usize, ws: &mut Search) -> Option<Vec<u32>> {
        if ws.seen.len() != self.n {
            ws.seen = vec![0; self.n];
            ws.prev = vec![0; self.n];
            ws.round = 0;
        }
        ws.round = ws.round.wrapping_add(1);
        if ws.round == 0 {
            ws.seen.fill(0);
            ws.round = 1;
        }
        let round = ws.round;
        ws.seen[a as usize] = round;
        ws.queue.clear();
        ws.queue.push_back((a, 1));
        let mut found = a == b;
        'search: while let Some((u, routers)) = ws.queue.pop_front() {
            if routers >= max {
                continue; // its neighbours are too far
            }
            for &v in &self.adj[u as usize] {
                if ws.seen[v as usize] != round {
                    ws.seen[v as usize] = round;
                    ws.prev[v as usize] = u;
                    if v == b {
                        found = true;
                        break 'search;
                    }
                    ws.queue.push_back((v, routers + 1));
                }
            }
        }
        if !found {
            return None;
        }
        let mut p = vec![b];
        while let Some(&last) = p.last() {
            if last == a {
                break;
            }
            p.push(ws.prev[last as usize]);
        }
        p.reverse();
        Some(p)
    }
}

/// A breadth-first search's memory, kept from one search to the next: a node is
/// seen in this search if `seen` holds this search's round.
#[derive(Default)]
struct Search {
    seen: Vec<u32>,
    prev: Vec<u32>,
    round: u32,
    queue: VecDeque<(u32, usize)>,
}

fn ring(n: u32) -> Graph {
    let links = (0..n)
        .map(|i| (i, (i + 1) % n))
        .filter(|(a, b)| a != b)
        .collect();
    Graph::new(n as usize, links)
}

fn grid(n: u32) -> Graph {
    let side = (f64::from(n).sqrt() as u32).max(2);
    let id = |r: u32, c: u32| r * side + c;
    let mut links = Vec::new();
    for r in 0..side {
        for c in 0..side {
            if c + 1 < side {
                links.push((id(r, c), id(r, c + 1)));
            }
            if r + 1 < side {
                links.push((id(r, c), id(r + 1, c)));
            }
        }
    }
    Graph::new((side * side) as usize, links)
}

/// A k-ary fat-tree: k pods of k/2 edge and k/2 aggregation switches, (k/2)² cores.
fn fat_tree(n: u32) -> Graph {
    let k = fat_tree_k(n);
    let h = k / 2;
    let cores = h * h;
    let agg = |pod: u32, i: u32| cores + pod * k + i;
    let edge = |pod: u32, i: u32| cores + pod * k + h + i;
    let mut links = Vec::new();
    for pod in 0..k {
        for a in 0..h {
            for e in 0..h {
                links.push((agg(pod, a), edge(pod, e)));
            }
            for c in 0..h {
                links.push((a * h + c, agg(pod, a)));
            }
        }
    }
    Graph::new((cores + k * k) as usize, links)
}

/// Most router links `sim gen` writes (a fat-tree of N routers has about
/// (4N/5)^1.5 / 2 of them).
pub const MAX_GEN_LINKS: u64 = 1_000_000;
/// Most `--routers × --flows`: drawing each flow between routers close enough for
/// its hop records takes time in proportion to the routers.
pub const MAX_GEN_WORK: u64 = 1_000_000_000;

/// The fat-tree's `k` for at most `n` routers: the largest even `k` with 5k²/4 ≤ n.
fn fat_tree_k(n: u32) -> u32 {
    let mut k = 2u32;
    while 5 * (k + 2) * (k + 2) / 4 <= n {
        k += 2;
    }
    k
}

/// The router links the topology will have, before it is built.
fn link_count(topology: Topology, n: u32) -> u64 {
    let n = u64::from(n);
    match topology {
        Topology::Ring => n,
        Topology::Grid => {
            let side = ((n as f64).sqrt() as u64).max(2);
            2 * side * (side - 1)
        }
        Topology::FatTree => {
            let k = u64::from(fat_tree_k(n as u32));
            k * k * k / 2
        }
    }
}

/// The limits that depend on several options.
fn check_args(a: &GenArgs) -> Result<(), String> {
    if a.d >= a.k {
        return Err(format!(
            "--d: forwarding delay {} is not below --k {} (frames per cycle)",
            a.d, a.k
        ));
    }
    let work = u64::from(a.routers) * u64::from(a.flows);
    if work > MAX_GEN_WORK {
        return Err(format!(
            "--flows: {} flows in {} routers: routers × flows is {work}, above the limit of {MAX_GEN_WORK}",
            a.flows, a.routers
        ));
    }
    let links = link_count(a.topology, a.routers);
    if links > MAX_GEN_LINKS {
        return Err(format!(
            "--routers: a {} of at most {} routers has {links} links, above the limit of {MAX_GEN_LINKS}",
            match a.topology {
                Topology::Ring => "ring",
                Topology::Grid => "grid",
                Topology::FatTree => "fat-tree",
            },
            a.routers
        ));
    }
    Ok(())
}

pub fn run(args: GenArgs) -> Result<()> {
    check_args(&args).map_err(UsageError)?;
    // drawing many flows on a big network takes a while: on a thread of its own, so
    // that a stop ends the command at once (a scenario with some of its flows would
    // not be the one asked for: nothing is written then)
    let args = std::sync::Arc::new(args);
    let a = args.clone();
    let made = crate::stop::unless_stopped(move || {
        let g = match a.topology {
            Topology::Ring => ring(a.routers),
            Topology::Grid => grid(a.routers),
            Topology::FatTree => fat_tree(a.routers),
        };
        scenario(&g, &a).map(|text| (g, text))
    });
    let (g, text) = match made {
        Ok(m) => m?,
        Err(crate::stop::Cut::Stopped) => {
            return Err(crate::Interrupted(format!(
                "while generating the network: nothing written to {}",
                args.output.display()
            ))
            .into())
        }
        Err(e) => anyhow::bail!("generating the network: {e}"),
    };
    std::fs::write(&args.output, text)
        .with_context(|| format!("--output: cannot write {}", args.output.display()))?;
    crate::say::say!(
        "{}: {} routers, {} links, {} flows",
        args.output.display(),
        g.n,
        g.links.len(),
        args.flows
    );
    Ok(())
}

/// Routers a probe of `size` bytes has hop records for.
fn max_routers(size: u32) -> usize {
    (size as usize).saturating_sub(IP_UDP_HEADERS as usize + HEADER_LEN) / HOP_LEN
}

/// The flows' router paths, each of at most `max` routers (at least 2): two routers
/// are drawn until they are close enough.
fn flows(g: &Graph, count: u32, seed: u64, max: usize) -> Vec<Vec<u32>> {
    let mut rng = Rng::new(seed);
    let mut ws = Search::default();
    (0..count)
        .map(|_| loop {
            let a = rng.below(g.n as u64) as u32;
            let mut b = rng.below(g.n as u64 - 1) as u32;
            if b >= a {
                b += 1;
            }
            if let Some(p) = g.path_within(a, b, max.max(2), &mut ws) {
                break p;
            }
        })
        .collect()
}

/// Flows on the busiest link direction.
fn busiest(paths: &[Vec<u32>]) -> usize {
    let mut count = std::collections::HashMap::<(u32, u32), usize>::new();
    for p in paths {
        for w in p.windows(2) {
            *count.entry((w[0], w[1])).or_default() += 1;
        }
    }
    count.values().copied().max().unwrap_or(1)
}

/// `--link-rate`: a bit rate.
fn parse_bit_rate(s: &str) -> Result<BitRate, String> {
    s.parse()
        .map_err(|e: lockstep_core::units::UnitError| e.to_string())
}

/// The deprecated `--mbit`: a bare number of Mbit/s, or a bit rate.
fn parse_mbit(s: &str) -> Result<BitRate, String> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return parse_bit_rate(&format!("{t}Mbit/s"));
    }
    parse_bit_rate(s)
}

/// `--size`: a size in whole bytes (a bare number, as it always was, is bytes).
fn parse_packet_size(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let text = if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        format!("{t}B")
    } else {
        s.to_string()
    };
    let size: Size = text
        .parse()
        .map_err(|e: lockstep_core::units::UnitError| e.to_string())?;
    u32::try_from(size.bytes()).map_err(|_| format!("{size}: expected 348B to 1500B"))
}

impl GenArgs {
    /// The rate of every link: --link-rate, or the deprecated --mbit.
    fn rate(&self) -> BitRate {
        self.mbit.unwrap_or(self.link_rate)
    }
}

fn scenario(g: &Graph, a: &GenArgs) -> Result<String> {
    if a.size < 348 || a.size > 1500 {
        return Err(UsageError(format!(
            "--size: {}B: expected 348B to 1500B (a probe with room for 8 hop records, within the MTU)",
            a.size
        ))
        .into());
    }
    let paths = flows(g, a.flows, a.seed, max_routers(a.size));
    let share = a.load / busiest(&paths) as f64;
    let rate_kbit = (share * a.rate().as_f64() / 1000.0).floor().max(1.0) as u64;
    // packets per reserved frame: enough that a frame per frame carries the rate
    let bits_per_frame = u128::from(rate_kbit) * 1000 * a.tf.as_nanos().max(1) as u128;
    let packets = bits_per_frame
        .div_ceil(u128::from(a.size) * 8 * 1_000_000_000)
        .max(1);
    let mut s = String::new();
    let name = format!("gen-{:?}-{}", a.topology, g.n).to_lowercase();
    let _ = writeln!(s, "# Generated by `lockstep sim gen` (seed {}): {:?}, {} routers, {} links, {} flows of {rate_kbit} kbit/s\n# loading the busiest link to {}.", a.seed, a.topology, g.n, g.links.len(), a.flows, a.load);
    let _ = writeln!(s, "\n[scenario]\nname = \"{name}\"\ndescription = \"generated {:?} network: {} routers, {} flows\"", a.topology, g.n, a.flows);
    let _ = writeln!(s, "tf = \"{}\"\nk = {}\nd = {}\nmodes = [\"fifo\", \"tdp\"]\nduration = \"{}\"\npadding = false\nrouting = \"flows\"", a.tf, a.k, a.d, a.duration);
    let mut first = vec![false; g.n];
    for p in &paths {
        first[p[0] as usize] = true;
    }
    for (i, f) in first.iter().enumerate() {
        let role = if *f { "edge" } else { "core" };
        let _ = writeln!(s, "\n[[node]]\nname = \"r{i}\"\nrole = \"{role}\"");
    }
    for i in 0..paths.len() {
        let _ = writeln!(s, "\n[[node]]\nname = \"s{i}\"\nrole = \"sender\"\n\n[[node]]\nname = \"d{i}\"\nrole = \"receiver\"");
    }
    let link = |s: &mut String, a: &str, b: &str, rate: BitRate| {
        let _ = writeln!(
            s,
            "\n[[link]]\nbetween = [\"{a}\", \"{b}\"]\nrate = \"{rate}\""
        );
    };
    for &(x, y) in &g.links {
        link(&mut s, &format!("r{x}"), &format!("r{y}"), a.rate());
    }
    for (i, p) in paths.iter().enumerate() {
        link(&mut s, &format!("s{i}"), &format!("r{}", p[0]), a.rate());
        link(
            &mut s,
            &format!("r{}", p[p.len() - 1]),
            &format!("d{i}"),
            a.rate(),
        );
    }
    for (i, p) in paths.iter().enumerate() {
        let hops: Vec<String> = p.iter().map(|r| format!("\"r{r}\"")).collect();
        let _ = writeln!(
            s,
            "\n[[flow]]\nname = \"f{i}\"\npath = [\"s{i}\", {}, \"d{i}\"]\nsize = \"{}B\"\npackets = {packets}\nrate = \"{rate_kbit}kbit/s\"",
            hops.join(", "),
            a.size
        );
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_sizes_are_read_by_the_unit_grammar() {
        assert_eq!(parse_bit_rate("1Gbit/s"), Ok(BitRate(1_000_000_000)));
        assert_eq!(parse_mbit("100"), Ok(BitRate(100_000_000)));
        assert_eq!(parse_mbit("1Gbit/s"), Ok(BitRate(1_000_000_000)));
        assert_eq!(parse_packet_size("500"), Ok(500));
        assert_eq!(parse_packet_size("1.5kB"), Ok(1500));
        assert_eq!(parse_packet_size("1/2kB"), Ok(500));
        assert_eq!(
            parse_packet_size("500bit").unwrap_err(),
            "500bit is not a whole number of bytes"
        );
    }

    #[test]
    fn topologies_have_the_expected_shape() {
        let r = ring(5);
        assert_eq!(r.links.len(), 5);
        let mut prev = Search::default();
        assert_eq!(r.path(0, 3, &mut prev), vec![0, 4, 3]);
        let g = grid(10);
        assert_eq!((g.n, g.links.len()), (9, 12));
        assert_eq!(g.path(0, 8, &mut prev).len(), 5);
        let f = fat_tree(20);
        // k = 4: 4 cores, 8 aggregation, 8 edge; 16 + 16 links
        assert_eq!((f.n, f.links.len()), (20, 32));
        let paths = flows(&g, 50, 3, 12);
        assert!(paths.iter().all(|p| p.len() >= 2 && p[0] != p[p.len() - 1]));
        assert_eq!(paths, flows(&g, 50, 3, 12));
    }

    #[test]
    fn paths_stay_within_the_probes_hop_records() {
        assert_eq!(
            (max_routers(348), max_routers(500), max_routers(1500)),
            (8, 12, 44)
        );
        let g = grid(400);
        let mut ws = Search::default();
        // 0 → 399: corner to corner, 39 routers
        assert_eq!(g.path(0, 399, &mut ws).len(), 39);
        assert_eq!(g.path_within(0, 399, 38, &mut ws), None);
        assert_eq!(
            g.path_within(0, 399, 39, &mut ws),
            Some(g.path(0, 399, &mut ws))
        );
        let paths = flows(&g, 200, 1, 5);
        assert!(paths.iter().all(|p| (2..=5).contains(&p.len())));
        // within reach, each path is the plain shortest one
        for p in &paths {
            assert_eq!(p, &g.path(p[0], p[p.len() - 1], &mut ws));
        }
        let ring = ring(1000);
        assert!(flows(&ring, 50, 2, 8).iter().all(|p| p.len() <= 8));
    }

    #[test]
    fn link_counts_are_known_before_the_graph_is_built() {
        for n in [2, 3, 10, 100, 401, 2000] {
            assert_eq!(
                link_count(Topology::Ring, n),
                ring(n).links.len() as u64,
                "{n}"
            );
            assert_eq!(
                link_count(Topology::Grid, n),
                grid(n).links.len() as u64,
                "{n}"
            );
            assert_eq!(
                link_count(Topology::FatTree, n),
                fat_tree(n).links.len() as u64,
                "{n}"
            );
        }
        // the largest fat-tree within the limit: k = 124, 19220 routers
        assert_eq!(link_count(Topology::FatTree, 19_844), 953_312);
        assert_eq!(link_count(Topology::FatTree, 19_845), 1_000_188);
    }
}
