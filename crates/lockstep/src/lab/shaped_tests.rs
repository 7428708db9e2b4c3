use super::*;

const FILE: &str = include_str!("../../../../scenarios/shaped-switch.toml");

const SHAPERS: &str = "shapers = [\"lockstep\", \"tbf\", \"htb\"]";

fn q(n: i128, d: i128) -> Q {
    Q::ratio(n, d).unwrap()
}

#[test]
fn the_scenario_file_parses() {
    assert_eq!(
        crate::lab::kind::probe("s.toml", FILE).unwrap().kind,
        crate::lab::ScenarioKind::Shaped
    );
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
    let c = s.commands(
        ShaperKind::Lockstep,
        Duration::from_millis(1),
        42,
        Path::new("/x"),
    );
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
    assert!(s
        .kernel_commands(ShaperKind::Lockstep, Duration::from_millis(1))
        .is_empty());
}

#[test]
fn kernel_shapers_get_unshaped_greedy_senders() {
    let s = Shaped::parse("f", FILE).unwrap();
    for kind in [ShaperKind::Tbf, ShaperKind::Htb] {
        let c = s.commands(kind, Duration::from_millis(1), 42, Path::new("/x"));
        assert_eq!(
            c[5].1.join(" "),
            "probe stream --to 10.77.0.2:9001 --flow 3 --greedy --size 1472B \
             --start-at-ns 42 --strategy sleep -D 5s --json"
        );
        // A's probe and the sinks are the same for every shaper
        assert_eq!(
            c[..3],
            s.commands(
                ShaperKind::Lockstep,
                Duration::from_millis(1),
                42,
                Path::new("/x")
            )[..3]
        );
    }
}

fn tc_lines(s: &Shaped, kind: ShaperKind, ts: Duration) -> Vec<String> {
    s.kernel_commands(kind, ts)
        .into_iter()
        .map(|(h, argv)| format!("{h}: tc {}", argv.join(" ")))
        .collect()
}

#[test]
fn tbf_gets_rate_r_and_the_bucket_of_ts_as_burst() {
    let s = Shaped::parse("f", FILE).unwrap();
    assert_eq!(
        tc_lines(&s, ShaperKind::Tbf, Duration::from_millis(1)),
        vec![
            "c: tc qdisc add dev eth0 root tbf rate 40000000bit burst 6514b limit 1000000b",
            "d: tc qdisc add dev eth0 root tbf rate 32000000bit burst 5514b limit 1000000b",
            "e: tc qdisc add dev eth0 root tbf rate 20000000bit burst 4014b limit 1000000b",
        ]
    );
    assert_eq!(
        tc_lines(&s, ShaperKind::Tbf, Duration::from_micros(100))[0],
        "c: tc qdisc add dev eth0 root tbf rate 40000000bit burst 2014b limit 1000000b"
    );
}

#[test]
fn htb_gets_one_class_rate_ceil_r_burst_cburst_b() {
    let s = Shaped::parse("f", FILE).unwrap();
    assert_eq!(
        tc_lines(&s, ShaperKind::Htb, Duration::from_millis(10)),
        vec![
            "c: tc qdisc add dev eth0 root handle 1: htb default 1",
            "c: tc class add dev eth0 parent 1: classid 1:1 htb rate 40000000bit ceil 40000000bit burst 51514b cburst 51514b",
            "d: tc qdisc add dev eth0 root handle 1: htb default 1",
            "d: tc class add dev eth0 parent 1: classid 1:1 htb rate 32000000bit ceil 32000000bit burst 41514b cburst 41514b",
            "e: tc qdisc add dev eth0 root handle 1: htb default 1",
            "e: tc class add dev eth0 parent 1: classid 1:1 htb rate 20000000bit ceil 20000000bit burst 26514b cburst 26514b",
        ]
    );
    let f = s.kernel_flow(0, Duration::from_millis(10)).unwrap();
    assert_eq!(
        (f.rate, f.burst, f.max_packet),
        (BitRate(40_000_000), Size(51514), Size(1514))
    );
    assert!(s.kernel_flow(3, Duration::from_millis(10)).is_none());
}

#[test]
fn each_shaper_has_the_bound_of_its_envelope() {
    let s = Shaped::parse("f", FILE).unwrap();
    let ts = Duration::from_micros(100);
    // tbf: (r, b) is loeser's convention
    assert_eq!(
        s.bound_of(ShaperKind::Tbf, ts).unwrap(),
        s.bound_with(ts, false).unwrap()
    );
    assert_eq!(
        s.bound_of(ShaperKind::Lockstep, ts).unwrap(),
        s.bound(ts).unwrap()
    );
    // htb: (r, b + M). C 16112 + 12112, D 15312 + 12112, E 14112 + 12112, A 848:
    // Σb = 82720 bits; g_max = 16112 / 60e6 (C); 1 − load/C = 0.07152.
    let h = s.bound_of(ShaperKind::Htb, ts).unwrap();
    assert_eq!(h.delay_estimate, q(82_720, 100_000_000));
    assert_eq!(
        h.delay,
        q(82_720, 100_000_000) - &q(7152, 100_000) * &q(16_112, 60_000_000)
    );
}

