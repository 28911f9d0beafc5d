package durability

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/weir-broker/weir/harness/result"
)

// chargeTo returns the fault a loss of a record acknowledged at ack (Unix
// ns) is charged to: the latest fault in force when it was acknowledged
// (struck at or before it, healed at or after it: an acks=1 zombie
// leader's acknowledgement during a link fault), else the first that
// struck after it, else the last.
func chargeTo(faults []result.Fault, start time.Time, ack int64) int {
	for i := len(faults) - 1; i >= 0; i-- {
		f := faults[i]
		if start.Add(f.At).UnixNano() <= ack && ack <= start.Add(f.Healed).UnixNano() {
			return i
		}
	}
	for i, f := range faults {
		if start.Add(f.At).UnixNano() >= ack {
			return i
		}
	}
	return len(faults) - 1
}

// checkCluster adds a cluster run's findings to o: records a consumer was
// served that the final log does not hold there, replicas that differ,
// what the samples counted, and how long partitions went without an
// acknowledged produce.
func (o *Outcome) checkCluster(in checkInput, pr *problems) {
	if in.seen == nil && in.replicas == nil && in.timeline == nil && in.faults == nil {
		return
	}
	o.Cluster = true
	o.DuplicatesAllowed, o.TruncatedReadsAllowed = in.allowDuplicates, in.unclean

	// Read past the commit point: served during the run, not in the log.
	for _, k := range slices.SortedFunc(maps.Keys(in.seen), func(a, b tp) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	}) {
		final := map[int64]uint64{}
		logStart := int64(0)
		if s := in.served[k]; s != nil {
			logStart = s.start
			for _, r := range s.records {
				final[r.offset] = r.id
			}
		}
		for _, r := range in.seen[k] {
			if r.offset < logStart {
				continue // deleted by retention since, not truncated
			}
			if id, ok := final[r.offset]; !ok || id != r.id {
				o.ReadTruncated++
				pr.add("read-truncated", "%d/%d: a consumer was served record %#x at offset %d, which the log no longer holds there",
					k.topic, k.partition, r.id, r.offset)
			}
		}
	}

	o.ReplicaProblems = in.replicas
	o.ReplicaMismatch = int64(len(in.replicas))

	o.Timeline = in.timeline
	o.Elections, o.ISRShrinks, o.ISRExpands = in.counts.elections, in.counts.shrinks, in.counts.expands
	o.MaxLag = -1
	for _, s := range in.timeline {
		o.UnderReplicatedMax = max(o.UnderReplicatedMax, s.UnderReplicated)
		o.OfflineMax = max(o.OfflineMax, s.Offline)
		o.MaxLag = max(o.MaxLag, s.MaxLag)
	}

	// Unavailability: gaps between a partition's acknowledgements while
	// the load ran (from the warm-up's end to the producers' stop).
	from, to := in.start.Add(in.warmup).UnixNano(), in.stop.UnixNano()
	// Every partition counts, those never acknowledged in the window too
	// (unavailable throughout).
	acks := map[tp][]int64{}
	for k := range in.served {
		acks[k] = nil
	}
	for _, l := range in.ledgers {
		for _, e := range l {
			if e.state == acked {
				k := tp{e.topic, e.partition}
				acks[k] = append(acks[k], e.ack)
			}
		}
	}
	if to <= from || len(acks) == 0 {
		return
	}
	var total int64
	for _, k := range slices.SortedFunc(maps.Keys(acks), func(a, b tp) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	}) {
		ts := acks[k]
		slices.Sort(ts)
		prev := from
		for _, t := range append(ts, to) {
			if t < from {
				continue
			}
			t = min(t, to)
			gap := t - prev
			o.UnavailableMax = max(o.UnavailableMax, time.Duration(gap))
			if gap > int64(UnavailableGap) {
				total += gap
				o.Windows = append(o.Windows, Window{Topic: k.topic, Partition: k.partition,
					From: time.Duration(prev - in.start.UnixNano()), To: time.Duration(t - in.start.UnixNano())})
			}
			prev = t
			if t == to {
				break
			}
		}
	}
	o.Unavailable = time.Duration(total / int64(len(acks)))
	slices.SortFunc(o.Windows, func(a, b Window) int { return cmp.Compare(a.From, b.From) })
	if len(o.Windows) > maxWindows {
		o.Windows = o.Windows[:maxWindows]
	}
}
