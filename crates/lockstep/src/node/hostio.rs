//! A sender's and a receiver's packets as whole frames through a frame port
//! ([`lockstep_linux::port::FramePort`], `live.io` = `packet`, `ring`, `ring-v2`,
//! `xdp`), in place of the kernel's UDP stack.
//!
//! Sending ([`SendPort`]): the flows leaving by one interface share one port (an
//! interface takes one XDP program). A flow's datagram is written as an
//! Ethernet/IPv4/UDP frame ([`UdpFrameHeader`]) to the next hop of the kernel's
//! route (its MAC from the neighbour table, [`lockstep_linux::route`]) into the
//! port's batch, which leaves when it is full and at the end of each frame's packets
//! ([`SendPort::flush`]): a frame's `t_send` is when it was written, up to a batch
//! earlier than it leaves. Frames the device queue does not take are counted per
//! flow (`send_errors.enobufs`); they are not sent again. TX timestamps, when on,
//! are asked for every frame (as the UDP path stamps every datagram); the port
//! numbers them across its flows (matched to their frames by the core's
//! [`TxMatcher`]), and [`SendPort`] hands each to its flow by the flow's sequence
//! number.
//!
//! Receiving ([`RecvPort`]): a port on the interface that has the receiver's address
//! takes every frame; those that are UDP to the receiver's address and port with
//! good checksums go to the receiver with the kernel's RX time (where a frame has
//! none, the clock read when it was taken, counted), the rest are counted by why
//! they were dropped.

use std::net::SocketAddrV4;
use std::sync::{Arc, Mutex, Weak};

use lockstep_core::measure::txmatch::TxMatcher;
use lockstep_core::wire::udpframe::{
    self, FrameDrop, FrameDrops, L4Checksum, UdpFrameHeader, OVERHEAD,
};
use lockstep_core::Instant;
use lockstep_linux::packet::{FrameMeta, BATCH_MAX};
use lockstep_linux::port::{self, FramePort, IoChoice, IoMode, PortError, PortSetup};
use lockstep_linux::udp::NetError;

/// Most stamped frames remembered per port while their TX timestamps are awaited.
const STAMPED_MAX: usize = 1 << 16;

/// A port the flows leaving by one interface share.
pub(crate) type Shared = Arc<Mutex<SendPort>>;

/// The ports open in this process, by namespace and interface, so that flows share
/// them ([`send_port`]); a port closes when its last flow is dropped.
static OPEN: Mutex<Vec<OpenPort>> = Mutex::new(Vec::new());

/// An open port: its namespace's id, its interface, the port while a flow holds it.
type OpenPort = (u64, String, Weak<Mutex<SendPort>>);

/// A flow's place in a shared port.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot(usize);

/// One interface's send port, its batch and its TX timestamps by flow.
pub(crate) struct SendPort {
    port: Box<dyn FramePort>,
    /// The batch: frame `i` at `i * slot_len`, `lens[i]` bytes, of flow `owners[i]`.
    buf: Vec<u8>,
    slot_len: usize,
    lens: Vec<usize>,
    owners: Vec<(usize, u64)>,
    stamp: bool,
    /// Stamped frames waiting for their TX timestamps, by id: (flow slot, seq).
    stamped: TxMatcher<(usize, u64)>,
    /// The id the port gives the next stamped frame that leaves.
    next_id: u32,
    /// Per flow: timestamps taken for it (seq, software time), frames refused.
    inbox: Vec<Vec<(u64, Option<Instant>)>>,
    refused: Vec<u64>,
}

