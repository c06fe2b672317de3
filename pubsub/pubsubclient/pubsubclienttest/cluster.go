package pubsubclienttest

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/stabilizer/stabilizer/pubsub/pubsubpb"
)

// Cluster is what the fake sites share, as real sites replicate it: topic
// definitions, every origin's messages, message ids and durable positions.
type Cluster struct {
	mu struct {
		sync.Mutex
		topics    map[string]*topic
		logs      map[string][]*pubsubpb.Message // per origin, in seq order, every topic
		seq       map[string]uint64              // per origin, the last seq
		ids       map[string]map[string]*pubsubpb.PublishResponse
		positions map[subKey]*position
		wall      int64         // the fake clock of HLCs: one tick per publish
		changed   chan struct{} // closed and replaced on every change
	}
}

type topic struct {
	def       *pubsubpb.Topic
	createdAt string
	created   *pubsubpb.HLC
}

type subKey struct{ topic, name string }

// position is a durable subscription's: per origin, where it starts and
// what was acked (the fake never folds acks into the floor).
type position struct {
	floor map[string]uint64
	acked map[string]map[uint64]bool
	start *pubsubpb.SubscribeStart
}

// NewCluster returns a cluster with no topics and no sites.
func NewCluster() *Cluster {
	c := &Cluster{}
	c.mu.topics = map[string]*topic{}
	c.mu.logs = map[string][]*pubsubpb.Message{}
	c.mu.seq = map[string]uint64{}
	c.mu.ids = map[string]map[string]*pubsubpb.PublishResponse{}
	c.mu.positions = map[subKey]*position{}
	c.mu.wall = 1_700_000_000_000_000_000
	c.mu.changed = make(chan struct{})
	return c
}

func (c *Cluster) changedLocked() {
	close(c.mu.changed)
	c.mu.changed = make(chan struct{})
}

func (c *Cluster) watch() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.changed
}

// normalize fills a definition's defaults, so that two definitions that
// mean the same compare equal.
func normalize(t *pubsubpb.Topic) *pubsubpb.Topic {
	t = proto.Clone(t).(*pubsubpb.Topic)
	if t.PublishAck == "" {
		t.PublishAck = pubsubpb.DefaultPublishAck
	}
	if t.MaxMessageBytes == 0 {
		t.MaxMessageBytes = pubsubpb.DefaultMaxMessageBytes
	}
	if t.Retention == nil {
		t.Retention = &pubsubpb.Retention{}
	}
	if t.Retention.Policy == "" || t.Retention.Policy == pubsubpb.RetentionAll {
		t.Retention.Policy = pubsubpb.RetentionLimits
	}
	return t
}

func (c *Cluster) createTopic(site string, def *pubsubpb.Topic) (*pubsubpb.TopicInfo, error) {
	if def == nil || def.Name == "" {
		return nil, status.Error(codes.InvalidArgument, "a topic needs a name")
	}
	// The fake keeps every message: it checks a retention's policy but
	// applies none.
	switch p := def.GetRetention().GetPolicy(); p {
	case "", pubsubpb.RetentionAll, pubsubpb.RetentionLimits, pubsubpb.RetentionInterest, pubsubpb.RetentionWorkQueue:
	default:
		return nil, status.Errorf(codes.InvalidArgument, "retention.policy %q is unknown (known: limits, interest, workqueue)", p)
	}
	def = normalize(def)
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.mu.topics[def.Name]; t != nil {
		if !proto.Equal(t.def, def) {
			return nil, status.Errorf(codes.AlreadyExists, "topic %s exists with another definition (publish_ack %s, delivery %q)",
				def.Name, t.def.PublishAck, t.def.Delivery)
		}
		return c.infoLocked(site, t), nil
	}
	c.mu.wall++
	t := &topic{def: def, createdAt: site, created: &pubsubpb.HLC{Wall: c.mu.wall}}
	c.mu.topics[def.Name] = t
	c.changedLocked()
	return c.infoLocked(site, t), nil
}

func unknownTopic(name string) error {
	return status.Errorf(codes.NotFound, "unknown topic %s", name)
}

func (c *Cluster) getTopic(site, name string) (*pubsubpb.TopicInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.mu.topics[name]
	if t == nil {
		return nil, unknownTopic(name)
	}
	return c.infoLocked(site, t), nil
}

func (c *Cluster) listTopics(site string) *pubsubpb.ListTopicsResponse {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := &pubsubpb.ListTopicsResponse{}
	for _, name := range slices.Sorted(maps.Keys(c.mu.topics)) {
		out.Topics = append(out.Topics, c.infoLocked(site, c.mu.topics[name]))
	}
	return out
}

func (c *Cluster) deleteTopic(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.topics[name] == nil {
		return unknownTopic(name)
	}
	delete(c.mu.topics, name)
	c.changedLocked()
	return nil
}

