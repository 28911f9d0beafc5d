package node

import (
	"context"
	"sync/atomic"

	"github.com/weir-broker/weir/core/meta"
)

// imageCell holds the cluster image the node answers from: swapped whole,
// never changed in place, so a request reads one consistent picture.
type imageCell struct {
	p atomic.Pointer[published]
}

type published struct {
	im   *meta.Image
	next chan struct{} // closed when a newer image replaces this one
}

func newImageCell(im *meta.Image) *imageCell {
	c := &imageCell{}
	c.p.Store(&published{im: im, next: make(chan struct{})})
	return c
}

// load returns the current image and a channel closed when it is replaced.
func (c *imageCell) load() (*meta.Image, <-chan struct{}) {
	p := c.p.Load()
	return p.im, p.next
}

// publish makes im the current image and wakes everyone waiting on the old
// one. Only the node's loop publishes.
func (c *imageCell) publish(im *meta.Image) {
	old := c.p.Swap(&published{im: im, next: make(chan struct{})})
	close(old.next)
}

// waitFor returns the first image for which cond holds, or ctx's error.
func (c *imageCell) waitFor(ctx context.Context, cond func(*meta.Image) bool) (*meta.Image, error) {
	for {
		im, next := c.load()
		if cond(im) {
			return im, nil
		}
		select {
		case <-next:
		case <-ctx.Done():
			return im, ctx.Err()
		}
	}
}
