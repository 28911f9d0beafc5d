package durability

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/weir-broker/weir/harness/device/diskfs"
	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// Outcome is what one run found: what was produced and acknowledged before
// the fault, what the restarted broker served, and how the two compare.
type Outcome struct {
	Fault Fault
	Torn  bool  // power: the clone kept torn writes
	Seed  int64 // the run's seed
	// FaultAt is when the fault struck, after the first acknowledgement.
	FaultAt time.Duration

	Attempted int64 // records handed to the clients
	Acked     int64 // records acknowledged (at any time, see the package doc)

	// AckedLost are acknowledged records the restarted broker does not
	// serve; AckedLostBytes their value bytes. LostPerPartition and
	// LostBytesPerPartition break them down (topic index, partition), the
	// unit flush policies' bounds hold for.
	AckedLost             int64
	AckedLostBytes        int64
	LostPerPartition      map[[2]int32]int64
	LostBytesPerPartition map[[2]int32]int64
	// OldestLostAge is how long before the fault the earliest-acknowledged
	// lost record was acknowledged (0 without loss, and for records
	// acknowledged after the cut).
	OldestLostAge time.Duration
	// UnackedSurvived are records never acknowledged (failed, or pending at
	// the fault) that the restarted broker serves: legal, the broker
	// appended them and the answer was lost.
	UnackedSurvived int64
	// Duplicates are records served more than once.
	Duplicates int64
	// Corrupt counts batches failing their CRC (or not decoding) and
	// records failing their checksum, unknown, or not what was produced.
	Corrupt int64
	// OffsetGaps counts offsets skipped between the log start and the
	// high watermark; OffsetReuse counts offsets served twice, records
	// served at another offset than the one acknowledged, and records
	// produced after recovery that did not land right after the recovered
	// end.
	OffsetGaps  int64
	OffsetReuse int64
	// PostRecovery records were produced after recovery (acks=all) and
	// checked; PostLost of them were not served.
	PostRecovery int64
	PostLost     int64
	// Recovery is from the restart's start until every partition served a
	// fetch.
	Recovery time.Duration

	// Before the fault: records acknowledged between the warm-up's end
	// (counted from the first acknowledgement) and the fault, over that
	// window, and their ack latencies (send to promise).
	Window     time.Duration
	MsgsPerSec float64
	MBPerSec   float64 // value bytes, MB = 2^20 bytes as package load
	AckP50     time.Duration
	AckP99     time.Duration
	AckMax     time.Duration

	// Fsyncs and MaxSync: the power fault's file system, before the cut:
	// fsyncs that succeeded and the longest of them. TimerLateness is the
	// worst delay of a timer in the broker's process before the cut (power:
	// the flush timers' delay, measured by a watch timer beside them).
	// Of a disk-power run they are the emulated disk's (fsyncs, including
	// directories', and the longest in device time), and DiskCut says
	// what the cut took back.
	Fsyncs        int64
	MaxSync       time.Duration
	TimerLateness time.Duration
	DiskCut       *diskfs.CutReport

	// Of a cluster run (RunCluster): Cluster is set, Schedule holds the
	// faults as they happened (each with the acknowledged records lost
	// that it most likely cost: those acknowledged after the previous
	// fault struck and before it did) and Timeline the cluster as
	// sampled. DuplicatesAllowed: the producers were not idempotent
	// (acks=1), so a retried record may be stored twice, legally.
	Cluster bool
	// Partial: the run broke off before its checks (the cluster did not
	// heal); only Schedule and Timeline are filled in, for the record.
	Partial           bool
	DuplicatesAllowed bool
	Schedule          []result.Fault
	Timeline          []result.Sample
	// ReadTruncated counts records a consumer was served during the run
	// that are not in the final log at the offset it read them at: it
	// read past what was committed, or (TruncatedReadsAllowed: unclean
	// election) a replica lacking committed records became the leader.
	ReadTruncated         int64
	TruncatedReadsAllowed bool
	// Moved counts acknowledged records served, but only at another
	// offset than the one acknowledged (DuplicatesAllowed: a retry stored
	// twice, the acknowledged copy lost); with idempotence that is offset
	// reuse.
	Moved int64
	// ReplicaMismatch counts partitions whose replicas differ after the
	// cluster healed (ReplicaProblems says how).
	ReplicaMismatch int64
	ReplicaProblems []string
	// Elections were counted from samples (a new leader at a newer leader
	// epoch; one that moved away and back between two samples is
	// missed), ISRShrinks and ISRExpands from the leaders'
	// counters (a process killed between samples takes its last changes
	// with it; the controller's removals of dead brokers are not among
	// them);
	// UnderReplicatedMax and OfflineMax are the most partitions seen
	// under-replicated or without a leader at once; MaxLag the largest
	// replica lag (records) a leader reported.
	Elections, ISRShrinks, ISRExpands int64
	UnderReplicatedMax, OfflineMax    int
	MaxLag                            int64
	// UnavailableMax is the longest time a partition went without an
	// acknowledged produce while the load ran (from the ledgers; with
	// several producers or partitions per producer, a partition is only
	// written every so often, so this includes the normal gap);
	// Unavailable sums, over every partition (one never acknowledged was
	// unavailable throughout), the gaps longer than UnavailableGap,
	// divided by the partitions: the mean time a partition was
	// unavailable.
	UnavailableMax time.Duration
	Unavailable    time.Duration
	// Windows are the gaps longer than UnavailableGap, in time order
	// (the first maxWindows).
	Windows []Window
	// FailedBy counts the records whose produce failed, by error.
	FailedBy map[string]int64

	// Problems describes the first few findings of each kind, for error
	// messages.
	Problems []string
}