#[test]
fn shapers_default_to_all_three_and_keep_their_order() {
    let s = Shaped::parse("f", FILE).unwrap();
    assert_eq!(s.shapers, ShaperKind::ALL.to_vec());
    let s = Shaped::parse("f", &FILE.replace(SHAPERS, "")).unwrap();
    assert_eq!(s.shapers, ShaperKind::ALL.to_vec(), "the default");
    let text = FILE.replace(SHAPERS, "shapers = [\"htb\", \"lockstep\"]");
    let s = Shaped::parse("f", &text).unwrap();
    assert_eq!(s.shapers, vec![ShaperKind::Htb, ShaperKind::Lockstep]);
    assert_eq!(
        plan_rows(&s)[..4],
        [
            (ShaperKind::Htb, Duration::from_millis(10)),
            (ShaperKind::Htb, Duration::from_millis(1)),
            (ShaperKind::Htb, Duration::from_micros(100)),
            (ShaperKind::Lockstep, Duration::from_millis(10)),
        ]
    );
}

#[test]
fn bad_shapers_name_file_field_and_what_is_expected() {
    let with = |v: &str| err(&FILE.replace(SHAPERS, &format!("shapers = {v}")));
    // the field is on line 24, its value at column 11
    assert_eq!(
        with("[\"tbf\", \"cbq\"]"),
        "s.toml:25:11: scenario.shapers[1]: expected lockstep, tbf or htb, got \"cbq\""
    );
    assert_eq!(
        with("\"tbf\""),
        "s.toml:25:11: scenario.shapers: expected an array of \"lockstep\", \"tbf\", \"htb\", like [\"lockstep\", \"tbf\"]"
    );
    assert_eq!(
        with("[]"),
        "s.toml:25:11: scenario.shapers: expected an array of \"lockstep\", \"tbf\", \"htb\": give at least one (or leave the field out for all three)"
    );
    assert_eq!(
        with("[\"tbf\", \"tbf\"]"),
        "s.toml:25:11: scenario.shapers[1]: \"tbf\" is listed twice"
    );
    assert_eq!(
        with("[\"lockstep\", 3]"),
        "s.toml:25:11: scenario.shapers[1]: expected lockstep, tbf or htb, got 3"
    );
}

fn err(text: &str) -> String {
    Shaped::parse("s.toml", text).unwrap_err().to_string()
}

#[test]
fn bad_fields_are_named_with_their_line() {
    assert_eq!(
        err(&FILE.replace("\"32Mbit/s\"", "\"0Mbit/s\"")),
        "s.toml:19:22: scenario.rates[1]: a bit rate must be above 0, got \"0Mbit/s\""
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
fn durations_have_limits() {
    assert_eq!(
        err(&FILE.replace("t_mux = \"0s\"", "t_mux = \"2s\"")),
        "s.toml:17:9: scenario.t_mux: 2s is above the limit of 1s"
    );
    assert_eq!(
        err(&FILE.replace("\"100us\"]", "\"1.5s\"]")),
        "s.toml:18:22: scenario.ts[2]: 1.5s is above the limit of 1s"
    );
    let many: Vec<String> = (1..=65).map(|i| format!("\"{i}ms\"")).collect();
    assert_eq!(
        err(&FILE.replace("ts = [\"10ms\", \"1ms\", \"100us\"]", &format!("ts = [{}]", many.join(", ")))),
        "s.toml:18:6: scenario.ts: 65 shaping intervals is above the limit of 64 (each is a run per shaper)"
    );
    assert_eq!(
        err(&FILE.replace("probe_period = \"1ms\"", "probe_period = \"999ns\"")),
        "s.toml:21:16: scenario.probe_period: 999ns is below the limit of 1us"
    );
    assert_eq!(
        err(&FILE.replace("duration = \"5s\"", "duration = \"86401s\"")),
        "s.toml:23:12: scenario.duration: 86401s is above the limit of 1 day (86400s)"
    );
    assert_eq!(
        err(&FILE.replace("\"32Mbit/s\"", "\"2Tbit/s\"")),
        "s.toml:19:22: scenario.rates[1]: 2Tbit/s is above the limit of 1 Tbit/s"
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

#[test]
fn observed_sums_and_shares() {
    let mut o = Observed {
        cpu_ns: vec![Some(100), Some(20), Some(3)],
        machine: Some(MachineCpu {
            user_ns: 600,
            system_ns: 200,
            idle_ns: 100,
            softirq_ns: 100,
            ..MachineCpu::default()
        }),
        machine_window_ns: Some(500),
        ..Observed::default()
    };
    assert_eq!(o.cpu_total_ns(), Some(123));
    assert_eq!(o.idle_share(), Some(0.1));
    // softirq per one CPU of wall time (two CPUs' worth of counters in 500 ns)
    assert_eq!(o.softirq_load(), Some(0.2));
    o.cpu_ns[1] = None;
    o.machine_window_ns = Some(0);
    assert_eq!(o.cpu_total_ns(), None);
    assert_eq!(o.softirq_load(), None);
}
