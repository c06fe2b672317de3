package lin

import (
	"context"

	"github.com/stabilizer/stabilizer/stabilizer"
)

// Channel is the application channel of a stabilizer.Node on which Attach
// sends the Raft group's messages.
const Channel = 0x90

// Attach makes the linearizable mode of a site: a Node whose raft state
// lives in the site's namespace DefaultNamespace and whose messages ride
// the site's inter-site transport on Channel, so they cross the same links
// as the streams. cfg.Site, cfg.Namespace and cfg.Transport are filled in
// from node. Call it before node.Start (it registers the channel); Start
// the returned Node once node has started, and Close it before node.
func Attach(node *stabilizer.Node, cfg Config) (*Node, error) {
	ns, err := node.Namespace(DefaultNamespace)
	if err != nil {
		return nil, err
	}
	cfg.Site, cfg.Namespace, cfg.Transport = node.Site(), ns, channelTransport{node}
	ln, err := New(cfg)
	if err != nil {
		return nil, err
	}
	log := ln.log
	err = node.HandleChannel(Channel, func(from string, frame []byte) {
		if err := ln.Step(context.Background(), from, frame); err != nil {
			log.Debug("raft message dropped", "from", from, "error", err)
		}
	})
	if err != nil {
		return nil, err
	}
	return ln, nil
}

type channelTransport struct{ node *stabilizer.Node }

func (t channelTransport) Send(to string, msg []byte) error {
	return t.node.SendChannel(to, Channel, msg)
}
