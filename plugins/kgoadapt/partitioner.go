package kgoadapt

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/plugins/partitioner"
)

// Assign sets the Partition of every record in recs with one call to p: the
// records' keys go to p as one batch for topic, which has the given number
// of partitions, and p's answer, once partitioner.Check accepts it, is copied
// into the records in order. It is for producers built with
// kgo.RecordPartitioner(kgo.ManualPartitioner()), which send each record to
// the partition it carries.
//
// Why not wrap p in a kgo.Partitioner instead: franz-go asks its partitioner
// one record at a time, and an external partitioner costs a process round
// trip per call; Assign makes one call per batch, as weir's interface
// requires. The caller supplies the partition count (from metadata it
// already has, or the topic's configuration) because franz-go does not
// expose it to a manual producer.
//
// Records may leave Topic empty (for kgo.DefaultProduceTopic) or set it to
// topic; a nil record or one for another topic is an error wrapping
// partitioner.ErrBadRequest. p's errors (ctx's error among them) come back
// wrapped, and a response that fails Check is an error wrapping
// partitioner.ErrBadResponse. On any error no record is changed. With no
// records, Assign only validates and does not call p.
func Assign(ctx context.Context, p partitioner.Partitioner, topic string, partitions int32, recs []*kgo.Record) error {
	keys := make([][]byte, len(recs))
	for i, r := range recs {
		switch {
		case r == nil:
			return fmt.Errorf("kgoadapt: assign partitions in %q: record %d is nil: %w", topic, i, partitioner.ErrBadRequest)
		case r.Topic != "" && r.Topic != topic:
			return fmt.Errorf("kgoadapt: assign partitions in %q: record %d is for topic %q: %w", topic, i, r.Topic, partitioner.ErrBadRequest)
		}
		keys[i] = r.Key
	}
	req := partitioner.Request{Topic: topic, Partitions: partitions, Keys: keys}
	if err := req.Validate(); err != nil {
		return fmt.Errorf("kgoadapt: assign partitions: %w", err)
	}
	if len(recs) == 0 {
		return nil // no round trip for nothing
	}
	resp, err := p.Partition(ctx, req)
	if err != nil {
		return fmt.Errorf("kgoadapt: partition %d records of %q: %w", len(recs), topic, err)
	}
	if err := partitioner.Check(req, resp); err != nil {
		return fmt.Errorf("kgoadapt: partitioner %s: %w", name(p), err)
	}
	for i, r := range recs {
		r.Partition = resp.Partitions[i]
	}
	return nil
}

// name names p for errors: its spec when it has one, else its type.
func name(p partitioner.Partitioner) string {
	if s, ok := p.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", p)
}
