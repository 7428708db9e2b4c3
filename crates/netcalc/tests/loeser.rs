//! The loeser §4.3.1 configuration (examples/loeser-fast-ethernet.toml) against
//! loeser Table 4, and the SPEC §4 port formulas against the generic analysis.

use lockstep_netcalc::units::{Shown, Unit};
use lockstep_netcalc::{load, Q};

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
