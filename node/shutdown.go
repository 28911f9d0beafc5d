package node

import (
	"context"
	"slices"
	"time"

	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/meta"
)

// ControlledShutdown is the first step of Close in a cluster (Kafka's
// controlled shutdown); whoever serves the node calls it while still serving
// (followers catch up, clients find the new leaders), then stops serving and
// closes the node. It is done once; Close does it if nobody did: the broker announces it is stopping
// (layout.AnnounceShutdown), and the controller hands the partitions it
// leads to other in-sync replicas and takes it out of their ISRs; when its
// image shows it holds nothing another live replica could take over (or
// ControlledShutdownTimeout passes) it goes on stopping. Clients then see
// leaders move, not a failure: produces and fetches go to the new leaders
// at once instead of waiting for the session to expire. A broker alone, or
// with nothing to hand over, skips it.
func (n *Node) ControlledShutdown() { n.handoverOnce.Do(n.controlledShutdown) }

// SkipControlledShutdown makes Close stop as a crash would leave the
// cluster: no controlled shutdown (the others notice when its session
// goes). For fault tests.
func (n *Node) SkipControlledShutdown() { n.handoverOnce.Do(func() {}) }

func (n *Node) controlledShutdown() {
	if n.loop == nil || n.cfg.ControlledShutdownTimeout < 0 {
		return
	}
	im, _ := n.image.load()
	if shutdownDone(im, n.cfg.NodeID) {
		return
	}
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ControlledShutdownTimeout)
	defer cancel()
	if err := layout.AnnounceShutdown(ctx, n.store, n.cfg.NodeID); err != nil {
		n.logger.Warn("controlled shutdown: cannot announce it; stopping anyway", "err", err)
		return
	}
	if _, err := n.image.waitFor(ctx, func(im *meta.Image) bool { return shutdownDone(im, n.cfg.NodeID) }); err != nil {
		n.logger.Warn("controlled shutdown: leaderships not all moved; stopping anyway", "waited", time.Since(begin).Round(time.Millisecond))
		return
	}
	n.logger.Info("controlled shutdown: leaderships moved", "took", time.Since(begin).Round(time.Millisecond))
}

// shutdownDone reports whether broker id leads nothing, and is in no ISR,
// that another live broker not shutting down could take over.
func shutdownDone(im *meta.Image, id int32) bool {
	for _, t := range im.Topics {
		if t.Deleting {
			continue
		}
		for _, st := range t.States {
			if st == nil || !slices.Contains(st.ISR, id) {
				continue
			}
			for _, r := range st.ISR {
				if r != id && im.Live(r) && !slices.Contains(im.ShuttingDown, r) {
					return false
				}
			}
		}
	}
	return true
}
