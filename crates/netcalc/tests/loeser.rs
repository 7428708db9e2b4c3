//! The loeser §4.3.1 configuration (examples/loeser-fast-ethernet.toml) against
//! loeser Table 4, and the loeser port formulas against the generic analysis.

use lockstep_netcalc::units::{Shown, Unit};
use lockstep_netcalc::{fifo_port, load, PortFlow, Q};

const EXAMPLE: &str = include_str!("../../../examples/loeser-fast-ethernet.toml");

fn us(q: &Q) -> f64 {
    Shown::new(q, Unit::Us).value()
}

#[test]
fn example_prints_bounds() {
    let adm = load(EXAMPLE).expect("the example is valid");
    let r = adm.snapshot();
    for ts in ["Ts10ms", "Ts1ms", "Ts100us"] {
        let a = r.flow(&format!("A-probe-{ts}")).unwrap();
        let s = r.server(&format!("B-port-{ts}")).unwrap();
        eprintln!(
            "{ts}: A tfa {} sfa {} | port B {} backlog {} B_est {} t_est {} spec {:?}",
            us(&a.tfa),
            us(&a.sfa),
            us(s.fifo_delay.as_ref().unwrap()),
            Shown::new(&s.backlog, Unit::Bytes),
            Shown::new(&s.backlog_estimate, Unit::Bytes),
            Shown::new(&s.delay_estimate, Unit::Us),
            s.spec_port
                .as_ref()
                .map(|p| (us(&p.delay), p.backlog_exact))
        );
    }
    assert_eq!(r.late_flows().count(), 0);
    assert_eq!(r.overflowing_servers().count(), 0);
}

/// loeser Table 4 from the FIFO port analysis (Eq. 4, 6, 7) with loeser's own inputs: the three
/// senders only (no probe flow) and the port rate left after preamble and gap,
/// C = 100 Mbit/s · 1514/1534.5; t_max adds Table 1's 80 µs.
#[test]
fn table_4_reproduced() {
    let c = lockstep_netcalc::units::rate("302800/3069Mbit/s").unwrap();
    let t_mux = lockstep_netcalc::units::time("45us").unwrap();
    let m = lockstep_netcalc::units::data("1514B").unwrap();
    let mbit = |n: i64| Q::int(n * 1_000_000);
    let b = |n: i64| Q::int(8 * n);
    // (Ts, buckets of C, D, E, exact t_switch in us, Table 4 t_max, Table 4 buffer KiB)
    let rows = [
        (
            "10ms",
            [51514, 41514, 26514],
            "1043929332/112525",
            9357.0,
            111.8,
        ),
        ("1ms", [6514, 5514, 4014], "146246832/112525", 1380.0, 15.7),
        ("100us", [2014, 1914, 1764], "56478582/112525", 582.0, 6.1),
    ];
    for (ts, buckets, exact, table_t_max, table_kib) in rows {
        let flows: Vec<PortFlow> = [40, 32, 20]
            .iter()
            .zip(buckets.iter())
            .map(|(r, bk)| PortFlow::new(mbit(*r), b(*bk), m.clone()))
            .collect();
        let p = fifo_port(&c, &t_mux, &flows).unwrap();
        assert!(p.backlog_exact, "{ts}");
        assert_eq!(
            Shown::new(&p.delay, Unit::Us).exact.to_string(),
            exact,
            "{ts}"
        );
        // t_max = t_switch + 80 us, to the microsecond as printed.
        assert_eq!((us(&p.delay) + 80.0).round(), table_t_max, "{ts}");
        // The buffer bound within 0.1 KiB of the table (their rounding).
        let kib = Shown::new(&p.backlog, Unit::Bytes).value() / 1024.0;
        assert!((kib - table_kib).abs() < 0.1, "{ts}: {kib} KiB");
    }
    // t_est (Eq. 7): 1345.7 and 506.5 us against the table's 1345 and 506; for 10 ms
    // Eq. 7 gives 9737.9 us where the table prints 9731.
    let flows: Vec<PortFlow> = [(40, 51514), (32, 41514), (20, 26514)]
        .iter()
        .map(|(r, bk)| PortFlow::new(mbit(*r), b(*bk), m.clone()))
        .collect();
    let p = fifo_port(&c, &t_mux, &flows).unwrap();
    assert_eq!(us(&p.delay_estimate).floor(), 9737.0);
}
