//! The kernel's route and the next hop's MAC ([`lockstep_linux::route`]) in two
//! namespaces joined by a veth pair: a neighbour in the table, one that has to be
//! asked (ARP), one that never answers, no route, a local address. Needs root (and
//! iproute2); otherwise it prints a skip note and passes. Names `lsr-<pid hex>-<n>`;
//! the namespaces are deleted by their guards, also when an assertion fails.

use std::net::Ipv4Addr;

mod common;

use common::{unique, IP_A, IP_B};
use lockstep_linux::cmd;
use lockstep_linux::route::{self, RouteError};

#[test]
fn the_next_hop_is_found_asked_for_or_named_when_it_cannot_be() {
    let test = "the_next_hop_is_found_asked_for_or_named_when_it_cannot_be";
    if !common::can_run(test, &["ip"]) {
        return;
    }
    let p = common::pair(&unique("lsr"));
    let if_a = p.if_a.clone();
    let got =
        p.a.run(|| {
            // in the table (the pair's static entry)
            let known = route::resolve(IP_B, Some(IP_A)).unwrap();
            // taken away: the kernel asks B, which answers
            cmd::ip(&["neigh", "del", &IP_B.to_string(), "dev", &if_a]).unwrap();
            let asked = route::resolve(IP_B, Some(IP_A)).unwrap();
            let silent = route::resolve(Ipv4Addr::new(10, 0, 0, 3), Some(IP_A)).unwrap_err();
            let nowhere = route::resolve(Ipv4Addr::new(10, 99, 0, 1), None).unwrap_err();
            let local = route::resolve(IP_A, None).unwrap_err();
            let owner = route::interface_with(IP_A).unwrap();
            let none = route::interface_with(IP_B).unwrap_err();
            (known, asked, silent, nowhere, local, owner, none)
        })
        .unwrap();
    let (known, asked, silent, nowhere, local, owner, none) = got;
    for hop in [&known, &asked] {
        assert_eq!(hop.route.ifname, p.if_a);
        assert_eq!((hop.route.gateway, hop.via), (None, IP_B));
        assert_eq!(hop.mac, p.mac_b);
    }
    assert!(matches!(silent, RouteError::Unresolved { .. }), "{silent}");
    let text = silent.to_string();
    assert!(
        text.contains("10.0.0.3") && text.contains(&p.if_a),
        "{text}"
    );
    assert!(matches!(nowhere, RouteError::NoRoute { .. }), "{nowhere}");
    assert!(nowhere.to_string().contains("10.99.0.1"), "{nowhere}");
    assert!(matches!(local, RouteError::Local { .. }), "{local}");
    assert_eq!(owner, p.if_a);
    assert!(
        matches!(none, RouteError::NoAddress(a) if a == IP_B),
        "{none}"
    );
}