/// The shared port of `ifname` in this namespace, opened in `mode` when none is.
/// Returns the port and what is worth saying about how it was opened.
pub(crate) fn send_port(
    ifname: &str,
    mode: IoMode,
    setup: &PortSetup,
    max_frame: usize,
) -> Result<(Shared, Vec<String>), PortError> {
    let ns = lockstep_linux::netns::current_id().unwrap_or(0);
    let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
    open.retain(|(_, _, w)| w.strong_count() > 0);
    if let Some(p) = open
        .iter()
        .find(|(n, i, _)| *n == ns && i == ifname)
        .and_then(|(_, _, w)| w.upgrade())
    {
        let mut sp = p.lock().unwrap_or_else(|e| e.into_inner());
        sp.fit(max_frame);
        drop(sp);
        return Ok((p, Vec::new()));
    }
    let opened = port::open(ifname, IoChoice::Force(mode), setup)?;
    let sp = Arc::new(Mutex::new(SendPort {
        port: opened.port,
        buf: vec![0u8; max_frame * BATCH_MAX],
        slot_len: max_frame,
        lens: Vec::with_capacity(BATCH_MAX),
        owners: Vec::with_capacity(BATCH_MAX),
        stamp: setup.tx_timestamps,
        stamped: TxMatcher::new(STAMPED_MAX),
        next_id: 0,
        inbox: Vec::new(),
        refused: Vec::new(),
    }));
    open.push((ns, ifname.to_string(), Arc::downgrade(&sp)));
    Ok((sp, opened.notes))
}

impl SendPort {
    /// Makes room for frames of `max_frame` bytes (before any is queued).
    fn fit(&mut self, max_frame: usize) {
        if max_frame > self.slot_len && self.lens.is_empty() {
            self.slot_len = max_frame;
            self.buf = vec![0u8; max_frame * BATCH_MAX];
        }
    }

    /// How the port moves frames.
    pub fn mode(&self) -> IoMode {
        self.port.mode()
    }

    /// A place for one more flow.
    pub fn add_flow(&mut self) -> Slot {
        self.inbox.push(Vec::with_capacity(64));
        self.refused.push(0);
        Slot(self.inbox.len() - 1)
    }

    /// Writes the frame of `payload` into the batch (sending the batch first when it
    /// is full); `false` when it cannot be written (too long for the port's slots).
    pub fn queue(
        &mut self,
        slot: Slot,
        seq: u64,
        header: &UdpFrameHeader,
        dscp: u8,
        payload: &[u8],
    ) -> Result<bool, NetError> {
        if self.lens.len() == BATCH_MAX {
            self.flush()?;
        }
        let at = self.lens.len() * self.slot_len;
        let Some(room) = self.buf.get_mut(at..at + self.slot_len) else {
            return Ok(false);
        };
        match header.emit(dscp, payload, room) {
            Ok(n) => {
                self.lens.push(n);
                self.owners.push((slot.0, seq));
                Ok(true)
            }
            Err(_) => Ok(false),
        }
    }

