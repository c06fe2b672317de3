package wan

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
)

// Bandwidth is a rate in bytes per second. Zero means unlimited.
type Bandwidth int64

// Common bandwidth units (decimal, as network rates are quoted).
const (
	BytePerSecond Bandwidth = 1
	KBPerSecond             = 1000 * BytePerSecond
	MBPerSecond             = 1000 * KBPerSecond
	GBPerSecond             = 1000 * MBPerSecond
)

// bandwidthUnits maps the accepted suffixes (lowercased) to bytes per second.
// Bit rates are accepted too because link speeds are often quoted in them.
var bandwidthUnits = []struct {
	suffix string
	scale  float64
}{
	{"gib/s", 1 << 30}, {"mib/s", 1 << 20}, {"kib/s", 1 << 10},
	{"gbit/s", 1e9 / 8}, {"mbit/s", 1e6 / 8}, {"kbit/s", 1e3 / 8},
	{"gbps", 1e9 / 8}, {"mbps", 1e6 / 8}, {"kbps", 1e3 / 8},
	{"gb/s", 1e9}, {"mb/s", 1e6}, {"kb/s", 1e3}, {"b/s", 1},
}

// ParseBandwidth parses a rate such as "20MB/s", "1.5 GB/s", "512KiB/s",
// "100Mbit/s" or "0" (unlimited). A bare number is bytes per second.
// KB, MB and GB are decimal (1000-based); KiB, MiB and GiB are binary.
func ParseBandwidth(s string) (Bandwidth, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" || t == "0" || t == "unlimited" {
		return 0, nil
	}
	scale := 1.0
	for _, u := range bandwidthUnits {
		if strings.HasSuffix(t, u.suffix) {
			scale = u.scale
			t = strings.TrimSpace(strings.TrimSuffix(t, u.suffix))
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("wan: bandwidth %q: want a number with a unit such as 20MB/s", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("wan: bandwidth %q: must not be negative", s)
	}
	b := v * scale
	if b > math.MaxInt64/2 {
		return 0, fmt.Errorf("wan: bandwidth %q: too large", s)
	}
	if b > 0 && b < 1 {
		b = 1
	}
	return Bandwidth(math.Round(b)), nil
}

// String formats the rate with the largest decimal unit that keeps it readable.
func (b Bandwidth) String() string {
	switch {
	case b == 0:
		return "unlimited"
	case b >= GBPerSecond:
		return strconv.FormatFloat(float64(b)/float64(GBPerSecond), 'f', -1, 64) + "GB/s"
	case b >= MBPerSecond:
		return strconv.FormatFloat(float64(b)/float64(MBPerSecond), 'f', -1, 64) + "MB/s"
	case b >= KBPerSecond:
		return strconv.FormatFloat(float64(b)/float64(KBPerSecond), 'f', -1, 64) + "KB/s"
	default:
		return strconv.FormatInt(int64(b), 10) + "B/s"
	}
}

// UnmarshalText lets topology files and flags write "20MB/s".
func (b *Bandwidth) UnmarshalText(text []byte) error {
	v, err := ParseBandwidth(string(text))
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// MarshalText is the inverse of UnmarshalText.
func (b Bandwidth) MarshalText() ([]byte, error) {
	if b == 0 {
		return []byte("0"), nil
	}
	return []byte(b.String()), nil
}

// transmit returns how long n bytes occupy a link of rate b.
func (b Bandwidth) transmit(n int) time.Duration {
	if b <= 0 {
		return 0
	}
	return time.Duration(float64(n) * float64(time.Second) / float64(b))
}

// ParseLoss parses a loss probability written as a fraction ("0.01") or a
// percentage ("1%").
func ParseLoss(s string) (float64, error) {
	t := strings.TrimSpace(s)
	scale := 1.0
	if strings.HasSuffix(t, "%") {
		t, scale = strings.TrimSpace(strings.TrimSuffix(t, "%")), 0.01
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return 0, fmt.Errorf("wan: loss %q: want a fraction such as 0.01 or a percentage such as 1%%", s)
	}
	v *= scale
	if math.IsNaN(v) || v < 0 || v >= 1 {
		return 0, fmt.Errorf("wan: loss %q: must be at least 0 and below 100%%", s)
	}
	return v, nil
}

// LinkConfig is the shaping of one directed link. The zero value is a perfect
// link: no delay, unlimited bandwidth, no loss.
type LinkConfig struct {
	// Delay is the one-way propagation delay: every byte leaves the link
	// Delay after it was sent (after its turn at the bandwidth limit).
	Delay time.Duration
	// Jitter spreads each chunk's delay uniformly over Delay±Jitter (never
	// below zero). Bytes of one connection are never reordered: a chunk
	// that draws a short delay waits behind the one before it, as on TCP.
	Jitter time.Duration
	// Bandwidth limits the rate at which the link accepts bytes, shared by
	// every connection through the link. Zero means unlimited.
	Bandwidth Bandwidth
	// Loss is the probability in [0, 1) that a TCP segment (1448 bytes or
	// less) is lost. A loss costs the chunk holding the segment, and every
	// byte behind it, a retransmission delay; see the package doc.
	Loss float64
}

// Validate reports every field that is out of range.
func (c LinkConfig) Validate() error {
	var errs []error
	if c.Delay < 0 {
		errs = append(errs, fmt.Errorf("wan: link: Delay: %v is negative", c.Delay))
	}
	if c.Jitter < 0 {
		errs = append(errs, fmt.Errorf("wan: link: Jitter: %v is negative", c.Jitter))
	}
	if c.Bandwidth < 0 {
		errs = append(errs, fmt.Errorf("wan: link: Bandwidth: %d is negative", int64(c.Bandwidth)))
	}
	if math.IsNaN(c.Loss) || c.Loss < 0 || c.Loss >= 1 {
		errs = append(errs, fmt.Errorf("wan: link: Loss: %v is outside [0, 1) (use Cut for a link that passes nothing)", c.Loss))
	}
	return errors.Join(errs...)
}

// String is a compact human form, e.g. "delay=35ms jitter=500µs bw=20MB/s loss=0".
func (c LinkConfig) String() string {
	return fmt.Sprintf("delay=%v jitter=%v bw=%v loss=%v", c.Delay, c.Jitter, c.Bandwidth, c.Loss)
}

// Defaults for Config fields left at zero.
const (
	DefaultMaxHeld    = 4 << 20
	DefaultListenHost = "127.0.0.1"
)

// Config configures a Network. The zero value is usable: no topology (links
// start perfect), no metrics, no logs.
type Config struct {
	// Topology, if set, names the known sites and gives every link its
	// initial shaping (see Topology.LinkConfig). Without it any site name
	// is accepted and links start as perfect links.
	Topology *Topology
	// Logger receives link changes and connection errors. Default: discard.
	Logger hclog.Logger
	// Registerer, if set, receives the wan_* metrics. Default: none.
	Registerer prometheus.Registerer
	// Seed drives jitter and loss so that a run can be repeated. Each link
	// derives its own stream from Seed and its endpoints. Default 0 is a
	// valid seed like any other.
	Seed uint64
	// MaxHeld bounds the bytes one direction of one connection may have
	// inside the emulated path (in flight, or held by a cut) before the
	// sender is pushed back, like a TCP window. It also caps throughput on
	// an unlimited link to MaxHeld/Delay. Default DefaultMaxHeld (4 MiB).
	MaxHeld int
	// ListenHost is the address proxies listen on. Default 127.0.0.1.
	ListenHost string
}

// Validate reports every bad field.
func (c *Config) Validate() error {
	var errs []error
	if c.MaxHeld < 0 {
		errs = append(errs, fmt.Errorf("wan: config: MaxHeld: %d is negative", c.MaxHeld))
	}
	return errors.Join(errs...)
}

func (c *Config) withDefaults() Config {
	out := *c
	if out.Logger == nil {
		out.Logger = hclog.NewNullLogger()
	}
	if out.MaxHeld == 0 {
		out.MaxHeld = DefaultMaxHeld
	}
	if out.ListenHost == "" {
		out.ListenHost = DefaultListenHost
	}
	return out
}
