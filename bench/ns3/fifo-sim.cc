// fifo-sim: the FIFO runs of scenarios/line.toml and scenarios/mesh4.toml in ns-3, with
// the delay accounting of lockstep's simulator (crates/sim), for bench/sim-vs-ns3.sh.
//
// What it models, and where lockstep's simulator says the same:
//
// - Links: one PointToPointNetDevice per link end, 100 Mbit/s, propagation 0 (`sim run`
//   default), a byte-limited DropTailQueue (tail drop) per output port. A frame costs
//   its IP packet + 38 bytes on the wire (Ethernet header 14, FCS 4, preamble 8,
//   inter-frame gap 12: crates/sim/src/link.rs, framing "ethernet"); ns-3's PPP header
//   is 2 bytes, so each packet is created with IP + 36 bytes. Queue limit: 100 ms at
//   the link rate (crates/sim/src/build.rs, QUEUE_TIME_NS), counted in the same bytes.
// - Routers: no IP stack. A protocol handler on every node reads the packet's tag
//   (flow, hop) and sends the packet on the next device of the flow's path, at the
//   instant it arrived (`sim run` defaults: host model ideal, processing 0). The paths
//   are the scenarios' (mesh4's flows go 5 times round their ring), so the loops that
//   lockstep's routers make with destination + TTL routes are a list of devices here.
// - Sources: a reserved flow sends one packet at the start of each of its frames
//   (line: every 250 us frame; mesh4: frames 0, 5, ... 55 of each 60, i.e. 800 pkt/s),
//   starting with the first frame at or after t = 1 s on the sender's clock. mesh4's
//   senders are asynchronous: the n-th sender's clock runs n x 50 ppb slow, and the
//   frame starts are converted to true time with the same integer arithmetic as
//   crates/sim/src/engine.rs (NodeClock::local, NodeClock::true_of). line's best-effort
//   load is a CBR of 1000-byte UDP payloads (1028-byte IP packets) every 200 us from
//   t = 1 s, sent after the reserved packet when both are due at once (as the
//   simulated host does).
// - Delay: as lockstep's results measure it, receive time minus the frame start, both
//   read on the sender's clock (a mesh4 receiver runs on its sender's clock); the
//   receive time is the arrival of the last bit at the sink.
// - Run: traffic from 1 s to 1 s + DURATION (a send due exactly at the end still goes),
//   then 1 s more for what is in flight, like `lockstep sim run`.
//
// - Ties: frames that arrive at one node at the same nanosecond are forwarded in
//   ns-3's event order (--ties=ns3, the default) or in lockstep's (--ties=lockstep; see
//   Flush): the one place where the two simulators' results can differ.
//
// Output (stdout, one JSON object): per flow packets sent, count, mean, p99 (nearest
// rank), max, min in ns; queue drops; node-instants with 2+ frames arriving at once;
// wall time of Simulator::Run() and events executed.
//
//   fifo-sim --scenario=line|mesh4 --duration=SECONDS [--ties=ns3|lockstep]
//            [--scheduler=map|heap|calendar|list]

#include "ns3/core-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

using namespace ns3;

namespace
{

const int64_t START_NS = 1000000000;   // every node starts at t = 1 s
const int64_t DRAIN_NS = 1000000000;   // run this long after the traffic ends
const uint64_t RATE_BPS = 100000000;   // every link: 100 Mbit/s
const uint32_t WIRE_OVERHEAD = 38;     // bytes per frame beyond the IP packet
const uint32_t PPP_HEADER = 2;         // what ns-3's PointToPointNetDevice adds
const uint64_t QUEUE_TIME_NS = 100000000;

// A clock that runs `drift_ppb` parts per billion fast (negative: slow), read as in
// crates/sim/src/engine.rs: local = t + t * drift / 1e9 (integer, towards zero).
struct Clock
{
    int64_t drift_ppb = 0;

    int64_t Local(int64_t t) const
    {
        __int128 d = (__int128)t * drift_ppb / 1000000000;
        return (int64_t)((__int128)t + d);
    }