    /// Sends the batch. A frame the device refuses is counted against its flow
    /// ([`SendPort::take_refused`]) and not sent again, as a router's port does: it
    /// used up its TX timestamp id, and the frames after it are still sent. An
    /// error only when the port fails (the frames not sent are counted too).
    pub fn flush(&mut self) -> Result<(), NetError> {
        let n = self.lens.len();
        if n == 0 {
            return Ok(());
        }
        let mut frames: [&[u8]; BATCH_MAX] = [&[]; BATCH_MAX];
        for (i, (f, &len)) in frames.iter_mut().zip(&self.lens).enumerate() {
            let at = i * self.slot_len;
            *f = self.buf.get(at..at + len).unwrap_or_default();
        }
        let stamp = [self.stamp; BATCH_MAX];
        let mut fate = [Fate::Refused { id_used: false }; BATCH_MAX];
        let mut result = Ok(());
        let mut off = 0;
        while off < n {
            match self.port.send(&frames[off..n], &stamp[off..n]) {
                Ok(k) => {
                    fate[off..off + k].fill(Fate::Left);
                    off += k;
                    if off < n {
                        fate[off] = Fate::Refused { id_used: true };
                        off += 1;
                    }
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.settle(&fate[..n]);
        result
    }

    /// Empties the batch: what left waits for its TX timestamp, what was refused is
    /// counted (a refused frame that used up an id waits for nothing).
    fn settle(&mut self, fate: &[Fate]) {
        for (&(slot, seq), f) in self.owners.iter().zip(fate) {
            let id_used = match *f {
                Fate::Left => {
                    if self.stamp {
                        self.stamped.note_sent(self.next_id, (slot, seq));
                    }
                    true
                }
                Fate::Refused { id_used } => {
                    if let Some(r) = self.refused.get_mut(slot) {
                        *r += 1;
                    }
                    id_used
                }
            };
            if self.stamp && id_used {
                self.next_id = self.next_id.wrapping_add(1);
            }
        }
        self.lens.clear();
        self.owners.clear();
    }

    /// Frames of flow `slot` the device did not take since the last call.
    pub fn take_refused(&mut self, slot: Slot) -> u64 {
        self.refused
            .get_mut(slot.0)
            .map(std::mem::take)
            .unwrap_or(0)
    }

    /// Takes the port's queued TX timestamps and hands flow `slot`'s to `each` (its
    /// sequence number, the software time); others wait for their flows. Returns how
    /// many were handed out.
    pub fn timestamps(
        &mut self,
        slot: Slot,
        each: &mut dyn FnMut(u64, Option<Instant>),
    ) -> Result<u64, NetError> {
        let SendPort {
            port,
            stamped,
            inbox,
            ..
        } = self;
        // bounded: at most every stamped frame, a batch at a time
        for _ in 0..=STAMPED_MAX / BATCH_MAX {
            let taken = port.tx_timestamps(&mut |ts| {
                if let Some(((s, seq), sw)) = stamped.on_timestamp(ts.id, Some(ts.software)) {
                    if let Some(b) = inbox.get_mut(s) {
                        b.push((seq, sw));
                    }
                }
            })?;
            if taken < BATCH_MAX {
                break;
            }
        }
        let mine = inbox
            .get_mut(slot.0)
            .map(std::mem::take)
            .unwrap_or_default();
        let n = mine.len() as u64;
        for (seq, sw) in &mine {
            each(*seq, *sw);
        }
        // give the buffer back, emptied, so the next call does not allocate
        if let Some(b) = inbox.get_mut(slot.0) {
            if b.is_empty() {
                let mut mine = mine;
                mine.clear();
                *b = mine;
            }
        }
        Ok(n)
    }
}

/// What became of a frame of the batch.
#[derive(Clone, Copy)]
enum Fate {
    Left,
    Refused { id_used: bool },
}

/// The largest frame a flow of `payload` bytes writes.
pub(crate) fn frame_len(payload: usize) -> usize {
    OVERHEAD + payload
}

/// A receiver's frame port and what it dropped.
pub(crate) struct RecvPort {
    pub port: Box<dyn FramePort>,
    pub to: SocketAddrV4,
    pub drops: FrameDrops,
    /// Frames handed on without a kernel RX time (the clock read when taken instead).
    pub clock_rx: u64,
}

impl RecvPort {
    /// Takes up to `max` frames: each one for the receiver goes to `each` with its
    /// payload and kernel RX time (`None`: the port gave none); the rest are counted.
    pub fn recv(
        &mut self,
        max: usize,
        each: &mut dyn FnMut(&[u8], Option<Instant>),
    ) -> Result<usize, NetError> {
        let RecvPort {
            port, to, drops, ..
        } = self;
        port.recv(max, &mut |frame, meta: FrameMeta| match udpframe::accept(
            frame,
            *to,
            l4_checksum(&meta),
        ) {
            Ok(payload) if !meta.truncated => each(payload, meta.kernel_rx),
            Ok(_) => drops.count(FrameDrop::Malformed),
            Err(why) => drops.count(why),
        })
    }
}

/// What the kernel said of a frame's L4 checksum.
fn l4_checksum(meta: &FrameMeta) -> L4Checksum {
    if meta.csum_valid || meta.csum_not_ready {
        L4Checksum::Trusted
    } else {
        L4Checksum::Verify
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_core::wire::EthernetAddress;
    use lockstep_core::ClockId;
    use lockstep_linux::packet::PacketStats;
    use lockstep_linux::udp::TxTimestamp;
    use std::net::Ipv4Addr;
    use std::os::fd::{AsFd, BorrowedFd};

    /// A port that hands out the frames it was given and takes `accept` frames per
    /// send; TX timestamps for ids `stamps`.
    struct FakePort {
        fd: std::io::Stdin,
        rx: Vec<(Vec<u8>, FrameMeta)>,
        sent: Vec<Vec<u8>>,
        accept: Vec<usize>,
        stamps: Vec<u32>,
    }

    impl Default for FakePort {
        fn default() -> FakePort {
            FakePort {
                fd: std::io::stdin(),
                rx: Vec::new(),
                sent: Vec::new(),
                accept: Vec::new(),
                stamps: Vec::new(),
            }
        }
    }

    impl AsFd for FakePort {
        fn as_fd(&self) -> BorrowedFd<'_> {
            // any descriptor: nothing waits on it
            self.fd.as_fd()
        }
    }

    impl FramePort for FakePort {
        fn mode(&self) -> IoMode {
            IoMode::Packet
        }
        fn ifindex(&self) -> u32 {
            1
        }
        fn recv(
            &mut self,
            max: usize,
            each: &mut dyn FnMut(&[u8], FrameMeta),
        ) -> Result<usize, NetError> {
            let n = max.min(self.rx.len());
            for (f, m) in self.rx.drain(..n) {
                each(&f, m);
            }
            Ok(n)
        }
        fn send(&mut self, frames: &[&[u8]], _stamp: &[bool]) -> Result<usize, NetError> {
            let n = if self.accept.is_empty() {
                frames.len()
            } else {
                self.accept.remove(0).min(frames.len())
            };
            self.sent.extend(frames[..n].iter().map(|f| f.to_vec()));
            Ok(n)
        }
        fn tx_timestamps(&mut self, each: &mut dyn FnMut(TxTimestamp)) -> Result<usize, NetError> {
            let n = self.stamps.len();
            for id in self.stamps.drain(..) {
                each(TxTimestamp {
                    id,
                    software: Some(Instant::new(ClockId::Realtime, 1000 + i64::from(id))),
                    hardware: None,
                });
            }
            Ok(n)
        }
        fn take_stats(&mut self) -> Result<PacketStats, NetError> {
            Ok(PacketStats::default())
        }
        fn take_error(&mut self) -> Result<Option<NetError>, NetError> {
            Ok(None)
        }
    }

    const TO: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 2, 2), 7000);

    fn header(src_port: u16) -> UdpFrameHeader {
        UdpFrameHeader {
            src_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst_mac: EthernetAddress([2, 0, 0, 0, 0, 2]),
            src: SocketAddrV4::new(Ipv4Addr::new(10, 0, 1, 2), src_port),
            dst: TO,
        }
    }

    fn frame(h: &UdpFrameHeader, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; frame_len(payload.len())];
        h.emit(0, payload, &mut f).unwrap();
        f
    }

