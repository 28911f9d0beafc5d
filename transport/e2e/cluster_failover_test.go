package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// The clients of TestClusterReplicatedLeaderStops: each produces to a topic
// of its own while the topic's leader stops (a failoverLoad), and franz-go
// consumer groups read one of them meanwhile (a groupReader).

// failoverLoad is one client producing to a topic of its own (one
// partition) on a goroutine, or a process, of its own, from before its
// leader stops until after it is back: it keeps producing until finish,
// counting the records acknowledged, so the test can wait for progress at
// each step of the failover. check then reads the topic back.
type failoverLoad struct {
	name, topic string
	acked       atomic.Int64  // records acknowledged so far
	halt        chan struct{} // closed by finish: send no more
	done        chan struct{} // closed once the client has settled what it sent and returned
	haltOnce    sync.Once
	// What the client acknowledged (Offset -1 where it does not say) and
	// why each record it gave up on failed, by value; the client's
	// goroutine writes them before done is closed.
	produced []seqRec
	failed   map[string]error
	// check, called after finish, reads the topic back and checks it
	// against what the client acknowledged.
	check func(t *testing.T)
}

// newFailoverLoad returns a load whose client is yet to be started (or
// failed to start: then done must be closed). When the test ends the load
// is halted and waited for; the contexts of loadContext, cancelled before,
// make a stuck client return.
func newFailoverLoad(t *testing.T, name, topic string) *failoverLoad {
	l := &failoverLoad{name: name, topic: topic, halt: make(chan struct{}), done: make(chan struct{}), failed: map[string]error{}}
	t.Cleanup(func() {
		if !l.finished() {
			t.Errorf("%s: still producing %v after it was halted", l.name, 2*waitTimeout)
		}
	})
	return l
}

// loadContext bounds a load's client; called after newFailoverLoad, it is
// cancelled when the test ends, before the test waits for the load.
func loadContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 4*waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// finish halts the load and waits for its client to return.
func (l *failoverLoad) finish(t *testing.T) {
	t.Helper()
	if !l.finished() {
		t.Fatalf("%s: still producing %v after it was halted", l.name, 2*waitTimeout)
	}
}

// finished halts the load and reports whether its client returned within
// 2*waitTimeout.
func (l *failoverLoad) finished() bool {
	l.haltOnce.Do(func() { close(l.halt) })
	select {
	case <-l.done:
		return true
	case <-time.After(2 * waitTimeout):
		return false
	}
}

// loadTick and loadBatch pace the loads: each client is given a batch of
// loadBatch records each loadTick (500 records a second), so that records
// are in flight when the leader stops, without flooding a 2-core machine
// (a batch that takes longer delays the next; ticks missed meanwhile are
// dropped).
const loadTick, loadBatch = 20 * time.Millisecond, 10

// run calls send with the numbers of the records of each batch, one batch
// a tick, until the load is halted or send fails.
func (l *failoverLoad) run(send func(from, to int) error) error {
	tick := time.NewTicker(loadTick)
	defer tick.Stop()
	for i := 0; ; i += loadBatch {
		select {
		case <-l.halt:
			return nil
		case <-tick.C:
		}
		if err := send(i, i+loadBatch); err != nil {
			return err
		}
	}
}

// awaitAcked waits until each load has had n more records acknowledged
// than when it was called.
func awaitAcked(t *testing.T, what string, n int64, loads ...*failoverLoad) {
	t.Helper()
	from := make([]int64, len(loads))
	for i, l := range loads {
		from[i] = l.acked.Load()
	}
	eventually(t, 2*waitTimeout, fmt.Sprintf("%d records acknowledged to every client %s", n, what), func() (bool, string) {
		ok, state := true, make([]string, len(loads))
		for i, l := range loads {
			select {
			case <-l.done:
				l.check(t)
				t.Fatalf("%s stopped producing by itself, %s", l.name, what)
			default:
			}
			got := l.acked.Load() - from[i]
			ok = ok && got >= n
			state[i] = fmt.Sprintf("%s %d", l.name, got)
		}
		return ok, strings.Join(state, ", ")
	})
}

// checkRead reads the topic back with read (its n records, in offset order)
// and checks that every record the client acknowledged is there once, in
// the order produced, at the offset acknowledged where the client says, and
// nothing else; and that the client gave up on no record.
func (l *failoverLoad) checkRead(t *testing.T, boot string, read func(n int) []seqRec) {
	t.Helper()
	if len(l.failed) > 0 {
		var some []string
		for v, err := range l.failed {
			if some = append(some, fmt.Sprintf("%s: %v", v, err)); len(some) == 5 {
				break
			}
		}
		t.Errorf("%s: %d records not acknowledged, among them %s", l.name, len(l.failed), strings.Join(some, "; "))
	}
	ends := endOffsets(t, boot, l.topic, 1)
	checkExactlyOnce(t, l.name, l.produced, read(int(ends[0])), ends)
	t.Logf("%s: %d records acknowledged, read back once each", l.name, len(l.produced))
}