    // The true time at which the clock reads `local` (rounded up).
    int64_t TrueOf(int64_t local) const
    {
        if (drift_ppb == 0)
        {
            return local;
        }
        __int128 den = (__int128)1000000000 + drift_ppb;
        __int128 x = (__int128)local * 1000000000;
        __int128 t = x / den;
        if (x % den != 0 && x < 0)
        {
            t -= 1; // floor, like div_euclid for a positive divisor
        }
        if (Local((int64_t)t) < local)
        {
            t += 1;
        }
        return (int64_t)t;
    }
};

// What a packet carries: its flow, the hop it is on, and its frame start (sender's clock).
class FlowTag : public Tag
{
  public:
    uint32_t flow = 0;
    uint32_t hop = 0;
    int64_t t0 = 0;
    uint64_t seq = 0;     // order in which packets were handed to their links
    int64_t created = 0;  // when the packet was handed to its current link (ns)
    uint32_t sender = 0;  // the node that handed it over (ids in lockstep's node order)

    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("lockstep::FlowTag").SetParent<Tag>().AddConstructor<FlowTag>();
        return tid;
    }

    TypeId GetInstanceTypeId() const override
    {
        return GetTypeId();
    }

    uint32_t GetSerializedSize() const override
    {
        return 36;
    }

    void Serialize(TagBuffer b) const override
    {
        b.WriteU32(flow);
        b.WriteU32(hop);
        b.WriteU64((uint64_t)t0);
        b.WriteU64(seq);
        b.WriteU64((uint64_t)created);
        b.WriteU32(sender);
    }

    void Deserialize(TagBuffer b) override
    {
        flow = b.ReadU32();
        hop = b.ReadU32();
        t0 = (int64_t)b.ReadU64();
        seq = b.ReadU64();
        created = (int64_t)b.ReadU64();
        sender = b.ReadU32();
    }

    void Print(std::ostream& os) const override
    {
        os << "flow=" << flow << " hop=" << hop << " t0=" << t0;
    }
};

// A flow: a reserved one (frames of a cycle) or a best-effort CBR load.
struct FlowSpec
{
    std::string name;
    std::vector<std::string> path; // node names, sender first, receiver last
    uint32_t ipBytes;
    bool reserved;                 // reported per flow (lockstep reports reserved flows)
    // reserved: frame length, frames per cycle, the slots it sends in
    int64_t tf = 0;
    int64_t k = 0;
    std::vector<int64_t> slots;
    // load: period
    int64_t period = 0;
};

struct ScenarioSpec
{
    std::vector<std::string> nodes;
    std::vector<std::pair<std::string, std::string>> links;
    std::vector<FlowSpec> flows;
    // sender name -> clock drift (ppb) of its asynchronous clock
    std::map<std::string, int64_t> drift;
};

std::vector<std::string>
Ring(const std::string& src,
     const std::vector<std::string>& ring,
     int loops,
     const std::string& dst)
{
    // src -> ring[0] -> ring[1] ... -> ring[0] (loops times) -> dst
    std::vector<std::string> p{src, ring[0]};
    for (int l = 0; l < loops; l++)
    {
        for (size_t i = 1; i <= ring.size(); i++)
        {
            p.push_back(ring[i % ring.size()]);
        }
    }
    p.push_back(dst);
    return p;
}

// scenarios/line.toml, mode fifo: tx -> r1 -> r2 -> rx, the reserved flow "ctl" (200-byte
// IP packets, one per 250 us frame) and a 40 Mbit/s load of 1000-byte UDP payloads.
ScenarioSpec
Line()
{
    ScenarioSpec s;
    s.nodes = {"tx", "r1", "r2", "rx"};
    s.links = {{"tx", "r1"}, {"r1", "r2"}, {"r2", "rx"}};
    FlowSpec ctl;
    ctl.name = "ctl";
    ctl.path = {"tx", "r1", "r2", "rx"};
    ctl.ipBytes = 200;
    ctl.reserved = true;
    ctl.tf = 250000;
    ctl.k = 8;
    ctl.slots = {0, 1, 2, 3, 4, 5, 6, 7};
    s.flows.push_back(ctl);
    FlowSpec load;
    load.name = "load";
    load.path = {"tx", "r1", "r2", "rx"};
    load.ipBytes = 1000 + 28;
    load.reserved = false;
    load.period = (int64_t)(1000ULL * 8 * 1000000000ULL / 40000000ULL); // 200 us
    s.flows.push_back(load);
    return s;
}

