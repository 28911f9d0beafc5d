package transport

// DescribeLogDirs: v0-v4.
//
// A broker has one log directory, its data directory: every partition log
// open there (leader or follower) with its size in bytes. Topics == nil
// asks for every partition; otherwise only those named (partitions not here
// are left out, as Kafka does). v2 made it flexible, v3 added a top-level
// error code, v4 the directory's total and usable bytes (the file system's,
// from statfs). Offset lag is for future replicas (there are none): 0.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDescribeLogDirs(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	d := s.node.LogDir()
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir, dir.TotalBytes, dir.UsableBytes = d.Path, d.Total, d.Usable
	want := func(topic string, p int32) bool { return true }
	if req.Topics != nil {
		asked := map[string][]int32{}
		for _, t := range req.Topics {
			asked[t.Topic] = append(asked[t.Topic], t.Partitions...)
		}
		want = func(topic string, p int32) bool { return slices.Contains(asked[topic], p) }
	}
	for _, p := range d.Partitions {
		if !want(p.Topic, p.Partition) {
			continue
		}
		if n := len(dir.Topics); n == 0 || dir.Topics[n-1].Topic != p.Topic {
			t := kmsg.NewDescribeLogDirsResponseDirTopic()
			t.Topic = p.Topic
			dir.Topics = append(dir.Topics, t)
		}
		rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		rp.Partition, rp.Size = p.Partition, p.Size
		t := &dir.Topics[len(dir.Topics)-1]
		t.Partitions = append(t.Partitions, rp)
	}
	resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
	return resp, nil
}