    fn meta(len: usize) -> FrameMeta {
        FrameMeta {
            len,
            kernel_rx: Some(Instant::new(ClockId::Realtime, 5)),
            csum_not_ready: false,
            csum_valid: false,
            truncated: false,
            vlan: None,
            kind: lockstep_linux::packet::FrameKind::Host,
        }
    }

    #[test]
    fn a_receiver_port_hands_on_its_datagrams_and_counts_the_rest() {
        let good = frame(&header(6001), b"probe");
        let mut other_ip = header(6001);
        other_ip.dst = SocketAddrV4::new(Ipv4Addr::new(10, 0, 2, 3), 7000);
        let mut other_port = header(6001);
        other_port.dst = SocketAddrV4::new(*TO.ip(), 7001);
        let mut bad_sum = good.clone();
        bad_sum[44] ^= 0x40;
        let mut tcp = good.clone();
        tcp[23] = 6;
        let mut cut = meta(good.len());
        cut.truncated = true;
        let frames = [
            (good.clone(), meta(good.len())),
            (frame(&other_ip, b"x"), meta(43)),
            (frame(&other_port, b"x"), meta(43)),
            (bad_sum.clone(), meta(bad_sum.len())),
            (tcp, meta(good.len())),
            (good[..30].to_vec(), meta(30)),
            (good.clone(), cut),
            (
                good.clone(),
                FrameMeta {
                    kernel_rx: None,
                    ..meta(good.len())
                },
            ),
        ];
        let mut rp = RecvPort {
            port: Box::new(FakePort {
                rx: frames.to_vec(),
                ..FakePort::default()
            }),
            to: TO,
            drops: FrameDrops::default(),
            clock_rx: 0,
        };
        let mut got = Vec::new();
        let n = rp
            .recv(64, &mut |p, t| got.push((p.to_vec(), t.map(|t| t.ns))))
            .unwrap();
        assert_eq!(n, frames.len());
        assert_eq!(
            got,
            [(b"probe".to_vec(), Some(5)), (b"probe".to_vec(), None)]
        );
        let d = rp.drops;
        assert_eq!((d.other_address, d.other_port, d.bad_checksum), (1, 1, 2));
        assert_eq!((d.malformed, d.other_protocol), (2, 0));
        // a checksum the kernel verified is not summed again
        rp.port = Box::new(FakePort {
            rx: vec![(
                bad_sum,
                FrameMeta {
                    csum_valid: true,
                    ..meta(good.len())
                },
            )],
            ..FakePort::default()
        });
        got.clear();
        rp.recv(64, &mut |p, _| got.push((p.to_vec(), None)))
            .unwrap();
        assert_eq!(got.len(), 1);
    }

