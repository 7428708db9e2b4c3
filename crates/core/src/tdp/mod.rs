//! Time-Driven Priority (pipeline forwarding) — the pure parts: the
//! scheduling table, the per-port frame queues and the frame marking carried in DSCP.
//!
//! - [`schedule`]: `k` rows of `(flow, packets)` per output port, validated against
//!   the link capacity of a frame minus the guard.
//! - [`queues`]: the `n_buf = d_max + 1` frame queues of an output port and the
//!   queue-index formula of baldi2006.
//! - [`marking`]: the DSCP mark and the alternating-bit recovery of the upstream frame
//!   on each input link.
//! - [`node`]: the sans-IO router (edge, core, FIFO mode) built from those parts,
//!   driven by `handle_packet` / `handle_timeout` / `poll_transmit` / `poll_timeout`.
//! - [`host`]: the sender state machine, [`receiver`]: the receiver state machine
//!   (same driving API as the node).
//! - [`config`]: the node configuration (`node.toml`), [`counters`]: what a node
//!   counts, [`event`]: the typed slip and drop events a node can queue,
//!   [`sender`]: which frames a sender's flows use, [`pool`]: reusable packet
//!   buffers.

pub mod config;
pub mod counters;
mod deps;
pub mod event;
pub mod host;
pub mod marking;
pub mod node;
pub mod pool;
pub mod queues;
pub mod receiver;
pub mod schedule;
pub mod sender;
pub mod trace;

pub use config::{
    BestEffortConfig, FlowConfig, FlowRule, FrameConfig, Mode, NeighbourConfig, NodeConfig,
    PortConfig, Role, RowConfig, SlipAction,
};
pub use counters::{FlowCounters, NodeCounters, PortCounters};
pub use event::{DropReason, NodeEvent, ProbeTag, SlipOutcome, SlipReason, EVENT_CAPACITY};
pub use host::{Sender, SenderCounters, SenderFlow, SenderTransmit};
pub use node::{Node, NodeConfigError, RxMeta, Transmit, TxKind};
pub use pool::PacketBuf;
pub use receiver::{Delivery, Receiver};
pub use sender::{SendFrame, SenderSchedule};
pub use trace::{Cause, FlowWindow, Outlier, WindowTally};