// startFranzLoad: a franz-go idempotent acks=all producer sends the values
// f-00000, f-00001... check: a franz-go consumer reads each once, in order.
func startFranzLoad(t *testing.T, boot, topic string) *failoverLoad {
	l := newFailoverLoad(t, "franz-go", topic)
	p := newClient(t, boot, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordRetries(1000), kgo.RetryTimeout(2*waitTimeout), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.ProduceRequestTimeout(5*time.Second))
	ctx := loadContext(t)
	go func() {
		defer close(l.done)
		l.run(func(from, to int) error {
			acked, failed := brokertest.ProduceTry(ctx, p, "f", from, to)
			for _, v := range acked {
				l.produced = append(l.produced, seqRec{Offset: -1, Value: v})
			}
			for v, err := range failed {
				l.failed[v] = err
			}
			l.acked.Add(int64(len(acked)))
			return nil
		})
	}()
	l.check = func(t *testing.T) {
		l.checkRead(t, boot, func(n int) []seqRec { return consumeSeq(t, boot, topic, n) })
	}
	return l
}

// startSaramaLoad: a sarama idempotent SyncProducer (acks=all, one request
// in flight as its idempotence requires, retrying long enough to outlast a
// failover) sends the values s-00000, s-00001..., a batch per SendMessages.
// check: a sarama partition consumer reads each once, in order, at the
// offset sarama acknowledged it at.
func startSaramaLoad(t *testing.T, boot, topic string) *failoverLoad {
	l := newFailoverLoad(t, "sarama", topic)
	cfg := saramaConfig()
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Retry.Max = int(2 * waitTimeout / (100 * time.Millisecond))
	cfg.Producer.Retry.Backoff = 100 * time.Millisecond
	cfg.Metadata.Retry.Max = 20
	p, err := sarama.NewSyncProducer([]string{boot}, cfg)
	if err != nil {
		close(l.done)
		t.Fatalf("sarama.NewSyncProducer: %v", err)
	}
	go func() {
		defer close(l.done)
		defer p.Close()
		l.run(func(from, to int) error {
			var pms []*sarama.ProducerMessage
			for i := from; i < to; i++ {
				pms = append(pms, &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(seqValue("s", i)), Metadata: seqValue("s", i)})
			}
			err := p.SendMessages(pms)
			failed := map[*sarama.ProducerMessage]error{}
			var perrs sarama.ProducerErrors
			switch {
			case errors.As(err, &perrs):
				for _, e := range perrs {
					failed[e.Msg] = e.Err
				}
			case err != nil:
				for _, pm := range pms {
					failed[pm] = err
				}
			}
			for _, pm := range pms {
				v := pm.Metadata.(string)
				if err := failed[pm]; err != nil {
					l.failed[v] = err
					continue
				}
				l.produced = append(l.produced, seqRec{pm.Partition, pm.Offset, "", v})
				l.acked.Add(1)
			}
			return nil
		})
	}()
	l.check = func(t *testing.T) {
		l.checkRead(t, boot, func(n int) []seqRec {
			var out []seqRec
			for _, m := range consumeSarama(t, boot, topic, n) {
				out = append(out, seqRec{m.Partition, m.Offset, m.Key, m.Value})
			}
			return out
		})
	}
	return l
}

// kcatDelivered is kcat's delivery report at verbosity 3 (-v -v).
var kcatDelivered = regexp.MustCompile(`^% Message delivered to partition (\d+) \(offset (-?\d+)\) on broker (-?\d+)$`)

// kcatFailoverLine is line i of what kcat produces across a failover: its
// number, then a line of linesFile, padded to 160 bytes, since kcat reads
// its input 128 bytes at a time and takes at most one line from each read
// (shorter lines would pile up in its buffer until the input ends).
func kcatFailoverLine(i int) string {
	line := fmt.Sprintf("%05d %s ", i, textLine(i))
	if len(line) < 160 {
		line += strings.Repeat("-", 160-len(line))
	}
	return line
}

