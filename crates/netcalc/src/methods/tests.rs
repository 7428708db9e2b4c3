use super::*;
use crate::model::{Flow, Multiplexing, Server};

fn i(n: i64) -> Q {
    Q::int(n)
}

fn q(n: i128, d: i128) -> Q {
    Q::ratio(n, d).unwrap()
}

fn tandem(n: usize, mux: Multiplexing, flows: &[(usize, usize)]) -> Network {
    Network {
        servers: (0..n)
            .map(|k| Server {
                name: format!("s{k}"),
                rate: i(20),
                latency: i(20),
                buffer: None,
                multiplexing: mux,
            })
            .collect(),
        flows: flows
            .iter()
            .enumerate()
            .map(|(k, &(a, b))| Flow {
                name: format!("f{k}"),
                path: (a..=b).map(|s| format!("s{s}")).collect(),
                rate: i(5),
                burst: i(25),
                peak: None,
                max_packet: None,
                deadline: None,
            })
            .collect(),
    }
}

fn all(net: &Network, m: Method) -> Vec<Q> {
    bounds(net, m)
        .unwrap()
        .into_iter()
        .map(|b| b.unwrap())
        .collect()
}

#[test]
fn two_flows_through_three_fifo_servers() {
    let net = tandem(3, Multiplexing::Fifo, &[(0, 2), (0, 2)]);
    // the aggregate leaves each server as 10 t + 50 + 10·20: D = 22.5, 32.5, 42.5
    assert_eq!(all(&net, Method::Tfa), vec![q(195, 2); 2]);
    // both flows as one FIFO aggregate through β_{20, 60}: 60 + 50/20
    assert_eq!(all(&net, Method::Sfa), vec![q(125, 2); 2]);
    assert!(matches!(
        bounds(&net, Method::Pmoo).unwrap()[0],
        Err(NoBound::NotApplicable(_))
    ));
}

#[test]
fn two_flows_through_three_arbitrary_servers() {
    let net = tandem(3, Multiplexing::Arbitrary, &[(0, 2), (0, 2)]);
    // R = 20 − 5, T = 60 + (25 + 5·60)/15, plus 25/15
    assert_eq!(all(&net, Method::Pmoo), vec![q(250, 3); 2]);
}

#[test]
fn a_cycle_is_named() {
    let mut net = tandem(2, Multiplexing::Fifo, &[(0, 1)]);
    net.flows[0].path = vec!["s1".into(), "s0".into()];
    net.flows.push(net.flows[0].clone());
    net.flows[1].path = vec!["s0".into(), "s1".into()];
    let err = bounds(&net, Method::Tfa).unwrap_err();
    assert!(
        err.message.contains("s0") && err.message.contains("s1"),
        "{err}"
    );
}