func (c *Cluster) infoLocked(site string, t *topic) *pubsubpb.TopicInfo {
	info := &pubsubpb.TopicInfo{Topic: proto.Clone(t.def).(*pubsubpb.Topic), CreatedAt: t.createdAt, Created: t.created}
	for _, o := range slices.Sorted(maps.Keys(c.mu.logs)) {
		st := &pubsubpb.OriginStats{Origin: o}
		for _, m := range c.mu.logs[o] {
			if m.Topic == t.def.Name {
				if st.Messages == 0 {
					st.FirstSeq = m.Seq
				}
				st.Messages++
				st.LastSeq = m.Seq
				st.Bytes += uint64(len(m.Data))
			}
		}
		if st.Messages > 0 {
			st.DeliveryFrontier = st.LastSeq + 1
			info.Origins = append(info.Origins, st)
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(c.mu.positions), func(a, b subKey) int {
		return cmpString(a.topic+"\x00"+a.name, b.topic+"\x00"+b.name)
	}) {
		if k.topic == t.def.Name {
			info.Subscriptions = append(info.Subscriptions, c.subInfoLocked(site, k.topic, k.name, c.mu.positions[k].start.DeadLetter))
		}
	}
	return info
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (c *Cluster) subInfoLocked(site, topic, name, deadLetter string) *pubsubpb.SubscriptionInfo {
	info := &pubsubpb.SubscriptionInfo{Topic: topic, Name: name, Durable: name != "", Site: site, DeadLetter: deadLetter}
	if p := c.mu.positions[subKey{topic, name}]; p != nil && name != "" {
		origins := slices.Sorted(maps.Keys(p.floor))
		for o := range p.acked {
			if _, ok := p.floor[o]; !ok {
				origins = append(origins, o)
			}
		}
		sort.Strings(origins)
		for _, o := range origins {
			op := &pubsubpb.OriginPosition{Origin: o, Floor: p.floor[o], Acked: slices.Sorted(maps.Keys(p.acked[o]))}
			info.Acked += uint64(len(op.Acked))
			info.Position = append(info.Position, op)
		}
	}
	return info
}

func (c *Cluster) listSubscriptions(site, topic string) *pubsubpb.ListSubscriptionsResponse {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := &pubsubpb.ListSubscriptionsResponse{}
	for _, k := range slices.SortedFunc(maps.Keys(c.mu.positions), func(a, b subKey) int {
		return cmpString(a.topic+"\x00"+a.name, b.topic+"\x00"+b.name)
	}) {
		if topic == "" || k.topic == topic {
			out.Subscriptions = append(out.Subscriptions, c.subInfoLocked(site, k.topic, k.name, c.mu.positions[k].start.DeadLetter))
		}
	}
	return out
}

func (c *Cluster) deleteSubscription(topic, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := subKey{topic, name}
	if c.mu.positions[k] == nil {
		return status.Errorf(codes.NotFound, "no durable subscription %s of topic %s", name, topic)
	}
	delete(c.mu.positions, k)
	c.changedLocked()
	return nil
}

// publish appends a message at origin, or finds the one with its id.
func (c *Cluster) publish(origin string, r *pubsubpb.PublishRequest) (*pubsubpb.PublishResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.mu.topics[r.Topic]
	if t == nil {
		return nil, unknownTopic(r.Topic)
	}
	size := uint64(len(r.Data))
	for k, v := range r.Headers {
		size += uint64(len(k) + len(v))
	}
	if size > t.def.MaxMessageBytes {
		return nil, status.Errorf(codes.InvalidArgument, "message of %d bytes is larger than topic %s's max_message_bytes %d",
			size, r.Topic, t.def.MaxMessageBytes)
	}
	if r.MsgId != "" {
		if orig := c.mu.ids[r.Topic][r.MsgId]; orig != nil {
			dup := proto.Clone(orig).(*pubsubpb.PublishResponse)
			dup.Duplicate = true
			return dup, nil
		}
	}
	resp := c.appendLocked(origin, &pubsubpb.Message{Topic: r.Topic, MsgId: r.MsgId, Headers: maps.Clone(r.Headers), Data: r.Data})
	resp.Frontier = &pubsubpb.Frontier{Predicate: t.def.PublishAck, Seq: resp.Seq, Version: 1}
	if r.MsgId != "" {
		if c.mu.ids[r.Topic] == nil {
			c.mu.ids[r.Topic] = map[string]*pubsubpb.PublishResponse{}
		}
		c.mu.ids[r.Topic][r.MsgId] = resp
	}
	return resp, nil
}

func (c *Cluster) appendLocked(origin string, m *pubsubpb.Message) *pubsubpb.PublishResponse {
	c.mu.seq[origin]++
	c.mu.wall++
	m.Origin, m.Seq, m.Hlc = origin, c.mu.seq[origin], &pubsubpb.HLC{Wall: c.mu.wall}
	c.mu.logs[origin] = append(c.mu.logs[origin], m)
	c.changedLocked()
	return &pubsubpb.PublishResponse{Origin: origin, Seq: m.Seq, Hlc: m.Hlc}
}

// PublishAt publishes a message as the site origin would, for tests that
// need several origins without a client at each.
func (c *Cluster) PublishAt(t testing.TB, origin, topic string, data string) *pubsubpb.PublishResponse {
	t.Helper()
	r, err := c.publish(origin, &pubsubpb.PublishRequest{Topic: topic, Data: []byte(data)})
	if err != nil {
		t.Fatalf("publish at %s to %s: %v", origin, topic, err)
	}
	return r
}

// Position returns a durable subscription's position as every site sees
// it, "" for none: "origin:floor+acked,acked ...".
func (c *Cluster) Position(topic, name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	info := c.subInfoLocked("", topic, name, "")
	out := ""
	for _, p := range info.Position {
		if out != "" {
			out += " "
		}
		out += fmt.Sprintf("%s:%d", p.Origin, p.Floor)
		for i, a := range p.Acked {
			sep := ","
			if i == 0 {
				sep = "+"
			}
			out += fmt.Sprintf("%s%d", sep, a)
		}
	}
	return out
}

// cursors is where a new subscription starts, per origin: the first seq
// it may deliver (origins it does not name start at 1), and the HLC wall
// time a message needs.
func (c *Cluster) cursorsLocked(start *pubsubpb.SubscribeStart) (map[string]uint64, int64) {
	cur := map[string]uint64{}
	p := start.GetStart()
	switch p.GetKind() {
	case pubsubpb.StartPosition_NEW:
		for o, s := range c.mu.seq {
			cur[o] = s + 1
		}
	case pubsubpb.StartPosition_LAST:
		for o, log := range c.mu.logs {
			for i := len(log) - 1; i >= 0; i-- {
				if log[i].Topic == start.Topic {
					cur[o] = log[i].Seq
					break
				}
			}
		}
	case pubsubpb.StartPosition_SEQ:
		maps.Copy(cur, p.Seqs)
	case pubsubpb.StartPosition_TIME:
		return cur, p.TimeUnixNano
	}
	return cur, 0
}

// attach returns a subscription's start, per origin, and what it acked:
// a durable one's stored position (made from its start the first time),
// an ephemeral one's start.
func (c *Cluster) attach(start *pubsubpb.SubscribeStart) (cursors map[string]uint64, minWall int64, acked map[string]map[uint64]bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.topics[start.Topic] == nil {
		return nil, 0, nil, unknownTopic(start.Topic)
	}
	cursors, minWall = c.cursorsLocked(start)
	if start.Durable == "" {
		return cursors, minWall, nil, nil
	}
	k := subKey{start.Topic, start.Durable}
	p := c.mu.positions[k]
	if p == nil {
		p = &position{floor: map[string]uint64{}, acked: map[string]map[uint64]bool{}, start: proto.Clone(start).(*pubsubpb.SubscribeStart)}
		for o, s := range cursors {
			p.floor[o] = s - 1
		}
		c.mu.positions[k] = p
		c.changedLocked()
		return cursors, minWall, nil, nil
	}
	cursors = map[string]uint64{}
	for o, f := range p.floor {
		cursors[o] = f + 1
	}
	acked = map[string]map[uint64]bool{}
	for o, a := range p.acked {
		acked[o] = maps.Clone(a)
	}
	return cursors, 0, acked, nil
}

// ack stores an acked (or termed) seq in a durable position.
func (c *Cluster) ack(topic, name, origin string, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.mu.positions[subKey{topic, name}]
	if p == nil {
		return
	}
	if p.acked[origin] == nil {
		p.acked[origin] = map[uint64]bool{}
	}
	p.acked[origin][seq] = true
	c.changedLocked()
}

// next returns the messages of topic after the cursors, at most n, in
// origin then seq order, and moves the cursors past them.
func (c *Cluster) next(topic string, cursors map[string]uint64, minWall int64, skip map[string]map[uint64]bool, n int) []*pubsubpb.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*pubsubpb.Message
	for _, o := range slices.Sorted(maps.Keys(c.mu.logs)) {
		log := c.mu.logs[o]
		from := max(cursors[o], 1)
		i := sort.Search(len(log), func(i int) bool { return log[i].Seq >= from })
		for ; i < len(log) && len(out) < n; i++ {
			m := log[i]
			cursors[o] = m.Seq + 1
			if m.Topic == topic && m.Hlc.Wall >= minWall && !skip[o][m.Seq] {
				out = append(out, m)
			}
		}
	}
	return out
}

// deadLetter publishes m, which went past max deliveries, to dl.
func (c *Cluster) deadLetter(site, dl, from string, m *pubsubpb.Message, deliveries uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.topics[dl] == nil {
		return
	}
	h := maps.Clone(m.Headers)
	if h == nil {
		h = map[string]string{}
	}
	h[pubsubpb.HeaderDeadLetterTopic] = from
	h[pubsubpb.HeaderDeadLetterOrigin] = m.Origin
	h[pubsubpb.HeaderDeadLetterSeq] = fmt.Sprint(m.Seq)
	h[pubsubpb.HeaderDeadLetterDeliveries] = fmt.Sprint(deliveries)
	c.appendLocked(site, &pubsubpb.Message{Topic: dl, Headers: h, Data: m.Data})
}