// startKcatLoad: kcat -P, idempotent (enable.idempotence=true) with
// acks=all, reads lines from a pipe that the test writes a batch at a time,
// and reports each message delivered (-v -v: its offset and the broker
// that acknowledged it) when it next polls librdkafka, which it does as it
// reads its input. Halted, the test closes the pipe and kcat sends what it
// holds and exits, with status 1 if any delivery failed. check: kcat exited
// 0, reported every line delivered, the k-th report at offset k
// (librdkafka reports a partition's messages in order: every line once, in
// order), acknowledged by the stopped leader and by another broker; and
// kcat -C reads the topic back line for line as written.
func startKcatLoad(t *testing.T, boot, topic string) *failoverLoad {
	kcat := kcatPath(t)
	l := newFailoverLoad(t, "kcat", topic)
	cmd := exec.CommandContext(loadContext(t), kcat, "-b", boot, "-P", "-t", topic, "-v", "-v",
		"-X", "acks=all", "-X", "enable.idempotence=true")
	stdin, err := cmd.StdinPipe()
	var stderr io.ReadCloser
	if err == nil {
		stderr, err = cmd.StderrPipe()
	}
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		close(l.done)
		t.Fatalf("kcat -P: %v", err)
	}
	type report struct {
		offset int64
		broker int32
	}
	var (
		written          bytes.Buffer
		lines            int
		reports          []report
		said             []string // the rest of what kcat printed
		writeErr, runErr error
		reported         = make(chan struct{})
	)
	go func() {
		defer close(reported)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			m := kcatDelivered.FindStringSubmatch(sc.Text())
			if m == nil {
				said = append(said, sc.Text())
				continue
			}
			off, _ := strconv.ParseInt(m[2], 10, 64)
			b, _ := strconv.Atoi(m[3])
			reports = append(reports, report{off, int32(b)})
			l.acked.Add(1)
		}
	}()
	go func() {
		defer close(l.done)
		writeErr = l.run(func(from, to int) error {
			var batch strings.Builder
			for i := from; i < to; i++ {
				batch.WriteString(kcatFailoverLine(i) + "\n")
			}
			if _, err := io.WriteString(stdin, batch.String()); err != nil {
				return err
			}
			written.WriteString(batch.String())
			lines = to
			return nil
		})
		stdin.Close()
		<-reported
		runErr = cmd.Wait()
	}()
	l.check = func(t *testing.T) {
		if runErr != nil || writeErr != nil {
			t.Errorf("kcat -P: %v (writing its input: %v); it said:\n%s", runErr, writeErr, strings.Join(said, "\n"))
		}
		if len(reports) != lines {
			t.Errorf("kcat reported %d of the %d lines it was given delivered", len(reports), lines)
		}
		by := map[int32]int{}
		for k, r := range reports {
			by[r.broker]++
			if r.offset != int64(k) {
				t.Errorf("kcat's delivery report %d: offset %d, want %d (each line once, in order)", k, r.offset, k)
				break
			}
		}
		if by[3] == 0 || len(by) < 2 {
			t.Errorf("kcat's deliveries by acknowledging broker: %v, want the stopped leader 3 and another", by)
		}
		t.Logf("kcat: %d lines delivered, by acknowledging broker %v", len(reports), by)
		out := runKcat(t, nil, "-b", boot, "-C", "-t", topic, "-o", "beginning", "-e", "-q")
		if got, want := strings.Split(string(out), "\n"), strings.Split(written.String(), "\n"); !slices.Equal(got, want) {
			first := 0
			for first < min(len(got), len(want)) && got[first] == want[first] {
				first++
			}
			t.Errorf("kcat -C read %d lines back, want the %d written; first difference at line %d", len(got)-1, len(want)-1, first)
		}
	}
	return l
}

// groupReader is the one member of a franz-go consumer group reading a
// one-partition topic from its start on a goroutine of its own, committing
// synchronously after every poll, so the last acknowledged commit is known.
// It keeps the record at each offset once, and checks as it reads that the
// member reads the partition in order: after a new assignment (a
// rebalance) it may resume anywhere from the last acknowledged commit to
// the end of what it had read, reading records again (which must be the
// same records), but not before that commit (an acknowledged commit lost)
// nor past that end (records skipped); without a rebalance it reads every
// offset once.
type groupReader struct {
	group, topic string
	coordinator  int32 // the broker that coordinated the group at the start
	cl           *kgo.Client
	assigns      atomic.Int32 // OnPartitionsAssigned calls, one per generation joined
	lost         atomic.Int32 // OnPartitionsLost calls
	cancel       context.CancelFunc
	done         chan struct{}
	stopOnce     sync.Once

	mu          sync.Mutex
	got         []seqRec      // got[i] is the record at offset i
	pos         int64         // the offset the member reads next
	seenAssigns int32         // assigns when the last record was read
	committed   int64         // where the last acknowledged commit put the group
	rereads     int           // records read again after a rebalance
	slowest     time.Duration // the longest commit, failed or not
	problems    []string
}

