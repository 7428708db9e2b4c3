//! The TDP node's per-packet path allocates nothing once warmed up: a counting
//! global allocator (this test binary only) watches a steady stream of reserved,
//! best-effort, probe and padding traffic through a core router.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::Ipv4Addr;

use lockstep_core::frame::FrameClock;
use lockstep_core::net::{PortId, Prefix, Route};
use lockstep_core::tdp::{
    BestEffortConfig, FrameConfig, Mode, Node, NodeConfig, PortConfig, Role, RxMeta, SlipAction,
};
use lockstep_core::wire::checksum::{fold, ones_complement_sum};
use lockstep_core::wire::probe::ProbeRepr;
use lockstep_core::wire::EthernetAddress;
use lockstep_core::{ClockId, Duration, Instant};

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCATIONS.with(|a| a.set(a.get() + 1));
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCATIONS.with(|a| a.set(a.get() + 1));
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn mac(a: u8, b: u8) -> EthernetAddress {
    EthernetAddress([2, 0, 0, 0, a, b])
}

fn port(id: u16, net: u8) -> PortConfig {
    PortConfig {
        id: PortId(id),
        ifname: format!("eth{id}"),
        mac: mac(net, 1),
        addr: Ipv4Addr::new(10, 0, net, 1),
        prefix_len: 24,
        rate_bps: 1_000_000_000,
        neighbour_mac: Some(mac(net, 2)),
        neighbour_addr: Some(Ipv4Addr::new(10, 0, net, 2)),
        d: Some(2),
        padding: None,
    }
}

/// Ethernet/IPv4/UDP to 10.0.9.5 with valid checksums.
fn frame(dscp: u8, payload: &[u8]) -> Vec<u8> {
    let ip_len = 28 + payload.len();
    let mut f = vec![0u8; 14 + ip_len];
    f[0..6].copy_from_slice(&mac(1, 1).0);
    f[6..12].copy_from_slice(&mac(1, 2).0);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let h = &mut f[14..34];
    h[0] = 0x45;
    h[1] = dscp << 2;
    h[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
    h[8] = 64;
    h[9] = 17;
    h[12..16].copy_from_slice(&[10, 0, 1, 2]);
    h[16..20].copy_from_slice(&[10, 0, 9, 5]);
    let c = !fold(ones_complement_sum(h, 0));
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f[34..36].copy_from_slice(&4000u16.to_be_bytes());
    f[36..38].copy_from_slice(&5000u16.to_be_bytes());
    f[38..40].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f[42..].copy_from_slice(payload); // UDP checksum 0: none
    f
}

#[test]
fn the_forwarding_path_does_not_allocate_once_warm() {
    let tf = 100_000;
    let config = NodeConfig {
        name: "r".into(),
        id: 1,
        role: Role::Core,
        mode: Mode::Tdp,
        frame: FrameConfig {
            tf: Duration(tf),
            k: 8,
            epoch_ns: 0,
            offset: Duration::ZERO,
            guard: Duration::from_micros(2),
            lead: 1,
        },
        ports: vec![port(1, 1), port(2, 2)],
        routes: vec![Route {
            prefix: "10.0.9.0/24".parse::<Prefix>().unwrap(),
            port: PortId(2),
            next_hop: Some(Ipv4Addr::new(10, 0, 2, 2)),
            ttl: None,
        }],
        neighbours: vec![],
        flows: vec![],
        best_effort: BestEffortConfig::default(),
        padding: true,
        on_slip: SlipAction::BestEffort,
    };
    let clock = FrameClock::new(Duration(tf), 8).unwrap();
    let mut node = Node::new(config).unwrap();
    let mut probe = vec![0u8; 256];
    ProbeRepr {
        flow_id: 1,
        total_len: 256,
        ..ProbeRepr::default()
    }
    .emit_into(&mut probe)
    .unwrap();
    // all test frames built up front (one set per frame of the 2k-frame parity
    // period): only the node runs while counting
    let frames: Vec<Vec<Vec<u8>>> = (0..16)
        .map(|f| {
            vec![
                frame(clock.dscp(f), &probe),
                frame(clock.dscp(f), &[1; 400]),
                frame(0, &[2; 900]),
            ]
        })
        .collect();
    let mut sent = 0u64;
    let run = |node: &mut Node, frames_from: i64, count: i64, sent: &mut u64| {
        for f in frames_from..frames_from + count {
            let t = f * tf;
            node.handle_timeout(Instant::new(ClockId::Tai, t));
            for (i, bytes) in frames[f.rem_euclid(16) as usize].iter().enumerate() {
                let now = Instant::new(ClockId::Tai, t + 10_000 * (i as i64 + 1));
                node.handle_packet(
                    now,
                    PortId(1),
                    bytes,
                    RxMeta {
                        kernel_rx: Some(now),
                    },
                );
            }
            for now in [t, t + 10_000, t + 20_000, t + 30_000, t + 40_000] {
                while let Some(tx) = node.poll_transmit(Instant::new(ClockId::Tai, now)) {
                    *sent += 1;
                    node.recycle(tx.buf);
                }
            }
        }
    };
    run(&mut node, 0, 50, &mut sent);
    COUNTING.with(|c| c.set(true));
    run(&mut node, 50, 2_000, &mut sent);
    COUNTING.with(|c| c.set(false));
    assert_eq!(
        ALLOCATIONS.with(Cell::get),
        0,
        "allocations in the steady state"
    );
    let c = node.counters();
    assert_eq!(c.ports[1].slipped, 0);
    assert!(c.hops_recorded > 2_000);
    assert!(c.padding_sent > 2_000);
    assert!(sent > 8_000);
}
