//! hdrhistogram against lockstep_core::stats::Histogram on the same samples.

use std::hint::black_box;
use std::time::Instant;

use base64::Engine;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer, V2Serializer};
use lockstep_core::stats::Histogram as Ours;

use crate::alloc_count::live;
use crate::latency::{exact_percentile, samples, HOST};

type Hdr = hdrhistogram::Histogram<u64>;

/// 1 ns … 60 s at 3 significant digits: the usual setup for latencies in ns.
fn hdr_new() -> Hdr {
    Hdr::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds")
}

const ROUNDS: usize = 9;
const MERGES: usize = 201;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn record_ours(data: &[i64]) -> Ours {
    let mut h = Ours::new();
    for &v in data {
        h.record(v);
    }
    h
}

fn record_hdr(data: &[i64]) -> (Hdr, usize) {
    let mut h = hdr_new();
    let mut errors = 0;
    for &v in data {
        errors += h.record(v as u64).is_err() as usize;
    }
    (h, errors)
}

fn rel(est: f64, exact: f64) -> String {
    format!("{:+.4} %", (est - exact) / exact * 100.0)
}

pub fn run(n: usize) {
    let t = Instant::now();
    let data = samples(HOST, n, 0x1a7e_2026);
    let mut sorted = data.clone();
    sorted.sort_unstable();
    println!(
        "== histogram: {} samples (log-normal body, median 3 µs; 1e-3 Pareto tail from 20 µs to 40 ms), made and sorted in {:.1} s",
        n,
        t.elapsed().as_secs_f64()
    );

    // (a) Time per recorded sample: fresh histograms, alternating which goes first.
    let (mut t_ours, mut t_hdr) = (Vec::new(), Vec::new());
    let mut hdr_errors = 0;
    for round in 0..ROUNDS {
        for which in [round % 2, 1 - round % 2] {
            let start = Instant::now();
            if which == 0 {
                black_box(record_ours(black_box(&data)));
                t_ours.push(start.elapsed().as_secs_f64() * 1e9 / n as f64);
            } else {
                let (h, e) = record_hdr(black_box(&data));
                black_box(h);
                hdr_errors = e;
                t_hdr.push(start.elapsed().as_secs_f64() * 1e9 / n as f64);
            }
        }
    }
    let spread = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(0.0, f64::max);
        (lo, hi)
    };
    let (olo, ohi) = spread(&t_ours);
    let (hlo, hhi) = spread(&t_hdr);
    let (om, hm) = (median(&mut t_ours), median(&mut t_hdr));
    println!("@ record_ns_ours {om:.2}");
    println!("@ record_ns_hdr {hm:.2}");

    // (b) Memory held: heap bytes live across building each, plus the struct itself.
    let before = live();
    let ours = record_ours(&data);
    let ours_heap = live() - before;
    let before = live();
    let (hdr, _) = record_hdr(&data);
    let hdr_heap = live() - before;
    let ours_mem = ours_heap as usize + std::mem::size_of::<Ours>();
    let hdr_mem = hdr_heap as usize + std::mem::size_of::<Hdr>();

    println!();
    println!("{:<34} {:>16} {:>16}", "", "lockstep-core", "hdrhistogram");
    println!(
        "{:<34} {:>16} {:>16}",
        "record, ns/sample (median of 9)",
        format!("{om:.2}"),
        format!("{hm:.2}")
    );
    println!(
        "{:<34} {:>16} {:>16}",
        "record, ns/sample (min–max)",
        format!("{olo:.2}–{ohi:.2}"),
        format!("{hlo:.2}–{hhi:.2}")
    );
    println!(
        "{:<34} {:>16} {:>16}",
        "memory held, bytes (heap+struct)", ours_mem, hdr_mem
    );
    println!(
        "{:<34} {:>16} {:>16}",
        "  as each reports",
        ours.memory_bytes(),
        format!("{} counters", hdr.distinct_values())
    );
    println!(
        "{:<34} {:>16} {:>16}",
        "record errors (out of range)", 0, hdr_errors
    );

    // (c) Accuracy against the sorted samples.
    println!();
    println!(
        "{:<10} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "statistic", "exact ns", "ours ns", "ours err", "hdr ns", "hdr err"
    );
    for (key, p) in [
        ("p50", 50.0),
        ("p99", 99.0),
        ("p99.9", 99.9),
        ("p99.99", 99.99),
        ("p99.999", 99.999),
    ] {
        let exact = exact_percentile(&sorted, p);
        let o = ours.percentile(p).unwrap_or(0);
        let h = hdr.value_at_quantile(p / 100.0);
        println!(
            "{:<10} {:>12} {:>12} {:>12} {:>12} {:>12}",
            key,
            exact,
            o,
            rel(o as f64, exact as f64),
            h,
            rel(h as f64, exact as f64)
        );
    }
    let exact_max = *sorted.last().unwrap_or(&0);
    let (o, h) = (ours.max().unwrap_or(0), hdr.max());
    println!(
        "{:<10} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "max",
        exact_max,
        o,
        rel(o as f64, exact_max as f64),
        h,
        rel(h as f64, exact_max as f64)
    );
    let exact_mean = data.iter().map(|&v| v as i128).sum::<i128>() as f64 / n as f64;
    let exact_sd = {
        let m = exact_mean;
        (data.iter().map(|&v| (v as f64 - m).powi(2)).sum::<f64>() / n as f64).sqrt()
    };
    let (o, h) = (ours.mean().unwrap_or(0.0), hdr.mean());
    println!(
        "{:<10} {:>12.1} {:>12.1} {:>12} {:>12.1} {:>12}",
        "mean",
        exact_mean,
        o,
        rel(o, exact_mean),
        h,
        rel(h, exact_mean)
    );
    let (o, h) = (ours.stddev().unwrap_or(0.0), hdr.stdev());
    println!(
        "{:<10} {:>12.1} {:>12.1} {:>12} {:>12.1} {:>12}",
        "stddev",
        exact_sd,
        o,
        rel(o, exact_sd),
        h,
        rel(h, exact_sd)
    );

    // (d) What a result document would store.
    let summary = ours.summary();
    let json = serde_json::to_string(&summary).unwrap_or_default();
    let pretty = serde_json::to_string_pretty(&summary).unwrap_or_default();
    let buckets = summary.histogram.count.len();
    // Serialization time: median of 21 of each.
    let time = |f: &mut dyn FnMut()| {
        let mut t: Vec<f64> = (0..21)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        median(&mut t)
    };
    let mut v2 = Vec::new();
    let mut v2d = Vec::new();
    let v2_us = time(&mut || {
        v2.clear();
        let _ = V2Serializer::new().serialize(&hdr, &mut v2);
    });
    let v2d_us = time(&mut || {
        v2d.clear();
        let _ = V2DeflateSerializer::new().serialize(&hdr, &mut v2d);
    });
    let json_us = time(&mut || {
        black_box(serde_json::to_string(&ours.summary()).unwrap_or_default());
    });
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b).len();
    println!();
    println!(
        "{:<52} {:>10} {:>10}",
        "serialized form", "bytes", "µs (med 21)"
    );
    println!(
        "{:<52} {:>10} {:>10.0}",
        format!("ours: Summary as JSON, compact ({buckets} buckets)"),
        json.len(),
        json_us
    );
    println!(
        "{:<52} {:>10} {:>10}",
        "ours: Summary as JSON, pretty (as summary.json)",
        pretty.len(),
        ""
    );
    println!("{:<52} {:>10} {:>10.0}", "hdr: V2", v2.len(), v2_us);
    println!(
        "{:<52} {:>10} {:>10}",
        "hdr: V2, base64 (a JSON string)",
        b64(&v2),
        ""
    );
    println!(
        "{:<52} {:>10} {:>10.0}",
        "hdr: V2 + deflate",
        v2d.len(),
        v2d_us
    );
    println!(
        "{:<52} {:>10} {:>10}",
        "hdr: V2 + deflate, base64 (a JSON string)",
        b64(&v2d),
        ""
    );

    // (e) Merging two per-CPU histograms: clone, then time the merge alone.
    let (a, b) = data.split_at(n / 2);
    let (oa, ob) = (record_ours(a), record_ours(b));
    let (ha, hb) = (record_hdr(a).0, record_hdr(b).0);
    let (mut m_ours, mut m_hdr) = (Vec::new(), Vec::new());
    let mut ours_ok = true;
    let mut hdr_ok = true;
    for i in 0..MERGES {
        for which in [i % 2, 1 - i % 2] {
            if which == 0 {
                let mut x = oa.clone();
                let start = Instant::now();
                x.merge(black_box(&ob));
                m_ours.push(start.elapsed().as_secs_f64() * 1e6);
                if i == 0 {
                    ours_ok = x == ours;
                }
                black_box(x);
            } else {
                let mut x = ha.clone();
                let start = Instant::now();
                let r = x.add(black_box(&hb));
                m_hdr.push(start.elapsed().as_secs_f64() * 1e6);
                if i == 0 {
                    hdr_ok = r.is_ok() && x == hdr;
                }
                black_box(x);
            }
        }
    }
    let (mo, mh) = (median(&mut m_ours), median(&mut m_hdr));
    println!("@ merge_us_ours {mo:.2}");
    println!("@ merge_us_hdr {mh:.2}");
    println!("@ ser_us_json {json_us:.0}");
    println!("@ ser_us_v2 {v2_us:.0}");
    println!("@ ser_us_v2_deflate {v2d_us:.0}");
    println!();
    println!(
        "{:<52} {:>10} {:>10}",
        "merge two halves (5M + 5M samples)", "ours", "hdr"
    );
    println!(
        "{:<52} {:>10.2} {:>10.2}",
        format!("µs per merge (median of {MERGES})"),
        mo,
        mh
    );
    println!(
        "{:<52} {:>10} {:>10}",
        "merged == recorded in one", ours_ok, hdr_ok
    );
    println!(
        "{:<52} {:>10} {:>10}",
        "non-empty buckets after merge",
        ours.buckets().count(),
        hdr.iter_recorded().count()
    );
    println!(
        "{:<52} {:>10} {:>10}",
        "negative values", "recorded", "refused"
    );
}