// Window is a time a partition went without an acknowledged produce,
// counted from the first acknowledgement.
type Window struct {
	Topic, Partition int32
	From, To         time.Duration
}

// maxWindows bounds Outcome.Windows.
const maxWindows = 200

// UnavailableGap is the shortest gap between acknowledgements of one
// partition counted as unavailability.
const UnavailableGap = 250 * time.Millisecond

// maxProblems bounds Outcome.Problems per kind.
const maxProblems = 5

// Metric names of an Outcome (result.Rep metrics), besides load's
// produce-msgs/s, produce-MB/s and ack-p50/p99/max-us.
const (
	MetricAttempted       = "attempted"
	MetricAcked           = "acked"
	MetricAckedLost       = "acked-lost"
	MetricAckedLostBytes  = "acked-lost-bytes"
	MetricLostAgeMs       = "lost-age-ms"
	MetricUnackedSurvived = "unacked-survived"
	MetricDuplicates      = "duplicates"
	MetricCorrupt         = "corrupt"
	MetricOffsetGaps      = "offset-gaps"
	MetricOffsetReuse     = "offset-reuse"
	MetricRecoveryMs      = "recovery-ms"
	MetricFaultAtMs       = "fault-at-ms"
	MetricTimerLateMs     = "timer-late-ms"
	// Of a disk-power run: the emulated disk's fsyncs before the cut, the
	// longest (device time), and what the cut took back: files whose data
	// went back to their last fsync, directory entries undone, and modelled
	// dirty pages that never reached the device.
	MetricDiskFsyncs     = "disk-fsyncs"
	MetricDiskMaxFsyncMs = "disk-max-fsync-ms"
	MetricCutFiles       = "cut-files"
	MetricCutEntries     = "cut-entries"
	MetricCutDirtyPages  = "cut-dirty-pages"

	// Of a cluster run.
	MetricReadTruncated      = "read-truncated"
	MetricMoved              = "acked-moved"
	MetricReplicaMismatch    = "replica-mismatch"
	MetricElections          = "leader-elections"
	MetricISRShrinks         = "isr-shrinks"
	MetricISRExpands         = "isr-expands"
	MetricUnderReplicatedMax = "under-replicated-max"
	MetricOfflineMax         = "offline-max"
	MetricMaxLag             = "replica-lag-max"
	MetricUnavailableMaxMs   = "unavailable-max-ms"
	MetricUnavailableMs      = "unavailable-ms"
	MetricFaults             = "faults"
)