// scenarios/mesh4.toml, mode fifo: four routers in a full mesh, five flows of 1002-byte
// IP packets at 800 packets/s (frames 0, 5, ... 55 of every 60 of 250 us), each 5 times
// round its ring; the n-th sender's clock is n x 50 ppb slow.
ScenarioSpec
Mesh4()
{
    ScenarioSpec s;
    s.nodes = {"r1", "r2", "r3", "r4", "s1234", "d1234", "s123", "d123", "s234", "d234",
               "s341", "d341", "s412", "d412"};
    s.links = {{"r1", "r2"}, {"r2", "r3"}, {"r3", "r4"}, {"r4", "r1"}, {"r1", "r3"}, {"r2", "r4"},
               {"s1234", "r1"}, {"r1", "d1234"}, {"s123", "r1"}, {"r1", "d123"},
               {"s234", "r2"}, {"r2", "d234"}, {"s341", "r3"}, {"r3", "d341"},
               {"s412", "r4"}, {"r4", "d412"}};
    struct F
    {
        const char* name;
        const char* src;
        std::vector<std::string> ring;
        const char* dst;
    };
    std::vector<F> fs = {{"f1234", "s1234", {"r1", "r2", "r3", "r4"}, "d1234"},
                         {"f123", "s123", {"r1", "r2", "r3"}, "d123"},
                         {"f234", "s234", {"r2", "r3", "r4"}, "d234"},
                         {"f341", "s341", {"r3", "r4", "r1"}, "d341"},
                         {"f412", "s412", {"r4", "r1", "r2"}, "d412"}};
    int ordinal = 0;
    for (auto& f : fs)
    {
        FlowSpec x;
        x.name = f.name;
        x.path = Ring(f.src, f.ring, 5, f.dst);
        x.ipBytes = 1002;
        x.reserved = true;
        x.tf = 250000;
        x.k = 60;
        for (int64_t slot = 0; slot < 60; slot += 5)
        {
            x.slots.push_back(slot);
        }
        s.flows.push_back(x);
        // senders in the order of the scenario's nodes: s1234 first
        ordinal++;
        s.drift[f.src] = -50 * ordinal;
    }
    return s;
}

struct FlowState
{
    FlowSpec spec;
    std::vector<Ptr<NetDevice>> out; // device to send on at each hop (0: the sender's)
    Clock clock;                     // the sender's (and the receiver's) clock
    int64_t nextFrame = 0;           // reserved: next frame to send in
    int64_t nextLocal = 0;           // load: next send time on the sender's clock
    uint64_t sent = 0;
    std::vector<int64_t> delays;
};

std::vector<FlowState> g_flows;
int64_t g_endNs = 0;
uint64_t g_seq = 0;
// --ties=lockstep: the packets that arrive at one instant, forwarded together after
// every arrival of that instant (see Flush)
bool g_lockstepTies = false;
struct Pending
{
    int64_t created;
    uint32_t sender;
    uint64_t seq;
    uint32_t node;
    Ptr<Packet> packet;
};
std::vector<Pending> g_pending;
bool g_flushScheduled = false;
// node-instants at which 2 or more frames arrived (their order is the tie-break's)
uint64_t g_tiedInstants = 0;
std::vector<std::pair<int64_t, uint32_t>> g_lastArrival; // per node: instant, frames
std::map<std::string, std::vector<size_t>> g_hostFlows; // sender -> its flows, in order

// The local time of the flow's next send.
int64_t
NextLocal(const FlowState& f)
{
    return f.spec.reserved ? f.nextFrame * f.spec.tf : f.nextLocal;
}

void
Advance(FlowState& f)
{
    if (f.spec.reserved)
    {
        do
        {
            f.nextFrame++;
        } while (std::find(f.spec.slots.begin(), f.spec.slots.end(), f.nextFrame % f.spec.k) ==
                 f.spec.slots.end());
    }
    else
    {
        f.nextLocal += f.spec.period;
    }
}

