package peer

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// WriteTxnMarkers sends a WriteTxnMarkers request (v1) to the broker: the
// transaction coordinator asking a partition leader to append markers. The
// response is the broker's, per marker and partition; the error is the
// exchange's.
func (c *Client) WriteTxnMarkers(ctx context.Context, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	req.Version = 1
	resp, err := c.request(ctx, req)
	if err != nil {
		return nil, err
	}
	r, ok := resp.(*kmsg.WriteTxnMarkersResponse)
	if !ok {
		return nil, fmt.Errorf("%w: %T to WriteTxnMarkers", errBadResponse, resp)
	}
	return r, nil
}
