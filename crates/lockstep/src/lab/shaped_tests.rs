use super::*;

const FILE: &str = include_str!("../../../../scenarios/shaped-switch.toml");

fn q(n: i128, d: i128) -> Q {
    Q::ratio(n, d).unwrap()
}

#[test]
fn the_scenario_file_parses() {
    assert!(is_shaped(FILE));
    let s = Shaped::parse("shaped-switch.toml", FILE).unwrap();
    assert_eq!(
        s.ts,
        vec![
            Duration::from_millis(10),
            Duration::from_millis(1),
            Duration::from_micros(100)
        ]
    );
    assert_eq!(
        s.rates,
        vec![
            BitRate(40_000_000),
            BitRate(32_000_000),
            BitRate(20_000_000)
        ]
    );
    assert_eq!(s.port_rate, BitRate(100_000_000));
    assert_eq!(s.t_mux, Duration::ZERO);
    assert_eq!(s.payload, Size(1472));
    assert_eq!(s.probe_size, Size(64));
}

#[test]
fn buckets_are_loesers_table_3() {
    let s = Shaped::parse("f", FILE).unwrap();
    let got: Vec<u64> = [10_000, 100]
        .iter()
        .flat_map(|us| {
            let ts = Duration::from_micros(*us);
            s.rates.iter().map(move |r| (*r, ts))
        })
        .map(|(r, ts)| s.bucket_bytes(r, ts))
        .collect();
    assert_eq!(got, vec![51514, 41514, 26514, 2014, 1914, 1764]);
}

#[test]
fn bound_at_10ms_by_hand() {
    // b_k = bucket + r·Ts: C 812112, D 652112, E 412112 bits; A (848000 bit/s, 848).
    // Σb = 1877184; g_max = (812112 − 12112)/(100e6 − 40e6) = 1/75 s;
    // 1 − load/C = 1 − 92848000/1e8 = 0.07152.
    let s = Shaped::parse("f", FILE).unwrap();
    let b = s.bound(Duration::from_millis(10)).unwrap();
    assert_eq!(b.delay_estimate, q(1_877_184, 100_000_000));
    assert_eq!(b.delay, q(1_877_184, 100_000_000) - q(7152, 100_000 * 75));
    assert_eq!(b.delay, q(1_781_824, 100_000_000));
}

#[test]
fn bound_at_100us_by_hand() {
    // C 20112, D 18512, E 16112, A 848 bits: Σb = 55584; g_max = 8000/60e6 = 1/7500.
    let s = Shaped::parse("f", FILE).unwrap();
    let b = s.bound(Duration::from_micros(100)).unwrap();
    assert_eq!(b.delay_estimate, q(55_584, 100_000_000));
    assert_eq!(b.delay, q(546_304, 1_000_000_000));
}

#[test]
fn t_mux_adds_to_both_bounds() {
    let text = FILE.replace("t_mux = \"0s\"", "t_mux = \"80us\"");
    let s = Shaped::parse("f", &text).unwrap();
    let b = s.bound(Duration::from_micros(100)).unwrap();
    assert_eq!(b.delay_estimate, q(55_584 + 8000, 100_000_000));
    assert_eq!(b.delay, q(546_304 + 80_000, 1_000_000_000));
}

#[test]
fn a_smaller_ts_gives_a_smaller_bound() {
    let s = Shaped::parse("f", FILE).unwrap();
    let d: Vec<Q> = s.ts.iter().map(|t| s.bound(*t).unwrap().delay).collect();
    assert!(d[0] > d[1] && d[1] > d[2]);
}

#[test]
fn commands_shape_c_d_e_and_probe_a() {
    let s = Shaped::parse("f", FILE).unwrap();
    let c = s.commands(Duration::from_millis(1), 42, Path::new("/x"));
    let hosts: Vec<&str> = c.iter().map(|(h, _)| h.as_str()).collect();
    assert_eq!(hosts, vec!["b", "b", "a", "c", "d", "e"]);
    let c_args = c[3].1.join(" ");
    assert_eq!(
        c_args,
        "probe stream --to 10.77.0.2:9001 --flow 1 --shape 40000000bit/s,6514B,1ms \
         --symmetric-burst --size 1472B --start-at-ns 42 --strategy sleep -D 5s --json"
    );
    assert!(c[2]
        .1
        .join(" ")
        .contains("--period 1ms --size 64B --start-at-ns 42"));
}

fn err(text: &str) -> String {
    Shaped::parse("s.toml", text).unwrap_err().to_string()
}

#[test]
fn bad_fields_are_named_with_their_line() {
    assert_eq!(
        err(&FILE.replace("\"32Mbit/s\"", "\"0Mbit/s\"")),
        "s.toml:15:22: scenario.rates[1]: a bit rate must be above 0, got \"0Mbit/s\""
    );
    assert!(
        err(&FILE.replace("\"20Mbit/s\"", "\"30Mbit/s\"")).contains("scenario.rates: their sum")
    );
    assert!(err(&FILE.replace("\"100us\"]", "\"-1ms\"]")).contains("scenario.ts[2]"));
    assert!(
        err(&FILE.replace("payload = \"1472B\"", "payload = \"9000B\""))
            .contains("scenario.payload")
    );
    assert!(
        err(&FILE.replace("duration = \"5s\"", "duration = \"5s\"\nbogus = 1")).contains("bogus")
    );
    assert!(err(&FILE.replace(", \"20Mbit/s\"]", "]")).contains("expected three rates"));
    assert!(
        err(&FILE.replace("strategy = \"sleep\"", "strategy = \"nap\""))
            .contains("scenario.strategy: expected sleep, hybrid or spin, got \"nap\"")
    );
}

#[test]
fn loesers_convention_leaves_out_r_ts() {
    // b = bucket: C 412112, D 332112, E 212112, A 848 bits: Σb = 957184;
    // g_max = 400000/60e6 = 1/150 s; Eq. 6 = 0.00957184 − 0.07152/150.
    let s = Shaped::parse("f", FILE).unwrap();
    let b = s.bound_with(Duration::from_millis(10), false).unwrap();
    assert_eq!(b.delay_estimate, q(957_184, 100_000_000));
    assert_eq!(b.delay, q(909_504, 100_000_000));
    assert_eq!(
        s.bound_with(Duration::from_millis(10), true).unwrap(),
        s.bound(Duration::from_millis(10)).unwrap()
    );
}