void
SendOne(size_t fi, int64_t t0)
{
    FlowState& f = g_flows[fi];
    Ptr<Packet> p = Create<Packet>(f.spec.ipBytes + WIRE_OVERHEAD - PPP_HEADER);
    FlowTag tag;
    tag.flow = fi;
    tag.hop = 0;
    tag.t0 = t0;
    tag.seq = g_seq++;
    tag.created = Simulator::Now().GetNanoSeconds();
    tag.sender = f.out[0]->GetNode()->GetId();
    p->AddPacketTag(tag);
    f.out[0]->Send(p, f.out[0]->GetBroadcast(), 0x0800);
    f.sent++;
}

// A sender host wakes: everything due goes, reserved flows first, then loads (the
// order of crates/sim/src/host.rs); then it sleeps until the next send.
void
HostWake(std::string host)
{
    int64_t now = Simulator::Now().GetNanoSeconds();
    auto& list = g_hostFlows[host];
    for (int pass = 0; pass < 2; pass++)
    {
        for (size_t fi : list)
        {
            FlowState& f = g_flows[fi];
            if (f.spec.reserved != (pass == 0))
            {
                continue;
            }
            int64_t local = f.clock.Local(now);
            while (NextLocal(f) <= local)
            {
                SendOne(fi, NextLocal(f));
                Advance(f);
            }
        }
    }
    int64_t next = INT64_MAX;
    for (size_t fi : list)
    {
        FlowState& f = g_flows[fi];
        next = std::min(next, std::max(f.clock.TrueOf(NextLocal(f)), now));
    }
    if (next <= g_endNs)
    {
        Simulator::Schedule(NanoSeconds(next - now), &HostWake, host);
    }
}

// Hands a packet that arrived to its flow's next hop, or records its delay at the end.
void
Forward(Ptr<Packet> p)
{
    FlowTag tag;
    p->PeekPacketTag(tag);
    FlowState& f = g_flows[tag.flow];
    uint32_t hop = tag.hop + 1;
    if (hop < f.out.size())
    {
        tag.hop = hop;
        tag.seq = g_seq++;
        tag.created = Simulator::Now().GetNanoSeconds();
        tag.sender = f.out[hop]->GetNode()->GetId();
        p->ReplacePacketTag(tag);
        f.out[hop]->Send(p, f.out[hop]->GetBroadcast(), 0x0800);
        return;
    }
    int64_t arrived = Simulator::Now().GetNanoSeconds();
    f.delays.push_back(f.clock.Local(arrived) - tag.t0);
}

// lockstep's simulator orders the events of one instant by when they were scheduled,
// then by the node that scheduled them (in the scenario's order), then in the order
// that node scheduled them; it schedules a frame's arrival when the frame is handed to
// its link. A router takes every frame that arrived at the instant in that order and
// forwards them when it wakes, which it does after every arrival of the instant
// (the wake-up is scheduled at the instant itself), routers in the scenario's order.
// ns-3 schedules a frame's arrival when its transmission starts, so frames that arrive
// at one instant can come out in another order. With --ties=lockstep every arrival of
// the instant is collected and then forwarded in lockstep's order (all of an instant's
// arrivals are scheduled before it begins: a frame takes time to serialise). Node ids
// here are lockstep's node indices: both create the nodes in the scenario's order.
void
Flush()
{
    g_flushScheduled = false;
    std::vector<Pending> batch;
    batch.swap(g_pending);
    std::stable_sort(batch.begin(), batch.end(), [](const Pending& a, const Pending& b) {
        if (a.created != b.created)
        {
            return a.created < b.created;
        }
        if (a.sender != b.sender)
        {
            return a.sender < b.sender;
        }
        return a.seq < b.seq;
    });
    std::vector<uint32_t> order; // the nodes that got frames, in node order
    for (auto& x : batch)
    {
        if (std::find(order.begin(), order.end(), x.node) == order.end())
        {
            order.push_back(x.node);
        }
    }
    std::sort(order.begin(), order.end());
    for (uint32_t n : order)
    {
        for (auto& x : batch)
        {
            if (x.node == n)
            {
                Forward(x.packet);
            }
        }
    }
}