// startGroupReader starts the member of a new group whose coordinator
// satisfies coordinatedBy.
func startGroupReader(t *testing.T, boot, prefix, topic string, coordinatedBy func(int32) bool) *groupReader {
	t.Helper()
	r := &groupReader{topic: topic, done: make(chan struct{})}
	r.group, r.coordinator = groupCoordinatedBy(t, boot, prefix, coordinatedBy)
	t.Logf("group %s: coordinated by broker %d", r.group, r.coordinator)
	cl, err := kgo.NewClient(kgo.SeedBrokers(boot), kgo.ConsumerGroup(r.group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { r.assigns.Add(1) }),
		kgo.OnPartitionsLost(func(context.Context, *kgo.Client, map[string][]int32) { r.lost.Add(1) }))
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	r.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.run(ctx, t)
	t.Cleanup(r.stop)
	return r
}

func (r *groupReader) run(ctx context.Context, t *testing.T) {
	defer close(r.done)
	for ctx.Err() == nil {
		// A poll ends after a while without records, so that a failed
		// commit is retried though nothing more comes.
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := r.cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("group %s: fetch %s/%d: %v", r.group, topic, p, err)
			}
		})
		assigns := r.assigns.Load()
		r.mu.Lock()
		fs.EachRecord(func(rec *kgo.Record) { r.take(rec, assigns) })
		r.mu.Unlock()
		begin := time.Now()
		err := r.cl.CommitUncommittedOffsets(ctx)
		r.mu.Lock()
		r.slowest = max(r.slowest, time.Since(begin))
		r.mu.Unlock()
		if err != nil {
			if ctx.Err() == nil {
				t.Logf("group %s: commit: %v", r.group, err)
			}
			continue
		}
		if at, ok := r.cl.CommittedOffsets()[r.topic][0]; ok {
			r.mu.Lock()
			r.committed = at.Offset
			r.mu.Unlock()
		}
	}
}

// take checks and keeps a record read; called with mu held.
func (r *groupReader) take(rec *kgo.Record, assigns int32) {
	next := int64(len(r.got))
	if assigns != r.seenAssigns {
		r.seenAssigns = assigns
		if rec.Offset != r.pos && (rec.Offset < r.committed || rec.Offset > next) {
			r.problem("resumed at offset %d after a rebalance, with the last acknowledged commit at %d and offsets up to %d read",
				rec.Offset, r.committed, next)
		}
		r.pos = rec.Offset
	}
	if rec.Offset != r.pos {
		r.problem("read offset %d after offset %d, without a rebalance between", rec.Offset, r.pos-1)
	}
	switch v := string(rec.Value); {
	case rec.Offset < next:
		r.rereads++
		if r.got[rec.Offset].Value != v {
			r.problem("read offset %d as %q, then as %q", rec.Offset, r.got[rec.Offset].Value, v)
		}
	case rec.Offset == next:
		r.got = append(r.got, seqRec{rec.Partition, rec.Offset, string(rec.Key), v})
	default:
		r.problem("skipped offsets %d to %d", next, rec.Offset-1)
	}
	r.pos = rec.Offset + 1
}

func (r *groupReader) problem(format string, args ...any) {
	if len(r.problems) < 5 {
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
	}
}

// stop stops the member (it leaves the group) and waits for it.
func (r *groupReader) stop() {
	r.stopOnce.Do(func() {
		r.cancel()
		<-r.done
		r.cl.Close()
	})
}

// finish waits until the member has read and committed up to end, stops
// it, and checks what it read: every one of produced once, in order, and
// nothing else; the group's committed offset, read back, at end. It returns
// how many times the group rebalanced and the records read again.
func (r *groupReader) finish(t *testing.T, boot string, produced []seqRec, end int64) (rebalances, rereads int) {
	t.Helper()
	eventually(t, 2*waitTimeout, fmt.Sprintf("group %s to read and commit up to offset %d", r.group, end), func() (bool, string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return int64(len(r.got)) >= end && r.committed >= end, fmt.Sprintf("read up to %d, committed %d", len(r.got), r.committed)
	})
	r.stop()
	for _, p := range r.problems {
		t.Errorf("group %s: %s", r.group, p)
	}
	checkExactlyOnce(t, "group "+r.group, produced, r.got, []int64{end})
	if c := committedOffsets(t, boot, r.group, r.topic, 1); c[0] != end {
		t.Errorf("group %s: committed offset %d read back, want %d", r.group, c[0], end)
	}
	rebalances = int(r.assigns.Load()) - 1
	t.Logf("group %s (coordinated by broker %d at the start): %d rebalances (%d with its partition lost), %d records read again; slowest commit %v",
		r.group, r.coordinator, rebalances, r.lost.Load(), r.rereads, r.slowest.Round(time.Millisecond))
	return rebalances, r.rereads
}