// checkInput is everything the check compares.
type checkInput struct {
	fault     Fault
	start     time.Time     // the first acknowledgement
	warmup    time.Duration // figures before the fault start this long after start
	cut       time.Time     // the fault's instant
	ledgers   [][]entry     // per producer, by sequence number
	post      []entry       // produced after recovery, by sequence number
	recovered map[tp]int64  // high watermarks when the restarted broker first served
	served    map[tp]*served

	// A cluster run's: the faults as they happened, when the producers
	// stopped, what the consumer was served, the samples and counts, and
	// how the replicas compared.
	faults          []result.Fault
	allowDuplicates bool
	unclean         bool // unclean election: truncated reads are legal
	stop            time.Time
	seen            map[tp][]seenRecord
	timeline        []result.Sample
	counts          clusterCounts
	replicas        []string
}

// problems collects findings, at most maxProblems of each kind.
type problems struct {
	counts map[string]int
	out    []string
}

func (p *problems) add(kind, format string, args ...any) {
	if p.counts == nil {
		p.counts = map[string]int{}
	}
	p.counts[kind]++
	if p.counts[kind] <= maxProblems {
		p.out = append(p.out, kind+": "+fmt.Sprintf(format, args...))
	}
}

// check compares what was produced with what was served.
func check(in checkInput) *Outcome {
	o := &Outcome{Fault: in.fault, LostPerPartition: map[[2]int32]int64{}, LostBytesPerPartition: map[[2]int32]int64{}}
	if !in.cut.IsZero() && !in.start.IsZero() {
		o.FaultAt = in.cut.Sub(in.start)
	}
	var pr problems
	seen := make([][]uint8, len(in.ledgers))
	for i, l := range in.ledgers {
		seen[i] = make([]uint8, len(l))
	}
	postSeen := make([]uint8, len(in.post))
	atAck := make([][]bool, len(in.ledgers)) // served at the offset it was acknowledged at
	for i, l := range in.ledgers {
		atAck[i] = make([]bool, len(l))
	}

	keys := slices.SortedFunc(maps.Keys(in.served), func(a, b tp) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	for _, k := range keys {
		s := in.served[k]
		for _, b := range s.badBatches {
			o.Corrupt++
			pr.add("corrupt", "%d/%d: %s", k.topic, k.partition, b)
		}
		for _, m := range s.offsetProblems {
			pr.add("offsets", "%d/%d: %s", k.topic, k.partition, m)
		}
		expect := s.start
		for _, r := range s.records {
			switch {
			case r.offset > expect:
				o.OffsetGaps += r.offset - expect
				pr.add("gap", "%d/%d: offsets %d..%d not served", k.topic, k.partition, expect, r.offset-1)
			case r.offset < expect:
				o.OffsetReuse++
				pr.add("reuse", "%d/%d: offset %d served again after %d", k.topic, k.partition, r.offset, expect-1)
			}
			expect = max(expect, r.offset+1)
			if r.bad != "" {
				o.Corrupt++
				pr.add("corrupt", "%d/%d offset %d: %s", k.topic, k.partition, r.offset, r.bad)
				continue
			}
			p, seq := splitID(r.id)
			var e *entry
			var mark *uint8
			switch {
			case p == postProducer && seq < uint64(len(in.post)):
				e, mark = &in.post[seq], &postSeen[seq]
			case p < len(in.ledgers) && seq < uint64(len(in.ledgers[p])):
				e, mark = &in.ledgers[p][seq], &seen[p][seq]
			default:
				o.Corrupt++
				pr.add("corrupt", "%d/%d offset %d: record id %#x was never produced", k.topic, k.partition, r.offset, r.id)
				continue
			}
			if e.sum != r.sum || e.topic != k.topic || e.partition != k.partition || e.size != r.size {
				o.Corrupt++
				pr.add("corrupt", "%d/%d offset %d: record %#x differs from the one produced", k.topic, k.partition, r.offset, r.id)
				continue
			}
			if *mark > 0 {
				o.Duplicates++
				pr.add("duplicate", "%d/%d offset %d: record %#x served again", k.topic, k.partition, r.offset, r.id)
			}
			*mark = min(*mark+1, 2)
			if p != postProducer && e.state == acked && e.offset == r.offset {
				atAck[p][seq] = true
			}
			if e.state != acked && *mark == 1 {
				o.UnackedSurvived++
			}
		}
		if s.end > expect {
			o.OffsetGaps += s.end - expect
			pr.add("gap", "%d/%d: offsets %d..%d below the high watermark not served", k.topic, k.partition, expect, s.end-1)
		}
	}

	// Records produced after recovery land right after the recovered end.
	nextPost := maps.Clone(in.recovered) // nil for a cluster run: then only among themselves
	if nextPost == nil {
		nextPost = map[tp]int64{}
	}
	for i, e := range in.post {
		k := tp{e.topic, e.partition}
		o.PostRecovery++
		if want, ok := nextPost[k]; ok && e.offset != want {
			o.OffsetReuse++
			pr.add("reuse", "%d/%d: record produced after recovery got offset %d, want %d (the recovered end)", k.topic, k.partition, e.offset, want)
		}
		nextPost[k] = e.offset + 1
		if postSeen[i] == 0 {
			o.PostLost++
			pr.add("post-lost", "%d/%d: record produced after recovery at offset %d not served", k.topic, k.partition, e.offset)
		}
	}

	// What was acknowledged and not served is lost; what was served, but
	// never at the offset acknowledged, moved. A cluster run charges each
	// loss to the first fault that struck after its acknowledgement.
	cut := in.cut.UnixNano()
	o.Schedule = slices.Clone(in.faults)
	var oldest int64
	for p, l := range in.ledgers {
		for seq := range l {
			e := &l[seq]
			o.Attempted++
			if e.state != acked {
				continue
			}
			o.Acked++
			if seen[p][seq] > 0 {
				switch {
				case atAck[p][seq]:
				case in.allowDuplicates:
					// Without idempotence a retried record can be stored
					// twice and only the copy the client never heard of
					// survive: the acknowledged copy is lost, the record
					// is not, and nothing is reused.
					o.Moved++
				default:
					o.OffsetReuse++
					pr.add("reuse", "%d/%d: record acknowledged at offset %d served elsewhere", e.topic, e.partition, e.offset)
				}
				continue
			}
			k := [2]int32{e.topic, e.partition}
			o.AckedLost++
			o.AckedLostBytes += int64(e.size)
			o.LostPerPartition[k]++
			o.LostBytesPerPartition[k] += int64(e.size)
			at, by := cut, "the fault"
			if len(o.Schedule) > 0 {
				i := chargeTo(o.Schedule, in.start, e.ack)
				o.Schedule[i].Lost++
				at, by = in.start.Add(o.Schedule[i].At).UnixNano(), o.Schedule[i].Kind+" on "+o.Schedule[i].Target
			}
			// Acknowledged during the fault it is charged to: age 0.
			oldest = max(oldest, at-e.ack, 0)
			pr.add("lost", "%d/%d: record acknowledged at offset %d, %v before %s", e.topic, e.partition, e.offset, time.Duration(at-e.ack), by)
		}
	}
	o.OldestLostAge = time.Duration(oldest)
	if in.stop.IsZero() {
		in.stop = in.cut
	}
	o.checkCluster(in, &pr)

	o.measure(in)
	o.Problems = pr.out
	return o
}

// measure fills the figures before the fault, over the window from the
// warm-up's end to the fault: the records acknowledged in it, and their
// latencies from send to acknowledgement. The warm-up keeps out the burst
// of records that piled up in the clients while they connected.
func (o *Outcome) measure(in checkInput) {
	from, to := in.start.Add(in.warmup).UnixNano(), in.cut.UnixNano()
	if to <= from {
		return
	}
	var lats []int64
	var bytes int64
	for _, l := range in.ledgers {
		for _, e := range l {
			if e.state == acked && e.ack >= from && e.ack <= to {
				lats = append(lats, e.ack-e.sent)
				bytes += int64(e.size)
			}
		}
	}
	o.Window = time.Duration(to - from)
	secs := o.Window.Seconds()
	o.MsgsPerSec = float64(len(lats)) / secs
	o.MBPerSec = float64(bytes) / (1 << 20) / secs
	if len(lats) == 0 {
		return
	}
	slices.Sort(lats)
	q := func(f float64) time.Duration { return time.Duration(lats[min(int(f*float64(len(lats))), len(lats)-1)]) }
	o.AckP50, o.AckP99, o.AckMax = q(0.50), q(0.99), time.Duration(lats[len(lats)-1])
}

// Metrics returns the outcome as a result.Rep's metrics. Figures before
// the fault are left out when there was no window to measure them in.
func (o *Outcome) Metrics() map[string]float64 {
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	m := map[string]float64{
		MetricAttempted:       float64(o.Attempted),
		MetricAcked:           float64(o.Acked),
		MetricAckedLost:       float64(o.AckedLost),
		MetricAckedLostBytes:  float64(o.AckedLostBytes),
		MetricLostAgeMs:       ms(o.OldestLostAge),
		MetricUnackedSurvived: float64(o.UnackedSurvived),
		MetricDuplicates:      float64(o.Duplicates),
		MetricCorrupt:         float64(o.Corrupt),
		MetricOffsetGaps:      float64(o.OffsetGaps),
		MetricOffsetReuse:     float64(o.OffsetReuse),
		MetricRecoveryMs:      ms(o.Recovery),
		MetricFaultAtMs:       ms(o.FaultAt),
	}
	if o.Fault == Power {
		m[MetricTimerLateMs] = ms(o.TimerLateness)
	}
	if c := o.DiskCut; c != nil {
		m[MetricDiskFsyncs] = float64(o.Fsyncs)
		m[MetricDiskMaxFsyncMs] = ms(o.MaxSync)
		m[MetricCutFiles] = float64(c.Files)
		m[MetricCutEntries] = float64(c.Removed + c.Restored)
		m[MetricCutDirtyPages] = float64(c.DirtyPages)
	}
	if o.Cluster {
		m[MetricReadTruncated] = float64(o.ReadTruncated)
		m[MetricMoved] = float64(o.Moved)
		m[MetricReplicaMismatch] = float64(o.ReplicaMismatch)
		m[MetricElections] = float64(o.Elections)
		m[MetricISRShrinks] = float64(o.ISRShrinks)
		m[MetricISRExpands] = float64(o.ISRExpands)
		m[MetricUnderReplicatedMax] = float64(o.UnderReplicatedMax)
		m[MetricOfflineMax] = float64(o.OfflineMax)
		m[MetricUnavailableMaxMs] = ms(o.UnavailableMax)
		m[MetricUnavailableMs] = ms(o.Unavailable)
		m[MetricFaults] = float64(len(o.Schedule))
		if o.MaxLag >= 0 {
			m[MetricMaxLag] = float64(o.MaxLag)
		}
	}
	if o.Window > 0 {
		m["produce-msgs/s"] = o.MsgsPerSec
		m["produce-MB/s"] = o.MBPerSec
		if o.AckMax > 0 {
			m["ack-p50-us"] = us(o.AckP50)
			m["ack-p99-us"] = us(o.AckP99)
			m["ack-max-us"] = us(o.AckMax)
		}
	}
	return m
}

// Nothing is the bound of settings that may lose no acknowledged record:
// every fault with durable acks, and a kill under any policy.
var Nothing = flushpolicy.Bound{Messages: 1, Bytes: 1}

// DefaultAgeSlack is added to an Age bound, besides the longest fsync the
// run saw and the worst timer lateness measured in the broker's process:
// the Age bound promises that an fsync is asked for by the time the oldest
// unflushed append is Age old; the log's timer then has to fire (the
// measured lateness), its goroutine to get the fsync lock (at most one
// fsync) and run, which this slack covers.
const DefaultAgeSlack = 25 * time.Millisecond

// ExpectedBound is what a setting may lose: nothing after a kill (the page
// cache survives) or with durable acks; after a power cut without durable
// acks, the flush policy's LossBound. policy is a flush policy spec; ""
// (the broker's default: never) and external plugins, which state no
// bound, give the zero (unbounded) Bound.
func ExpectedBound(fault Fault, durableAcks bool, policy string) (flushpolicy.Bound, error) {
	if fault == Kill || durableAcks {
		return Nothing, nil
	}
	if policy == "" || policy == "default" || strings.ContainsRune(strings.SplitN(policy, ":", 2)[0], '/') {
		return flushpolicy.Bound{}, nil
	}
	p, err := flushpolicy.New(policy)
	if err != nil {
		return flushpolicy.Bound{}, fmt.Errorf("%w: flush policy: %w", ErrConfig, err)
	}
	if b, ok := p.(flushpolicy.Bounded); ok {
		return b.LossBound(), nil
	}
	return flushpolicy.Bound{}, nil
}

// Verify checks the guarantees every run must keep, whatever the fault and
// the policy: no corrupt record served, no duplicate, offsets without gaps
// or reuse, every record produced after recovery served; and that the
// acknowledged records lost stay within b, per partition: fewer than
// b.Messages records and b.Bytes value bytes (the policy counts whole
// batches, which are larger, so this checks less than it promises), and
// each acknowledged less than b.Age + ageSlack + Outcome.MaxSync +
// Outcome.TimerLateness before the fault. A cluster run must also have
// no record a consumer read that the log lost (unless unclean election
// allowed it) and replicas that agree; its duplicates are allowed without
// idempotence. The error joins one error per broken guarantee, each
// wrapping ErrCorrupt, ErrDuplicate, ErrOffsets, ErrLoss,
// ErrTruncatedRead or ErrReplicas.
func (o *Outcome) Verify(b flushpolicy.Bound, ageSlack time.Duration) error {
	var errs []error
	detail := func(kinds ...string) string {
		var out []string
		for _, p := range o.Problems {
			for _, k := range kinds {
				if strings.HasPrefix(p, k+": ") {
					out = append(out, p)
				}
			}
		}
		if len(out) == 0 {
			return ""
		}
		return "\n  " + strings.Join(out, "\n  ")
	}
	if o.Corrupt > 0 {
		errs = append(errs, fmt.Errorf("%w: %d batches or records%s", ErrCorrupt, o.Corrupt, detail("corrupt")))
	}
	if o.ReadTruncated > 0 && !o.TruncatedReadsAllowed {
		errs = append(errs, fmt.Errorf("%w: %d records a consumer was served are not in the log%s", ErrTruncatedRead, o.ReadTruncated, detail("read-truncated")))
	}
	if o.ReplicaMismatch > 0 {
		errs = append(errs, fmt.Errorf("%w: %d partitions:\n  %s", ErrReplicas, o.ReplicaMismatch, strings.Join(o.ReplicaProblems, "\n  ")))
	}
	if o.Duplicates > 0 && !o.DuplicatesAllowed {
		errs = append(errs, fmt.Errorf("%w: %d records%s", ErrDuplicate, o.Duplicates, detail("duplicate")))
	}
	if o.OffsetGaps > 0 || o.OffsetReuse > 0 {
		errs = append(errs, fmt.Errorf("%w: %d offsets skipped, %d reused%s", ErrOffsets, o.OffsetGaps, o.OffsetReuse,
			detail("gap", "reuse", "offsets")))
	}
	if o.PostLost > 0 {
		errs = append(errs, fmt.Errorf("%w: %d of %d records produced after recovery not served%s", ErrLoss, o.PostLost,
			o.PostRecovery, detail("post-lost")))
	}
	if o.AckedLost > 0 {
		var over []string
		for _, k := range slices.SortedFunc(maps.Keys(o.LostPerPartition), func(a, b [2]int32) int {
			return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
		}) {
			n, bytes := o.LostPerPartition[k], o.LostBytesPerPartition[k]
			if b.Messages > 0 && n >= b.Messages {
				over = append(over, fmt.Sprintf("%d/%d: %d records, bound < %d", k[0], k[1], n, b.Messages))
			}
			if b.Bytes > 0 && bytes >= b.Bytes {
				over = append(over, fmt.Sprintf("%d/%d: %d value bytes, bound < %d", k[0], k[1], bytes, b.Bytes))
			}
		}
		if limit := b.Age + ageSlack + o.MaxSync + o.TimerLateness; b.Age > 0 && o.OldestLostAge >= limit {
			over = append(over, fmt.Sprintf("oldest acknowledged %v before the fault, bound < %v (%v + slack %v + longest fsync %v + timer lateness %v)",
				o.OldestLostAge, limit, b.Age, ageSlack, o.MaxSync, o.TimerLateness))
		}
		if len(over) > 0 {
			errs = append(errs, fmt.Errorf("%w: %d of %d acknowledged (bound: %v): %s%s", ErrLoss, o.AckedLost, o.Acked, b,
				strings.Join(over, "; "), detail("lost")))
		}
	}
	return errors.Join(errs...)
}