// Every node's handler: forward on the flow's next device, or record at the receiver.
void
Receive(Ptr<NetDevice> dev,
        Ptr<const Packet> packet,
        uint16_t proto,
        const Address& from,
        const Address& to,
        NetDevice::PacketType type)
{
    uint32_t node = dev->GetNode()->GetId();
    int64_t now = Simulator::Now().GetNanoSeconds();
    auto& last = g_lastArrival[node];
    if (last.first == now)
    {
        if (++last.second == 2)
        {
            g_tiedInstants++;
        }
    }
    else
    {
        last = {now, 1};
    }
    Ptr<Packet> p = packet->Copy();
    if (!g_lockstepTies)
    {
        Forward(p);
        return;
    }
    FlowTag tag;
    p->PeekPacketTag(tag);
    g_pending.push_back({tag.created, tag.sender, tag.seq, node, p});
    if (!g_flushScheduled)
    {
        g_flushScheduled = true;
        Simulator::ScheduleNow(&Flush);
    }
}

} // namespace

int
main(int argc, char** argv)
{
    std::string scenario = "line";
    double duration = 60;
    std::string scheduler = "map";
    std::string ties = "ns3";
    CommandLine cmd;
    cmd.AddValue("scenario", "line or mesh4", scenario);
    cmd.AddValue("duration", "simulated traffic time (s)", duration);
    cmd.AddValue("scheduler", "ns-3 event scheduler: map, heap, calendar or list", scheduler);
    cmd.AddValue("ties",
                 "order of frames arriving at one instant: ns3 (its event order) or lockstep",
                 ties);
    cmd.Parse(argc, argv);
    if (ties != "ns3" && ties != "lockstep")
    {
        fprintf(stderr, "--ties: ns3 or lockstep\n");
        return 2;
    }
    g_lockstepTies = ties == "lockstep";

    std::map<std::string, std::string> schedulers = {{"map", "ns3::MapScheduler"},
                                                     {"heap", "ns3::HeapScheduler"},
                                                     {"calendar", "ns3::CalendarScheduler"},
                                                     {"list", "ns3::ListScheduler"}};
    if (!schedulers.count(scheduler))
    {
        fprintf(stderr, "unknown scheduler %s\n", scheduler.c_str());
        return 2;
    }
    ObjectFactory sf;
    sf.SetTypeId(schedulers[scheduler]);
    Simulator::SetScheduler(sf);

    ScenarioSpec s;
    if (scenario == "line")
    {
        s = Line();
    }
    else if (scenario == "mesh4")
    {
        s = Mesh4();
    }
    else
    {
        fprintf(stderr, "unknown scenario %s (line or mesh4)\n", scenario.c_str());
        return 2;
    }
    g_endNs = START_NS + (int64_t)(duration * 1e9 + 0.5);

    std::map<std::string, Ptr<Node>> nodes;
    for (auto& n : s.nodes)
    {
        nodes[n] = CreateObject<Node>();
    }
    g_lastArrival.assign(nodes.size(), {-1, 0});
    // the queue limit of crates/sim/src/build.rs: 100 ms at the link rate
    uint64_t limit = std::max<uint64_t>(RATE_BPS * QUEUE_TIME_NS / 8 / 1000000000ULL, 3028);
    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", DataRateValue(DataRate(RATE_BPS)));
    p2p.SetDeviceAttribute("Mtu", UintegerValue(9000));
    p2p.SetChannelAttribute("Delay", TimeValue(NanoSeconds(0)));
    p2p.SetQueue("ns3::DropTailQueue",
                 "MaxSize",
                 QueueSizeValue(QueueSize(QueueSizeUnit::BYTES, limit)));
    // (a, b) -> the device on a that sends to b
    std::map<std::pair<std::string, std::string>, Ptr<NetDevice>> dev;
    for (auto& l : s.links)
    {
        NetDeviceContainer d = p2p.Install(nodes[l.first], nodes[l.second]);
        dev[{l.first, l.second}] = d.Get(0);
        dev[{l.second, l.first}] = d.Get(1);
    }
    for (auto& n : nodes)
    {
        n.second->RegisterProtocolHandler(MakeCallback(&Receive), 0x0800, nullptr, false);
    }
    for (auto& spec : s.flows)
    {
        FlowState f;
        f.spec = spec;
        for (size_t i = 0; i + 1 < spec.path.size(); i++)
        {
            auto it = dev.find({spec.path[i], spec.path[i + 1]});
            if (it == dev.end())
            {
                fprintf(stderr, "no link %s-%s\n", spec.path[i].c_str(), spec.path[i + 1].c_str());
                return 2;
            }
            f.out.push_back(it->second);
        }
        auto d = s.drift.find(spec.path[0]);
        f.clock.drift_ppb = d == s.drift.end() ? 0 : d->second;
        int64_t local = f.clock.Local(START_NS);
        if (spec.reserved)
        {
            // the first frame starting at or after the start, then the first with a slot
            f.nextFrame = (local + spec.tf - 1) / spec.tf;
            while (std::find(spec.slots.begin(), spec.slots.end(), f.nextFrame % spec.k) ==
                   spec.slots.end())
            {
                f.nextFrame++;
            }
        }
        else
        {
            f.nextLocal = local;
        }
        f.delays.reserve((size_t)(duration * 1e9 / (spec.reserved ? spec.tf : spec.period)) + 16);
        g_hostFlows[spec.path[0]].push_back(g_flows.size());
        g_flows.push_back(f);
    }
    for (auto& h : g_hostFlows)
    {
        Simulator::Schedule(NanoSeconds(START_NS), &HostWake, h.first);
    }
    Simulator::Stop(NanoSeconds(g_endNs + DRAIN_NS));

    auto w0 = std::chrono::steady_clock::now();
    Simulator::Run();
    auto w1 = std::chrono::steady_clock::now();
    uint64_t events = Simulator::GetEventCount();
    int64_t wallNs = std::chrono::duration_cast<std::chrono::nanoseconds>(w1 - w0).count();

    uint64_t drops = 0;
    for (auto& d : dev)
    {
        Ptr<PointToPointNetDevice> p = DynamicCast<PointToPointNetDevice>(d.second);
        drops += p->GetQueue()->GetTotalDroppedPackets();
    }
    printf("{\"scenario\":\"%s\",\"duration_s\":%g,\"scheduler\":\"%s\",\"ties\":\"%s\",\"wall_ns\":%" PRId64
           ",\"events\":%" PRIu64 ",\"queue_drops\":%" PRIu64 ",\"tied_instants\":%" PRIu64 ",\"flows\":[",
           scenario.c_str(),
           duration,
           scheduler.c_str(),
           ties.c_str(),
           wallNs,
           events,
           drops,
           g_tiedInstants);
    for (size_t i = 0; i < g_flows.size(); i++)
    {
        FlowState& f = g_flows[i];
        std::vector<int64_t>& v = f.delays;
        std::sort(v.begin(), v.end());
        long double sum = 0;
        for (int64_t x : v)
        {
            sum += x;
        }
        size_t n = v.size();
        double mean = n ? (double)(sum / n) : 0;
        // nearest rank: the smallest value with at least 99 % of the values at or below it
        size_t r99 = n ? (size_t)((99 * (uint64_t)n + 99) / 100) : 0;
        int64_t p99 = n ? v[std::max<size_t>(r99, 1) - 1] : 0;
        printf("%s{\"flow\":\"%s\",\"reserved\":%s,\"sent\":%" PRIu64 ",\"count\":%zu,\"mean_ns\":%.3f,"
               "\"p99_ns\":%" PRId64 ",\"max_ns\":%" PRId64 ",\"min_ns\":%" PRId64 "}",
               i ? "," : "",
               f.spec.name.c_str(),
               f.spec.reserved ? "true" : "false",
               f.sent,
               n,
               mean,
               p99,
               n ? v.back() : 0,
               n ? v.front() : 0);
    }
    printf("]}\n");
    Simulator::Destroy();
    return 0;
}