    fn send_port(fake: FakePort) -> SendPort {
        SendPort {
            port: Box::new(fake),
            buf: vec![0u8; 256 * BATCH_MAX],
            slot_len: 256,
            lens: Vec::new(),
            owners: Vec::new(),
            stamp: true,
            stamped: TxMatcher::new(STAMPED_MAX),
            next_id: 0,
            inbox: Vec::new(),
            refused: Vec::new(),
        }
    }

    #[test]
    fn a_send_port_batches_counts_refusals_and_hands_each_flow_its_timestamps() {
        let mut sp = send_port(FakePort {
            accept: vec![2, 0, 0],
            stamps: vec![0, 1],
            ..FakePort::default()
        });
        let (a, b) = (sp.add_flow(), sp.add_flow());
        let (ha, hb) = (header(6001), header(6002));
        assert!(sp.queue(a, 0, &ha, 0x0c, b"a0").unwrap());
        assert!(sp.queue(b, 0, &hb, 0x0c, b"b0").unwrap());
        assert!(sp.queue(a, 1, &ha, 0x1c, b"a1").unwrap());
        // too long for the port's slots: not written
        assert!(!sp.queue(a, 2, &ha, 0, &[0u8; 300]).unwrap());
        sp.flush().unwrap();
        // two left, the third was refused (and not sent again)
        assert_eq!((sp.take_refused(a), sp.take_refused(b)), (1, 0));
        assert_eq!(sp.take_refused(a), 0);
        let mut sa = Vec::new();
        assert_eq!(
            sp.timestamps(a, &mut |seq, t| sa.push((seq, t.map(|t| t.ns))))
                .unwrap(),
            1
        );
        assert_eq!(sa, [(0, Some(1000))]);
        let mut sb = Vec::new();
        sp.timestamps(b, &mut |seq, t| sb.push((seq, t.map(|t| t.ns))))
            .unwrap();
        assert_eq!(sb, [(0, Some(1001))]);
    }

    #[test]
    fn a_frame_refused_in_the_middle_keeps_the_ids_of_those_after_it() {
        let mut sp = send_port(FakePort {
            accept: vec![1, 5],
            stamps: vec![0, 2],
            ..FakePort::default()
        });
        let (a, b) = (sp.add_flow(), sp.add_flow());
        let (ha, hb) = (header(6001), header(6002));
        assert!(sp.queue(a, 0, &ha, 0, b"a0").unwrap());
        assert!(sp.queue(b, 0, &hb, 0, b"b0").unwrap());
        assert!(sp.queue(a, 1, &ha, 0, b"a1").unwrap());
        sp.flush().unwrap();
        assert_eq!((sp.take_refused(a), sp.take_refused(b)), (0, 1));
        let mut sa = Vec::new();
        sp.timestamps(a, &mut |seq, t| sa.push((seq, t.map(|t| t.ns))))
            .unwrap();
        // id 1 was the refused frame's: a1 is id 2
        assert_eq!(sa, [(0, Some(1000)), (1, Some(1002))]);
        let mut sb = Vec::new();
        sp.timestamps(b, &mut |seq, _| sb.push(seq)).unwrap();
        assert!(sb.is_empty());
    }

    #[test]
    fn a_full_batch_leaves_before_the_next_frame_is_written() {
        let mut sp = send_port(FakePort::default());
        sp.stamp = false;
        let s = sp.add_flow();
        let h = header(6001);
        for seq in 0..=BATCH_MAX as u64 {
            assert!(sp.queue(s, seq, &h, 0, &seq.to_be_bytes()).unwrap());
        }
        assert_eq!(sp.lens.len(), 1);
        sp.flush().unwrap();
        assert!(sp.lens.is_empty());
        assert_eq!(sp.stamped.waiting(), 0);
    }
}
