package transport

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// WriteTxnMarkers' version case (TestEveryServedVersion): a commit marker
// for a producer the partition has not seen, one producer per version.
func init() {
	versionCases[27] = versionCase{
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrWriteTxnMarkersRequest()
			req.Version = v
			m := kmsg.NewWriteTxnMarkersRequestMarker()
			m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = 9000+int64(v), 0, true, 0
			mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			mt.Topic, mt.Partitions = "t", []int32{0}
			m.Topics = append(m.Topics, mt)
			req.Markers = append(req.Markers, m)
			return req
		},
		errorOf: func(r kmsg.Response) int16 {
			resp := r.(*kmsg.WriteTxnMarkersResponse)
			if len(resp.Markers) != 1 || len(resp.Markers[0].Topics) != 1 || len(resp.Markers[0].Topics[0].Partitions) != 1 {
				return -100
			}
			return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
		},
	}
}
